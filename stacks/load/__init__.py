"""The loader as deployed: its task functions, its state machine, and what starts a load.

- ``loader_functions``: one function per task of ``loader.pipeline.handlers``, each sized;
- ``loader_workflow``: the bucket and the Step Functions state machine over those tasks;
- ``schedule``: scheduled reloads, upload triggers and the feeds' schedules;
- ``enrich_workflow``: ``ipmeta enrich`` on AWS, a Distributed Map of sort-merge tasks over
  files of addresses (with ``enrichInputs`` and ``enrichOutputs``).

It may import the shared modules of ``stacks`` and the loader's declarations (``loader``),
never another sub-package of ``stacks``.
"""
