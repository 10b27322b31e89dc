"""What happens to versions after activation: listing, rollback, and cleanup after a grace period.

**Cleanup and rollback cannot race.** Cleanup deletes in two phases. First each doomed version
is marked ``deleting``, newest first (a delta before its base), by a conditional write on its
metadata item (``Versions.mark_deleting``) that fails once a rollback or an activation claimed
the version (``Versions.claim_active``, on the same item, before either writes the pointer):
that version stays, and so does its base. Only then are items deleted, after
``min(grace_seconds, DRAIN_SECONDS)`` for a request that read the version's metadata just
before the mark, and the manifest last. A version left ``deleting`` by a killed cleanup is
finished by the next one, and rollback refuses it (``VersionNotRestorable``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from ipmeta.schema.errors import NoDataset, VersionNotFound
from ipmeta.schema.keys import format_version
from ipmeta.schema.records import VersionMeta, VersionStatus
from loader.errors import VersionNotRestorable
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
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Delete versions beyond retention and failed or abandoned loads, once their grace period passed.

    ``also_delete(version)`` removes what lives outside the table (an exported
    file); it runs before the version is marked deleted, so a failure leaves
    the version for the next cleanup to finish.

    A version stops being served when the pointer moves away from it, but
    containers cache the pointer for a few seconds: the grace period, longer
    than that cache, keeps the data until no lookup can still ask for it. With
    replica regions (the table's own, ``RegionPointers.replicas``), a version is
    deleted only once every region's own pointer has moved past it too
    (``held_by_regions``); until then it is held.
    It deletes in two phases (module docstring).
    """
    at = time.time() if now is None else now
    active = table.lookup.read_active_version(consistent=True)
    metas = table.lookup.list_version_metas()
    retired = _retired_newest_first(metas)
    doomed = _doomed(
        table, metas, retired[retention:], at=at, grace_seconds=grace_seconds, lease=lease_seconds
    )
    bases = _spare_served(doomed, metas, active, retired[:retention])
    regions = table.regions.replicas()
    held = held_by_regions(table, doomed, metas, regions, at=at, grace_seconds=grace_seconds)
    for version in held:
        doomed.pop(version)
    kept, marked = _mark_deleting(table, doomed, metas, at=at)
    if marked:
        sleep(min(grace_seconds, DRAIN_SECONDS))
    going = {version: reason for version, reason in doomed.items() if version not in kept}
    deleted = [
        {"version": format_version(version), "reason": reason, "items_deleted": items}
        for version, reason, items in _delete_all(going, table, staging, also_delete, regions)
    ]
    outcome: dict[str, Any] = {
        "dataset": table.dataset,
        "active": format_version(active) if active else None,
        "retained": [format_version(meta.version) for meta in retired[:retention]],
        "bases": [format_version(base) for base in bases],
        "deleted": deleted,
    }
    if kept:  # a rollback or an activation claimed them between the read and the mark
        outcome["claimed_meanwhile"] = [format_version(version) for version in sorted(kept)]
    if regions:
        outcome["held_by_regions"] = {format_version(v): region for v, region in sorted(held.items())}
    return outcome


def _delete_all(
    going: Mapping[int, str],
    table: LoaderTable,
    staging: Staging | None,
    also_delete: Callable[[int], None] | None,
    regions: Sequence[str],
) -> list[tuple[int, str, int]]:
    """Phase two, for every version marked: (version, why, items deleted), oldest first."""
    return [
        (version, reason, delete_version(version, table, staging, also_delete, regions=regions))
        for version, reason in sorted(going.items())
    ]


def _spare_served(
    doomed: dict[int, str], metas: Sequence[VersionMeta], active: int | None, kept: Sequence[VersionMeta]
) -> list[int]:
    """Take the active version, and the bases of it and of the retired versions kept, out of
    ``doomed``: a delta answers through its base. Returns those bases."""
    doomed.pop(active or 0, None)
    serving = [meta for meta in metas if meta.version == active] + list(kept)
    bases = sorted({meta.base for meta in serving if meta.base})
    for base in bases:
        doomed.pop(base, None)
    return bases


#: Why cleanup deletes a version a killed cleanup had marked ``deleting``.
RESUMED = "deletion resumed"
#: The longest a request that read a version's metadata before it was marked may still read its items.
DRAIN_SECONDS: Final = 30.0
#: The status a version must still have for cleanup to mark it, by why it is doomed.
_MARKABLE: Final[Mapping[str, frozenset[VersionStatus]]] = {
    BEYOND_RETENTION: frozenset({VersionStatus.RETIRED}),
    "failed load": frozenset({VersionStatus.FAILED}),
    "abandoned load": frozenset({VersionStatus.LOADING}),
}


