"""What happens to versions after activation: listing, rollback, and cleanup after a grace period."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
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


#: Why cleanup deletes a retired version: more are retired than retention keeps.
BEYOND_RETENTION = "beyond retention"


def cleanup(
    table: LoaderTable,
    staging: Staging | None = None,
    *,
    retention: int = DEFAULT_RETENTION,
    grace_seconds: float = DEFAULT_CLEANUP_GRACE_SECONDS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
    also_delete: Callable[[int], None] | None = None,
    regions: Sequence[str] = (),
) -> dict[str, Any]:
    """Delete versions beyond retention and failed or abandoned loads, once their grace period passed.

    ``also_delete(version)`` removes what lives outside the table (an exported
    file); it runs before the version is marked deleted, so a failure leaves
    the version for the next cleanup to finish.

    A version stops being served when the pointer moves away from it, but
    containers cache the pointer for a few seconds: the grace period, longer
    than that cache, keeps the data until no lookup can still ask for it.
    With replica ``regions``, a version is deleted only once every region's own
    pointer has moved past it too (``held_by_regions``); until then it is held.
    """
    at = time.time() if now is None else now
    active = table.lookup.read_active_version(consistent=True)
    metas = table.lookup.list_version_metas()
    retired = _retired_newest_first(metas)
    doomed = _doomed(
        table, metas, retired[retention:], at=at, grace_seconds=grace_seconds, lease=lease_seconds
    )
    doomed.pop(active or 0, None)
    # A delta answers through its base: a base stays while a version that may serve needs it.
    serving = [meta for meta in metas if meta.version == active] + retired[:retention]
    bases = sorted({meta.base for meta in serving if meta.base})
    for base in bases:
        doomed.pop(base, None)
    held: dict[int, str] = {}
    if regions:
        held = held_by_regions(table, doomed, metas, regions, at=at, grace_seconds=grace_seconds)
    for version in held:
        doomed.pop(version)
    deleted = [
        {
            "version": format_version(version),
            "reason": reason,
            "items_deleted": delete_version(version, table, staging, also_delete),
        }
        for version, reason in sorted(doomed.items())
    ]
    outcome: dict[str, Any] = {
        "dataset": table.dataset,
        "active": format_version(active) if active else None,
        "retained": [format_version(meta.version) for meta in retired[:retention]],
        "bases": [format_version(base) for base in bases],
        "deleted": deleted,
    }
    if regions:
        outcome["held_by_regions"] = {format_version(v): region for v, region in sorted(held.items())}
    return outcome


def _doomed(
    table: LoaderTable,
    metas: Sequence[VersionMeta],
    beyond_retention: Sequence[VersionMeta],
    *,
    at: float,
    grace_seconds: float,
    lease: float,
) -> dict[int, str]:
    """Versions past their grace period: retired beyond retention, failed, or abandoned loads."""
    doomed: dict[int, str] = {}
    for meta in beyond_retention:
        if at - (meta.retired_at or 0) >= grace_seconds:
            doomed[meta.version] = BEYOND_RETENTION
    for meta in metas:
        if meta.status == VersionStatus.FAILED and at - (meta.failed_at or 0) >= grace_seconds:
            doomed[meta.version] = "failed load"
    lock = table.lock.read()
    for load in table.loads.list_all():
        if _abandoned(load, lock, at, max(grace_seconds, lease)):
            doomed[load.version] = "abandoned load"
    return doomed


def held_by_regions(
    table: LoaderTable,
    doomed: Mapping[int, str],
    metas: Sequence[VersionMeta],
    regions: Sequence[str],
    *,
    at: float,
    grace_seconds: float,
) -> dict[int, str]:
    """The retired versions a replica region may still serve, each with the first such region.

    A region's pointer only ever copies home's, with home's generation, and never goes back
    to an older one (``loader.pipeline.arrival``). Once it follows the generation that released
    a version (``VersionMeta.released_generation``, the write of home's pointer that stopped
    reading it) or a later one, the region cannot serve that version again. What home reads of
    a region's pointer may lag behind it, never run ahead of it, so the rule holds on a stale
    read too. A version never stamped waits for home's present generation; a region with no
    pointer holds everything; and the region's own containers get ``grace_seconds`` after its
    pointer last moved, as home's do. Failed and abandoned loads were never served anywhere.
    """
    home = table.regions.home()
    present = home.generation if home else 0
    pointers = {region: table.regions.of(region) for region in regions}
    released = {meta.version: meta.released_generation for meta in metas}
    held: dict[int, str] = {}
    for version, reason in doomed.items():
        if reason != BEYOND_RETENTION:
            continue
        needed = released.get(version) or present
        for region, pointer in pointers.items():
            if (
                pointer is None
                or pointer.generation < needed
                or version in pointer.names
                or at - pointer.at < grace_seconds
            ):
                held[version] = region
                break
    return held


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


def rollback(
    table: LoaderTable, to: int | None = None, *, now: float | None = None, edge: EdgeCache | None = None
) -> dict[str, Any]:
    """Point lookups back at a retained version: one conditional write, no data copied.

    ``edge`` (default: the environment's distribution) has its cache invalidated after the switch.
    """
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
    table.versions.release(table.versions.activate(to, expected_current=current, base=target.base))
    at = int(time.time() if now is None else now)
    table.versions.set_status(to, VersionStatus.ACTIVE, at)
    table.versions.set_status(current, VersionStatus.RETIRED, at)
    active, previous = format_version(to), format_version(current)
    edge = edge if edge is not None else EdgeCache.from_environment()
    invalidation = invalidate_after(f"rollback-{table.dataset}-{active}-{at}", edge)
    events.emit_activated(
        {"dataset": table.dataset, "version": active, "previous": previous, "rollback": True}
    )
    rolled = {"dataset": table.dataset, "active": active, "previous": previous}
    return rolled | ({"edge_invalidation": invalidation} if invalidation else {})
