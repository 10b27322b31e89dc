"""Reading range CSVs into typed rows, with a ``line N: reason`` for every bad one.

Accepted input:
- a header row naming the columns, or none when ``columns`` is given;
- ``start`` and ``end`` as IP text or decimal integers, or one ``network`` CIDR
  column (``netblock`` is read as ``network``); with start and end present, the
  network column is only a label and is dropped;
- padded layouts (``Netblock , start , end , metadata``): spaces around fields
  and column names are ignored;
- gzip (``.gz``), a UTF-8 BOM, CRLF, quoted fields with commas, and IPv4 and
  IPv6 rows in the same file;
- a local path or an ``s3://bucket/key`` URI (downloaded first).

Every other column is metadata, kept as text here; ``loader.normalize`` types it.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import ipaddress
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final, cast

from ipmeta.errors import InvalidIpAddress
from ipmeta.ips import MAX_BY_FAMILY, Address, Family, parse_address_field
from loader.errors import LoadRejected, SourceError

START_COLUMN = "start"
END_COLUMN = "end"
NETWORK_COLUMN = "network"
COLUMN_ALIASES: Final = {"netblock": NETWORK_COLUMN, "cidr": NETWORK_COLUMN}
#: DynamoDB's item size limit.
MAX_ITEM_BYTES = 400 * 1024
#: Bytes an item spends outside its metadata: key and bound attributes, names, map overhead.
_ITEM_OVERHEAD_BYTES = 200
# A metadata field may be large (the 400 KB item check reports it); csv's default caps at 128 KB.
csv.field_size_limit(max(csv.field_size_limit(), 1 << 24))
#: Declared column types, as `--types asn=int,name=str` spells them.
DECLARED_TYPES: Final = {"int": "N", "number": "N", "str": "S", "string": "S"}


@dataclass(frozen=True, slots=True)
class SourceRow:
    origin: str  #: ``file line N``, for messages
    family: Family
    start: int
    end: int
    values: dict[str, str]  #: metadata columns, as text


@dataclass(frozen=True, slots=True)
class RowError:
    message: str  #: ``file: line N: reason``


@dataclass
class ParsedSource:
    columns: list[str]  #: metadata column names
    rows: list[SourceRow] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    rows_read: int = 0


def is_s3_uri(source: str | Path) -> bool:
    return str(source).startswith("s3://")


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise SourceError(f"{uri}: expected s3://bucket/key")
    return bucket, key


def materialize(source: str | Path, workdir: Path | None = None) -> Path:
    """A local path for ``source``: S3 objects are downloaded (Lambda has /tmp for that)."""
    if not is_s3_uri(source):
        path = Path(source)
        if not path.is_file():
            raise SourceError(f"{path}: no such file")
        return path
    from loader import s3

    bucket, key = split_s3_uri(str(source))
    folder = workdir or Path(tempfile.mkdtemp(prefix="ipmeta-source-"))
    target = folder / Path(key).name
    s3.download(bucket, key, target)
    return target


def sha256_of(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def open_binary(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def text_lines(binary: Iterable[bytes], name: str) -> Iterator[str]:
    """Decoded lines (line endings kept, so the csv module sees quoted newlines and CRLF)."""
    lines = iter(binary)
    number = 0
    while True:
        number += 1
        try:
            raw = next(lines)
        except StopIteration:
            return
        except (OSError, EOFError) as error:  # a truncated or corrupt gzip stream
            raise SourceError(f"{name}: line {number}: cannot read: {error}") from None
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(f"{name}: line {number}: not valid UTF-8 text") from None


def read_sources(
    paths: Sequence[Path],
    columns: Sequence[str] | None = None,
    declared_types: Mapping[str, str] | None = None,
    max_errors: int = 0,
) -> ParsedSource:
    """Every row of every file, or ``LoadRejected`` once more than ``max_errors`` rows are bad."""
    parsed: ParsedSource | None = None
    for path in paths:
        with open_binary(path) as handle:
            try:
                for entry in parse_rows(text_lines(handle, path.name), path.name, columns, declared_types):
                    if isinstance(entry, _Header):
                        if parsed is None:
                            parsed = ParsedSource(columns=entry.metadata)
                        elif parsed.columns != entry.metadata:
                            raise SourceError(
                                f"{path.name}: line 1: columns {entry.metadata} differ from the "
                                f"first file's {parsed.columns}"
                            )
                        continue
                    assert parsed is not None
                    parsed.rows_read += 1
                    if isinstance(entry, RowError):
                        parsed.rejected.append(entry.message)
                        if len(parsed.rejected) > max_errors:
                            raise LoadRejected(
                                f"{len(parsed.rejected)} bad rows (at most {max_errors} allowed); "
                                f"first: {parsed.rejected[0]}",
                                parsed.rejected,
                            )
                    else:
                        parsed.rows.append(entry)
            except (OSError, EOFError) as error:  # a truncated or corrupt gzip stream
                raise SourceError(f"{path.name}: cannot read: {error}") from None
    if parsed is None or not parsed.rows:
        names = ", ".join(path.name for path in paths)
        raise SourceError(f"{names}: line 1: no ranges to load")
    return parsed


@dataclass(frozen=True, slots=True)
class _Header:
    metadata: list[str]


@dataclass(frozen=True, slots=True)
class _Layout:
    width: int
    start_at: int | None
    end_at: int | None
    network_at: int | None
    metadata: list[tuple[int, str]]
    declared: dict[str, str]
    strip_values: bool


def _layout(
    names: list[str], name: str, declared_types: Mapping[str, str] | None, *, strip_values: bool
) -> _Layout:
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
    declared: dict[str, str] = {}
    for column, kind in (declared_types or {}).items():
        if column not in {column for _, column in metadata}:
            raise SourceError(f"{where}: --types names {column!r}, which is not a metadata column")
        if kind not in DECLARED_TYPES:
            raise SourceError(f"{where}: unknown type {kind!r} for {column!r} (use int or str)")
        declared[column] = DECLARED_TYPES[kind]
    return _Layout(
        width=len(names),
        start_at=names.index(START_COLUMN) if has_range else None,
        end_at=names.index(END_COLUMN) if has_range else None,
        network_at=None if has_range else names.index(NETWORK_COLUMN),
        metadata=metadata,
        declared=declared,
        strip_values=strip_values,
    )


def parse_rows(
    lines: Iterable[str],
    name: str,
    columns: Sequence[str] | None,
    declared_types: Mapping[str, str] | None = None,
) -> Iterator[_Header | SourceRow | RowError]:
    """The header, then one row or one error per record.

    ``reader.line_num`` is the physical line where a record ends, so quoted
    newlines count and messages point where an editor would.
    """
    # Not strict: the padded layout puts spaces after closing quotes (`"a, b" ,`).
    reader = csv.reader(lines, skipinitialspace=True)
    if columns is None:
        try:
            columns = next(reader)
        except StopIteration:
            raise SourceError(f"{name}: line 1: the file is empty; expected a header row") from None
        except csv.Error as error:
            raise SourceError(f"{name}: line 1: {error}") from None
    names = [COLUMN_ALIASES.get(key, key) for key in (column.strip().lower() for column in columns)]
    # Values are data and stay verbatim ("PhotoShelter, Inc. " keeps its space);
    # only a padded layout, recognisable by its padded header, has padding to strip.
    padded = any(column != column.strip() for column in columns)
    layout = _layout(names, name, declared_types, strip_values=padded)
    yield _Header([column for _, column in layout.metadata])
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise SourceError(f"{name}: line {reader.line_num}: {error}") from None
        if not record or all(not value.strip() for value in record):
            continue
        yield _parse_record(record, layout, f"{name}: line {reader.line_num}")


def _parse_record(record: list[str], layout: _Layout, where: str) -> SourceRow | RowError:
    if len(record) != layout.width:
        return RowError(f"{where}: expected {layout.width} columns, found {len(record)}")
    try:
        if layout.network_at is not None:
            start, end = _parse_network(record[layout.network_at])
        else:
            start, end = _parse_bounds(record[layout.start_at or 0], record[layout.end_at or 0])
    except InvalidIpAddress as error:
        return RowError(f"{where}: {error.message}")
    if start.family != end.family:
        return RowError(f"{where}: start is IPv{start.family} but end is IPv{end.family}")
    if start.value > end.value:
        return RowError(
            f"{where}: start {record[layout.start_at or 0].strip()} is after end "
            f"{record[layout.end_at or 0].strip()}"
        )
    # Interned: a few thousand organizations repeat across 400k rows.
    values = {
        column: sys.intern(record[index].strip() if layout.strip_values else record[index])
        for index, column in layout.metadata
    }
    problem = _metadata_problem(values, layout.declared)
    if problem:
        return RowError(f"{where}: {problem}")
    return SourceRow(origin=where, family=start.family, start=start.value, end=end.value, values=values)


def _metadata_problem(values: Mapping[str, str], declared: Mapping[str, str]) -> str | None:
    for column, value in values.items():
        if declared.get(column) == "N" and value and not _is_integer(value):
            return f"column {column!r} is declared int but holds {value!r}"
    size = _ITEM_OVERHEAD_BYTES + sum(
        len(column) + len(value.encode()) + 3 for column, value in values.items()
    )
    if size > MAX_ITEM_BYTES:
        return f"the item would take {size} bytes; DynamoDB allows 400 KB"
    return None


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] == "-" else text
    return digits.isascii() and digits.isdigit()


def _parse_field(text: str, family_hint: Family | None = None) -> Address:
    text = text.strip()
    if not text:
        raise InvalidIpAddress("an address field is empty")
    if "%" in text:
        raise InvalidIpAddress(f"{text!r} has a zone id; ranges are addresses, not interfaces")
    return parse_address_field(text, family_hint)


def _parse_bounds(start_text: str, end_text: str) -> tuple[Address, Address]:
    # An integer alone cannot tell v4 from v6; the other field, if it is text, can.
    start_is_integer, end_is_integer = start_text.strip().isdigit(), end_text.strip().isdigit()
    if start_is_integer and not end_is_integer:
        end = _parse_field(end_text)
        return _parse_field(start_text, end.family), end
    if start_is_integer and end_is_integer:
        # Both integers: the larger decides, so ``0,2**128-1`` is the whole of IPv6.
        family: Family = 4 if int(end_text) <= MAX_BY_FAMILY[4] and int(start_text) <= MAX_BY_FAMILY[4] else 6
        return _parse_field(start_text, family), _parse_field(end_text, family)
    start = _parse_field(start_text)
    return start, _parse_field(end_text, start.family)


def _parse_network(text: str) -> tuple[Address, Address]:
    text = text.strip()
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as error:
        raise InvalidIpAddress(f"{text!r} is not a valid network: {error}") from None
    family: Family = 4 if network.version == 4 else 6
    return Address(family, int(network.network_address)), Address(family, int(network.broadcast_address))
