"""Range CSVs to rows, with a ``file: line N: reason`` for every bad one.

Accepted input:
- a header row naming the columns, or none when ``columns`` is given;
- ``start`` and ``end`` as IP text or decimal integers, or one ``network`` CIDR
  column (``netblock`` and ``cidr`` are read as ``network``); with start and
  end present, the network column is only a label and is dropped;
- padded layouts (``Netblock , start , end , metadata``): spaces around fields
  and column names are ignored;
- gzip (``.gz``), a UTF-8 BOM, CRLF, quoted fields with commas, and IPv4 and
  IPv6 rows in the same file.

Every other column is metadata, kept as text; ``column_types`` decides what it
is stored as. A column declared a number (``--types lat=float``) is checked
here, so a bad value fails its own row.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ipmeta.schema import ips
from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import MAX_BY_FAMILY, Address, Family, parse_address_field
from loader.errors import SourceError
from loader.formats.column_types import NUMBER, number_problem, stored_type_of
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow
from loader.formats.text import MAX_RECORD_BYTES, TextLines, open_binary

if TYPE_CHECKING:
    from _csv import Reader as CsvReader

START_COLUMN: Final = "start"
END_COLUMN: Final = "end"
NETWORK_COLUMN: Final = "network"
COLUMN_ALIASES: Final = {"netblock": NETWORK_COLUMN, "cidr": NETWORK_COLUMN}
#: DynamoDB's item size limit.
MAX_ITEM_BYTES: Final = 400 * 1024
#: Bytes an item spends outside its metadata: key and bound attributes, names, map overhead.
ITEM_OVERHEAD_BYTES: Final = 200
# A metadata field may be large (the 400 KB item check reports it); csv's default caps at 128 KB.
# No field is longer than its record, which ``TextLines`` bounds.
csv.field_size_limit(max(csv.field_size_limit(), MAX_RECORD_BYTES))

#: Adds columns to a row's values in place (a join); returns why the row is bad, or None.
Enrich = Callable[[dict[str, str]], str | None]


def open_csv_rows(path: Path, name: str, options: FormatOptions) -> Iterator[Header | SourceRow | RowError]:
    with open_binary(path) as handle:
        yield from parse_csv(TextLines(handle, name), name, options.columns, options.declared_types)


@dataclass(frozen=True, slots=True)
class Layout:
    width: int
    start_at: int | None
    end_at: int | None
    network_at: int | None
    metadata: list[tuple[int, str]]
    #: Columns declared a number -> the declared type, as spelled (``int``, ``float``...)
    numbers: dict[str, str]
    strip_values: bool
    joined: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return [column for _, column in self.metadata] + list(self.joined)


def layout_of(
    names: list[str],
    name: str,
    declared_types: Mapping[str, str] | None,
    *,
    strip_values: bool,
    joined: Sequence[str] = (),
) -> Layout:
    """Where the bounds and the metadata are; ``joined`` columns are added by an ``Enrich``."""
    where = f"{name}: line 1"
    if len(set(names)) != len(names):
        duplicates = sorted({column for column in names if names.count(column) > 1})
        raise SourceError(f"{where}: duplicate column names {duplicates}")
    if any(not column for column in names):
        raise SourceError(f"{where}: a column has no name")
    has_range = START_COLUMN in names and END_COLUMN in names
    if not has_range and NETWORK_COLUMN not in names:
        raise SourceError(
            f"{where}: no start and end columns, nor a network column, in {names}; "
            "give a header row or --columns start,end,..."
        )
    bounds = {START_COLUMN, END_COLUMN, NETWORK_COLUMN}
    metadata = [(index, column) for index, column in enumerate(names) if column not in bounds]
    return Layout(
        width=len(names),
        start_at=names.index(START_COLUMN) if has_range else None,
        end_at=names.index(END_COLUMN) if has_range else None,
        network_at=None if has_range else names.index(NETWORK_COLUMN),
        metadata=metadata,
        numbers=declared_numbers(declared_types, [column for _, column in metadata] + list(joined), where),
        strip_values=strip_values,
        joined=tuple(joined),
    )


def declared_numbers(
    declared_types: Mapping[str, str] | None, columns: Sequence[str], where: str
) -> dict[str, str]:
    """The columns declared a number, checked against the file's columns."""
    numbers: dict[str, str] = {}
    for column, kind in (declared_types or {}).items():
        if column not in columns:
            raise SourceError(f"{where}: --types names {column!r}, which is not a metadata column")
        try:
            stored = stored_type_of(kind)
        except ValueError as error:
            raise SourceError(f"{where}: {error} for {column!r}") from None
        if stored == NUMBER:
            numbers[column] = kind.strip().lower()
    return numbers


def normalized_names(columns: Sequence[str]) -> list[str]:
    """Header names as the loader keys them: trimmed, lower case, aliases resolved."""
    return [COLUMN_ALIASES.get(key, key) for key in (column.strip().lower() for column in columns)]


