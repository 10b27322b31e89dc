"""The guard against a broken release: a written version that changed too much is held, not activated.

``activate`` asks ``judge`` before it switches the pointer. A release is held when

- it changes more than ``max_change_ratio`` of the version it would replace:
  the share the load's diff measured (``change_of_base``: the ranges it added,
  replaced or removed, over the items of the active version's base), so a
  release that rewrites 90% of the ranges is held under any ratio below 0.9,
  and so is one that drops them. Removed counts the base's stretches gone from
  the buckets the release still holds and every base item of the buckets it
  left empty (a provider's whole IPv6 list, one region's /8s:
  ``plan_writes._vacated``, from the base's manifest);
- it holds fewer items than ``min_size_ratio`` of that version's (a truncated
  or nearly empty file: an empty one is refused by its reader before this);
- or its caller held it before the load (``held_by``: one list of a combined
  network dataset moved past its own ratio, ``list_change``).

A dataset whose active version holds under ``GUARD_MIN_ITEMS`` items is not
measured: one range of ten is already 10%. A held version is whole and verified:
its load and version are ``held``, ``ipmeta versions`` lists it so, the lock
is freed, and ``ReleaseHeld`` (the feed's alarm metric) is published. ``ipmeta activate LOAD_ID`` activates it
as it is (``activate(..., accept_held=True)``). The first version of a dataset
is never held: there is nothing to compare it with.

Defaults per kind (docs/feeds.md): vendor databases drift 1-2% a release, so
their feeds hold above 10%; cloud lists 10-20%; Tor's exit list churns daily,
so it holds above 50%; every feed holds a release under half the size of the
active one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from ipmeta.schema.records import VersionStatus
from ipmeta.schema.settings import METRICS_NAMESPACE
from loader.formats import FormatOptions, SourceRow, open_rows
from loader.records import LoadItem, LoadStatus
from loader.settings import LOADER_SERVICE_NAME, METRIC_DATASET_DIMENSION, METRIC_RELEASE_HELD
from loader.store.table import LoaderTable

#: The guard's limit for a feed's release: vendor databases drift 1-2% a release (docs/feeds.md).
DEFAULT_FEED_MAX_CHANGE_RATIO: Final = 0.1
#: Every feed's floor: a release under half the active version's size is held.
DEFAULT_MIN_SIZE_RATIO: Final = 0.5
#: Below this many items in the active version a share is noise (one range of ten is 10%):
#: such a dataset's releases are not measured.
GUARD_MIN_ITEMS: Final = 100


@dataclass(frozen=True)
class Verdict:
    held: bool
    reason: str = ""


def judge(load: LoadItem, table: LoaderTable) -> Verdict:
    """Whether ``load``'s release must be held, and why (``activate`` asks, before the switch)."""
    options = load.options
    if options.held_by:
        return Verdict(True, options.held_by)
    if not load.previous or (options.max_change_ratio is None and options.min_size_ratio is None):
        return Verdict(False)
    previous = table.loads.get(load.previous)
    active_items = release_items(previous) if previous is not None else 0
    if active_items < GUARD_MIN_ITEMS:
        return Verdict(False)
    size = release_items(load)
    if options.min_size_ratio is not None and size < options.min_size_ratio * active_items:
        floor = f"{options.min_size_ratio:.0%} of the active version's {active_items:,}"
        return Verdict(True, f"{size:,} items, under {floor}")
    delta = load.report.delta or {}
    # A report from before ``change_of_base`` was measured has only the delta's own share.
    share = delta.get("change_of_base", delta.get("share_of_base"))
    if options.max_change_ratio is not None and share is not None and float(share) > options.max_change_ratio:
        removed, of = int(delta.get("removed", 0)), int(delta.get("base_items", 0))
        removal = f" ({removed:,} of its {of:,} items removed)" if removed else ""
        limit = f"above {options.max_change_ratio:.0%}"
        return Verdict(True, f"changes {float(share):.0%} of the active version{removal}, {limit}")
    return Verdict(False)


def release_items(load: LoadItem) -> int:
    """The items of the release as a full version: a delta's own items are only what changed."""
    delta = load.report.delta or {}
    if delta.get("written_as") != "delta":
        return load.items
    return sum(int(delta.get(name, 0)) for name in ("unchanged", "replaced", "added"))


def hold(load: LoadItem, table: LoaderTable, verdict: Verdict, *, now: float | None = None) -> None:
    """Mark the load and its version held, free the lock, and raise the alarm's metric."""
    at = int(time.time() if now is None else now)
    table.versions.set_status(load.version, VersionStatus.HELD, at)
    held = load.report.with_(status=str(LoadStatus.HELD), held=verdict.reason)
    table.loads.set_status(load.version, LoadStatus.HELD, at, report=held, error=verdict.reason)
    table.lock.release(load.load_id)
    publish_held(table.dataset)


