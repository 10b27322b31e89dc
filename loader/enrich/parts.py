"""One part of an input read in bounded chunks, and the annotated output written whole or not at all.

A ``Part`` is a local file or an S3 object (``s3://bucket/key``, through
pyarrow's filesystem), as CSV, JSON Lines or Parquet, gzip allowed for the
text formats; optionally a byte range of an uncompressed text file (the part
starts after the first newline at or past its start, unless it is 0, and ends
with the line that crosses its end: the Hadoop convention, so parts tile the
file) or a set of a Parquet file's row groups.

Every limit is checked as the bytes arrive: a line (or CSV record) longer than
``MAX_RECORD_BYTES`` (the loader's cap) and a gzip stream that inflates more
than ``MAX_INFLATE_RATIO`` times its size are refused with ``EnrichInputError``.
Text columns are read as text, so the output repeats the input's values.
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import parse_ip
from loader.errors import SourceError
from loader.export.parquet import resolve
from loader.formats.text import MAX_RECORD_BYTES

FORMATS: Final = ("csv", "jsonl", "parquet")
#: A gzip input that inflates more than this many times its size is a bomb, not a log: a log of
#: addresses compresses 3 to 10 times (one address repeated a million times, ~1000, is refused too).
MAX_INFLATE_RATIO: Final = 200
#: Inflated bytes read before the ratio is judged (a small file's header skews it).
_RATIO_GRACE: Final = 64 << 20
_READ_STEP: Final = 1 << 20
METADATA_KEY: Final = b"ipmeta"


class EnrichInputError(SourceError):
    """An input (or output) the job refuses: the message says which and why."""


def format_of(name: str) -> str:
    plain = name.removesuffix(".gz").lower()
    for suffix, kind in (
        (".csv", "csv"),
        (".tsv", "csv"),
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "jsonl"),
        (".parquet", "parquet"),
        (".pq", "parquet"),
    ):
        if plain.endswith(suffix):
            return kind
    raise EnrichInputError(
        f"{name}: cannot tell its format from the name; give --format csv, jsonl or parquet"
    )


@dataclass(frozen=True)
class Part:
    """What one task reads. ``column``: the address column's name, or (header-less CSV) 0-based index."""

    uri: str
    column: str = "ip"
    format: str | None = None
    byte_range: tuple[int, int] | None = None
    row_groups: Sequence[int] | None = None
    filesystem: pafs.FileSystem | None = None

    @property
    def kind(self) -> str:
        return self.format or format_of(self.uri)

    @property
    def gzip(self) -> bool:
        return self.uri.endswith(".gz")

    @property
    def header_less(self) -> bool:
        return self.column.isdigit()


def read_chunks(part: Part, chunk_rows: int) -> Iterator[pa.Table]:
    """The part's rows in tables of at most ``chunk_rows`` rows (at least one table, maybe empty).

    An input that cannot be read to its end (gone, cut short, unreadable) is an
    ``EnrichInputError``: the rows already read are no answer for the part.
    """
    try:
        yield from _chunks(part, chunk_rows)
    except FileNotFoundError as error:
        raise EnrichInputError(f"{part.uri}: not found ({error})") from None
    except OSError as error:
        raise EnrichInputError(f"{part.uri}: could not be read to its end ({str(error)[:300]})") from None


def _chunks(part: Part, chunk_rows: int) -> Iterator[pa.Table]:
    fs, path = resolve(part.uri, part.filesystem)
    if part.kind == "parquet":
        yield from _parquet_chunks(fs, path, part, chunk_rows)
        return
    if part.byte_range is not None and part.gzip:
        raise EnrichInputError(f"{part.uri}: a gzip file cannot be split by byte range; read it whole")
    # compression=None: pyarrow would inflate a .gz itself, past every limit of ours.
    raw = fs.open_input_file(path) if part.byte_range else fs.open_input_stream(path, compression=None)
    with raw:
        stream: io.RawIOBase = _Inflating(raw, part.uri) if part.gzip else _Plain(raw)
        if part.byte_range is not None:
            header = part.kind == "csv" and not part.header_less
            ranged = _ByteRange(raw, part.byte_range, header=header)
            stream = _Prefixed(ranged.head, io.BufferedReader(ranged, _READ_STEP))
        stream = _LineCapped(stream, part.uri)
        reader = _csv_reader(stream, part) if part.kind == "csv" else _jsonl_reader(stream, part)
        yield from _rechunk(reader, chunk_rows, part)


