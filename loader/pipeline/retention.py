"""What happens to versions after activation: listing, rollback, and cleanup after a grace period."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ipmeta.schema.errors import NoDataset, VersionNotFound
from ipmeta.schema.keys import format_version
from ipmeta.schema.records import VersionMeta, VersionStatus
from loader.records import LoadItem, LoadStatus, LockItem, load_id_of
from loader.settings import DEFAULT_CLEANUP_GRACE_SECONDS, DEFAULT_LOCK_LEASE_SECONDS, DEFAULT_RETENTION
from loader.store import events
from loader.store.edge_cache import EdgeCache, invalidate_after
from loader.store.staging import Staging
from loader.store.table import LoaderTable


def _retired_newest_first(metas: list[VersionMeta]) -> list[VersionMeta]:
    retired = [meta for meta in metas if meta.status == VersionStatus.RETIRED]
    return sorted(retired, key=lambda meta: (meta.retired_at or 0, meta.version), reverse=True)


def cleanup(
    table: LoaderTable,
    staging: Staging | None = None,
    *,
    retention: int = DEFAULT_RETENTION,
    grace_seconds: float = DEFAULT_CLEANUP_GRACE_SECONDS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
    also_delete: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Delete versions beyond retention and failed or abandoned loads, once their grace period passed.

    ``also_delete(version)`` removes what lives outside the table (an exported
    file); it runs before the version is marked deleted, so a failure leaves
    the version for the next cleanup to finish.

    A version stops being served when the pointer moves away from it, but
    containers cache the pointer for a few seconds: the grace period, longer
    than that cache, keeps the data until no lookup can still ask for it.
    """
    at = time.time() if now is None else now
    active = table.lookup.read_active_version(consistent=True)
    metas = table.lookup.list_version_metas()
    retired = _retired_newest_first(metas)
    doomed: dict[int, str] = {}
    for meta in retired[retention:]:
        if at - (meta.retired_at or 0) >= grace_seconds:
            doomed[meta.version] = "beyond retention"
    for meta in metas:
        if meta.status == VersionStatus.FAILED and at - (meta.failed_at or 0) >= grace_seconds:
            doomed[meta.version] = "failed load"
    lock = table.lock.read()
    for load in table.loads.list_all():
        if _abandoned(load, lock, at, max(grace_seconds, lease_seconds)):
            doomed[load.version] = "abandoned load"
    doomed.pop(active or 0, None)
    # A delta answers through its base: a base stays while a version that may serve needs it.
    serving = [meta for meta in metas if meta.version == active] + retired[:retention]
    bases = sorted({meta.base for meta in serving if meta.base})
    for base in bases:
        doomed.pop(base, None)
    deleted = [
        {
            "version": format_version(version),
            "reason": reason,
            "items_deleted": delete_version(version, table, staging, also_delete),
        }
        for version, reason in sorted(doomed.items())
    ]
    kept = [format_version(meta.version) for meta in retired[:retention]]
    active_label = format_version(active) if active else None
    return {
        "dataset": table.dataset,
        "active": active_label,
        "retained": kept,
        "bases": [format_version(base) for base in bases],
        "deleted": deleted,
    }


def _abandoned(load: LoadItem, lock: LockItem | None, at: float, idle_limit: float) -> bool:
    """An unfinished load nobody holds the lock for, idle longer than its lease and the grace period."""
    if load.status not in (LoadStatus.PREPARING, LoadStatus.PREPARED):
        return False
    locked = lock is not None and lock.owner == load.load_id and lock.expires_at >= at
    return not locked and at - load.updated_at >= idle_limit


def delete_version(
    version: int,
    table: LoaderTable,
    staging: Staging | None = None,
    also_delete: Callable[[int], None] | None = None,
) -> int:
    """Delete a version's partitions, manifest and staged chunks; keep its metadata, marked deleted."""
    if also_delete is not None:
        also_delete(version)
    manifest = table.manifests.get(version)
    partitions = manifest.partitions if manifest is not None else []
    with ThreadPoolExecutor(max_workers=8) as pool:
        items = sum(pool.map(table.partitions.delete, partitions))
    table.manifests.delete(version)
    at = int(time.time())
    if table.lookup.get_version_meta(version) is not None:
        table.versions.set_status(version, VersionStatus.DELETED, at)
    if table.loads.get(version) is not None:
        table.loads.set_status(version, LoadStatus.DELETED, at)
    if staging is not None:
        staging.delete_load(load_id_of(version, table.dataset))
    return items


def list_versions(table: LoaderTable) -> list[dict[str, Any]]:
    """Every version not deleted, newest first, with the active one marked (what `ipmeta versions` prints)."""
    active = table.lookup.read_active_version(consistent=True)
    return [
        {
            "dataset": table.dataset,
            "version": format_version(meta.version),
            "status": str(meta.status),
            "active": meta.version == active,
            "items": meta.items,
            "base": format_version(meta.base) if meta.base else None,
            "sha256": meta.sha256[:12],
            "sources": list(meta.sources),
            "created_at": meta.created_at,
            "activated_at": meta.activated_at,
            "retired_at": meta.retired_at,
        }
        for meta in sorted(table.lookup.list_version_metas(), key=lambda meta: -meta.version)
        if meta.status != VersionStatus.DELETED
    ]


def rollback(table: LoaderTable, to: int | None = None, *, now: float | None = None) -> dict[str, Any]:
    """Point lookups back at a retained version: one conditional write, no data copied."""
    current = table.lookup.read_active_version(consistent=True)
    if current is None:
        raise NoDataset(f"dataset {table.dataset!r} has no active version; there is nothing to roll back")
    metas = table.lookup.list_version_metas()
    if to is None:
        retained = _retired_newest_first(metas)
        if not retained:
            raise VersionNotFound("no retained version to roll back to")
        to = retained[0].version
    target = next((meta for meta in metas if meta.version == to), None)
    if target is None or target.status != VersionStatus.RETIRED:
        status = target.status if target else "unknown"
        raise VersionNotFound(
            f"{format_version(to)} is {status} in dataset {table.dataset!r}, not a retained version; "
            "see `ipmeta versions`"
        )
    table.versions.activate(to, expected_current=current, base=target.base)
    at = int(time.time() if now is None else now)
    table.versions.set_status(to, VersionStatus.ACTIVE, at)
    table.versions.set_status(current, VersionStatus.RETIRED, at)
    active, previous = format_version(to), format_version(current)
    invalidate_after(f"rollback-{table.dataset}-{active}-{at}", EdgeCache.from_environment())
    events.emit_activated(
        {"dataset": table.dataset, "version": active, "previous": previous, "rollback": True}
    )
    return {"dataset": table.dataset, "active": active, "previous": previous}
