"""``scan``: one streaming pass over one source file, its rows staged by bucket.

The scan validates every row (a ``file: line N: reason`` for each bad one),
learns what each column holds (``ColumnEvidence``), and splits each row at
bucket edges into *pieces*, staged with the row's file position (``seq``) so
that ``last-wins`` stays exact across files and partitions:

- a row inside one bucket is one piece;
- a row across bucket edges becomes its partial head and tail pieces, and the
  whole buckets between them: one piece each when there is one, a *cover row*
  when there are ``COVER_MIN_BUCKETS`` or more (``::/0`` is one cover row, not
  16.7 M pieces). Cover rows are few; they travel in the scan's summary.

Memory is bounded by the spill's buffers, not by the file (``staged.BucketSpill``).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from ipmeta.schema import keys
from loader.errors import LoadRejected
from loader.formats import (
    ColumnEvidence,
    FormatOptions,
    Header,
    RowError,
    SourceRow,
    open_rows,
    staged_bytes,
)
from loader.pipeline import staged
from loader.pipeline.descriptor import LoadDescriptor, Source, read_descriptor
from loader.store.source import is_s3_uri, materialize
from loader.store.staging import Staging

#: A row covering at least this many whole buckets keeps them as one cover row.
COVER_MIN_BUCKETS: Final = 2
#: Rejected rows listed by name in a report (all are counted).
MAX_LISTED_REJECTIONS: Final = 1000
#: A load may hold this many cover rows; each is kept in memory by the planning steps.
MAX_COVER_ROWS: Final = 100_000
#: ``seq`` = source index above the row's ordinal in its file: file order across files.
SEQ_SOURCE_SHIFT: Final = 40


@dataclass
class ScanSummary:
    """What one source held, staged as ``scan/S.json`` for the planning step."""

    source: int
    name: str
    columns: list[str]
    rows_read: int = 0
    rows_rejected: int = 0
    rejected: list[str] = field(default_factory=list)
    splits: int = 0  #: rows that cross a bucket edge
    pieces: int = 0  #: rows staged, counting each bucket piece
    buckets: list[staged.BucketSpan] = field(default_factory=list)
    #: ``[seq, family, first_bucket, last_bucket, origin, values]`` of each cover row
    covers: list[list[Any]] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), default=_as_json).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ScanSummary:
        raw = json.loads(data)
        raw["buckets"] = [staged.BucketSpan(*span.values()) for span in raw["buckets"]]
        return cls(**raw)


def scan_source(load_id: str, source: int, staging: Staging, *, workdir: Path | None = None) -> ScanSummary:
    """Scan source ``source`` of the load and stage its rows and summary (idempotent)."""
    descriptor = read_descriptor(staging, load_id)
    if staging.exists(load_id, staged.scan_name(source)):
        return ScanSummary.from_json(staging.get(load_id, staged.scan_name(source)))
    spec = descriptor.sources[source]
    with tempfile.TemporaryDirectory(prefix="ipmeta-scan-", dir=workdir) as folder:
        path = materialize(spec.uri, Path(folder)) if is_s3_uri(spec.uri) else Path(spec.uri)
        formats = descriptor.options.format_options(_locations(descriptor, Path(folder)))
        summary, spill = _scan_rows(descriptor, source, spec, path, formats=formats, folder=Path(folder))
        rows_file = Path(folder) / "rows"
        summary.buckets = spill.finish(rows_file)
        staging.put_file(load_id, staged.rows_name(source), rows_file)
    # The summary last: its presence says the source is scanned (a killed scan reruns).
    staging.put(load_id, staged.scan_name(source), summary.to_json())
    return summary


def _locations(descriptor: LoadDescriptor, folder: Path) -> Path | None:
    """The GeoIP2 Locations file, local (an S3 one is downloaded beside the source)."""
    locations = descriptor.options.locations
    if locations is None:
        return None
    if not is_s3_uri(locations):
        return Path(locations)
    target = folder / "locations"
    target.mkdir(exist_ok=True)
    return materialize(locations, target)


def _scan_rows(
    descriptor: LoadDescriptor,
    source: int,
    spec: Source,
    path: Path,
    *,
    formats: FormatOptions,
    folder: Path,
) -> tuple[ScanSummary, staged.BucketSpill]:
    started = time.monotonic()
    options = descriptor.options
    spill = staged.BucketSpill(folder)
    evidence = ColumnEvidence()
    summary: ScanSummary | None = None
    keep_origin = options.overlaps == "reject"
    for ordinal, entry in enumerate(open_rows(path, spec.name, formats)):
        if isinstance(entry, Header):
            summary = ScanSummary(source, spec.name, list(entry.columns))
            continue
        assert summary is not None, "a row source yields its header first"
        summary.rows_read += 1
        if isinstance(entry, RowError):
            _reject(summary, entry, options.max_errors)
            continue
        evidence.observe(entry.values, entry.origin)
        seq = (source << SEQ_SOURCE_SHIFT) | ordinal
        values = [entry.values[column] for column in summary.columns]
        _stage_row(summary, spill, seq=seq, row=entry, values=values, keep_origin=keep_origin)
    if summary is None:
        raise LoadRejected(f"{spec.name}: line 1: no header and no rows")
    summary.evidence = evidence.to_json()
    summary.seconds = round(time.monotonic() - started, 3)
    return summary, spill


def _reject(summary: ScanSummary, error: RowError, max_errors: int) -> None:
    summary.rows_rejected += 1
    if len(summary.rejected) < MAX_LISTED_REJECTIONS:
        summary.rejected.append(error.message)
    if summary.rows_rejected > max_errors:
        raise LoadRejected(
            f"{summary.rows_rejected} bad rows (at most {max_errors} allowed); first: {summary.rejected[0]}",
            summary.rejected,
        )


def _stage_row(
    summary: ScanSummary,
    spill: staged.BucketSpill,
    *,
    seq: int,
    row: SourceRow,
    values: list[Any],
    keep_origin: bool,
) -> None:
    tail = _ROW_JSON.encode([values, row.origin] if keep_origin else [values])[1:]
    cover = None
    pieces = split_row(row.family, row.start, row.end)
    if len(pieces) > 1:
        summary.splits += 1
    for piece in pieces:
        if isinstance(piece, CoverRun):
            cover = piece
            continue
        bucket, first, last = piece
        spill.add(row.family, bucket, f"[{seq},{first},{last},{tail}\n")
        summary.pieces += 1
    if cover is not None:
        if len(summary.covers) >= MAX_COVER_ROWS:
            raise LoadRejected(
                f"{row.origin}: more than {MAX_COVER_ROWS:,} rows span several whole buckets; "
                "a load keeps such rows in memory while it plans"
            )
        summary.covers.append([seq, row.family, cover.first_bucket, cover.last_bucket, row.origin, values])


def _as_json(value: Any) -> Any:
    """A MaxMind DB may hold bytes, which JSON cannot: staged tagged, typed back to bytes when stored."""
    if isinstance(value, bytes | bytearray):
        return staged_bytes(value)
    raise TypeError(f"cannot stage a {type(value).__name__}")


#: A staged row's JSON: one encoder for every row, since ``json.dumps`` with options builds one per call.
_ROW_JSON: Final = json.JSONEncoder(separators=(",", ":"), default=_as_json)


@dataclass(frozen=True, slots=True)
class CoverRun:
    """Whole buckets ``first_bucket..last_bucket`` of one row."""

    first_bucket: int
    last_bucket: int


def split_row(family: int, start: int, end: int) -> list[tuple[int, int, int] | CoverRun]:
    """``(bucket, first, last)`` pieces of a row, with a ``CoverRun`` for a long run of whole buckets.

    A list, not a generator: nearly every row is one piece, and the scan splits each of millions.
    """
    first_bucket, last_bucket = keys.bucket_of_value(family, start), keys.bucket_of_value(family, end)
    if first_bucket == last_bucket:
        return [(first_bucket, start, end)]
    whole_first = first_bucket if start == keys.bucket_bounds(family, first_bucket)[0] else first_bucket + 1
    whole_last = last_bucket if end == keys.bucket_bounds(family, last_bucket)[1] else last_bucket - 1
    if whole_last - whole_first + 1 >= COVER_MIN_BUCKETS:
        pieces: list[tuple[int, int, int] | CoverRun] = []
        if whole_first > first_bucket:
            pieces.append((first_bucket, start, keys.bucket_bounds(family, first_bucket)[1]))
        pieces.append(CoverRun(whole_first, whole_last))
        if whole_last < last_bucket:
            pieces.append((last_bucket, keys.bucket_bounds(family, last_bucket)[0], end))
        return pieces
    return [(piece.bucket, piece.first, piece.last) for piece in keys.split_at_buckets(family, start, end)]
