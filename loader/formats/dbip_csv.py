"""DB-IP Lite CSVs (``dbip-city-lite-2026-06.csv.gz``...): no header; the field count names the edition.

| edition | fields | columns |
|---|---|---|
| Country Lite | 3 | ``start,end,country`` |
| ASN Lite | 4 | ``start,end,asn,organization`` |
| City Lite | 8 | ``start,end,continent,country,region,city,lat,lon`` |

``--columns`` overrides the guess (another DB-IP edition, say).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from loader.errors import SourceError
from loader.formats.csv_rows import parse_csv
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow
from loader.formats.text import TextLines, open_binary

DBIP_LAYOUTS: Final = {
    3: ("start", "end", "country"),
    4: ("start", "end", "asn", "organization"),
    8: ("start", "end", "continent", "country", "region", "city", "lat", "lon"),
}


def open_dbip_rows(path: Path, name: str, options: FormatOptions) -> Iterator[Header | SourceRow | RowError]:
    with open_binary(path) as handle:
        lines = TextLines(handle, name)
        first = lines.peek()
        if first is None:
            raise SourceError(f"{name}: line 1: the file is empty")
        columns = options.columns or _columns_of(first, name)
        yield from parse_csv(lines, name, columns, options.declared_types)


def _columns_of(first_line: str, name: str) -> tuple[str, ...]:
    try:
        fields = next(csv.reader([first_line]))
    except (csv.Error, StopIteration):
        fields = []
    layout = DBIP_LAYOUTS.get(len(fields))
    if layout is None:
        raise SourceError(
            f"{name}: line 1: {len(fields)} fields, but DB-IP Lite CSVs have 3 (country), "
            "4 (ASN) or 8 (city); name the columns with --columns start,end,..."
        )
    return layout
