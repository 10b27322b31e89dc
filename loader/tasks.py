"""The loader's tasks, one function per Step Functions state.

``prepare`` → ``write_chunk`` (once per chunk, in parallel) → ``activate``;
``cleanup`` runs on a schedule, ``abort`` from every Catch. ``loader.handlers``
wraps them for Lambda; ``loader.driver`` runs them locally with a thread pool
standing in for the Map state. Each task takes and returns plain data.

Bookkeeping lives in the base table (keys in ``ipmeta.keys``):
- the **load item** is the progress pointer: status, chunk count and the set of
  finished chunks, read with ConsistentRead. A chunk joins the set once, so a
  retried or resumed chunk is skipped, and its counters add up exactly once;
- the **lock item** lets one load run at a time. Its lease expires, and every
  chunk renews it, so a crashed load blocks the next one only for a lease;
- the **manifest** holds the expected items per partition: ``activate`` checks
  the counts against it and ``cleanup`` knows what to delete.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ipmeta import keys
from ipmeta.errors import (
    ActivationConflict,
    IpmetaError,
    LoadIncomplete,
    LoadNotFound,
    LoadRejected,
    NoDataset,
    VersionNotFound,
)
from ipmeta.settings import (
    DEFAULT_CLEANUP_GRACE_SECONDS,
    DEFAULT_LOCK_LEASE_SECONDS,
    DEFAULT_RETENTION,
)
from ipmeta.store import BATCH_WRITE_LIMIT, Store, WriteStats
from loader import events, normalize, reverse_index
from loader.source import SourceRow, is_s3_uri, materialize, read_sources, sha256_of
from loader.staging import Staging, chunk_name, decode_chunk, encode_chunk

#: Items per chunk: one Map iteration, about 100 BatchWriteItem calls.
DEFAULT_CHUNK_SIZE = 2500
DEFAULT_WRITE_WORKERS = 8
REPORT = "report.json"

# Load statuses. "preparing" loads never staged all chunks and cannot resume.
PREPARING, PREPARED, ACTIVATED, FAILED, DELETED = "preparing", "prepared", "activated", "failed", "deleted"


class VerificationFailed(IpmetaError):
    status = 500
    code = "LOAD_VERIFICATION_FAILED"


class LoadNotWritable(IpmetaError):
    status = 409
    code = "LOAD_NOT_WRITABLE"


@dataclass(frozen=True)
class LoadOptions:
    columns: Sequence[str] | None = None
    #: Declared metadata types, e.g. ``{"asn": "int"}``; others are inferred.
    types: Mapping[str, str] = field(default_factory=dict)
    overlaps: normalize.OverlapPolicy = "last-wins"
    max_errors: int = 0
    dry_run: bool = False
    chunk_size: int = DEFAULT_CHUNK_SIZE
    write_workers: int = DEFAULT_WRITE_WORKERS
    lock_lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS
    #: The metadata column the ``ranges-by-value`` index keys on (``--index-field``).
    index_field: str | None = None
    #: The column whose non-empty values put a range in the ``flagged-ranges`` index.
    flag_column: str | None = None
    shard_budget: int = reverse_index.DEFAULT_SHARD_BUDGET
    max_shards: int = reverse_index.DEFAULT_MAX_SHARDS

    def fingerprint(self) -> str:
        """What, besides the bytes, decides the dataset: the same source read differently is a change."""
        shape: dict[str, Any] = {
            "columns": list(self.columns or []),
            "types": dict(self.types),
            "overlaps": self.overlaps,
        }
        if self.index_field or self.flag_column:
            # Only then, so a load without indexes keeps the fingerprint it always had.
            shape["indexes"] = {
                "field": self.index_field,
                "flag": self.flag_column,
                "budget": self.shard_budget,
                "max_shards": self.max_shards,
            }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_event(cls, options: Mapping[str, Any] | None) -> LoadOptions:
        """Options as a state machine's input spells them (``columns`` may be ``"a,b,c"``)."""
        options = dict(options or {})
        columns = options.pop("columns", None)
        if isinstance(columns, str):
            columns = [column.strip() for column in columns.split(",")]
        known = {name for name in cls.__dataclass_fields__ if name != "columns"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"unknown load options {sorted(unknown)}")
        return cls(columns=columns, **options)

    def to_event(self) -> dict[str, Any]:
        data = asdict(self)
        data["columns"] = list(self.columns) if self.columns else None
        data["types"] = dict(self.types)
        return data