def _parquet_chunks(fs: pafs.FileSystem, path: str, part: Part, chunk_rows: int) -> Iterator[pa.Table]:
    try:
        # pre_buffer keeps every range it read for the file's life: memory grew with the input
        # (about 18 bytes a row, measured at 50 M rows); without it, one row group at a time.
        parquet = pq.ParquetFile(path, filesystem=fs, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as error:
        raise EnrichInputError(f"{part.uri}: not a readable Parquet file ({error})") from None
    if parquet.metadata.num_rows == 0:
        raise EnrichInputError(f"{part.uri}: the Parquet file has no rows")
    _check_column(parquet.schema_arrow.names, part)
    groups = list(part.row_groups) if part.row_groups is not None else None
    empty = True
    for batch in parquet.iter_batches(batch_size=chunk_rows, row_groups=groups):
        empty = False
        yield pa.Table.from_batches([batch])
    if empty:
        yield parquet.schema_arrow.empty_table()


def _check_column(names: Sequence[str], part: Part) -> None:
    if part.header_less:
        if int(part.column) >= len(names):
            raise EnrichInputError(f"{part.uri}: --column {part.column}, but rows have {len(names)} columns")
        return
    if part.column not in names:
        shown = ", ".join(names[:20])
        raise EnrichInputError(f"{part.uri}: no column {part.column!r}; the columns are: {shown}")


def address_column(table: pa.Table, part: Part) -> pa.ChunkedArray:
    return table.column(int(part.column)) if part.header_less else table.column(part.column)


def _csv_reader(stream: io.RawIOBase, part: Part) -> Iterator[pa.RecordBatch]:
    buffered = io.BufferedReader(stream, _READ_STEP)
    first = buffered.readline(MAX_RECORD_BYTES + 1)
    if not first.strip():
        if part.byte_range is not None:
            return  # a byte range with no line of its own
        raise EnrichInputError(f"{part.uri}: the file is empty")
    if len(first) > MAX_RECORD_BYTES:
        raise EnrichInputError(f"{part.uri}: line 1 is longer than {MAX_RECORD_BYTES} bytes")
    cells = next(csv.reader([first.decode("utf-8-sig", errors="replace")]))
    if part.header_less:
        names = [f"column{index}" for index in range(len(cells))]
        body: io.RawIOBase = _Prefixed(first, buffered)
    else:
        names = cells
        _check_header(names, part)
        body = _Prefixed(b"", buffered)
    _check_column(names, part)
    schema = pa.schema([(name, pa.string()) for name in names])
    if not part.header_less and not buffered.peek(1):
        if part.byte_range is None:
            raise EnrichInputError(f"{part.uri}: the file has a header but no rows")
        yield pa.RecordBatch.from_pylist([], schema)
        return
    # One block at a time, read when needed: memory holds a block, never a read-ahead queue.
    options = pacsv.ReadOptions(column_names=names, block_size=MAX_RECORD_BYTES, use_threads=False)
    convert = pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False)
    try:
        reader = pacsv.open_csv(body, read_options=options, convert_options=convert)
        yield from reader
    except pa.ArrowInvalid as error:
        raise EnrichInputError(f"{part.uri}: {_arrow_problem(error)}") from None


def _check_header(names: Sequence[str], part: Part) -> None:
    for name in names:
        try:
            parse_ip(name)
        except InvalidIpAddress:
            continue
        raise EnrichInputError(
            f"{part.uri}: the first row holds an address ({name[:45]!r}), so the file has no header; "
            "name the address column by its 0-based index: --column 0"
        )


def _jsonl_reader(stream: io.RawIOBase, part: Part) -> Iterator[pa.RecordBatch]:
    buffered = io.BufferedReader(stream, _READ_STEP)
    if not buffered.peek(1):
        raise EnrichInputError(f"{part.uri}: the file is empty")
    try:
        reader = pajson.open_json(
            buffered, read_options=pajson.ReadOptions(block_size=MAX_RECORD_BYTES, use_threads=False)
        )
        first = True
        for batch in reader:
            if first:
                _check_column(batch.schema.names, part)
                first = False
            yield batch
    except pa.ArrowInvalid as error:
        raise EnrichInputError(f"{part.uri}: {_arrow_problem(error)}") from None


def _arrow_problem(error: Exception) -> str:
    text = str(error)
    if "straddling" in text or "block size" in text.lower():
        return f"a line is longer than {MAX_RECORD_BYTES} bytes (the loader's cap)"
    return text[:300]


