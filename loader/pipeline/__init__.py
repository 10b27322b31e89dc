"""The load state machine's states, one module each, and what runs them.

States, in the order a load runs them (the Lambda task of ``handlers`` in
brackets when its name differs):

- ``fetch`` (a feed's run, ``fetch`` and ``record_release``): the vendor's latest
  release, unchanged or streamed into the bucket for ``start``; remembered once active;
  a network feed's lists through ``network_feed``, the one path ``ipmeta update`` takes too;
- ``start``: unchanged, resumed, or a new version under the load lock;
- ``scan``: one streaming pass over one source file, rows staged by bucket;
- ``partitions`` (``plan_partitions``): the partitions the resolve tasks work on;
- ``resolve``: one partition's rows become items, dealt into write sections; over a
  base, ``diff`` keeps what changed from it (a delta version's items);
- ``plan_writes``: ranges across partition edges, covers, the reverse-index plan;
- ``write`` (``write_chunks``): one chunk into the table, exactly once;
- ``export_task`` (``export``, with ``exportMmdb``): the version as a MaxMind DB;
- ``activate``: verify, then switch the pointer with a conditional write, unless
  ``guard`` holds a release that changed too much or shrank (``ipmeta activate``
  serves it then);
- ``retention`` (``cleanup``): old versions after the grace period; rollback and listing too;
- ``abort``: where every Catch leads; frees the lock.

And outside the state machine, in each replica region of a deployment with
``replicaRegions``: ``arrival`` (``arrive``, on a schedule), the region's own pointer
following home's, each version once it has wholly arrived in that region.

And ``ipmeta enrich`` on AWS, a state machine of its own (``stacks/load/enrich_workflow.py``):
``enrich_parts`` cuts a job's input into parts (objects, byte ranges, row groups) and reads
its manifests, pure; ``enrich_task`` runs its steps (``enrich_plan``, ``enrich_snapshot``,
``enrich_part``, ``enrich_summary``, ``enrich_abort``), each part through the one engine.

Their shared parts: ``descriptor`` (``load.json``, what every state knows of
the load), ``staged`` (the files staged between states and their encodings)
and ``normalize`` (overlap resolution and coalescing, pure). The runners:
``driver`` runs the states locally over a process pool, ``handlers`` are the
Lambda entry points (``loader.pipeline.handlers.<task>``).

May import ``loader.store``, ``loader.export``, ``loader.formats``,
``loader.feeds``, ``loader.enrich`` (the engine the enrich parts run) and the shared
modules of ``loader``; never ``loader.planning``.
"""
