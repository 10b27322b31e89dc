"""``enrich_part``: one part of an input annotated against a snapshot (the contract: ``loader.enrich``)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from loader.enrich.addresses import QUOTED_ERRORS, parse_addresses
from loader.enrich.merge import ERROR, RANGE_END, RANGE_START, annotate
from loader.enrich.parts import (
    FORMATS,
    METADATA_KEY,
    EnrichInputError,
    Part,
    address_column,
    format_of,
    read_chunks,
)
from loader.enrich.snapshot import Snapshot
from loader.export.parquet import resolve

#: Rows per chunk: what memory holds of the input at once. Measured on a 5 M-range snapshot: a
#: chunk of 500 k rows peaks at about 100 MB of working arrays, and three are in flight.
DEFAULT_CHUNK_ROWS: Final = 250_000
#: A dictionary column gets Parquet dictionary pages when its dictionary has at most 1/3 as
#: many values as a chunk has rows (measured where it pays: ``_parquet_encoding``).
SMALL_DICTIONARY: Final = 3
#: The largest dictionary written as a page (Arrow writes a dictionary column's whole
#: dictionary as one page per row group, whatever the writer's page limit): a larger one is
#: written plainly instead.
DICTIONARY_PAGE_LIMIT: Final = 8 << 20
#: Chunks merged at once, each on its own thread.
MERGE_THREADS: Final = 2


@dataclass(frozen=True)
class Output:
    uri: str
    format: str | None = None
    overwrite: bool = False
    filesystem: pafs.FileSystem | None = None

    @property
    def kind(self) -> str:
        return self.format or format_of(self.uri)

    def refuse_existing(self) -> None:
        """Raise unless the output is absent or may be replaced."""
        fs, path = resolve(self.uri, self.filesystem)
        if not self.overwrite and fs.get_file_info(path).type != pafs.FileType.NotFound:
            raise EnrichInputError(f"{self.uri} already exists; give --overwrite to replace it")


@dataclass
class EnrichSummary:
    rows: int = 0
    invalid_rows: int = 0
    unmatched_rows: int = 0
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    #: the first invalid rows: (row number, 1-based in the part, message)
    problems: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def enrich_part(
    part: Part,
    snapshot: Snapshot,
    output: Output,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Callable[[int], None] | None = None,
) -> EnrichSummary:
    """Annotate ``part`` against ``snapshot`` into ``output``; see ``loader.enrich`` for the contract."""
    started = time.monotonic()
    if output.kind not in FORMATS:
        raise EnrichInputError(
            f"{output.uri}: output format {output.kind!r} is not one of {', '.join(FORMATS)}"
        )
    output.refuse_existing()
    fs, path = resolve(output.uri, output.filesystem)
    summary = EnrichSummary(versions=snapshot.versions())
    partial = f"{path}.{uuid.uuid4().hex[:8]}.partial"
    writer: _Writer | None = None
    # Chunks are merged on MERGE_THREADS threads (mostly in Arrow and numpy, outside the GIL)
    # and written in order on one more: memory holds at most MERGE_THREADS + 1 chunks.
    merging: deque[Future[_Merged]] = deque()
    with ThreadPoolExecutor(max_workers=MERGE_THREADS, thread_name_prefix="enrich-merge") as pool:
        try:
            read = 0
            for chunk in read_chunks(part, chunk_rows):
                if not chunk.num_columns:
                    continue  # a byte range with no line of its own
                merging.append(pool.submit(_annotated, chunk, part, snapshot, read))
                read += chunk.num_rows
                if len(merging) >= MERGE_THREADS:
                    writer = _take(
                        merging.popleft().result(), writer, summary, progress, (fs, partial, output)
                    )
            while merging:
                writer = _take(merging.popleft().result(), writer, summary, progress, (fs, partial, output))
            if writer is None:  # an empty byte range: an empty part
                fs.open_output_stream(partial).close()
            else:
                writer.close()
            fs.move(partial, path)
        except BaseException:
            for pending in merging:
                pending.cancel()
            if writer is not None:
                writer.abort()
            if fs.get_file_info(partial).type != pafs.FileType.NotFound:
                fs.delete_file(partial)
            raise
    summary.seconds = round(time.monotonic() - started, 3)
    return summary


@dataclass(frozen=True)
class _Merged:
    """A chunk annotated, and what it adds to the summary."""

    table: pa.Table
    #: the address column's name
    address: str
    #: the columns enrich added (the input's come first)
    added: tuple[str, ...]
    invalid_rows: int
    unmatched_rows: int
    #: (row number, 1-based in the part, message) of its first invalid rows
    problems: list[tuple[int, str]]


def _annotated(chunk: pa.Table, part: Part, snapshot: Snapshot, first_row: int) -> _Merged:
    parsed = parse_addresses(address_column(chunk, part))
    added = annotate(snapshot, parsed)
    clash = sorted(set(added) & set(chunk.column_names))
    if clash:
        raise EnrichInputError(f"{part.uri}: the input already has columns {clash}, which enrich adds")
    for name, column in added.items():
        chunk = chunk.append_column(name, column)
    return _Merged(
        chunk,
        chunk.column_names[int(part.column)] if part.header_less else part.column,
        tuple(added),
        int(parsed.invalid.sum()),
        _count_unmatched(added["ip_error"]),
        [(first_row + at + 1, message) for at, message in parsed.problems],
    )


def _take(
    merged: _Merged,
    writer: _Writer | None,
    summary: EnrichSummary,
    progress: Callable[[int], None] | None,
    target: tuple[pafs.FileSystem, str, Output],
) -> _Writer:
    """Count a merged chunk into ``summary`` and queue it for writing (opening the writer first)."""
    summary.problems.extend(merged.problems[: QUOTED_ERRORS - len(summary.problems)])
    summary.invalid_rows += merged.invalid_rows
    summary.unmatched_rows += merged.unmatched_rows
    summary.rows += merged.table.num_rows
    if writer is None:
        writer = _Writer(target, merged, summary)
    writer.write(merged.table)
    if progress is not None:
        progress(merged.table.num_rows)
    return writer


def _count_unmatched(errors: pa.Array) -> int:
    codes = pc.value_counts(errors.drop_null()).to_pylist()
    return sum(int(each["counts"]) for each in codes if each["values"] != "IP_ADDRESS_INVALID")


class _Writer:
    """The output's format, written at a temporary name.

    Each chunk is written on a thread of its own while the next ones are merged.
    """

    def __init__(
        self, target: tuple[pafs.FileSystem, str, Output], merged: _Merged, summary: EnrichSummary
    ) -> None:
        fs, path, output = target
        schema = merged.table.schema
        address = merged.address
        self.kind = output.kind
        meta: Mapping[bytes, bytes] = {METADATA_KEY: json.dumps({"versions": summary.versions}).encode()}
        self._sink = fs.open_output_stream(path, compression="gzip" if output.uri.endswith(".gz") else None)
        self._parquet: pq.ParquetWriter | None = None
        self._csv: pacsv.CSVWriter | None = None
        if self.kind == "parquet":
            self._parquet = pq.ParquetWriter(
                self._sink,
                schema.with_metadata(meta),
                compression="snappy",
                **_parquet_encoding(merged.table, address, merged.added),
            )
        elif self.kind == "csv":
            self._csv = pacsv.CSVWriter(self._sink, _plain_schema(schema))
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="enrich-write")
        self._pending: Future[None] | None = None

    def write(self, table: pa.Table) -> None:
        """Queue ``table`` once the chunk before it is written (raising what that write raised)."""
        self._wait()
        self._pending = self._thread.submit(self._write, table)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _write(self, table: pa.Table) -> None:
        if self._parquet is not None:
            self._parquet.write_table(table.replace_schema_metadata(self._parquet.schema.metadata))
        elif self._csv is not None:
            self._csv.write_table(table.cast(self._csv_schema(table)))
        else:
            lines = "".join(json.dumps(row, default=str) + "\n" for row in table.to_pylist())
            self._sink.write(lines.encode())

    def _csv_schema(self, table: pa.Table) -> pa.Schema:
        return _plain_schema(table.schema)

    def close(self) -> None:
        try:
            self._wait()
        finally:
            self._thread.shutdown()
        if self._parquet is not None:
            self._parquet.close()
        if self._csv is not None:
            self._csv.close()
        self._sink.close()

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._wait()
        with contextlib.suppress(OSError, pa.ArrowException):
            self.close()


def _parquet_encoding(table: pa.Table, address: str, added: tuple[str, ...]) -> dict[str, Any]:
    """Dictionary pages only where a chunk's values repeat: a column whose Arrow dictionary is
    small beside the chunk (``SMALL_DICTIONARY``), and the error codes.

    Arrow writes a dictionary column's own dictionary as the page (hashing its values, once per
    row group) and the rows as their indices; the values are copied and compressed per row
    otherwise (and for a dictionary over ``DICTIONARY_PAGE_LIMIT``). Measured on 10 M rows: the
    ASN demo's 81 k organization names beside a 250 k-row chunk, 0.9 s against 1.2-1.4 s plainly
    and 83 MB against 149 MB; the city synthetic's 120 k city names and 100 k postal codes, no
    faster either way, so plain. The range text (nearly one bound per row) is always plain.

    Min/max statistics for the input's columns but its addresses (a log's time column prunes),
    and for the added columns that are not text: an added text (a city, a country, a range)
    spans nearly all its values in every row group of an output in its input's order, so no
    reader prunes by it, and a dictionary column's statistics cost twice as much to write as
    the column itself (Arrow finds the indices in use first).
    """
    texts = {address, RANGE_START, RANGE_END}
    dictionaries = [
        (f.name, _largest_dictionary(table.column(f.name)))
        for f in table.schema
        if pa.types.is_dictionary(f.type) and f.name not in texts
    ]
    paged = [
        name
        for name, largest in dictionaries
        if len(largest) * SMALL_DICTIONARY <= table.num_rows and largest.nbytes <= DICTIONARY_PAGE_LIMIT
    ]
    return {
        "use_dictionary": [*paged, ERROR],
        "write_statistics": [
            f.name for f in table.schema if f.name not in texts and not (f.name in added and _is_text(f.type))
        ],
    }


def _largest_dictionary(column: pa.ChunkedArray) -> pa.Array:
    return max((chunk.dictionary for chunk in column.chunks), key=len, default=pa.array([], pa.string()))


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    """Dictionary-encoded columns as their values, which text formats write."""
    return pa.schema(
        [pa.field(f.name, f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in schema]
    )
