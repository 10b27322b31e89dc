"""A value's ranges in the ASN CSV, by an oracle that knows nothing of the loader, and the values to check.

A value's ranges are its rows minus the addresses later rows of the file take
over (last wins), sorted by (family, start). ``pick_values`` names the 20 values
both ``tests/integration/test_reverse_asn.py`` (on a subset) and
``bench/reverse.py`` (on the full v4+v6 load) page through.
"""

from __future__ import annotations

import csv
import functools
import ipaddress
import random
from collections import Counter
from pathlib import Path

from ipmeta_cli.demo import ASN_COLUMNS, ASN_FILES
from testing.row_scan import Row

HOTTEST, RANDOM_VALUES = 8, 12


def read_rows(paths: tuple[Path, ...] = ASN_FILES) -> list[Row]:
    """Every row of ``paths`` in file order; parsed once per process (half a million rows take
    seconds), each caller getting its own list."""
    return list(_parsed_rows(paths))


@functools.cache
def _parsed_rows(paths: tuple[Path, ...]) -> tuple[Row, ...]:
    rows: list[Row] = []
    for path in paths:
        with path.open(newline="") as handle:
            for line in csv.reader(handle):
                first, last = ipaddress.ip_address(line[0]), ipaddress.ip_address(line[1])
                values = dict(zip(ASN_COLUMNS[2:], line[2:], strict=True))
                rows.append(Row(first.version, int(first), int(last), values, len(rows)))
    return tuple(rows)


def overlaps(rows: list[Row]) -> dict[int, list[Row]]:
    """Each row's overlapping rows (a sweep: the file has almost none)."""
    found: dict[int, list[Row]] = {}
    open_rows: list[Row] = []
    for row in sorted(rows, key=lambda r: (r.family, r.start)):
        open_rows = [other for other in open_rows if other.family == row.family and other.end >= row.start]
        for other in open_rows:
            found.setdefault(row.position, []).append(other)
            found.setdefault(other.position, []).append(row)
        open_rows.append(row)
    return found


def expected_ranges(value: str, rows: list[Row], overlapping: dict[int, list[Row]]) -> list[tuple[str, str]]:
    """The value's rows minus what later rows take (last wins), in (family, start) order."""
    pieces: list[tuple[int, int, int]] = []
    for row in rows:
        if row.values["asn"] != value:
            continue
        remaining = [(row.start, row.end)]
        for later in (other for other in overlapping.get(row.position, []) if other.position > row.position):
            remaining = [
                part
                for first, last in remaining
                for part in ((first, min(last, later.start - 1)), (max(first, later.end + 1), last))
                if part[0] <= part[1]
            ]
        pieces.extend((row.family, first, last) for first, last in remaining)
    return [
        (str(ipaddress.ip_address(first)), str(ipaddress.ip_address(last)))
        for family, first, last in sorted(pieces)
        if family in (4, 6)
    ]


def pick_values(rows: list[Row], seed: int = 20) -> list[str]:
    """The ``HOTTEST`` most frequent values, then ``RANDOM_VALUES`` others drawn with ``seed``."""
    counts = Counter(row.values["asn"] for row in rows)
    hottest = [value for value, _ in counts.most_common(HOTTEST)]
    others = sorted(set(counts) - set(hottest))
    return hottest + random.Random(seed).sample(others, RANDOM_VALUES)
