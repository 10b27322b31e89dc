"""``arrival``: a replica region's pointers follow home's, each version only once it has wholly arrived.

Global tables replicate item by item, asynchronously, in no order across items:
a region may hold home's new pointer, or a delta, before the version's items. So
a replica region's lookups never read home's pointer; they read the region's own
(``keys.KeySpace.region_pointer``), and only this check, running in that region
against its own replica, writes it:

1. read home's pointer as it has arrived here (with its ``generation``), and this
   region's own; nothing to do when the region already follows that generation;
2. for the version home names, and a delta's base, unless the region recorded it
   as arrived (for this very version: the record names the version's ``uid``):
   read its manifest and metadata here, and count each partition with strongly
   consistent ``Select=COUNT`` Queries (region-local, as every read here is)
   until every count equals the manifest's, the count home's activation made
   before it served (``PartitionCounts.items``); recounting only the
   partitions that did not match, every ``poll_seconds``, until ``wait_seconds``
   ran out: then the region waits for the next run and keeps serving what it serves.
   Partitions found complete are saved as such for the version's ``uid``, and a run
   stops counting when its time is up (``count_seconds``): the next run counts only
   the rest, so a version of any size arrives in runs of bounded time;
3. record each counted version as arrived, with its ``uid``, then copy home's
   pointer into the region's own, on the condition that the region's generation is older;
4. for each version recorded as arrived whose index entries were not counted yet, count
   them in the region's GSIs (``Select=COUNT`` Queries of the version's index keys, named
   with their total in its manifest, ``records.IndexCensus``) until the totals match or the
   deadline comes (a pass over the index keys saved as it goes, like the items'
   count: ``PartitionCounts.index_entries``), and record them counted. Reverse lookups
   of a version answer in the region only once it is
   (``ipmeta.lookup.catalog.indexes_arrived``): a GSI is updated asynchronously after
   its table, and cannot be read consistently, so the items' count
   says nothing of it. Plain lookups need no GSI and do not wait for this step.

Every write is idempotent and conditional, so the check may be killed at any point
(SIGKILL included) and run again: it counts what it had not found complete, and ends
with the region on home's version. A version's items never change once written, and versions are never reused,
so a count that matches is a version that arrived. Rollback at home is one more
generation: each region follows it (its target arrived there before, or is counted).
A version number can come back after a point-in-time restore; its ``uid`` cannot, so an
arrival record of the older version never stands for the newer one.
In AWS a schedule runs it every minute in each replica region
(``loader.pipeline.handlers.arrive``); locally ``ipmeta follow --region R`` does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Final

from ipmeta.schema.keys import format_version
from loader.records import Pointer
from loader.settings import DEFAULT_POLL_SECONDS
from loader.store.table import LoaderTable

#: Partitions counted at once.
COUNT_WORKERS: Final = 16


@dataclass(frozen=True)
class Following:
    """Where one dataset's pointer of one region stands after a run of the check."""

    dataset: str
    region: str
    #: ``moved`` (it now follows home), ``current`` (it already did), ``waiting`` (a version has not
    #: wholly arrived: the region serves what it served) or ``inactive`` (home's pointer not here yet).
    status: str
    home: str | None
    serving: str | None
    #: How long home has named a version this region does not serve yet (0 when it follows).
    behind_seconds: int = 0
    #: Partitions (or bookkeeping items) of the awaited version not yet here, when waiting.
    missing: int = 0
    #: Items this run counted (each version's, once all its partitions matched), and how long it took.
    counted_items: int = 0
    seconds: float = 0.0
    #: Index entries of arrived versions not in the region's GSIs yet (their reverse lookups wait).
    index_entries_missing: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Clock:
    """Time as the check sees it: tests and the simulation run it faster than the wall."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep


WALL_CLOCK: Final = Clock()


def follow_home(
    table: LoaderTable,
    region: str,
    *,
    check: bool = True,
    wait_seconds: float = 0.0,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    count_seconds: float | None = None,
    clock: Clock = WALL_CLOCK,
) -> list[Following]:
    """One run of the check over every dataset that serves (as the list of datasets arrived here).

    ``count_seconds`` bounds the run's counting (None: it counts until it is done), and it
    goes on at least until ``wait_seconds``; what it counted is saved, and the next run
    counts the rest (``loader.store.partition_counts``).
    ``check=False`` copies home's pointer and records its versions as arrived, indexes
    included, without counting: what a region without this check would do, and what the
    simulation (``bench.replication``) shows going wrong.
    """
    began = clock.now()
    times = _Times(
        began + wait_seconds,
        None if count_seconds is None else began + max(wait_seconds, count_seconds),
        poll_seconds,
        clock,
    )
    names = table.lookup.read_dataset_names(consistent=True)
    return [follow_dataset(table.for_dataset(name), region, check=check, times=times) for name in names]


@dataclass(frozen=True)
class _Times:
    """When a run stops waiting for what is short (``deadline``), and stops counting (``until``)."""

    deadline: float
    until: float | None
    poll_seconds: float
    clock: Clock

    def wait(self) -> bool:
        """Sleep a poll, unless the deadline comes first (False)."""
        if self.clock.now() + self.poll_seconds > self.deadline:
            return False
        self.clock.sleep(self.poll_seconds)
        return True


def follow_dataset(table: LoaderTable, region: str, *, check: bool, times: _Times) -> Following:
    following = _follow_pointer(table, region, check=check, times=times)
    if not check:
        return following
    missing = _count_indexes(table, region, times)
    return dataclasses.replace(following, index_entries_missing=missing) if missing else following


def _follow_pointer(table: LoaderTable, region: str, *, check: bool, times: _Times) -> Following:
    clock = times.clock
    home = table.regions.home()
    mine = table.regions.of(region)
    report = _Report(table.dataset, region, home, clock)
    if home is None:
        return report.outcome("inactive", mine)
    if mine is not None and mine.generation >= home.generation:
        return report.outcome("current", mine)
    if check:
        # The base first: a delta is never served before the version it answers through.
        for version in sorted(home.names):
            meta = table.lookup.get_version_meta(version)
            if meta is not None and table.regions.arrived(region, version, meta.uid):
                continue
            items, missing = _count_until_arrived(table, region, version, times)
            if missing:
                return report.outcome("waiting", mine, missing)
            uid = _uid(table, version)
            table.regions.mark_arrived(region, version, uid, items=items, at=int(clock.now()))
            report.counted += items
    else:
        for version in sorted(home.names):
            uid = _uid(table, version)
            table.regions.mark_arrived(region, version, uid, items=0, at=int(clock.now()))
            table.regions.mark_indexed(region, version, uid, entries=0, at=int(clock.now()))
    moved = table.regions.follow(region, home, int(clock.now()))
    return report.outcome("moved" if moved else "current", home if moved else table.regions.of(region))


class _Report:
    """What one dataset's run found, said as a ``Following``."""

    def __init__(self, dataset: str, region: str, home: Pointer | None, clock: Clock) -> None:
        self.dataset, self.region, self.home, self.clock = dataset, region, home, clock
        self.began = clock.now()
        self.counted = 0

    def outcome(self, status: str, serving: Pointer | None, missing: int = 0) -> Following:
        home, now = self.home, self.clock.now()
        behind = home is not None and (serving is None or serving.generation < home.generation)
        return Following(
            self.dataset,
            self.region,
            status,
            format_version(home.version) if home else None,
            format_version(serving.version) if serving else None,
            max(0, round(now - home.at)) if behind and home else 0,
            missing,
            self.counted,
            round(now - self.began, 3),
        )