def _rechunk(batches: Iterator[pa.RecordBatch], chunk_rows: int, part: Part) -> Iterator[pa.Table]:
    pending: list[pa.RecordBatch] = []
    rows = 0
    seen = False
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        while rows >= chunk_rows:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, chunk_rows)
            seen = True
            rest = table.slice(chunk_rows)
            pending, rows = rest.to_batches(), rest.num_rows
    if rows or not seen:
        if not pending and part.byte_range is None:
            raise EnrichInputError(f"{part.uri}: the file has no rows")
        yield pa.Table.from_batches(pending) if pending else pa.table({})


class _Plain(io.RawIOBase):
    """A pyarrow stream as a Python one."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _LineCapped(io.RawIOBase):
    """The bytes of ``inner``, refused once a line runs past ``MAX_RECORD_BYTES`` (found per block, in C)."""

    def __init__(self, inner: io.RawIOBase, name: str) -> None:
        self._inner, self._name = inner, name
        self._line = 0  # bytes since the last newline
        self._number = 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # At most the cap per read, so a line wholly inside one read is within it: only the
        # line running in from the reads before, and the one running on, need counting.
        view = memoryview(buffer)[:MAX_RECORD_BYTES]
        size = self._inner.readinto(view) or 0
        block = view[:size].tobytes()
        first = block.find(b"\n")
        if self._line + (size if first < 0 else first) > MAX_RECORD_BYTES:
            raise EnrichInputError(
                f"{self._name}: line {self._number} is longer than {MAX_RECORD_BYTES} bytes"
            )
        if first < 0:
            self._line += size
        else:
            self._number += block.count(b"\n")
            self._line = size - block.rfind(b"\n") - 1
        return size


class _Inflating(io.RawIOBase):
    """gzip (every member) inflated step by step, refused once it inflates past ``MAX_INFLATE_RATIO``."""

    def __init__(self, raw: Any, name: str) -> None:
        self._raw, self._name = raw, name
        self._inflater = zlib.decompressobj(wbits=31)
        self._pending = b""
        self.read_bytes = 0
        self.inflated = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        out = b""
        while not out:
            if not self._pending:
                self._pending = self._raw.read(_READ_STEP)
                self.read_bytes += len(self._pending)
                if not self._pending:
                    return 0
            if self._inflater.eof:
                self._inflater = zlib.decompressobj(wbits=31)
            try:
                out = self._inflater.decompress(self._pending, len(buffer))
            except zlib.error as error:
                raise EnrichInputError(f"{self._name}: not a valid gzip stream ({error})") from None
            self._pending = (
                self._inflater.unused_data if self._inflater.eof else self._inflater.unconsumed_tail
            )
        self.inflated += len(out)
        if self.inflated > _RATIO_GRACE and self.inflated > MAX_INFLATE_RATIO * self.read_bytes:
            raise EnrichInputError(
                f"{self._name}: inflates more than {MAX_INFLATE_RATIO} times its size; refused as a gzip bomb"
            )
        buffer[: len(out)] = out
        return len(out)


class _Prefixed(io.RawIOBase):
    """``head`` then the rest of ``body``."""

    def __init__(self, head: bytes, body: io.BufferedReader[Any]) -> None:
        self._head, self._body = head, body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        data = self._body.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _ByteRange(io.RawIOBase):
    """The lines of a random-access file that start in ``[start, end)``; ``head`` is the file's
    first line (the header) when ``header`` and the range starts past it."""

    def __init__(self, raw: Any, byte_range: tuple[int, int], *, header: bool) -> None:
        self._raw = raw
        start, end = byte_range
        size = raw.size()
        self.head = b""
        self._at = 0 if start == 0 else self._line_end(start - 1, size)
        if header and start > 0:
            header_end = self._line_end(0, size)
            self.head = raw.read_at(header_end, 0)
            self._at = max(self._at, header_end)
        self._end = max(self._at, self._line_end(end - 1, size) if 0 < end < size else size)

    def _line_end(self, position: int, size: int) -> int:
        """Just past the first newline at or after ``position`` (or the file's end)."""
        while position < size:
            block: bytes = self._raw.read_at(min(_READ_STEP, size - position), position)
            found = block.find(b"\n")
            if found >= 0:
                return position + found + 1
            position += len(block)
        return int(size)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), self._end - self._at)
        if size <= 0:
            return 0
        data = self._raw.read_at(size, self._at)
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)
