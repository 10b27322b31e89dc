"""MaxMind DB files (``.mmdb``, ``.mmdb.gz``) to rows: one per network, streamed by ``maxminddb``.

Memory stays flat: the reader maps the file and walks its tree one network at a
time (a gzipped file is first inflated to a temporary file, never to memory, and
at most ``MAX_INFLATED_BYTES``). ``mmdb_tree`` walks the search tree first, in
bounded depth: ``maxminddb``'s iterators trust it, and a tree that loops crashes
the C one. A network whose value DynamoDB cannot hold (a double of ``inf``) is a
bad row, as a CSV's bad line is: ``--max-errors`` skips it and the report names it.
Values keep their types (a ``NativeValues``); ``mmdb_fields`` says which fields
become columns.

**IPv4 in an IPv6 tree.** The format keeps IPv4 at ``::a.b.c.d`` (``::/96``);
``maxminddb`` lists those networks as IPv4, and skips the alias subtrees
(``::ffff:0:0/96``, ``2002::/16``) that point back at them, so each comes out
once. A database may instead hold real records under ``::ffff:0:0/96``
(IPv4-mapped, which lookups answer as IPv4): those become IPv4 ranges too,
unless the ``::/96`` record for the same addresses is the same, when they are
a copy and are skipped. Other IPv6 networks (6to4 included) stay IPv6.
"""

from __future__ import annotations

import contextlib
import gzip
import ipaddress
import struct
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import maxminddb

from ipmeta.schema.ips import Family, format_address, ipv4_of_mapped
from loader.errors import SourceError
from loader.formats.column_types import NativeValues, native_problem, number_problem
from loader.formats.csv_rows import ITEM_OVERHEAD_BYTES, MAX_ITEM_BYTES, declared_numbers
from loader.formats.mmdb_fields import (
    ALL_FIELDS,
    MAX_DISCOVERED_COLUMNS,
    FieldPath,
    columns_of,
    default_paths,
    flatten,
    holds_a_map,
    leaf_paths,
    pick,
)
from loader.formats.mmdb_tree import check_database
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow

#: What a damaged file makes the reader raise, in either implementation (C or pure Python).
READ_ERRORS: Final = (
    maxminddb.InvalidDatabaseError,
    ValueError,
    IndexError,
    struct.error,
    OSError,
    # The pure-Python reader builds its metadata with keyword arguments: an unknown key is a TypeError.
    TypeError,
)


#: A ``.mmdb.gz`` is inflated to a temporary file: at most this much, or a small gzip fills the
#: disk. DB-IP City Lite's ``.mmdb.gz``, the largest release a feed fetches, is about 130 MB.
MAX_INFLATED_BYTES: Final = 4 << 30


def open_mmdb_rows(path: Path, name: str, options: FormatOptions) -> Iterator[Header | SourceRow | RowError]:
    with _plain_copy(path, name) as database:
        reader = _open(database, name)
        try:
            columns = _choose_columns(reader, name, options.mmdb_fields)
            numbers = declared_numbers(options.declared_types, list(columns), f"{name}: --types")
            yield Header(list(columns))
            as_text = frozenset(options.declared_types) - set(numbers)
            every = options.mmdb_fields == ALL_FIELDS
            yield from _rows(reader, name, columns, numbers, every=every, as_text=as_text)
        finally:
            reader.close()


@contextlib.contextmanager
def _plain_copy(path: Path, name: str) -> Iterator[Path]:
    """The file itself, or for ``.gz`` an inflated temporary copy (the reader maps a file)."""
    if path.suffix != ".gz":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="ipmeta-mmdb-") as folder:
        target = Path(folder) / path.stem
        try:
            with gzip.open(path, "rb") as packed, target.open("wb") as plain:
                inflated = 0
                while block := packed.read(1 << 20):
                    inflated += len(block)
                    if inflated > MAX_INFLATED_BYTES:
                        raise SourceError(
                            f"{name}: inflates past {MAX_INFLATED_BYTES} bytes, more than a MaxMind DB "
                            "holds; refused (a gzip bomb?)"
                        )
                    plain.write(block)
        except (OSError, EOFError) as error:
            raise SourceError(f"{name}: cannot read: {error}") from None
        yield target