@dataclass(frozen=True)
class Prepared:
    status: str  #: "prepared", "unchanged" (same source as the active version) or "dry-run"
    load_id: str
    version: int
    chunks: int
    items: int
    report: dict[str, Any] = field(default_factory=dict)
    done: tuple[int, ...] = ()  #: chunks already written (a resumed load)

    def to_event(self) -> dict[str, Any]:
        """The Step Functions output: the Map state iterates over ``chunks``."""
        return {
            "status": self.status,
            "load_id": self.load_id,
            "version": self.version,
            "chunks": [{"load_id": self.load_id, "chunk": index} for index in range(self.chunks)],
        }


def load_id_of(version: int) -> str:
    return keys.format_version(version)


def version_of(load_id: str) -> int:
    if not load_id.startswith("v") or not load_id[1:].isdigit():
        raise LoadNotFound(f"{load_id!r} is not a load id (expected v<number>)")
    return int(load_id[1:])


def _now(now: float | None) -> float:
    return time.time() if now is None else now


# -- prepare -------------------------------------------------------------------------------


def prepare(
    sources: Sequence[str | Path],
    options: LoadOptions,
    store: Store,
    staging: Staging,
    *,
    now: float | None = None,
) -> Prepared:
    """Read, validate and normalize the sources; stage shuffled chunks for a new version.

    Nothing is written before the whole source validated. An unfinished load of
    the same source and options is resumed rather than prepared again.
    """
    paths = [materialize(source) for source in sources]
    try:
        return _prepare(sources, paths, options, store, staging, now=now)
    finally:
        # A warm Lambda container keeps /tmp: downloads must not pile up there.
        for source, path in zip(sources, paths, strict=True):
            if is_s3_uri(source):
                path.unlink(missing_ok=True)


