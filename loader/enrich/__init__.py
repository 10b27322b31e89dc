"""Annotating files of addresses: a sort-merge of each chunk against a version snapshot.

The engine that ``ipmeta enrich`` runs locally and the enrich task runs on AWS,
one part at a time (``docs/enrich.md``):

- ``snapshot``: a pinned version of each dataset, loaded from its Parquet export
  (``loader.export.parquet``) into sorted numpy arrays and an Arrow table;
- ``addresses``: a column of address text parsed as ``parse_ip`` parses it,
  vectorized for the usual dotted quad;
- ``merge``: the sort-merge (``searchsorted`` on sorted addresses) and the
  columns each row gets: the merged data, the range, the bogon flag, the error;
- ``parts``: one part of an input (a file or an S3 object, a byte range or row
  groups) read in bounded chunks, and the output written under a temporary name;
- ``job``: ``enrich_part``, the contract below, and its ``EnrichSummary``;
- ``memory``: ``tune_allocators``, the heap and page settings of a process that runs enrich.

**Contract of ``enrich_part(part, snapshot, output)``.** It reads ``part`` in
chunks of ``EnrichOptions.chunk_rows`` rows; for each chunk it parses the
address column, sorts the chunk's addresses, merges them with each dataset's
sorted range starts (``numpy.searchsorted``), checks the range's end, restores
the input's order and appends the chunk, its own columns untouched, to the
output. Memory holds the snapshot and one chunk, whatever the input's size. A
row whose address is blank or invalid gets ``ip_error`` and counts as invalid;
one no dataset holds gets ``IP_ADDRESS_NOT_FOUND`` (or ``..._RESERVED`` for a
bogon), as ``GET /v1/ip/{ip}`` would, and counts as unmatched. The output
appears at its name only once whole; on any error nothing is left there. It
returns an ``EnrichSummary``: rows, invalid_rows, unmatched_rows, seconds.

May import ``loader.export`` (the snapshot's layout), ``loader.formats`` and the
shared modules of ``loader``, and the lookup's pure packages (``ipmeta.schema``,
``ipmeta.lookup``, ``ipmeta.shapes``); never ``loader.store`` or
``loader.pipeline``: it reads files, never the table. pyarrow and numpy live
here and in ``loader.export``, never in the lookup function.
"""