def _open(path: Path, name: str) -> maxminddb.Reader:
    # The readers trust the search tree (a loop crashes the C one): it is walked here first.
    check_database(path, name)
    try:
        return maxminddb.open_database(str(path))
    except READ_ERRORS as error:
        raise SourceError(f"{name}: not a MaxMind DB file, or a damaged one: {error}") from None


def _choose_columns(
    reader: maxminddb.Reader, name: str, mmdb_fields: Mapping[str, str] | None
) -> dict[str, FieldPath]:
    if mmdb_fields == ALL_FIELDS:
        return columns_of(_discover(reader, name, limit=None))
    if mmdb_fields is not None:
        return columns_of(mmdb_fields)
    defaults = default_paths(reader.metadata().database_type)
    if defaults is not None:
        first = next(_networks(reader, name), None)
        # A known type with an unknown layout (another publisher's "city") is discovered instead.
        if first is not None and any(
            pick(first[1], path) is not None for path in columns_of(defaults).values()
        ):
            return columns_of(defaults)
    return columns_of(_discover(reader, name))


def _discover(reader: maxminddb.Reader, name: str, limit: int | None = MAX_DISCOVERED_COLUMNS) -> list[str]:
    """Every leaf path of every record, in the order first seen: a whole pass over the database."""
    found: dict[str, None] = {}
    previous = None
    for _, record in _networks(reader, name):
        # Neighbouring networks often hold the same record: comparing costs less than walking it.
        if record == previous:
            continue
        previous = record
        for path in leaf_paths(record):
            if path not in found:
                found[path] = None
                if limit is not None and len(found) > limit:
                    raise SourceError(
                        f"{name}: records hold more than {limit} fields; choose the columns with "
                        "--mmdb-fields column=dotted.path,... (or keep them all: --mmdb-fields all)"
                    )
    if not found:
        raise SourceError(f"{name}: the database holds no networks")
    return list(found)


def _networks(reader: maxminddb.Reader, name: str) -> Iterator[tuple[Any, Any]]:
    """``(network, record)`` pairs; a damaged file ends with the last network read."""
    networks = iter(reader)
    last = None
    while True:
        try:
            network, record = next(networks)
        except StopIteration:
            return
        except READ_ERRORS as error:
            after = f"network {last}" if last is not None else "the first network"
            raise SourceError(f"{name}: after {after}: cannot read the database: {error}") from None
        last = network
        yield network, record


def _rows(
    reader: maxminddb.Reader,
    name: str,
    columns: Mapping[str, FieldPath],
    numbers: Mapping[str, str],
    *,
    every: bool,
    as_text: frozenset[str],
) -> Iterator[SourceRow | RowError]:
    to_row = _RowBuilder(list(columns.items()), numbers, every=every, as_text=as_text)
    holds_ipv6 = reader.metadata().ip_version == 6
    for network, record in _networks(reader, name):
        start, prefix = int(network.network_address), network.prefixlen
        end = start | ((1 << (network.max_prefixlen - prefix)) - 1)
        # format_address beats str(network) several times over for IPv4, and this runs per network.
        origin = f"{name}: network {format_address(network.version, start)}/{prefix}"
        if network.version == 4:
            yield to_row(record, origin=origin, family=4, start=start, end=end)
        elif (mapped := ipv4_of_mapped(6, start, end)) is not None:
            if not (holds_ipv6 and _copies_ipv4_record(reader, mapped[0], prefix - 96, record)):
                yield to_row(record, origin=origin, family=4, start=mapped[0], end=mapped[1])
        else:
            yield to_row(record, origin=origin, family=6, start=start, end=end)


def _copies_ipv4_record(reader: maxminddb.Reader, start: int, prefix: int, record: Any) -> bool:
    """Whether ``::/96`` answers the IPv4-mapped network's addresses with the same record."""
    ipv4_record, ipv4_prefix = reader.get_with_prefix_len(ipaddress.IPv4Address(start))
    return ipv4_record == record and ipv4_prefix <= prefix


