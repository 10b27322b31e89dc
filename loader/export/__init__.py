"""A loaded version back out as a file: a MaxMind DB, a CSV or Parquet, streamed in address order.

- ``version_ranges``: a version's ranges read from the table, sorted, each once;
- ``files``: ``write_mmdb`` and ``write_csv``, pure, over any sorted ranges;
- ``mmdb_writer``: our streaming MaxMind DB writer (``docs/decisions.md`` says why ours);
- ``parquet``: ``write_parquet``, the warehouse layout that is also ``loader.enrich``'s snapshot;
- ``snapshots``: ``export_snapshot``, a retained version of the table written as that Parquet.

May import ``loader.store``, ``loader.formats`` and the shared modules of
``loader``; never ``loader.pipeline`` or ``loader.planning``. ``files``,
``mmdb_writer`` and ``parquet`` import no ``loader.store``: they write files, never the table.
The ``export`` state that runs these in a load is ``loader.pipeline.export_task``.
"""
