"""``plan_partitions``: from the scans' summaries, the partitions the resolve tasks work on.

A partition is a run of non-empty buckets of one family, in address order,
holding at most ``max_rows`` pieces (a bucket larger than that is a partition
of its own: a bucket is never split, so the largest bucket bounds a task's
memory). Buckets are independent once rows are split at their edges, so the
partitions resolve in parallel.

This step also settles the cover rows (``loader.pipeline.scan``): among themselves, at
bucket granularity, by the overlap policy. Buckets that no piece falls in and
that a cover owns are *cover-only*: they get no items, only an entry in the
version's cover list. Where a cover meets pieces, its claim on those buckets
goes to their partition, to be resolved with the pieces.

Everything here is proportional to the number of buckets and cover rows, not rows.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from ipmeta.schema import keys
from loader.errors import LoadRejected, SourceError
from loader.formats import ColumnEvidence, declared_types_for
from loader.pipeline import normalize, staged
from loader.pipeline.descriptor import LoadDescriptor, read_descriptor
from loader.pipeline.scan import MAX_LISTED_REJECTIONS, ScanSummary
from loader.store.staging import Staging

#: The most items a load may write: far above the largest public databases (DB-IP City
#: Lite, 14.8 M networks), and a clear refusal before a runaway source fills a table.
DEFAULT_MAX_ITEMS: Final = 100_000_000


@dataclass(frozen=True)
class CoverBlock:
    """Whole buckets ``first..last`` claimed by cover row ``row`` with a CIDR prefix (for most-specific)."""

    family: int
    first: int
    last: int
    prefix: int
    row: int


@dataclass
class PartitionSpec:
    index: int
    family: int
    buckets: list[int]  #: the non-empty buckets, ascending
    pieces: int
    #: ``[source, start, end]``: the byte range of each source's row file holding these buckets
    ranges: list[list[int]] = field(default_factory=list)
    covers: list[int] = field(default_factory=list)  #: indexes of the cover blocks meeting these buckets


@dataclass
class PartitionPlan:
    """Staged as ``plan/partitions.json``: what every later step reads."""

    columns: list[str]
    column_types: dict[str, str]
    sections: int  #: write sections each partition deals its items into
    partitions: list[PartitionSpec]
    cover_rows: list[list[Any]]  #: ``[seq, family, first_bucket, last_bucket, origin, values]``
    cover_blocks: list[CoverBlock]
    #: ``[family, first_bucket, last_bucket, cover_row]``: buckets a cover alone owns
    cover_only: list[list[int]]
    rows_read: int = 0
    rows_rejected: int = 0
    rejected: list[str] = field(default_factory=list)
    splits: int = 0
    pieces: int = 0
    scan_seconds: float = 0.0
    #: column -> why it is text though it holds numbers (``ColumnEvidence.mixed``)
    mixed_columns: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PartitionPlan:
        raw = json.loads(data)
        raw["partitions"] = [PartitionSpec(**spec) for spec in raw["partitions"]]
        raw["cover_blocks"] = [CoverBlock(**block) for block in raw["cover_blocks"]]
        return cls(**raw)


def plan_partitions(load_id: str, staging: Staging) -> PartitionPlan:
    """Read every scan summary, check the load as a whole, and stage the partition plan."""
    descriptor = read_descriptor(staging, load_id)
    scans = [
        ScanSummary.from_json(staging.get(load_id, staged.scan_name(source)))
        for source in range(len(descriptor.sources))
    ]
    plan = _plan(descriptor, scans, descriptor.options.partition_rows)
    staging.put(load_id, staged.PARTITIONS, plan.to_json())
    listing = [{"load_id": load_id, "partition": spec.index} for spec in plan.partitions]
    staging.put(load_id, staged.PARTITION_LIST, json.dumps(listing).encode())
    return plan


def _plan(descriptor: LoadDescriptor, scans: Sequence[ScanSummary], max_rows: int) -> PartitionPlan:
    options = descriptor.options
    columns = _common_columns(scans)
    _check_rejections(scans, options.max_errors)
    column_types, mixed = _column_types(scans, _declared_types(descriptor, scans), columns)
    for flag, column in (("--index-field", options.index_field), ("--flag-column", options.flag_column)):
        if column is not None and column not in columns:
            message = f"{flag} {column!r} is not a metadata column (columns: {', '.join(columns)})"
            raise LoadRejected(message, [message])
    pieces = sum(scan.pieces for scan in scans)
    cover_rows = [cover for scan in scans for cover in scan.covers]
    if pieces + len(cover_rows) > DEFAULT_MAX_ITEMS:
        raise LoadRejected(
            f"the sources hold {pieces:,} pieces after splitting at bucket edges, more than the "
            f"{DEFAULT_MAX_ITEMS:,} items a load may write; split the dataset"
        )
    partitions = _group(scans, max_rows)
    blocks = _cover_blocks(cover_rows, options.overlaps)
    _attach_covers(partitions, blocks)
    return PartitionPlan(
        columns=columns,
        column_types=column_types,
        sections=max(1, math.ceil(pieces / options.chunk_size)),
        partitions=partitions,
        cover_rows=cover_rows,
        cover_blocks=blocks,
        cover_only=_cover_only(blocks, cover_rows, partitions, options.overlaps),
        rows_read=sum(scan.rows_read for scan in scans),
        rows_rejected=sum(scan.rows_rejected for scan in scans),
        rejected=[reason for scan in scans for reason in scan.rejected][:MAX_LISTED_REJECTIONS],
        splits=sum(scan.splits for scan in scans),
        pieces=pieces,
        scan_seconds=round(max((scan.seconds for scan in scans), default=0.0), 3),
        mixed_columns=mixed,
    )


def _common_columns(scans: Sequence[ScanSummary]) -> list[str]:
    first = scans[0]
    for scan in scans[1:]:
        if scan.columns != first.columns:
            raise SourceError(
                f"{scan.name}: line 1: columns {scan.columns} differ from the first file's {first.columns}"
            )
    if not any(scan.rows_read - scan.rows_rejected for scan in scans):
        names = ", ".join(scan.name for scan in scans)
        raise SourceError(f"{names}: line 1: no ranges to load")
    return first.columns


def _check_rejections(scans: Sequence[ScanSummary], max_errors: int) -> None:
    rejected = sum(scan.rows_rejected for scan in scans)
    if rejected > max_errors:
        reasons = [reason for scan in scans for reason in scan.rejected][:MAX_LISTED_REJECTIONS]
        raise LoadRejected(
            f"{rejected} bad rows (at most {max_errors} allowed); first: {reasons[0]}", reasons
        )


def _declared_types(descriptor: LoadDescriptor, scans: Sequence[ScanSummary]) -> dict[str, str]:
    """``--types``, over the types a format declares for its own columns (a GeoIP2 postcode is text)."""
    options = descriptor.options
    # Only the format is decided here, by name: the Locations file itself is the scans' business.
    formats = options.format_options(Path(options.locations) if options.locations else None)
    declared: dict[str, str] = {}
    for scan in scans:
        declared.update(declared_types_for(scan.name, formats))
    return declared


def _column_types(
    scans: Sequence[ScanSummary], declared: Mapping[str, str], columns: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each column's stored type, and the columns of numbers and text (with the row that made them text)."""
    evidence = ColumnEvidence()
    for scan in scans:
        evidence.merge(ColumnEvidence.from_json(scan.evidence))
    problems = evidence.problems(declared)
    if problems:
        raise LoadRejected(problems[0], problems)
    types = evidence.column_types(declared)
    return {column: types.get(column, "S") for column in columns}, evidence.mixed(declared)