def parse_csv(
    lines: Iterable[str],
    name: str,
    columns: Sequence[str] | None,
    declared_types: Mapping[str, str] | None = None,
    *,
    joined: Sequence[str] = (),
    enrich: Enrich | None = None,
) -> Iterator[Header | SourceRow | RowError]:
    """The header, then one row or one error per record.

    ``reader.line_num`` is the physical line where a record ends, so quoted
    newlines count and messages point where an editor would.
    """
    # Not strict: the padded layout puts spaces after closing quotes (`"a, b" ,`).
    reader = csv.reader(lines, skipinitialspace=True)
    bounded = lines if isinstance(lines, TextLines) else None
    if columns is None:
        try:
            columns = next(reader)
        except StopIteration:
            raise SourceError(f"{name}: line 1: the file is empty; expected a header row") from None
        except csv.Error as error:
            raise SourceError(f"{name}: line 1: {error}") from None
        if bounded is not None:
            bounded.end_record()
    # Values are data and stay verbatim ("PhotoShelter, Inc. " keeps its space);
    # only a padded layout, recognisable by its padded header, has padding to strip.
    padded = any(column != column.strip() for column in columns)
    layout = layout_of(normalized_names(columns), name, declared_types, strip_values=padded, joined=joined)
    yield Header(layout.columns)
    for line, record in records(reader, name, bounded):
        yield parse_record(record, layout, f"{name}: line {line}", enrich)


def records(reader: CsvReader, name: str, lines: TextLines | None) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of each non-blank record; a CSV syntax error ends the file with its line.

    ``lines`` (what the reader reads) hears where each record ends, to bound the next one.
    """
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise SourceError(f"{name}: line {reader.line_num}: {error}") from None
        if lines is not None:
            lines.end_record()
        if record and any(value.strip() for value in record):
            yield reader.line_num, record


def parse_record(
    record: list[str], layout: Layout, where: str, enrich: Enrich | None = None
) -> SourceRow | RowError:
    if len(record) != layout.width:
        return RowError(f"{where}: expected {layout.width} columns, found {len(record)}")
    bounds = _record_bounds(record, layout)
    if isinstance(bounds, str):
        return RowError(f"{where}: {bounds}")
    start, end = bounds
    # Interned: a few thousand organizations repeat across 400k rows.
    values = {
        column: sys.intern(record[index].strip() if layout.strip_values else record[index])
        for index, column in layout.metadata
    }
    problem = enrich(values) if enrich is not None else None
    problem = problem or metadata_problem(values, layout.numbers)
    if problem:
        return RowError(f"{where}: {problem}")
    return SourceRow(origin=where, family=start.family, start=start.value, end=end.value, values=values)


def _record_bounds(record: list[str], layout: Layout) -> tuple[Address, Address] | str:
    """The row's first and last address, IPv4-mapped ranges folded to IPv4; else why not."""
    try:
        if layout.network_at is not None:
            start, end = parse_network(record[layout.network_at])
        else:
            start, end = _parse_bounds(record[layout.start_at or 0], record[layout.end_at or 0])
    except InvalidIpAddress as error:
        return error.message
    if start.family != end.family:
        return f"start is IPv{start.family} but end is IPv{end.family}"
    if start.value > end.value:
        first, last = record[layout.start_at or 0].strip(), record[layout.end_at or 0].strip()
        return f"start {first} is after end {last}"
    mapped = ips.ipv4_of_mapped(start.family, start.value, end.value)
    return (Address(4, mapped[0]), Address(4, mapped[1])) if mapped else (start, end)


def metadata_problem(values: Mapping[str, str], numbers: Mapping[str, str]) -> str | None:
    """Why a row's metadata cannot be stored: a declared number that is not one, or an item over 400 KB."""
    for column, declared in numbers.items():
        value = values.get(column, "")
        problem = number_problem(value, declared)
        if problem:
            return f"column {column!r} is declared {declared} but holds {value!r}: {problem}"
    # An upper bound first (a character is at most 4 bytes), in C: nearly every row is far below.
    text = sum(map(len, values.values()))
    if ITEM_OVERHEAD_BYTES + 3 * len(values) + sum(map(len, values)) + 4 * text <= MAX_ITEM_BYTES:
        return None
    size = ITEM_OVERHEAD_BYTES + sum(
        len(column) + len(value.encode()) + 3 for column, value in values.items()
    )
    if size > MAX_ITEM_BYTES:
        return f"the item would take {size} bytes; DynamoDB allows 400 KB"
    return None


def _parse_field(text: str, family_hint: Family | None = None) -> Address:
    text = text.strip()
    if not text:
        raise InvalidIpAddress("an address field is empty")
    if "%" in text:
        raise InvalidIpAddress(f"{text!r} has a zone id; ranges are addresses, not interfaces")
    return parse_address_field(text, family_hint)


def _is_integer(text: str) -> bool:
    stripped = text.strip()
    return stripped.isascii() and stripped.isdigit()


def _parse_bounds(start_text: str, end_text: str) -> tuple[Address, Address]:
    # An integer alone cannot tell v4 from v6; the other field, if it is text, can.
    # ASCII only: ``isdigit`` also takes ``²``, which ``int`` refuses.
    start_is_integer, end_is_integer = (_is_integer(text) for text in (start_text, end_text))
    if start_is_integer and not end_is_integer:
        end = _parse_field(end_text)
        return _parse_field(start_text, end.family), end
    if start_is_integer and end_is_integer:
        # Both integers: the larger decides, so ``0,2**128-1`` is the whole of IPv6.
        fits_ipv4 = int(end_text) <= MAX_BY_FAMILY[4] and int(start_text) <= MAX_BY_FAMILY[4]
        family: Family = 4 if fits_ipv4 else 6
        return _parse_field(start_text, family), _parse_field(end_text, family)
    start = _parse_field(start_text)
    return start, _parse_field(end_text, start.family)


def parse_network(text: str) -> tuple[Address, Address]:
    family, first, last = ips.parse_network(text.strip())
    return Address(family, first), Address(family, last)