def _prepare(
    sources: Sequence[str | Path],
    paths: Sequence[Path],
    options: LoadOptions,
    store: Store,
    staging: Staging,
    *,
    now: float | None,
) -> Prepared:
    started = time.monotonic()
    checksum = sha256_of(paths)
    fingerprint = options.fingerprint()
    if not options.dry_run:
        unchanged = _unchanged(store, checksum, fingerprint)
        if unchanged is not None:
            return unchanged
        resumable = _resumable_load(store, checksum, fingerprint)
        if resumable is not None:
            return resume(load_id_of(int(resumable["version"])), store, options, now=now)

    parsed = read_sources(paths, options.columns, options.types, options.max_errors)
    resolution = normalize.resolve(parsed.rows, options.overlaps)
    column_types = normalize.infer_column_types(
        parsed.rows,
        {column: "N" if kind in ("int", "number") else "S" for column, kind in options.types.items()},
    )
    index_plan = _plan_index(options, parsed.columns, resolution.segments, parsed.rows, column_types)
    pieces = normalize.plan_pieces(resolution.segments)
    per_bucket = normalize.items_per_bucket(resolution.segments, pieces)
    chunk_count = -(-len(pieces) // options.chunk_size)
    report: dict[str, Any] = {
        "sources": [str(source) for source in sources],
        "sha256": checksum,
        "rows_read": parsed.rows_read,
        "rows_rejected": len(parsed.rejected),
        "rejected": parsed.rejected,
        "overlap_policy": options.overlaps,
        "overlaps_resolved": resolution.overlapping_rows,
        "segments": len(resolution.segments),
        "splits": normalize.count_splits(resolution.segments),
        "items": len(pieces),
        "chunks": chunk_count,
        "column_types": column_types,
    }
    report.update(_bucket_figures({keys.bucket_name(*bucket): count for bucket, count in per_bucket.items()}))
    if index_plan is not None:
        report.update(index_plan.report())
    if options.dry_run:
        report["prepare_seconds"] = round(time.monotonic() - started, 3)
        return Prepared("dry-run", "", 0, chunk_count, len(pieces), report)

    active = store.read_active_version(consistent=True)
    version = store.allocate_version()
    load_id = load_id_of(version)
    at = _now(now)
    store.acquire_lock(load_id, lease_seconds=options.lock_lease_seconds, now=at)
    try:
        load = {
            "load_id": load_id,
            "status": PREPARING,
            "sha256": checksum,
            "fingerprint": fingerprint,
            "options": options.to_event(),
            "sources": [str(source) for source in sources],
            "previous": active or 0,
            "chunks": chunk_count,
            "items": len(pieces),
            "created_at": at,
            "updated_at": int(at),
        }
        store.put_load(version, load)
        store.put_version_meta(
            version,
            {
                "status": "loading",
                "load_id": load_id,
                "sha256": checksum,
                "fingerprint": fingerprint,
                "sources": [str(source) for source in sources],
                "column_types": column_types,
                "previous": active or 0,
                "created_at": int(at),
                "items": len(pieces),
                "chunks": chunk_count,
                **(index_plan.metadata(column_types) if index_plan is not None else {}),
            },
        )
        store.put_manifest(
            version,
            {
                keys.partition_key(version, family, bucket): count
                for (family, bucket), count in per_bucket.items()
            },
        )
        normalize.shuffle_pieces(pieces, checksum, resolution.segments)
        for index, offset in enumerate(range(0, len(pieces), options.chunk_size)):
            chunk_pieces = pieces[offset : offset + options.chunk_size]
            items = normalize.build_piece_items(
                version, chunk_pieces, resolution.segments, parsed.rows, column_types, index=index_plan
            )
            staging.put(load_id, chunk_name(index), encode_chunk(list(items)))
        report["prepare_seconds"] = round(time.monotonic() - started, 3)
        staging.put(load_id, REPORT, json.dumps(report).encode())
        summary = {
            name: value for name, value in report.items() if name not in ("items_per_bucket", "rejected")
        }
        store.update_load(version, status=PREPARED, report=summary, updated_at=int(_now(now)))
        return Prepared(PREPARED, load_id, version, chunk_count, len(pieces), report)
    except BaseException as error:
        # Nothing of this load can be live yet: failing it frees the lock now, not
        # after the lease, and cleanup removes whatever was staged or written.
        fail(load_id, f"prepare failed: {error!r}"[:1000], store)
        raise


def _plan_index(
    options: LoadOptions,
    columns: Sequence[str],
    segments: Sequence[normalize.Segment],
    rows: Sequence[SourceRow],
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
        normalize.segment_values(segments, rows, column_types),
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


def _unchanged(store: Store, checksum: str, fingerprint: str) -> Prepared | None:
    active = store.read_active_version(consistent=True)
    if active is None:
        return None
    meta = store.get_version_meta(active) or {}
    if meta.get("sha256") != checksum or meta.get("fingerprint", fingerprint) != fingerprint:
        return None
    report = {"status": "unchanged", "version": load_id_of(active), "sha256": checksum, "items_written": 0}
    return Prepared("unchanged", load_id_of(active), active, 0, int(meta.get("items", 0)), report)


def _resumable_load(store: Store, checksum: str, fingerprint: str) -> dict[str, Any] | None:
    active = store.read_active_version(consistent=True) or 0
    candidates = [
        load
        for load in store.list_loads()
        if load.get("status") == PREPARED
        and load.get("sha256") == checksum
        and load.get("fingerprint") == fingerprint
        # Started from another active version, it would lose activation anyway.
        and int(load.get("previous", 0)) == active
    ]
    return max(candidates, key=lambda load: int(load["version"])) if candidates else None


def resume(
    load_id: str, store: Store, options: LoadOptions | None = None, *, now: float | None = None
) -> Prepared:
    """Take a staged load back: its lock, and the chunks still to write."""
    version = version_of(load_id)
    load = store.get_load(version)
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load["status"] != PREPARED:
        raise LoadNotWritable(
            f"load {load_id} is {load['status']}; only a prepared load resumes"
            + ("; run the load again to prepare a new one" if load["status"] == PREPARING else "")
        )
    lease = options.lock_lease_seconds if options else DEFAULT_LOCK_LEASE_SECONDS
    store.acquire_lock(load_id, lease_seconds=lease, now=_now(now))
    report = {**load.get("report", {}), "resumed": True, "chunks_already_written": len(load["done"])}
    return Prepared(
        PREPARED, load_id, version, int(load["chunks"]), int(load["items"]), report, tuple(load["done"])
    )


# -- write_chunk -----------------------------------------------------------------------------


def write_chunk(
    load_id: str,
    index: int,
    store: Store,
    staging: Staging,
    *,
    workers: int = DEFAULT_WRITE_WORKERS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
) -> WriteStats:
    """Write one staged chunk with parallel BatchWriteItem calls of 25 items, once.

    A chunk already in the load item's ``done`` set is skipped. Writing one
    twice (a crash between the writes and the mark) is harmless anyway: items
    are whole-item puts keyed by (partition, offset).
    """
    version = version_of(load_id)
    load = store.get_load(version)
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load["status"] != PREPARED:
        raise LoadNotWritable(f"load {load_id} is {load['status']}; chunk {index} is not written")
    if index in load["done"]:
        return WriteStats()
    # Renewing the lease also proves the lock is still ours.
    store.acquire_lock(load_id, lease_seconds=lease_seconds, now=_now(now))
    items = decode_chunk(staging.get(load_id, chunk_name(index)))
    batches = [
        items[offset : offset + BATCH_WRITE_LIMIT] for offset in range(0, len(items), BATCH_WRITE_LIMIT)
    ]
    stats = WriteStats()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(lambda batch: store.batch_write(batch, stats), batches):
            pass
    store.mark_chunk_done(version, index, stats.as_dict(), _now(now))
    return stats


# -- activate --------------------------------------------------------------------------------


def verify(version: int, store: Store, *, workers: int = 16) -> None:
    """Every partition holds exactly the items ``prepare`` planned for it."""
    expected = store.get_manifest(version)
    if expected is None:
        raise VerificationFailed(f"version {load_id_of(version)} has no manifest")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = dict(zip(expected, pool.map(store.count_partition, expected), strict=True))
    wrong = {pk: (count, found[pk]) for pk, count in expected.items() if found[pk] != count}
    if wrong:
        sample = ", ".join(
            f"{pk}: expected {want}, found {got}" for pk, (want, got) in list(wrong.items())[:5]
        )
        raise VerificationFailed(f"{len(wrong)} partitions do not hold the planned items ({sample})")


def activate(
    load_id: str,
    store: Store,
    staging: Staging,
    *,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check the counts, then switch the pointer only if it still names the version we started from."""
    version = version_of(load_id)
    load = store.get_load(version)
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load["status"] == ACTIVATED:
        return {"load_id": load_id, "version": version, "status": ACTIVATED, "report": load.get("report", {})}
    if load["status"] != PREPARED:
        raise LoadNotWritable(f"load {load_id} is {load['status']}; it cannot be activated")
    missing = sorted(set(range(int(load["chunks"]))) - set(load["done"]))
    if missing:
        raise LoadIncomplete(f"load {load_id}: {len(missing)} chunks not written yet (first: {missing[:5]})")
    store.acquire_lock(load_id, lease_seconds=lease_seconds, now=_now(now))
    verify(version, store)
    previous = int(load.get("previous", 0)) or None
    try:
        store.activate_version(version, expected_current=previous)
    except ActivationConflict as error:
        current = store.read_active_version(consistent=True)
        # The pointer naming this very version means a retried Activate whose first
        # attempt switched it and then died: only the bookkeeping below remains.
        if current != version:
            _lose_activation(load_id, previous, current, store, now=now, cause=error)
    at = _now(now)
    store.update_version_meta(version, status="active", activated_at=int(at))
    if previous is not None:
        store.update_version_meta(previous, status="retired", retired_at=int(at))
    report = _final_report(load, store.get_load(version) or load, at, staging)
    summary = {name: value for name, value in report.items() if name not in ("items_per_bucket", "rejected")}
    store.update_load(version, status=ACTIVATED, report=summary, updated_at=int(at))
    store.update_version_meta(version, report=summary)
    store.release_lock(load_id)
    events.emit_activated(
        {
            "version": load_id,
            "previous": load_id_of(previous) if previous else None,
            "items": int(load["items"]),
            "rows": report.get("rows_read"),
            "sha256": load.get("sha256"),
        }
    )
    return {"load_id": load_id, "version": version, "status": ACTIVATED, "report": report}


def _lose_activation(
    load_id: str,
    previous: int | None,
    current: int | None,
    store: Store,
    *,
    now: float | None,
    cause: Exception,
) -> NoReturn:
    message = (
        f"load {load_id} lost activation: it started from "
        f"{load_id_of(previous) if previous else 'no dataset'}, but "
        f"{load_id_of(current) if current else 'none'} is active now (another load activated first); "
        f"{load_id} stays inactive and cleanup will delete it"
    )
    fail(load_id, message, store, now=now)
    raise ActivationConflict(message) from cause


def _final_report(
    load: Mapping[str, Any], finished: Mapping[str, Any], at: float, staging: Staging
) -> dict[str, Any]:
    try:
        report: dict[str, Any] = json.loads(staging.get(str(load["load_id"]), REPORT))
    except (OSError, KeyError, ValueError):
        report = dict(load.get("report", {}))
    except Exception:  # S3's NoSuchKey: the report is a courtesy, not a gate
        report = dict(load.get("report", {}))
    duration = max(at - float(load.get("created_at", at)), 1e-9)
    written = int(finished.get("items_written", 0))
    report.update(
        {
            "load_id": load["load_id"],
            "status": ACTIVATED,
            "items_written": written,
            "retries": int(finished.get("retries", 0)),
            "throttles": int(finished.get("throttles", 0)),
            "duration_seconds": round(duration, 3),
            "items_per_second": round(written / duration, 1),
        }
    )
    staging.put(str(load["load_id"]), REPORT, json.dumps(report).encode())
    return report


# -- abort, cleanup, rollback ------------------------------------------------------------------


def fail(load_id: str, error: str, store: Store, *, now: float | None = None) -> None:
    """Mark a load failed and free the lock; cleanup deletes its partial version after the grace period."""
    version = version_of(load_id)
    at = int(_now(now))
    load = store.get_load(version)
    if load is not None and load.get("status") == ACTIVATED:
        # A step after activation failed (a Catch still routes here): the version is live
        # and must stay so; only the lock is ours to free.
        store.release_lock(load_id)
        return
    if load is not None:
        store.update_load(version, status=FAILED, error=error[:1000], updated_at=at)
    if store.get_version_meta(version) is not None:
        store.update_version_meta(version, status="failed", failed_at=at)
    store.release_lock(load_id)


def cleanup(
    store: Store,
    staging: Staging | None = None,
    *,
    retention: int = DEFAULT_RETENTION,
    grace_seconds: float = DEFAULT_CLEANUP_GRACE_SECONDS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Delete versions beyond retention and failed or abandoned loads, once their grace period passed.

    A version stops being served when the pointer moves away from it, but
    containers cache the pointer for a few seconds: the grace period, longer
    than that cache, keeps the data until no lookup can still ask for it.
    """
    at = _now(now)
    active = store.read_active_version(consistent=True)
    metas = {int(meta["version"]): meta for meta in store.list_version_metas()}
    loads = {int(load["version"]): load for load in store.list_loads()}
    lock = store.read_lock() or {}
    retired = sorted(
        (meta for meta in metas.values() if meta.get("status") == "retired"),
        key=lambda meta: (int(meta.get("retired_at", 0)), int(meta["version"])),
        reverse=True,
    )
    doomed: dict[int, str] = {}
    for meta in retired[retention:]:
        if at - int(meta.get("retired_at", 0)) >= grace_seconds:
            doomed[int(meta["version"])] = "beyond retention"
    for version, meta in metas.items():
        if meta.get("status") == "failed" and at - int(meta.get("failed_at", 0)) >= grace_seconds:
            doomed[version] = "failed load"
    for version, load in loads.items():
        if load.get("status") not in (PREPARING, PREPARED):
            continue
        locked = lock.get("owner") == load["load_id"] and int(lock.get("expires_at", 0)) >= at
        idle = at - int(load.get("updated_at", 0))
        if not locked and idle >= max(grace_seconds, lease_seconds):
            doomed[version] = "abandoned load"
    doomed.pop(active or 0, None)
    deleted: list[dict[str, Any]] = []
    for version, reason in sorted(doomed.items()):
        items = delete_version(version, store, staging)
        deleted.append({"version": load_id_of(version), "reason": reason, "items_deleted": items})
    kept = [load_id_of(int(meta["version"])) for meta in retired[:retention]]
    return {"active": load_id_of(active) if active else None, "retained": kept, "deleted": deleted}


def delete_version(version: int, store: Store, staging: Staging | None = None) -> int:
    """Delete a version's partitions, manifest and staged chunks; keep its metadata, marked deleted."""
    manifest = store.get_manifest(version) or {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        items = sum(pool.map(store.delete_partition, manifest))
    store.delete_manifest(version)
    at = int(time.time())
    if store.get_version_meta(version) is not None:
        store.update_version_meta(version, status="deleted", deleted_at=at)
    if store.get_load(version) is not None:
        store.update_load(version, status=DELETED, updated_at=at)
    if staging is not None:
        staging.delete_load(load_id_of(version))
    return items


def list_versions(store: Store) -> list[dict[str, Any]]:
    """Every version not deleted, newest first, with the active one marked."""
    active = store.read_active_version(consistent=True)
    rows = []
    for meta in sorted(store.list_version_metas(), key=lambda meta: -int(meta["version"])):
        if meta.get("status") == "deleted":
            continue
        version = int(meta["version"])
        rows.append(
            {
                "version": load_id_of(version),
                "status": meta.get("status"),
                "active": version == active,
                "items": meta.get("items"),
                "sha256": str(meta.get("sha256", ""))[:12],
                "sources": meta.get("sources", []),
                "created_at": meta.get("created_at"),
                "activated_at": meta.get("activated_at"),
                "retired_at": meta.get("retired_at"),
            }
        )
    return rows


def rollback(store: Store, to: int | None = None, *, now: float | None = None) -> dict[str, Any]:
    """Point lookups back at a retained version: one conditional write, no data copied."""
    current = store.read_active_version(consistent=True)
    if current is None:
        raise NoDataset("no dataset is active; there is nothing to roll back")
    metas = {int(meta["version"]): meta for meta in store.list_version_metas()}
    if to is None:
        retained = sorted(
            (meta for meta in metas.values() if meta.get("status") == "retired"),
            key=lambda meta: (int(meta.get("retired_at", 0)), int(meta["version"])),
            reverse=True,
        )
        if not retained:
            raise VersionNotFound("no retained version to roll back to")
        to = int(retained[0]["version"])
    target = metas.get(to)
    if target is None or target.get("status") != "retired":
        status = target.get("status") if target else "unknown"
        raise VersionNotFound(f"{load_id_of(to)} is {status}, not a retained version; see `ipmeta versions`")
    store.activate_version(to, expected_current=current)
    at = int(_now(now))
    store.update_version_meta(to, status="active", activated_at=at)
    store.update_version_meta(current, status="retired", retired_at=at)
    events.emit_activated({"version": load_id_of(to), "previous": load_id_of(current), "rollback": True})
    return {"active": load_id_of(to), "previous": load_id_of(current)}