def _mark_deleting(
    table: LoaderTable, doomed: Mapping[int, str], metas: Sequence[VersionMeta], *, at: float
) -> tuple[set[int], int]:
    """Phase one: mark each doomed version ``deleting``, newest first. Returns the versions that
    could not be (a rollback or an activation claimed them first, with the bases those answer
    through), and how many this run marked."""
    bases = {meta.version: meta.base for meta in metas if meta.base}
    kept: set[int] = set()
    marked = 0
    for version in sorted(doomed, reverse=True):
        reason = doomed[version]
        if version in kept or reason == RESUMED:
            continue
        if table.versions.mark_deleting(version, allowed=_MARKABLE[reason], at=int(at)):
            marked += 1
        else:
            kept.add(version)
            if bases.get(version):
                kept.add(bases[version])
    return kept & set(doomed), marked


def _doomed(
    table: LoaderTable,
    metas: Sequence[VersionMeta],
    beyond_retention: Sequence[VersionMeta],
    *,
    at: float,
    grace_seconds: float,
    lease: float,
) -> dict[int, str]:
    """Versions past their grace period: retired beyond retention, failed, or abandoned loads, and
    versions a killed cleanup left ``deleting``. A version ever activated is never a failed or
    abandoned load, whatever its load record says (an activation may die right after the switch)."""
    doomed: dict[int, str] = {}
    for meta in beyond_retention:
        if at - (meta.retired_at or 0) >= grace_seconds:
            doomed[meta.version] = BEYOND_RETENTION
    served = {meta.version for meta in metas if meta.activated_at is not None or meta.retained}
    for meta in metas:
        failed = meta.status == VersionStatus.FAILED and meta.version not in served
        if failed and at - (meta.failed_at or 0) >= grace_seconds:
            doomed[meta.version] = "failed load"
    lock = table.lock.read()
    for load in table.loads.list_all():
        if load.version not in served and _abandoned(load, lock, at, max(grace_seconds, lease)):
            doomed[load.version] = "abandoned load"
    for meta in metas:
        if meta.status == VersionStatus.DELETING:
            doomed[meta.version] = RESUMED
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
    *,
    regions: Sequence[str] = (),
) -> int:
    """Phase two: delete a ``deleting`` version's partitions, manifest and staged chunks, and the
    saved progress of its counts in home and in ``regions``; keep its metadata, marked deleted.
    The manifest goes only after every partition it names, so a run killed anywhere is finished
    by the next from the same manifest."""
    if also_delete is not None:
        also_delete(version)
    manifest = table.manifests.get(version)
    partitions = manifest.partitions if manifest is not None else []
    with ThreadPoolExecutor(max_workers=8) as pool:
        items = sum(pool.map(table.partitions.delete, partitions))
    table.manifests.delete(version)
    table.counts.progress.forget(version, [None, *regions])
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

    The target is claimed first (``Versions.claim_active``: only a ``retired`` version can be),
    so a cleanup marking it ``deleting`` at the same moment either wins, and the rollback is
    refused, or loses, and keeps it. A version whose manifest is gone was partly deleted (by a
    cleanup of an older release): it is refused too, as is a delta whose base is either.
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
    at = int(time.time() if now is None else now)
    _check_restorable(table, target, to)
    if not table.versions.claim_active(to, allowed=frozenset({VersionStatus.RETIRED}), at=at):
        _check_restorable(table, table.lookup.get_version_meta(to), to)
        raise VersionNotRestorable(f"{format_version(to)} changed status meanwhile; see `ipmeta versions`")
    assert target is not None
    try:
        if target.base:
            _check_restorable(table, table.lookup.get_version_meta(target.base), target.base, delta=to)
        move = table.versions.activate(to, expected_current=current, base=target.base)
    except Exception:
        table.versions.set_status(to, VersionStatus.RETIRED, at)
        raise
    table.versions.release(move)
    table.versions.set_status(current, VersionStatus.RETIRED, at)
    active, previous = format_version(to), format_version(current)
    edge = edge if edge is not None else EdgeCache.from_environment()
    invalidation = invalidate_after(f"rollback-{table.dataset}-{active}-{at}", edge)
    events.emit_activated(
        {"dataset": table.dataset, "version": active, "previous": previous, "rollback": True}
    )
    rolled = {"dataset": table.dataset, "active": active, "previous": previous}
    return rolled | ({"edge_invalidation": invalidation} if invalidation else {})


def _check_restorable(table: LoaderTable, meta: VersionMeta | None, version: int, delta: int = 0) -> None:
    """Raise unless ``meta`` is a retired version whose items are all still there."""
    of = f" (the base of {format_version(delta)})" if delta else ""
    if meta is not None and meta.status == VersionStatus.DELETING:
        raise VersionNotRestorable(
            f"{format_version(version)}{of} is {meta.status} in dataset {table.dataset!r}: cleanup "
            "is deleting its items, so it can never serve again; roll back to another version "
            "(`ipmeta versions`)"
        )
    if meta is None or (meta.status != VersionStatus.RETIRED and not delta):
        status = meta.status if meta else "unknown"
        raise VersionNotFound(
            f"{format_version(version)} is {status} in dataset {table.dataset!r}, not a retained version; "
            "see `ipmeta versions`"
        )
    if table.manifests.get(version) is None:
        raise VersionNotRestorable(
            f"{format_version(version)}{of} in dataset {table.dataset!r} was partly deleted (its manifest "
            "is gone); it can never serve again; roll back to another version (`ipmeta versions`)"
        )
