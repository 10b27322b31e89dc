"""The guards ``bench.replication`` removes with ``--no-check``, one per scenario, to show each is needed.

Each scenario exercises one guard of issue 33. Without it, the same scenario must report mixed
answers or deletes while served; with it, none. The product reads none of this: the arrival
count is switched off through ``arrival.follow_home(check=False)``, a parameter whose default is
the check, and every other guard is patched out here, in the simulation's process only, for
the length of one scenario (``unittest.mock``), so no production path has a switch to leave on.

- ``ARRIVAL``: a replica region serves a version only once it counted it wholly arrived
  (``loader.pipeline.arrival``). Removed: the region copies home's pointer without counting.
- ``DELETING_MARK``: cleanup marks a version ``deleting`` with a conditional write before it
  deletes an item, so a rollback cannot take it, and the next cleanup finishes what a killed one
  began (``retention._mark_deleting``). Removed: cleanup deletes at once, marking nothing.
- ``EVER_ACTIVATED``: a version a pointer ever named is never an abandoned load, whatever its
  load record says (``retention._doomed``, and the condition of ``Versions.mark_deleting``).
  Removed: every unfinished load idle past its lease is abandoned, and the mark is skipped
  (its condition states the same rule a second time).
- ``TABLE_REGIONS``: cleanup holds a version for the regions the table itself lists as replicas
  (``RegionPointers.replicas``). Removed: cleanup sees no region, as a cleanup given its regions
  by a flag nobody set did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Final
from unittest import mock

from ipmeta.schema.records import VersionMeta
from loader.pipeline import retention
from loader.store.table import LoaderTable

ARRIVAL: Final = "the arrival count"
DELETING_MARK: Final = "the two-phase deleting mark"
EVER_ACTIVATED: Final = "a version ever activated is never abandoned"
TABLE_REGIONS: Final = "the regions come from the table's replicas"


def _mark_nothing(
    table: LoaderTable, doomed: Mapping[int, str], metas: Sequence[VersionMeta], *, at: float
) -> tuple[set[int], int]:
    """``retention._mark_deleting`` without its writes: nothing claimed meanwhile, nothing marked."""
    return set(), 0


def _doomed_by_load_record(original: Callable[..., dict[int, str]]) -> Callable[..., dict[int, str]]:
    """``retention._doomed`` with every unfinished load idle past its lease taken as abandoned,
    served or not: the rule before issue 33."""

    def doomed(
        table: LoaderTable,
        metas: Sequence[VersionMeta],
        beyond_retention: Sequence[VersionMeta],
        *,
        at: float,
        grace_seconds: float,
        lease: float,
    ) -> dict[int, str]:
        found = original(table, metas, beyond_retention, at=at, grace_seconds=grace_seconds, lease=lease)
        lock = table.lock.read()
        for load in table.loads.list_all():
            if retention._abandoned(load, lock, at, max(grace_seconds, lease)):
                found.setdefault(load.version, "abandoned load")
        return found

    return doomed


@contextmanager
def without(guard: str, home: LoaderTable) -> Iterator[None]:
    """Run the block with ``guard`` removed from home's cleanup and rollback (``home``: the table
    whose ``regions`` cleanup asks). ``ARRIVAL`` is the region's, removed by its caller."""
    with ExitStack() as stack:
        if guard in (DELETING_MARK, EVER_ACTIVATED):
            stack.enter_context(mock.patch.object(retention, "_mark_deleting", _mark_nothing))
        if guard == EVER_ACTIVATED:
            stack.enter_context(
                mock.patch.object(retention, "_doomed", _doomed_by_load_record(retention._doomed))
            )
        if guard == TABLE_REGIONS:
            stack.enter_context(mock.patch.object(home.regions, "replicas", return_value=()))
        yield
