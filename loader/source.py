"""Reading range CSVs into typed rows.

A file has a header row naming its columns, or none when ``columns`` is given
(``--columns start,end,asn,organization``). ``start`` and ``end`` hold IP text
or decimal integers; every other column is metadata.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipmeta.errors import InvalidIpAddress
from ipmeta.ips import Family, parse_address_field

START_COLUMN = "start"
END_COLUMN = "end"


class SourceError(ValueError):
    """A row or a file the loader cannot accept; the message names file and line."""


@dataclass(frozen=True, slots=True)
class SourceRow:
    origin: str  #: ``file:line``, for messages
    family: Family
    start: int
    end: int
    values: dict[str, str]  #: metadata columns, as text


def sha256_of(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def read_rows(path: Path, columns: Sequence[str] | None = None) -> Iterator[SourceRow]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        yield from parse_rows(handle, path.name, columns)


def parse_rows(
    handle: io.TextIOBase | Iterable[str], name: str, columns: Sequence[str] | None
) -> Iterator[SourceRow]:
    """Rows of one CSV; ``reader.line_num`` is the physical line, so quoted newlines count."""
    reader = csv.reader(handle)
    if columns is None:
        try:
            columns = next(reader)
        except StopIteration:
            raise SourceError(f"{name}: the file is empty; expected a header row") from None
    names = [column.strip().lower() for column in columns]
    for required in (START_COLUMN, END_COLUMN):
        if required not in names:
            raise SourceError(
                f"{name}: no {required!r} column in {names}; give a header row or --columns start,end,..."
            )
    start_at, end_at = names.index(START_COLUMN), names.index(END_COLUMN)
    metadata = [(index, column) for index, column in enumerate(names) if index not in (start_at, end_at)]
    for record in reader:
        line = reader.line_num
        origin = f"{name}:{line}"
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) != len(names):
            raise SourceError(f"{origin}: expected {len(names)} columns, found {len(record)}")
        try:
            start = parse_address_field(record[start_at])
            end = parse_address_field(record[end_at], family_hint=start.family)
        except InvalidIpAddress as error:
            raise SourceError(f"{origin}: {error.message}") from None
        if start.family != end.family:
            raise SourceError(f"{origin}: start is IPv{start.family} but end is IPv{end.family}")
        if start.value > end.value:
            raise SourceError(f"{origin}: start {record[start_at]} is after end {record[end_at]}")
        yield SourceRow(
            origin=origin,
            family=start.family,
            start=start.value,
            end=end.value,
            values={column: record[index].strip() for index, column in metadata},
        )