def _count_until_arrived(table: LoaderTable, region: str, version: int, times: _Times) -> tuple[int, int]:
    """(items, 0) once every partition of ``version`` holds its manifest's count here; else (0, how
    many partitions, or bookkeeping items, are still missing or uncounted) when time is up first.
    Partitions found complete are saved as such (this run's or an earlier one's) and not counted again."""
    while True:
        missing = 1
        expected = _expected(table, version)
        if expected is not None:
            count = table.counts.items(
                region,
                version,
                _uid(table, version),
                expected,
                until=times.until,
                now=times.clock.now,
                workers=COUNT_WORKERS,
            )
            if count.whole:
                return sum(expected.values()), 0
            missing = len(count.short) + count.uncounted
            if count.uncounted:
                return 0, missing  # the run's counting time is up: the next run goes on
        if not times.wait():
            return 0, missing


def _count_indexes(table: LoaderTable, region: str, times: _Times) -> int:
    """Step 4: each arrived version's index entries counted in the region's GSIs, recounted every
    ``poll_seconds`` until they match or the deadline comes; the entries still missing."""
    missing = 0
    for version, uid in sorted(table.regions.unindexed(region).items()):
        manifest = table.manifests.get(version)
        meta = table.lookup.get_version_meta(version)
        if manifest is None or meta is None or meta.uid != uid or not meta.retained:
            continue  # deleted, or the record of another version of the number: never read
        while True:
            count = table.counts.index_entries(
                region,
                version,
                uid,
                manifest.indexes,
                until=times.until,
                now=times.clock.now,
                workers=COUNT_WORKERS,
            )
            if count.whole or count.uncounted or not times.wait():
                break
        if count.whole:
            table.regions.mark_indexed(region, version, uid, entries=count.found, at=int(times.clock.now()))
        else:
            missing += count.missing
    return missing


def _uid(table: LoaderTable, version: int) -> str:
    meta = table.lookup.get_version_meta(version)
    return meta.uid if meta is not None else ""


def _expected(table: LoaderTable, version: int) -> dict[str, int] | None:
    """Each partition's item count from the version's manifest, once it and the version's
    metadata (what ``/v1/datasets`` and ``/v1/health`` read) are here; else None."""
    manifest = table.manifests.get(version)
    if manifest is None or table.lookup.get_version_meta(version) is None:
        return None
    return dict(manifest.items_per_partition)