def publish_held(dataset: str) -> None:
    """One metric line (EMF, on stdout): the alarm on ``ReleaseHeld`` fires on any."""
    line = EphemeralMetrics(
        namespace=METRICS_NAMESPACE,
        default_dimensions={"service": LOADER_SERVICE_NAME, METRIC_DATASET_DIMENSION: dataset},
    )
    line.add_metric(name=METRIC_RELEASE_HELD, unit=MetricUnit.Count, value=1)
    line.flush_metrics()


#: A list's ranges: ``(family, start, end)`` -> the set of its rows' values there (AWS lists a
#: prefix once per service), as canonical JSON.
ListRanges = Mapping[tuple[int, int, int], frozenset[str]]


@dataclass(frozen=True)
class ListChange:
    """How a list's release differs from the one loaded: by range, and by address in each family.

    A range is added or removed by its bounds, and modified when its rows say something else
    (a prefix moved to another region). ``ranges_share``: the larger of added and removed (a
    swap counts once: 90 of 100 exits swapped is 0.9) plus modified, over the ranges it had.
    ``address_shares``: per family the list held, the larger of the addresses added and
    removed over those it held, so dropping a whole IPv6 list or one region's few large
    blocks shows though it is a small share of the ranges.
    """

    ranges: int
    added: int
    removed: int
    modified: int
    address_shares: Mapping[int, float]

    @property
    def ranges_share(self) -> float:
        return (max(self.added, self.removed) + self.modified) / max(1, self.ranges)

    @property
    def share(self) -> float:
        return max([self.ranges_share, *self.address_shares.values()])


def list_change(before: ListRanges, after: ListRanges) -> ListChange:
    """``before`` and ``after`` compared range by range and, in each family ``before`` holds, by address."""
    shares = {}
    for family in (4, 6):
        old = _merged(key for key in before if key[0] == family)
        if old:
            new = _merged(key for key in after if key[0] == family)
            held, common = _size(old), _overlap(old, new)
            shares[family] = max(held - common, _size(new) - common) / held
    return ListChange(
        ranges=len(before),
        added=sum(1 for key in after if key not in before),
        removed=sum(1 for key in before if key not in after),
        modified=sum(1 for key, values in after.items() if key in before and before[key] != values),
        address_shares=shares,
    )


def _merged(ranges: Iterable[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """The addresses of ``ranges`` as sorted, disjoint, non-adjacent ``(start, end)`` stretches."""
    merged: list[tuple[int, int]] = []
    for _, start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _size(stretches: Sequence[tuple[int, int]]) -> int:
    return sum(end - start + 1 for start, end in stretches)


def _overlap(one: Sequence[tuple[int, int]], other: Sequence[tuple[int, int]]) -> int:
    """How many addresses two sets of disjoint sorted stretches share."""
    shared, at, to = 0, 0, 0
    while at < len(one) and to < len(other):
        low, high = max(one[at][0], other[to][0]), min(one[at][1], other[to][1])
        shared += max(0, high - low + 1)
        if one[at][1] < other[to][1]:
            at += 1
        else:
            to += 1
    return shared


class ListLimits(Protocol):
    """A catalogue entry's guard (``loader.feeds.catalogue.NetworkList``)."""

    @property
    def name(self) -> str: ...
    @property
    def max_change_ratio(self) -> float: ...


def moved_too_far(before: Path, after: Path, limits: ListLimits) -> str:
    """Why a network list's new file must hold its dataset's release, or ``""``: under
    ``DEFAULT_MIN_SIZE_RATIO`` of the ranges it had, or more than ``max_change_ratio`` of its
    ranges or of one family's addresses added, removed or modified (``list_change``).

    A list of a combined dataset is measured alone: the Tor list changing wholesale
    is a small share of a dataset of cloud ranges, and must still be seen.
    """
    old, new = list_ranges(before), list_ranges(after)
    change = list_change(old, new)
    limit = f"above {limits.max_change_ratio:.0%}"
    if len(new) < DEFAULT_MIN_SIZE_RATIO * len(old):
        floor = f"{DEFAULT_MIN_SIZE_RATIO:.0%} of the {len(old):,} loaded"
        return f"{limits.name}: {len(new):,} ranges, under {floor}"
    if change.ranges_share > limits.max_change_ratio:
        counts = f"{change.added:,} added, {change.removed:,} removed, {change.modified:,} modified"
        return f"{limits.name}: changes {change.ranges_share:.0%} of its ranges, {limit} ({counts})"
    for family, share in sorted(change.address_shares.items()):
        if share > limits.max_change_ratio:
            return f"{limits.name}: changes {share:.0%} of its IPv{family} addresses, {limit}"
    return ""


def list_ranges(path: Path) -> dict[tuple[int, int, int], frozenset[str]]:
    """The ranges of a network list file and what its rows say there; bad rows are the load's to report."""
    rows = open_rows(path, path.name, FormatOptions(format="network"))
    found: dict[tuple[int, int, int], set[str]] = {}
    for row in rows:
        if isinstance(row, SourceRow):
            text = json.dumps(row.values, sort_keys=True, default=str)
            found.setdefault((row.family, row.start, row.end), set()).add(text)
    return {key: frozenset(values) for key, values in found.items()}