def _utf8_bytes(values: Mapping[str, Any]) -> int:
    """An item's size as the 400 KB check counts it, text in UTF-8 bytes."""
    size = ITEM_OVERHEAD_BYTES
    for column, value in values.items():
        entries = value if isinstance(value, list) else [value]
        size += len(column.encode()) + sum(
            len(entry.encode()) if isinstance(entry, str) else len(entry) if isinstance(entry, bytes) else 8
            for entry in entries
        )
    return size


def _immutable(value: Any) -> Any:
    """``bytearray`` as ``bytes``, inside arrays too."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [_immutable(inner) for inner in value]
    return value


class _RowBuilder:
    """A record's chosen fields as a row, checked against declared types and the item size.

    With every field (``--mmdb-fields all``) a record is flattened once, not
    walked once per column. A record equal to the previous network's (common:
    neighbours share a place) reuses its row's values, which nothing changes.
    """

    def __init__(
        self,
        paths: list[tuple[str, FieldPath]],
        numbers: Mapping[str, str],
        *,
        every: bool,
        as_text: frozenset[str],
    ) -> None:
        self.paths = paths
        self.numbers = numbers
        #: Columns declared text (``--types x=str``): any value is stored, as its text.
        self.as_text = as_text
        self.every = every
        self._last: tuple[Any, NativeValues] | None = None

    def __call__(
        self, record: Any, *, origin: str, family: Family, start: int, end: int
    ) -> SourceRow | RowError:
        if self._last is not None and record == self._last[0]:
            return SourceRow(origin=origin, family=family, start=start, end=end, values=self._last[1])
        values = self._values(record, origin)
        if isinstance(values, str):
            return RowError(values)
        self._last = (record, values)
        return SourceRow(origin=origin, family=family, start=start, end=end, values=values)

    def _values(self, record: Any, origin: str) -> NativeValues | str:
        """The row's values, or why the record cannot be one."""
        values = NativeValues()
        size = ITEM_OVERHEAD_BYTES
        flat = flatten(record) if self.every else None
        is_map = type(record) is dict
        for column, path in self.paths:
            value: Any
            if flat is not None:
                value = flat.get(column)
            else:
                # Most paths are one key deep (flat layouts): no walk for those.
                value = record.get(path[0]) if is_map and len(path) == 1 else pick(record, path)
            kind = type(value)
            if kind is bytearray or kind is list:
                # The C reader answers bytes as bytearray, the pure-Python one as bytes: one type.
                value = _immutable(value)
                kind = type(value)
            if kind is str:
                size += len(column) + len(value)
            elif kind is dict or (kind is list and holds_a_map(value)):
                dotted = ".".join(path) or "the record"
                return f"{origin}: column {column!r} ({dotted}) holds a map; name one of its fields"
            elif kind is list:
                size += len(column) + sum(
                    len(entry) if isinstance(entry, str | bytes) else 8 for entry in value
                )
            else:
                size += len(column) + (len(value) if kind is bytes else 8)
            # inf, nan or a double past DynamoDB's range: a bad row (--max-errors), not a bad file.
            if (kind is float or kind is list) and column not in self.as_text:
                unholdable = native_problem(value)
                if unholdable:
                    return f"{origin}: column {column!r} holds {repr(value)[:60]}: {unholdable}"
            values[column] = value
        problem = self._declared_problem(values) if self.numbers else None
        if problem:
            return f"{origin}: {problem}"
        # Characters first (a character is at most 4 bytes), UTF-8 bytes only near the limit.
        if size * 4 > MAX_ITEM_BYTES and (size := _utf8_bytes(values)) > MAX_ITEM_BYTES:
            return f"{origin}: the item would take about {size} bytes; DynamoDB allows 400 KB"
        return values

    def _declared_problem(self, values: Mapping[str, Any]) -> str | None:
        for column, declared in self.numbers.items():
            value = values[column]
            if value is None:
                continue
            problem = number_problem(repr(value) if isinstance(value, float) else str(value), declared)
            if problem:
                return f"column {column!r} is declared {declared} but holds {value!r}: {problem}"
        return None