def _group(scans: Sequence[ScanSummary], max_rows: int) -> list[PartitionSpec]:
    """Runs of non-empty buckets, in (family, bucket) order, of at most ``max_rows`` pieces."""
    counts: dict[tuple[int, int], int] = {}
    for scan in scans:
        for span in scan.buckets:
            counts[span.family, span.bucket] = counts.get((span.family, span.bucket), 0) + span.rows
    partitions: list[PartitionSpec] = []
    for (family, bucket), rows in sorted(counts.items()):
        current = partitions[-1] if partitions else None
        if current is None or current.family != family or current.pieces + rows > max_rows:
            current = PartitionSpec(len(partitions), family, [], 0)
            partitions.append(current)
        current.buckets.append(bucket)
        current.pieces += rows
    for scan in scans:
        where = {(span.family, span.bucket): span for span in scan.buckets}
        for spec in partitions:
            spans = [where[spec.family, bucket] for bucket in spec.buckets if (spec.family, bucket) in where]
            if spans:  # buckets are in order in the file, so a partition's are one byte range
                spec.ranges.append([scan.source, spans[0].offset, spans[-1].offset + spans[-1].length])
    return partitions


def _cover_blocks(cover_rows: Sequence[Sequence[Any]], policy: str) -> list[CoverBlock]:
    """Each cover row as whole-bucket blocks: its CIDR blocks under most-specific, one run otherwise."""
    blocks: list[CoverBlock] = []
    for index, (_, family, first, last, _, _) in enumerate(cover_rows):
        if policy != "most-specific":
            blocks.append(CoverBlock(family, first, last, 0, index))
            continue
        bucket_bits = keys.BUCKET_PREFIX_BITS[family]
        for block_first, block_last, prefix in normalize.cidr_blocks(first, last, bucket_bits):
            blocks.append(CoverBlock(family, block_first, block_last, prefix, index))
    return blocks


