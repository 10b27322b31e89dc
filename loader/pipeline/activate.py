"""``activate``: verify the written version, then switch the pointer to it atomically."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from ipmeta.schema.keys import format_version
from ipmeta.schema.records import VersionStatus
from loader.errors import (
    ActivationConflict,
    LoadIncomplete,
    LoadNotFound,
    LoadNotWritable,
    VerificationFailed,
    VerificationPending,
    VersionNotRestorable,
)
from loader.pipeline import guard
from loader.pipeline.abort import fail
from loader.pipeline.staged import REPORT
from loader.records import LoadItem, LoadReport, LoadStatus, Manifest, version_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.store import events
from loader.store.edge_cache import EdgeCache, invalidate_after
from loader.store.staging import Staging
from loader.store.table import LoaderTable

#: What a version may be when its activation claims it: written by this load, held by the guard
#: (``ipmeta activate`` accepts it), or already claimed by a retried Activate.
_ACTIVATABLE: Final = frozenset({VersionStatus.LOADING, VersionStatus.HELD, VersionStatus.ACTIVE})


#: How often activation counts a version's index entries again while home's GSIs catch up.
INDEX_POLL_SECONDS: Final = 1.0
#: How long an activation with no time limit (the local driver) waits for them.
INDEX_LAG_WAIT_SECONDS: Final = 120.0


@dataclass(frozen=True)
class Activation:
    load_id: str
    version: int
    status: LoadStatus
    report: LoadReport


def verify(
    load: LoadItem,
    table: LoaderTable,
    *,
    until: float | None = None,
    now: Callable[[], float] = time.time,
    workers: int = 16,
) -> None:
    """The version holds the items the load planned.

    Every chunk counted what DynamoDB accepted, once (``mark_chunk_done``), so
    the total is exact. Counting every partition (consistent ``Select=COUNT``
    Queries, ``PartitionCounts.items``) also catches items landing on each
    other's keys. It is the very count each replica region makes before it
    serves the version (``arrival``): a sample here would let a version serve in
    home that no region ever sees arrive. It reads every item once, in parallel,
    and saves each partition found complete: past ``until`` it stops with
    ``VerificationPending``, and the next attempt counts only the rest. Then the
    version's index entries, in home's GSIs, as each region counts them in its own.
    """
    if load.items_written != load.items:
        raise VerificationFailed(
            f"load {load.load_id} wrote {load.items_written:,} items of the {load.items:,} it planned"
        )
    manifest = table.manifests.get(load.version)
    meta = table.lookup.get_version_meta(load.version)
    if manifest is None or meta is None:
        raise VerificationFailed(f"version {load.load_id} has no manifest")
    count = table.counts.items(
        None, load.version, meta.uid, manifest.items_per_partition, until=until, now=now, workers=workers
    )
    if count.short:
        sample = ", ".join(
            f"{pk}: expected {want}, found {got}" for pk, (want, got) in list(count.short.items())[:5]
        )
        raise VerificationFailed(f"{len(count.short)} partitions do not hold the planned items ({sample})")
    if count.uncounted:
        raise VerificationPending(
            f"load {load.load_id}: {count.uncounted:,} partitions still to count "
            f"({count.counted:,} counted now); the next attempt counts only those"
        )
    if manifest.indexes:
        _verify_indexes(load, table, meta.uid, manifest, until=until, now=now, workers=workers)


def _verify_indexes(
    load: LoadItem,
    table: LoaderTable,
    uid: str,
    manifest: Manifest,
    *,
    until: float | None,
    now: Callable[[], float],
    workers: int,
) -> None:
    """Every index entry of the version is in home's GSIs, before the pointer names it.

    Home verifies what each region's check will (``PartitionCounts.index_entries``): a GSI is
    updated asynchronously in home too, so reverse lookups right after a switch could miss
    entries, and an index that never adds up would serve in home and wait forever in every
    region. A pass that adds up short is counted again every ``INDEX_POLL_SECONDS`` until
    ``until`` (``INDEX_LAG_WAIT_SECONDS`` from now without one); then ``VerificationPending``.
    """
    deadline = until if until is not None else now() + INDEX_LAG_WAIT_SECONDS
    while True:
        count = table.counts.index_entries(
            None, load.version, uid, manifest.indexes, until=until, now=now, workers=workers
        )
        if count.whole:
            return
        if count.uncounted or now() + INDEX_POLL_SECONDS > deadline:
            raise VerificationPending(
                f"load {load.load_id}: {count.found:,} of its {count.wanted:,} reverse-lookup index "
                f"entries in the table's indexes so far ({count.uncounted:,} keys still to count); "
                "the next attempt counts on"
            )
        time.sleep(INDEX_POLL_SECONDS)


def activate(
    load_id: str,
    table: LoaderTable,
    staging: Staging,
    *,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
    export: Mapping[str, Any] | None = None,
    edge: EdgeCache | None = None,
    accept_held: bool = False,
    until: float | None = None,
) -> Activation:
    """Check the counts, then switch the pointer only if it still names the version we started from.

    ``export`` (``export_task.Exported``, written before activation) goes into the change event.
    ``edge`` (default: the environment's distribution) has its cache invalidated once the version
    answers, by a reference of this load: a retried Activate asks again, and gets the same one.
    The guard (``loader.pipeline.guard``) may hold the release instead: the answer is then
    ``held``, and only ``accept_held`` (``ipmeta activate``) activates it.
    ``until`` (the Lambda's time left) bounds the verification: ``VerificationPending`` past it,
    with what was counted saved, and the state machine's retry goes on from there.
    """
    table = table.for_load(load_id)
    edge = edge if edge is not None else EdgeCache.from_environment()
    load = activatable_load(load_id, table)
    if load.status == LoadStatus.ACTIVATED:
        invalidate_after(f"activate-{load_id}", edge)
        return Activation(load_id, load.version, LoadStatus.ACTIVATED, load.report)
    if load.status == LoadStatus.HELD and not accept_held:
        return Activation(load_id, load.version, LoadStatus.HELD, _held_report(load, staging, load.error))
    table.lock.acquire(load_id, lease_seconds=lease_seconds, now=time.time() if now is None else now)
    verify(load, table, until=until)
    verdict = guard.judge(load, table) if load.status == LoadStatus.PREPARED else guard.Verdict(False)
    if verdict.held:
        guard.hold(load, table, verdict, now=now)
        return Activation(load_id, load.version, LoadStatus.HELD, _held_report(load, staging, verdict.reason))
    # Named before the switch (idempotently): a dataset that answers is always one lookups fan out to.
    table.versions.register_dataset(serving=True)
    at = time.time() if now is None else now
    _claim_and_switch(load_id, load, table, at=at, now=now)
    report = _final_report(load, table.loads.get(load.version) or load, at, staging)
    table.loads.set_status(load.version, LoadStatus.ACTIVATED, int(at), report=report)
    table.lock.release(load_id)
    events.emit_activated(
        {
            "dataset": table.dataset,
            "version": format_version(load.version),
            "previous": format_version(load.previous) if load.previous else None,
            "items": load.items,
            "rows": report.rows_read,
            "sha256": load.sha256,
            **({"export": dict(export)} if export else {}),
        }
    )
    invalidate_after(f"activate-{load_id}", edge)
    return Activation(load_id, load.version, LoadStatus.ACTIVATED, report)


def _claim_and_switch(
    load_id: str, load: LoadItem, table: LoaderTable, *, at: float, now: float | None
) -> None:
    """Claim the version, switch the pointer to it, and retire the one it replaces."""
    # Claimed before the switch: a version a pointer ever named is never a failed or abandoned
    # load to cleanup, and one cleanup already marked ``deleting`` never becomes active.
    if not table.versions.claim_active(load.version, allowed=_ACTIVATABLE, at=int(at)):
        meta = table.lookup.get_version_meta(load.version)
        raise VersionNotRestorable(
            f"load {load_id}: its version is {meta.status if meta else 'gone'}; cleanup took it for "
            "abandoned, so it cannot be activated: load again"
        )
    _switch_pointer(load, table, now=now)
    if load.previous:
        table.versions.set_status(load.previous, VersionStatus.RETIRED, int(at))


def activatable_load(load_id: str, table: LoaderTable) -> LoadItem:
    table = table.for_load(load_id)
    load = table.loads.get(version_of(load_id))
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load.status not in (LoadStatus.PREPARED, LoadStatus.HELD, LoadStatus.ACTIVATED):
        raise LoadNotWritable(f"load {load_id} is {load.status}; it cannot be activated")
    missing = load.unrecorded_chunks
    if load.status == LoadStatus.PREPARED and missing:
        raise LoadIncomplete(f"load {load_id}: {len(missing)} chunks not written yet (first: {missing[:5]})")
    return load


def _switch_pointer(load: LoadItem, table: LoaderTable, *, now: float | None) -> None:
    """Switch the pointer, and stamp what it stopped reading (``Versions.release``: replicas' cleanup)."""
    previous = load.previous or None
    meta = table.lookup.get_version_meta(load.version)
    try:
        move = table.versions.activate(load.version, expected_current=previous, base=meta.base if meta else 0)
        table.versions.release(move)
    except ActivationConflict as error:
        current = table.lookup.read_active_version(consistent=True)
        # The pointer naming this very version means a retried Activate whose first
        # attempt switched it and then died: only the bookkeeping remains.
        if current != load.version:
            _lose_activation(load.load_id, previous, current, table, now=now, cause=error)


def _lose_activation(
    load_id: str,
    previous: int | None,
    current: int | None,
    table: LoaderTable,
    *,
    now: float | None,
    cause: Exception,
) -> NoReturn:
    message = (
        f"load {load_id} lost activation: it started from "
        f"{format_version(previous) if previous else 'no version'}, but "
        f"{format_version(current) if current else 'none'} is active now (another load activated first); "
        f"{load_id} stays inactive and cleanup will delete it"
    )
    table.versions.withdraw_claim(version_of(load_id), int(time.time() if now is None else now))
    fail(load_id, message, table, now=now)
    raise ActivationConflict(message) from cause


def _staged_report(load: LoadItem, staging: Staging) -> LoadReport:
    """The staged report (with its per-bucket table), or the load item's summary of it."""
    try:
        return LoadReport.from_dict(json.loads(staging.get(load.load_id, REPORT)))
    except Exception:  # a missing report (local file or S3 NoSuchKey) is a courtesy, not a gate
        return load.report


def _held_report(load: LoadItem, staging: Staging, reason: str | None) -> LoadReport:
    report = _staged_report(load, staging)
    return report.with_(load_id=load.load_id, status=str(LoadStatus.HELD), held=reason)


def _final_report(load: LoadItem, finished: LoadItem, at: float, staging: Staging) -> LoadReport:
    """The staged report (with its per-bucket table) plus what the writes cost."""
    report = _staged_report(load, staging)
    duration = max(at - load.created_at, 1e-9)
    phases = dict(report.phases or {})
    phases["load"] = {"seconds": round(duration, 3), "items": finished.items_written}
    report = report.with_(
        phases=phases,
        load_id=load.load_id,
        status=str(LoadStatus.ACTIVATED),
        items_written=finished.items_written,
        write_units=finished.write_units,
        index_write_units=finished.index_write_units,
        retries=finished.retries,
        throttles=finished.throttles,
        duration_seconds=round(duration, 3),
        items_per_second=round(finished.items_written / duration, 1),
    )
    staging.put(load.load_id, REPORT, report.to_json())
    return report
