"""The loader as deployed: its task functions, its state machine, and what starts a load.

- ``loader_functions``: one function per task of ``loader.pipeline.handlers``, each sized;
- ``loader_workflow``: the bucket and the Step Functions state machine over those tasks;
- ``schedule``: scheduled reloads, upload triggers and the feeds' schedules.

It may import the shared modules of ``stacks`` and the loader's declarations (``loader``),
never another sub-package of ``stacks``.
"""
