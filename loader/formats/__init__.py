"""Source formats: each file a load reads becomes a ``Header``, then a row or an error per record.

| ``--format`` | reads | module |
|---|---|---|
| ``csv`` | range CSVs: start/end or network, header or ``--columns`` | ``csv_rows`` |
| ``mmdb`` | MaxMind DB files, ``.mmdb`` or ``.mmdb.gz`` (``--mmdb-fields``) | ``mmdb_rows`` |
| ``geoip2-csv`` | GeoIP2/GeoLite2 Blocks CSVs joined with ``--locations`` | ``geoip2_csv`` |
| ``dbip-csv`` | DB-IP Lite CSVs (no header) | ``dbip_csv`` |
| ``geofeed`` | RFC 8805 geofeeds: ``prefix,country,region,city,postal`` | ``geofeed`` |
| ``network`` | public network lists (AWS, Tor...), in each owner's format, by file name | ``network_lists`` |
| ``auto`` | ``mmdb`` for ``.mmdb``/``.mmdb.gz``, ``geoip2-csv`` with ``--locations``, else ``csv`` | |

The readers share ``rows`` (``Header``, ``SourceRow``, ``RowError``, ``FormatOptions``),
``text`` (opening plain or gzipped files, lines read with a limit) and ``mmdb_fields``
(``--mmdb-fields``). ``mmdb_tree`` walks a MaxMind DB's search tree in bounded depth
before ``maxminddb`` may iterate it (a looping tree crashes its C reader).

Every reader streams: memory does not grow with the file. A file that cannot
be read at all raises ``SourceError`` (``file: line N: reason``); a bad record
is a ``RowError`` and the load decides (``--max-errors``). What each column is
stored as is decided across all files by ``ColumnEvidence`` (``column_types``).

Of the loader, imports only ``loader.errors``: the pipeline, the export and
``loader.options`` read through it, never the other way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from loader.formats.column_types import (
    DECLARED_TYPES,
    NATIVE,
    NUMBER,
    STRING,
    ColumnEvidence,
    NativeValues,
    parse_declared_types,
    staged_bytes,
    stored_bytes,
    stored_data,
    typed_value,
)
from loader.formats.mmdb_fields import parse_field_map
from loader.formats.rows import (
    FORMATS,
    FormatOptions,
    Header,
    RowError,
    SourceRow,
    declared_types_for,
    format_of,
)

__all__ = [
    "DECLARED_TYPES",
    "FORMATS",
    "NATIVE",
    "NUMBER",
    "STRING",
    "ColumnEvidence",
    "FormatOptions",
    "Header",
    "NativeValues",
    "RowError",
    "SourceRow",
    "declared_types_for",
    "format_of",
    "open_rows",
    "parse_declared_types",
    "parse_field_map",
    "staged_bytes",
    "stored_bytes",
    "stored_data",
    "typed_value",
]


def open_rows(path: Path, name: str, options: FormatOptions) -> Iterator[Header | SourceRow | RowError]:
    """First item is a Header, then one SourceRow or RowError per record, streaming (bounded memory).

    ``path`` is a local file; ``name`` is how messages call it (an S3 key's name, say).
    """
    kind = format_of(name, options)
    if kind == "mmdb":
        from loader.formats.mmdb_rows import open_mmdb_rows

        return open_mmdb_rows(path, name, options)
    if kind == "geoip2-csv":
        from loader.formats.geoip2_csv import open_geoip2_rows

        return open_geoip2_rows(path, name, options)
    if kind == "geofeed":
        from loader.formats.geofeed import open_geofeed_rows

        return open_geofeed_rows(path, name, options)
    if kind == "network":
        from loader.formats.network_lists import open_network_rows

        return open_network_rows(path, name, options)
    if kind == "dbip-csv":
        from loader.formats.dbip_csv import open_dbip_rows

        return open_dbip_rows(path, name, options)
    from loader.formats.csv_rows import open_csv_rows

    return open_csv_rows(path, name, options)
