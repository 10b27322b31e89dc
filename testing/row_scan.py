"""Which row owns an address, by scans that know nothing of the loader.

The last row (in file order) holding the address wins, and no row means none
does. ``brute_force`` reads every row: the oracle of the lookup and normalization
tests' generated rows. ``CsvScan`` answers the same over a whole ASN CSV, fast
enough for ``tests/integration/test_asn_dataset.py`` and the ``asn`` section of
``bench/two_datasets.py``.
"""

from __future__ import annotations

import bisect
import csv
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar


class Ranged(Protocol):
    """A row of a source: its family and its first and last address."""

    @property
    def family(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


RowT = TypeVar("RowT", bound=Ranged)


@dataclass(frozen=True)
class Row:
    """A row of a source as the tests write it and the oracles read it: its family, first and last
    address, its values by column, and its place in the file (later rows win)."""

    family: int
    start: int
    end: int
    values: Mapping[str, Any] = field(default_factory=dict)
    position: int = 0


def brute_force(rows: Iterable[RowT], family: int, value: int) -> RowT | None:
    """The last row in file order holding the address (rows are writes applied in order)."""
    winner = None
    for row in rows:
        if row.family == family and row.start <= value <= row.end:
            winner = row
    return winner


class CsvScan:
    """Rows of one family sorted by start, with a running maximum of ends, so a scan
    backwards from the last row starting at or before the address can stop as soon
    as no earlier row reaches that far: ``brute_force``'s answer, in time for a whole CSV."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = sorted(rows, key=lambda row: row.start)
        self.starts = [row.start for row in self.rows]
        self.reach: list[int] = []
        furthest = -1
        for row in self.rows:
            furthest = max(furthest, row.end)
            self.reach.append(furthest)

    def owner(self, value: int) -> Row | None:
        best: Row | None = None
        index = bisect.bisect_right(self.starts, value) - 1
        while index >= 0 and self.reach[index] >= value:
            row = self.rows[index]
            if row.end >= value and (best is None or row.position > best.position):
                best = row
            index -= 1
        return best


def read_csv(path: Path, first_position: int) -> list[Row]:
    """The rows of an ASN CSV with no header (``start,end,asn,organization``), numbered on from
    ``first_position``."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            asn_row((start, end, int(asn), organization), first_position + number)
            for number, (start, end, asn, organization) in enumerate(csv.reader(handle))
        ]


def asn_row(line: tuple[str, str, int, str], position: int) -> Row:
    """A line of an ASN source (first and last address as text, AS, organization) as a row whose
    values are named as the API names them."""
    start, end, asn, organization = line
    first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
    return Row(first.version, int(first), int(last), {"asn": asn, "organization": organization}, position)
