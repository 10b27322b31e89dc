"""``prepare``: read, validate and normalize the sources, then stage shuffled chunks for a new version.

Nothing is written before the whole source validated. An unfinished load of
the same source and options is resumed rather than prepared again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipmeta import keys
from ipmeta.ips import Family
from ipmeta.records import VersionMeta, VersionStatus
from loader import normalize, reverse_index
from loader.abort import fail
from loader.batching import batched
from loader.errors import LoadNotFound, LoadNotWritable, LoadRejected
from loader.options import LoadOptions
from loader.records import LoadItem, LoadReport, LoadStatus, Manifest, load_id_of, version_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.source import ParsedSource, is_s3_uri, materialize, read_sources, sha256_of
from loader.staging import REPORT, Staging, chunk_name, encode_chunk
from loader.table import LoaderTable

#: What ``prepare`` says a load is: ready to write, the same as the active version, or only checked.
DRY_RUN, UNCHANGED = "dry-run", "unchanged"


@dataclass(frozen=True)
class Prepared:
    status: str  #: "prepared", "unchanged" (same source as the active version) or "dry-run"
    load_id: str
    version: int
    chunks: int
    items: int
    report: LoadReport = field(default_factory=LoadReport)
    done: frozenset[int] = frozenset()  #: chunks already written (a resumed load)

    def to_event(self) -> dict[str, Any]:
        """The Step Functions output: the Map state iterates over ``chunks``."""
        return {
            "status": self.status,
            "load_id": self.load_id,
            "version": self.version,
            "chunks": [{"load_id": self.load_id, "chunk": index} for index in range(self.chunks)],
        }


@dataclass(frozen=True)
class DatasetPlan:
    """Everything ``prepare`` decided before it writes: rows, segments, items and the report."""

    parsed: ParsedSource
    resolution: normalize.Resolution
    column_types: Mapping[str, str]
    index_plan: reverse_index.IndexPlan | None
    pieces: list[normalize.Piece]
    per_bucket: Mapping[tuple[Family, int], int]
    chunk_count: int
    report: LoadReport


def prepare(
    sources: Sequence[str | Path],
    options: LoadOptions,
    table: LoaderTable,
    staging: Staging,
    *,
    now: float | None = None,
) -> Prepared:
    """A staged load for a new version (or the unchanged, resumed or dry-run outcome)."""
    paths = [materialize(source) for source in sources]
    try:
        return _prepare(sources, paths, options, table, staging, now=now)
    finally:
        # A warm Lambda container keeps /tmp: downloads must not pile up there.
        for source, path in zip(sources, paths, strict=True):
            if is_s3_uri(source):
                path.unlink(missing_ok=True)


def _prepare(
    sources: Sequence[str | Path],
    paths: Sequence[Path],
    options: LoadOptions,
    table: LoaderTable,
    staging: Staging,
    *,
    now: float | None,
) -> Prepared:
    started = time.monotonic()
    checksum = sha256_of(paths)
    fingerprint = options.fingerprint()
    if not options.dry_run:
        unchanged = _unchanged(table, checksum, fingerprint)
        if unchanged is not None:
            return unchanged
        resumable = _resumable_load(table, checksum, fingerprint)
        if resumable is not None:
            return resume(resumable.load_id, table, options, now=now)
    plan = plan_dataset(sources, paths, options, checksum)
    if options.dry_run:
        report = plan.report.with_(prepare_seconds=round(time.monotonic() - started, 3))
        return Prepared(DRY_RUN, "", 0, plan.chunk_count, len(plan.pieces), report)
    at = time.time() if now is None else now
    load = _open_load(sources, options, plan, table, checksum=checksum, fingerprint=fingerprint, at=at)
    try:
        _stage_chunks(load.version, plan, checksum, staging, options.chunk_size)
        report = plan.report.with_(prepare_seconds=round(time.monotonic() - started, 3))
        staging.put(load.load_id, REPORT, report.to_json())
        done_at = time.time() if now is None else now
        table.set_load_status(load.version, LoadStatus.PREPARED, int(done_at), report=report)
        return Prepared(
            str(LoadStatus.PREPARED), load.load_id, load.version, plan.chunk_count, len(plan.pieces), report
        )
    except BaseException as error:
        # Nothing of this load can be live yet: failing it frees the lock now, not
        # after the lease, and cleanup removes whatever was staged or written.
        fail(load.load_id, f"prepare failed: {error!r}"[:1000], table)
        raise


def plan_dataset(
    sources: Sequence[str | Path], paths: Sequence[Path], options: LoadOptions, checksum: str
) -> DatasetPlan:
    """Parse, resolve overlaps, type columns, plan the indexes and the items: all in memory, no writes."""
    parsed = read_sources(paths, options.columns, options.types, options.max_errors)
    resolution = normalize.resolve(parsed.rows, options.overlaps)
    column_types = normalize.infer_column_types(
        parsed.rows,
        {column: "N" if kind in ("int", "number") else "S" for column, kind in options.types.items()},
    )
    index_plan = _plan_index(options, parsed.columns, resolution.segments, parsed, column_types)
    pieces = normalize.plan_pieces(resolution.segments)
    per_bucket = normalize.items_per_bucket(resolution.segments, pieces)
    chunk_count = -(-len(pieces) // options.chunk_size)
    report = LoadReport(
        sources=tuple(str(source) for source in sources),
        sha256=checksum,
        rows_read=parsed.rows_read,
        rows_rejected=len(parsed.rejected),
        rejected=tuple(parsed.rejected),
        overlap_policy=options.overlaps,
        overlaps_resolved=resolution.overlapping_rows,
        segments=len(resolution.segments),
        splits=normalize.count_splits(resolution.segments),
        items=len(pieces),
        chunks=chunk_count,
        column_types=column_types,
        value_index=index_plan.report().get("value_index") if index_plan else None,
        flag_index=index_plan.report().get("flag_index") if index_plan else None,
        **_bucket_figures({keys.bucket_name(*bucket): count for bucket, count in per_bucket.items()}),
    )
    return DatasetPlan(parsed, resolution, column_types, index_plan, pieces, per_bucket, chunk_count, report)


def _open_load(
    sources: Sequence[str | Path],
    options: LoadOptions,
    plan: DatasetPlan,
    table: LoaderTable,
    *,
    checksum: str,
    fingerprint: str,
    at: float,
) -> LoadItem:
    """A new version and its bookkeeping: the lock, the load item, the version metadata, the manifest."""
    active = table.read_active_version(consistent=True)
    version = table.allocate_version()
    table.acquire_lock(load_id_of(version), lease_seconds=options.lock_lease_seconds, now=at)
    named = tuple(str(source) for source in sources)
    load = LoadItem(
        version=version,
        status=LoadStatus.PREPARING,
        sha256=checksum,
        fingerprint=fingerprint,
        options=options,
        sources=named,
        previous=active or 0,
        chunks=plan.chunk_count,
        items=len(plan.pieces),
        created_at=at,
        updated_at=int(at),
    )
    try:
        table.put_load(load)
        table.put_version_meta(_version_meta(load, plan))
        manifest = {
            keys.partition_key(version, family, bucket): count
            for (family, bucket), count in plan.per_bucket.items()
        }
        table.put_manifest(version, Manifest(manifest))
    except BaseException as error:
        fail(load.load_id, f"prepare failed: {error!r}"[:1000], table)
        raise
    return load


def _version_meta(load: LoadItem, plan: DatasetPlan) -> VersionMeta:
    index = plan.index_plan
    return VersionMeta(
        version=load.version,
        status=VersionStatus.LOADING,
        load_id=load.load_id,
        sha256=load.sha256,
        fingerprint=load.fingerprint,
        sources=load.sources,
        column_types=plan.column_types,
        previous=load.previous,
        created_at=int(load.created_at),
        items=load.items,
        chunks=load.chunks,
        rows=plan.parsed.rows_read,
        value_index=index.value_index_meta(plan.column_types) if index else None,
        flag_index=index.flag_index_meta() if index else None,
    )


def _stage_chunks(version: int, plan: DatasetPlan, checksum: str, staging: Staging, chunk_size: int) -> None:
    """Shuffle the pieces (seeded by the checksum) and stage them as chunks of items."""
    normalize.shuffle_pieces(plan.pieces, checksum, plan.resolution.segments)
    for index, chunk_pieces in enumerate(batched(plan.pieces, chunk_size)):
        items = normalize.build_piece_items(
            version,
            chunk_pieces,
            plan.resolution.segments,
            plan.parsed.rows,
            plan.column_types,
            index=plan.index_plan,
        )
        staging.put(load_id_of(version), chunk_name(index), encode_chunk(list(items)))


def _plan_index(
    options: LoadOptions,
    columns: Sequence[str],
    segments: Sequence[normalize.Segment],
    parsed: ParsedSource,
    column_types: Mapping[str, str],
) -> reverse_index.IndexPlan | None:
    """Shard counts of the reverse indexes, or None when the load asks for none."""
    if not options.index_field and not options.flag_column:
        return None
    for option, column in (("--index-field", options.index_field), ("--flag-column", options.flag_column)):
        if column is not None and column not in columns:
            message = f"{option} {column!r} is not a metadata column (columns: {', '.join(columns)})"
            raise LoadRejected(message, [message])
    return reverse_index.plan_index(
        normalize.segment_values(segments, parsed.rows, column_types),
        value_field=options.index_field,
        flag_column=options.flag_column,
        budget=options.shard_budget,
        max_shards=options.max_shards,
    )


def _bucket_figures(per_bucket: Mapping[str, int]) -> dict[str, Any]:
    total = sum(per_bucket.values())
    hottest = max(per_bucket, key=lambda name: per_bucket[name]) if per_bucket else None
    return {
        "items_per_bucket": dict(sorted(per_bucket.items(), key=lambda entry: -entry[1])),
        "buckets": len(per_bucket),
        "hottest_bucket": hottest,
        "hottest_bucket_share": round(per_bucket[hottest] / total, 4) if hottest else 0.0,
    }


def _unchanged(table: LoaderTable, checksum: str, fingerprint: str) -> Prepared | None:
    active = table.read_active_version(consistent=True)
    if active is None:
        return None
    meta = table.get_version_meta(active)
    if meta is None or meta.sha256 != checksum or (meta.fingerprint or fingerprint) != fingerprint:
        return None
    report = LoadReport(status=UNCHANGED, version=load_id_of(active), sha256=checksum, items_written=0)
    return Prepared(UNCHANGED, load_id_of(active), active, 0, meta.items, report)


def _resumable_load(table: LoaderTable, checksum: str, fingerprint: str) -> LoadItem | None:
    active = table.read_active_version(consistent=True) or 0
    candidates = [
        load
        for load in table.list_loads()
        if load.status == LoadStatus.PREPARED
        and load.sha256 == checksum
        and load.fingerprint == fingerprint
        # Started from another active version, it would lose activation anyway.
        and load.previous == active
    ]
    return max(candidates, key=lambda load: load.version) if candidates else None


def resume(
    load_id: str, table: LoaderTable, options: LoadOptions | None = None, *, now: float | None = None
) -> Prepared:
    """Take a staged load back: its lock, and the chunks still to write."""
    load = table.get_load(version_of(load_id))
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load.status != LoadStatus.PREPARED:
        raise LoadNotWritable(
            f"load {load_id} is {load.status}; only a prepared load resumes"
            + ("; run the load again to prepare a new one" if load.status == LoadStatus.PREPARING else "")
        )
    lease = options.lock_lease_seconds if options else DEFAULT_LOCK_LEASE_SECONDS
    table.acquire_lock(load_id, lease_seconds=lease, now=time.time() if now is None else now)
    report = load.report.with_(resumed=True, chunks_already_written=len(load.done))
    return Prepared(
        str(LoadStatus.PREPARED), load_id, load.version, load.chunks, load.items, report, load.done
    )
