"""A version as a warehouse wants it: one Parquet file of sorted ranges with integer bounds.

The layout (``docs/parquet.md`` has the DDL and the join query):

- ``ip_family`` (int8): 4 or 6;
- ``network_bucket`` (int64): the address's top 16 bits (``BUCKET_BITS``), for
  both families. A range is one row per bucket it touches, so a join of
  addresses to ranges is an equi-join on ``(ip_family, network_bucket)`` plus a
  range check, as MaxMind's ``mmdbconvert`` and ipinfo's ``join_key`` do it;
- ``ip_start``/``ip_end`` (int64): an IPv4 range's bounds, null for IPv6;
- ``ip_start_hex``/``ip_end_hex`` (string): the bounds as fixed-width,
  zero-padded lowercase hex (8 digits for IPv4, 32 for IPv6). Text of one width
  sorts and compares like the numbers in DuckDB, Athena/Trino and Spark, which
  have no 128-bit integer;
- ``range_id`` (int64): the range's ordinal in (family, start) order, the same on
  each bucket row of one range;
- then the data fields, typed: a Number column is int64 when its values are whole,
  else float64; a String is string; a MaxMind DB's own types keep theirs (bool,
  int64, float64, string, binary), and a nested record or an array is JSON text
  (``exact_json``, as the API writes it). Every row of a CSV-loaded dataset has
  every field (an empty Number cell is null, as stored); a MaxMind DB field a
  record lacks is null.

Rows are sorted by (family, bucket, start) in row groups of ``ROW_GROUP_ROWS``,
so a reader prunes by bucket. The footer's ``ipmeta`` key holds JSON: dataset,
version, base, column kinds and the layout's version. Pure over sorted ranges,
like ``files``: it never reads the table. ``filesystem`` is any pyarrow
filesystem (local or S3); the file is written under a temporary name and moved
into place only once whole (on S3, a single object appears at the end).
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ipmeta.shapes import exact_json
from loader.export.files import ExportRange, ExportStats
from loader.formats.column_types import NATIVE, NUMBER

#: Bits of an address that name its ``network_bucket``, both families: at most 65,536 rows per range.
BUCKET_BITS: Final = 16
ADDRESS_BITS: Final = {4: 32, 6: 128}
HEX_WIDTH: Final = {4: 8, 6: 32}
ROW_GROUP_ROWS: Final = 65_536
METADATA_KEY: Final = b"ipmeta"
LAYOUT_VERSION: Final = 1
#: The layout's own columns; a data field may not take one of these names.
LAYOUT_COLUMNS: Final = (
    "ip_family",
    "network_bucket",
    "ip_start",
    "ip_end",
    "ip_start_hex",
    "ip_end_hex",
    "range_id",
)
LAYOUT_SCHEMA: Final = pa.schema(
    [
        ("ip_family", pa.int8()),
        ("network_bucket", pa.int64()),
        ("ip_start", pa.int64()),
        ("ip_end", pa.int64()),
        ("ip_start_hex", pa.string()),
        ("ip_end_hex", pa.string()),
        ("range_id", pa.int64()),
    ]
)


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What the footer records: which version of which dataset, and each data field's kind."""

    dataset: str
    version: int
    base: int
    #: field -> the version's column type (``N``, ``S`` or ``native``)
    column_kinds: Mapping[str, str]

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "dataset": self.dataset,
                "version": self.version,
                "base": self.base,
                "column_kinds": dict(self.column_kinds),
                "layout": LAYOUT_VERSION,
                "bucket_bits": BUCKET_BITS,
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SnapshotInfo:
        parsed = json.loads(raw)
        if parsed.get("layout") != LAYOUT_VERSION:
            raise ValueError(f"snapshot layout {parsed.get('layout')!r} is not {LAYOUT_VERSION}")
        return cls(parsed["dataset"], int(parsed["version"]), int(parsed["base"]), parsed["column_kinds"])


def hex_of(family: int, value: int) -> str:
    return format(value, f"0{HEX_WIDTH[family]}x")


def bucket_of(family: int, value: int) -> int:
    return value >> (ADDRESS_BITS[family] - BUCKET_BITS)


def write_parquet(
    ranges: Iterable[ExportRange],
    out: str,
    info: SnapshotInfo,
    filesystem: pafs.FileSystem | None = None,
) -> ExportStats:
    """``ranges`` (sorted by family, start; disjoint) as the layout above, at ``out`` on ``filesystem``."""
    started = time.monotonic()
    fs, path = resolve(out, filesystem)
    columns = [name for name in info.column_kinds if name not in LAYOUT_COLUMNS]
    taken = sorted(set(info.column_kinds) & set(LAYOUT_COLUMNS))
    if taken:
        raise ValueError(f"data fields {taken} take names of the layout's columns; rename them to export")
    partial = f"{path}.partial"
    stats = ExportStats()
    writer: pq.ParquetWriter | None = None
    try:
        for batch in _batches(_bucket_rows(ranges, stats), columns):
            if writer is None:
                schema = _schema(batch, columns, info)
                writer = pq.ParquetWriter(partial, schema, filesystem=fs, compression="zstd")
            writer.write_table(_table(batch, columns, writer.schema), row_group_size=ROW_GROUP_ROWS)
        if writer is None:  # no range at all: an empty file still says what it is
            writer = pq.ParquetWriter(partial, _schema([], columns, info), filesystem=fs)
        writer.close()
        fs.move(partial, path)
    except BaseException:
        if writer is not None:
            writer.close()
        _delete(fs, partial)
        raise
    stats.file_bytes = fs.get_file_info(path).size or 0
    stats.seconds = round(time.monotonic() - started, 3)
    stats.details = {"row_groups": pq.ParquetFile(path, filesystem=fs).num_row_groups}
    return stats


