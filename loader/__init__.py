"""Everything that writes datasets: read a source, load it as a new version, activate it, keep it tidy.

The parts, by role (``tests/unit/test_layout.py`` holds each to its imports):

- ``loader.pipeline``: the states of the load state machine, one module each,
  the local ``driver`` that runs the same states without Step Functions, and the
  Lambda ``handlers`` the stack names;
- ``loader.formats``: the source readers (range CSV, MaxMind DB, GeoIP2 CSV,
  DB-IP CSV), rows out with typed values;
- ``loader.export``: a version back out as a MaxMind DB, a CSV or Parquet;
- ``loader.enrich``: files of addresses annotated by a sort-merge against a
  version snapshot (its Parquet export), the engine of ``ipmeta enrich``;
- ``loader.planning``: the capacity and cost model behind ``ipmeta plan``,
  pure arithmetic that never writes;
- ``loader.store``: data access, the only loader code that calls boto3: the
  table, the S3 bucket, the change events, the staging area, the source files;
- ``loader.feeds``: the vendor feeds (MaxMind, DB-IP, IPinfo, any URL): the
  latest release of each, fetched, verified and unpacked for a load, through
  its one HTTP module (``docs/feeds.md``).

The modules at this level are the vocabulary the packages share: ``errors``
(stable codes), ``settings`` (environment names and defaults), ``options``
(``LoadOptions``), ``records`` (the load item, report and manifest),
``reverse_index`` (the index's shard plan), ``item_units`` (what an item's write takes,
its GSI entries included) and ``batching``. They import
nothing from the packages but ``loader.formats``.

Imports point one way: ``pipeline`` may use ``store``, ``export``, ``feeds``
and ``formats``; ``enrich`` may use ``export`` and ``formats``, never ``store``;
``export`` may use ``store`` and ``formats``; ``store`` uses neither;
``formats``, ``planning`` and ``feeds`` use only the shared modules. Nothing
here imports ``ipmeta_cli`` or ``stacks``, and the lookup imports none of it.
"""