def cover_priority(block: CoverBlock, seq: int) -> int:
    """The claim priority of a cover block, comparable with the pieces' (``normalize.resolve``)."""
    return block.prefix * normalize.PREFIX_WEIGHT + seq


def _attach_covers(partitions: Sequence[PartitionSpec], blocks: Sequence[CoverBlock]) -> None:
    for spec in partitions:
        for index, block in enumerate(blocks):
            if block.family != spec.family:
                continue
            at = bisect.bisect_left(spec.buckets, block.first)
            if at < len(spec.buckets) and spec.buckets[at] <= block.last:
                spec.covers.append(index)


def _cover_only(
    blocks: Sequence[CoverBlock],
    cover_rows: Sequence[Sequence[Any]],
    partitions: Sequence[PartitionSpec],
    policy: str,
) -> list[list[int]]:
    """Bucket runs no piece falls in, each with the cover row that owns it."""
    runs: list[list[int]] = []
    for family in (4, 6):
        claims = [
            (block.first, block.last, cover_priority(block, int(cover_rows[block.row][0])), block.row)
            for block in blocks
            if block.family == family
        ]
        if not claims:
            continue
        spans, overlapped = normalize.sweep(claims)
        if policy == "reject" and overlapped:
            seqs = [int(row[0]) for row in cover_rows]
            normalize.raise_first_overlap(claims, seqs, lambda index: str(cover_rows[index][4]))
        occupied = sorted(bucket for spec in partitions if spec.family == family for bucket in spec.buckets)
        for first, last, row in spans:
            runs.extend([family, start, end, row] for start, end in _free_runs(first, last, occupied))
    return runs


def _free_runs(first: int, last: int, occupied: Sequence[int]) -> list[tuple[int, int]]:
    """``first..last`` without the occupied buckets, as runs."""
    runs: list[tuple[int, int]] = []
    at = bisect.bisect_left(occupied, first)
    start = first
    while at < len(occupied) and occupied[at] <= last:
        if occupied[at] > start:
            runs.append((start, occupied[at] - 1))
        start = occupied[at] + 1
        at += 1
    if start <= last:
        runs.append((start, last))
    return runs