def resolve(uri: str, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of a local path or an ``s3://bucket/key`` (``filesystem`` wins if given)."""
    if filesystem is not None:
        return filesystem, uri.removeprefix("s3://")
    if "://" in uri:
        fs, path = pafs.FileSystem.from_uri(uri)
        return fs, str(path)
    return pafs.LocalFileSystem(), uri


def _delete(fs: pafs.FileSystem, path: str) -> None:
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_file(path)


#: One output row: (family, bucket, start, range_id, range).
_Row = tuple[int, int, int, int, ExportRange]


def _bucket_rows(ranges: Iterable[ExportRange], stats: ExportStats) -> Iterator[_Row]:
    """A row per (range, bucket), in (family, bucket, start) order.

    A wide range's later buckets wait in a heap until the ranges that start
    before them in those buckets have gone out; only open wide ranges are held.
    """
    pending: list[_Row] = []
    for range_id, item in enumerate(ranges):
        stats.ranges += 1
        first, last = bucket_of(item.family, item.start), bucket_of(item.family, item.end)
        key = (item.family, first, item.start)
        while pending and pending[0][:3] < key:
            yield heapq.heappop(pending)
        yield (item.family, first, item.start, range_id, item)
        for bucket in range(first + 1, last + 1):
            heapq.heappush(pending, (item.family, bucket, item.start, range_id, item))
    while pending:
        yield heapq.heappop(pending)


def _batches(rows: Iterator[_Row], columns: Sequence[str]) -> Iterator[list[_Row]]:
    batch: list[_Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROW_GROUP_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


def _schema(batch: Sequence[_Row], columns: Sequence[str], info: SnapshotInfo) -> pa.Schema:
    fields = [pa.field(name, _arrow_type(info.column_kinds[name], name, batch)) for name in columns]
    schema = pa.schema([*LAYOUT_SCHEMA, *fields])
    return schema.with_metadata({METADATA_KEY: info.to_json()})


def _arrow_type(kind: str, name: str, batch: Sequence[_Row]) -> pa.DataType:
    """A column's type, from its kind and (for Numbers and native values) the first rows' values."""
    values = [row[4].data.get(name) for row in batch]
    present = [value for value in values if value is not None]
    if kind not in (NATIVE, NUMBER):
        return pa.string()
    if kind == NUMBER:
        return pa.int64() if all(_whole(value) for value in present) else pa.float64()
    return _native_type(present)


def _whole(value: Any) -> bool:
    """A Number that an int64 holds exactly."""
    if isinstance(value, Decimal):
        return value.is_finite() and value == value.to_integral_value() and abs(value) < 2**63
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


def _native_type(present: Sequence[Any]) -> pa.DataType:
    first = present[0] if present else ""
    if isinstance(first, bool):
        return pa.bool_()
    if isinstance(first, int) and all(isinstance(v, int) and abs(v) < 2**63 for v in present):
        return pa.int64()
    if isinstance(first, float | Decimal):
        return pa.float64()
    if isinstance(first, bytes):
        return pa.binary()
    return pa.string()


def _table(batch: Sequence[_Row], columns: Sequence[str], schema: pa.Schema) -> pa.Table:
    v4 = [row[0] == 4 for row in batch]
    arrays: dict[str, Any] = {
        "ip_family": [row[0] for row in batch],
        "network_bucket": [row[1] for row in batch],
        "ip_start": [row[4].start if is4 else None for row, is4 in zip(batch, v4, strict=True)],
        "ip_end": [row[4].end if is4 else None for row, is4 in zip(batch, v4, strict=True)],
        "ip_start_hex": [hex_of(row[0], row[4].start) for row in batch],
        "ip_end_hex": [hex_of(row[0], row[4].end) for row in batch],
        "range_id": [row[3] for row in batch],
    }
    for name in columns:
        kind = schema.field(name).type
        arrays[name] = [_cell(row[4].data.get(name), kind, name) for row in batch]
    return pa.Table.from_pydict(arrays, schema=schema)


def _cell(value: Any, kind: pa.DataType, name: str) -> Any:
    if value is None:
        return None
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else exact_json.dumps(value)
    if pa.types.is_int64(kind):
        if isinstance(value, bool) or not isinstance(value, int | Decimal) or value != int(value):
            raise ValueError(f"field {name!r} was whole numbers in the first rows, then {value!r}")
        return int(value)
    if pa.types.is_float64(kind):
        return float(value)
    return value
