"""A loaded version back out as a file: a MaxMind DB or a CSV, streamed in address order.

- ``version_ranges``: a version's ranges read from the table, sorted, each once;
- ``files``: ``write_mmdb`` and ``write_csv``, pure, over any sorted ranges;
- ``mmdb_writer``: our streaming MaxMind DB writer (``docs/decisions.md`` says why ours).

May import ``loader.store``, ``loader.formats`` and the shared modules of
``loader``; never ``loader.pipeline`` or ``loader.planning``. ``files`` and
``mmdb_writer`` import no ``loader.store``: they write files, never the table.
The ``export`` state that runs these in a load is ``loader.pipeline.export_task``.
"""
