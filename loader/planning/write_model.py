"""How fast a load can write: DynamoDB's partitions, split for heat, and the client, second by second.

Pure arithmetic on plain data, no AWS: the model behind ``ipmeta plan``.
``docs/capacity.md`` explains it and quotes the sources.

**Partitions.** A table is a set of physical partitions, each owning a range of
the partition-key hash and accepting at most ``PARTITION_WRITE_UNITS`` write
units a second. A new on-demand table has ``ON_DEMAND_START_PARTITIONS``; one
pre-warmed to W write units a second has ``ceil(W / 1,000)``; a provisioned
table has ``ceil(WCU / 1,000)`` and accepts no more than its WCU in all.
Keys hash onto partitions with blake2b, so a run repeats.

**Time steps.** The load advances one second at a time. In each second the
client writes the next items of the write order, at most its own ceiling
(``concurrent_requests × 25 / batch latency``), until the item it needs to write
belongs to a partition that has used its second's budget: a batch waits for
its slowest item, so the hottest partition of the window stops the whole
client. A *shuffled* order holds every bucket at its overall share in every
window, so its rate is constant between splits and is computed per phase, not
per second. Every step costs time proportional to the runs it touches, and a
long run of one key is skipped over in one move, so a load of millions of
items takes a fraction of a second.

**Split for heat.** A partition that has run above ``heat_fraction`` of its
limit for ``after_seconds`` splits in two, at the hash that halves its recent
writes. A partition written by a single key does not split: a key lives in one
partition, and its sequential sort keys would all land in the upper half, so
one key never goes above 1,000 write units a second.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from loader.item_units import write_units as write_units_per_item
from loader.reverse_index import KEYS_PER_PARTITION

PARTITION_WRITE_UNITS: Final = 1_000
ON_DEMAND_START_PARTITIONS: Final = 4
#: DynamoDB's default per-table on-demand write quota: an on-demand table never goes past it.
ON_DEMAND_TABLE_QUOTA: Final = 40_000
BATCH_ITEMS: Final = 25
#: DynamoDB bills this much per item on top of its attributes.
ITEM_OVERHEAD_BYTES: Final = 100
#: What an index entry holds beside the item's projected attributes: the index's two key
#: attributes (``gsi1pk`` ``v12#asn#15169#3``-style, ``gsi1sk`` a family, start and value hash).
INDEX_KEY_BYTES: Final = 96
KB: Final = 1_024
GB: Final = 1 << 30
MILLION: Final = 1_000_000

_HASH_SPACE: Final = 1 << 64
#: Item counts become fractional inside a step; anything below this is nothing.
_EPSILON: Final = 1e-9


class Limit(StrEnum):
    """What held a load back."""

    CLIENT = "client ceiling"
    TABLE = "table throughput"
    HOTTEST_PARTITION = "hottest partition"
    ONE_KEY = "one partition key"


class OrderKind(StrEnum):
    SORTED = "sorted"
    SHUFFLED = "shuffled"
    AS_WRITTEN = "as written"


def key_hash(key: str) -> int:
    """Where a partition key lands in the hash space: blake2b, because ``hash()`` is salted per process."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


# -- what is written, where, by whom ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteOrder:
    """The buckets of a load in the order their items are written.

    ``runs`` are consecutive items of one bucket, in write order; a shuffled
    order has one run per bucket, whose order does not matter.
    """

    kind: OrderKind
    runs: tuple[tuple[str, int], ...]

    @classmethod
    def sorted(cls, items_per_bucket: Mapping[str, int]) -> WriteOrder:
        """Each bucket's items consecutively, buckets in the mapping's (key) order."""
        return cls(OrderKind.SORTED, _positive_runs(items_per_bucket.items()))

    @classmethod
    def shuffled(cls, items_per_bucket: Mapping[str, int]) -> WriteOrder:
        """Every window holds each bucket at its overall share."""
        return cls(OrderKind.SHUFFLED, _positive_runs(items_per_bucket.items()))

    @classmethod
    def as_written(cls, buckets: Iterable[str]) -> WriteOrder:
        """The bucket of every item, in write order."""
        runs = ((bucket, sum(1 for _ in group)) for bucket, group in itertools.groupby(buckets))
        return cls(OrderKind.AS_WRITTEN, _positive_runs(runs))

    @property
    def items(self) -> int:
        return sum(count for _, count in self.runs)

    def items_per_bucket(self) -> dict[str, int]:
        """Items of each bucket, buckets in order of first appearance."""
        totals: dict[str, int] = {}
        for bucket, count in self.runs:
            totals[bucket] = totals.get(bucket, 0) + count
        return totals


def _positive_runs(runs: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    kept = []
    for bucket, count in runs:
        if count < 0:
            raise ValueError(f"bucket {bucket} has a negative item count ({count})")
        if count:
            kept.append((bucket, count))
    return tuple(kept)


@dataclass(frozen=True, slots=True)
class TableSetup:
    name: str
    partitions: int
    #: What the table accepts in all, whatever its partitions could take.
    write_units_per_second: float

    @classmethod
    def on_demand(cls, warm_write_units: int | None = None) -> TableSetup:
        """A new on-demand table, optionally pre-warmed (``warmWriteUnitsPerSecond``)."""
        if warm_write_units is None:
            return cls("on-demand", ON_DEMAND_START_PARTITIONS, ON_DEMAND_TABLE_QUOTA)
        partitions = max(ON_DEMAND_START_PARTITIONS, math.ceil(warm_write_units / PARTITION_WRITE_UNITS))
        # Pre-warming past the default quota only works once the quota was raised to match.
        quota = max(ON_DEMAND_TABLE_QUOTA, warm_write_units)
        return cls(f"on-demand pre-warmed to {warm_write_units:,} WRU/s", partitions, quota)

    @classmethod
    def provisioned(cls, write_capacity_units: int) -> TableSetup:
        partitions = max(1, math.ceil(write_capacity_units / PARTITION_WRITE_UNITS))
        return cls(f"provisioned {write_capacity_units:,} WCU", partitions, write_capacity_units)


@dataclass(frozen=True, slots=True)
class Client:
    """The writer: ``concurrent_requests`` BatchWriteItem calls of 25 items in flight."""

    concurrent_requests: int
    batch_latency_ms: float

    @property
    def writes_per_second(self) -> float:
        return self.concurrent_requests * BATCH_ITEMS * 1_000 / self.batch_latency_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrent_requests": self.concurrent_requests,
            "batch_latency_ms": self.batch_latency_ms,
            "writes_per_second": round(self.writes_per_second),
        }


@dataclass(frozen=True, slots=True)
class SplitForHeat:
    """When a hot partition splits. Both figures are assumptions: AWS documents neither."""

    after_seconds: float = 300.0
    heat_fraction: float = 0.8

    def to_json(self) -> dict[str, Any]:
        return {"after_seconds": self.after_seconds, "heat_fraction": self.heat_fraction}


#: The blog's client: one Python thread. 4 ms a batch is what its 6,000 writes/s implies (docs/capacity.md).
SINGLE_THREAD_CLIENT: Final = Client(concurrent_requests=1, batch_latency_ms=4.0)
#: The loader: ``mapMaxConcurrency`` (8) chunk writers at about 1,000 items/s each (docs/reverse.md).
LOADER_CLIENT: Final = Client(concurrent_requests=8, batch_latency_ms=25.0)
DEFAULT_SPLIT: Final = SplitForHeat()
#: About what an ASN range item weighs (docs/deploy.md).
DEFAULT_ITEM_BYTES: Final = 250


@dataclass(frozen=True, slots=True)
class LoadEstimate:
    table: str
    items: int
    seconds: float
    limited_by: Limit
    partitions_at_start: int
    partitions_at_end: int
    splits: int

    @property
    def writes_per_second(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "items": self.items,
            "seconds": round(self.seconds, 1),
            "writes_per_second": round(self.writes_per_second),
            "limited_by": str(self.limited_by),
            "partitions_at_start": self.partitions_at_start,
            "partitions_at_end": self.partitions_at_end,
            "splits": self.splits,
        }


# -- the simulation --------------------------------------------------------------------


class _Partitions:
    """The table's partitions as ranges of the key hash, each named by its first hash."""

    def __init__(self, count: int) -> None:
        self._starts = [index * _HASH_SPACE // count for index in range(count)]
        self._hashes: dict[str, int] = {}
        self._partition_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._starts)

    def hash_of(self, key: str) -> int:
        found = self._hashes.get(key)
        if found is None:
            found = self._hashes[key] = key_hash(key)
        return found

    def of(self, key: str) -> int:
        found = self._partition_of.get(key)
        if found is None:
            found = self._starts[bisect.bisect_right(self._starts, self.hash_of(key)) - 1]
            self._partition_of[key] = found
        return found

    def split_for_heat(self, writes_by_key: Mapping[str, float]) -> bool:
        """Split a partition at the hash that halves these writes; False when one key has them all."""
        ordered = sorted(writes_by_key.items(), key=lambda key_writes: self.hash_of(key_writes[0]))
        if len(ordered) < 2:
            return False
        half = sum(writes for _, writes in ordered) / 2
        below = itertools.accumulate(writes for _, writes in ordered[:-1])
        cut = 1 + min(enumerate(below), key=lambda index_sum: abs(index_sum[1] - half))[0]
        at = self.hash_of(ordered[cut][0])
        place = bisect.bisect_left(self._starts, at)
        if place < len(self._starts) and self._starts[place] == at:
            return False  # the key starts a partition already: nothing to move
        self._starts.insert(place, at)
        self._partition_of.clear()
        return True


@dataclass(frozen=True, slots=True)
class _Rates:
    """A load's per-second limits, in items."""

    partition: float
    client: float
    table: float
    units_per_item: int

    @property
    def step(self) -> float:
        return min(self.client, self.table)

    @property
    def step_limit(self) -> Limit:
        return Limit.CLIENT if self.client <= self.table else Limit.TABLE

    def is_hot(self, items: float, split: SplitForHeat) -> bool:
        return items * self.units_per_item >= split.heat_fraction * PARTITION_WRITE_UNITS


def estimate_load(
    order: WriteOrder,
    table: TableSetup,
    client: Client = LOADER_CLIENT,
    split: SplitForHeat = DEFAULT_SPLIT,
    item_bytes: float = DEFAULT_ITEM_BYTES,
) -> LoadEstimate:
    """How long ``order`` takes to write into ``table``, and what held it back."""
    units = write_units_per_item(item_bytes)
    rates = _Rates(
        partition=PARTITION_WRITE_UNITS / units,
        client=client.writes_per_second,
        table=table.write_units_per_second / units,
        units_per_item=units,
    )
    partitions = _Partitions(table.partitions)
    if order.kind is OrderKind.SHUFFLED:
        seconds, limits, splits = _write_shuffled(order.runs, partitions, rates, split)
    else:
        seconds, limits, splits = _write_in_order(order.runs, partitions, rates, split)
    limited_by = max(limits, key=limits.__getitem__) if limits else rates.step_limit
    return LoadEstimate(
        table.name, order.items, seconds, limited_by, table.partitions, len(partitions), splits
    )


def _write_shuffled(
    runs: Sequence[tuple[str, int]], partitions: _Partitions, rates: _Rates, split: SplitForHeat
) -> tuple[float, dict[Limit, float], int]:
    """Phase by phase: the rate only changes when a partition splits."""
    remaining = float(sum(count for _, count in runs))
    shares = {bucket: count / remaining for bucket, count in runs}
    seconds, splits = 0.0, 0
    limits: dict[Limit, float] = {}
    heat: dict[int, float] = {}
    cannot_split: set[int] = set()
    while remaining > _EPSILON:
        members: dict[int, dict[str, float]] = {}
        for bucket, share in shares.items():
            members.setdefault(partitions.of(bucket), {})[bucket] = share
        load = {partition: sum(keyed.values()) for partition, keyed in members.items()}
        hottest = max(load, key=load.__getitem__)
        partition_limit = Limit.ONE_KEY if len(members[hottest]) == 1 else Limit.HOTTEST_PARTITION
        rate, limit = min((rates.partition / load[hottest], partition_limit), (rates.step, rates.step_limit))
        splittable = [
            p
            for p in load
            if len(members[p]) > 1 and p not in cannot_split and rates.is_hot(load[p] * rate, split)
        ]
        heat = {partition: heat.get(partition, 0.0) for partition in splittable}
        until_split = min((split.after_seconds - hot for hot in heat.values()), default=math.inf)
        phase = min(remaining / rate, max(0.0, until_split))
        seconds += phase
        limits[limit] = limits.get(limit, 0.0) + phase
        remaining -= rate * phase
        heat = {partition: hot + phase for partition, hot in heat.items()}
        for partition in [p for p, hot in heat.items() if hot >= split.after_seconds - _EPSILON]:
            if partitions.split_for_heat(members[partition]):
                splits += 1
            else:
                cannot_split.add(partition)
            del heat[partition]
    return seconds, limits, splits


def _write_in_order(
    runs: Sequence[tuple[str, int]], partitions: _Partitions, rates: _Rates, split: SplitForHeat
) -> tuple[float, dict[Limit, float], int]:
    """Second by second, each second writing the next items until a partition's budget runs out."""
    seconds, splits = 0.0, 0
    limits: dict[Limit, float] = {}
    heat: dict[int, float] = {}
    position = _RunCursor(runs)
    while not position.done:
        skipped = position.skip_steady_seconds(rates)
        if skipped:
            seconds += skipped
            steady_limit = _steady_limit(rates)
            limits[steady_limit] = limits.get(steady_limit, 0.0) + skipped
            partition = partitions.of(position.bucket)
            steady_is_hot = rates.is_hot(min(rates.partition, rates.step), split)
            # One key writes alone: every other partition cools, and this one cannot split.
            heat = {partition: heat.get(partition, 0.0) + skipped} if steady_is_hot else {}
            continue
        step = _write_one_second(position, partitions, rates)
        if step.limit is None:
            seconds += step.written / rates.step
            break
        seconds += 1
        limits[step.limit] = limits.get(step.limit, 0.0) + 1
        hot = [p for p, items in step.used.items() if rates.is_hot(items, split)]
        heat = {partition: heat.get(partition, 0.0) + 1 for partition in hot}
        for partition in [p for p, hot_for in heat.items() if hot_for >= split.after_seconds]:
            if partitions.split_for_heat(step.writers[partition]):
                splits += 1
                del heat[partition]
    return seconds, limits, splits


def _steady_limit(rates: _Rates) -> Limit:
    return Limit.ONE_KEY if rates.partition <= rates.step else rates.step_limit


class _RunCursor:
    """Where the load is in its runs: the current bucket and what is left of its run."""

    def __init__(self, runs: Sequence[tuple[str, int]]) -> None:
        self._runs = runs
        self._index = 0
        self.left = float(runs[0][1]) if runs else 0.0

    @property
    def done(self) -> bool:
        return self._index >= len(self._runs)

    @property
    def bucket(self) -> str:
        return self._runs[self._index][0]

    def take(self, items: float) -> None:
        self.left -= items
        if self.left <= _EPSILON:
            self._index += 1
            self.left = float(self._runs[self._index][1]) if not self.done else 0.0

    def skip_steady_seconds(self, rates: _Rates) -> int:
        """Seconds in the middle of a long run, all alike: skip them, leaving the run's last two."""
        steady = min(rates.partition, rates.step)
        if self.left < 2 * steady:
            return 0
        seconds = math.floor(self.left / steady) - 1
        self.left -= seconds * steady
        return seconds


@dataclass(slots=True)
class _Second:
    written: float
    limit: Limit | None
    used: dict[int, float]
    writers: dict[int, dict[str, float]]


def _write_one_second(position: _RunCursor, partitions: _Partitions, rates: _Rates) -> _Second:
    used: dict[int, float] = {}
    writers: dict[int, dict[str, float]] = {}
    budget = rates.step
    while not position.done:
        bucket = position.bucket
        partition = partitions.of(bucket)
        take = min(position.left, rates.partition - used.get(partition, 0.0), budget)
        if take > _EPSILON:
            used[partition] = used.get(partition, 0.0) + take
            by_key = writers.setdefault(partition, {})
            by_key[bucket] = by_key.get(bucket, 0.0) + take
            budget -= take
        finishes_run = take >= position.left - _EPSILON
        position.take(take)
        if finishes_run:
            continue
        if budget <= _EPSILON:
            limit = rates.step_limit
        else:
            sharing = writers.get(partition, {}).keys() - {bucket}
            limit = Limit.HOTTEST_PARTITION if sharing else Limit.ONE_KEY
        return _Second(rates.step - budget, limit, used, writers)
    return _Second(rates.step - budget, None, used, writers)


# -- charts ----------------------------------------------------------------------------


def hottest_share_series(order: WriteOrder, window: int = 1_000) -> list[float]:
    """The largest bucket's share of each ``window`` consecutive writes: a chart's data."""
    if order.kind is OrderKind.SHUFFLED:
        total = order.items
        share = max((count for _, count in order.runs), default=0) / total if total else 0.0
        return [round(share, 4)] * math.ceil(total / window)
    series: list[float] = []
    counts: dict[str, int] = {}
    filled = 0
    for bucket, count in order.runs:
        left = count
        while left:
            take = min(left, window - filled)
            counts[bucket] = counts.get(bucket, 0) + take
            filled += take
            left -= take
            if filled == window:
                series.append(round(max(counts.values()) / window, 4))
                counts, filled = {}, 0
    if filled:
        series.append(round(max(counts.values()) / filled, 4))
    return series


# -- pre-warming -------------------------------------------------------------------------


def warm_throughput_for(
    order: WriteOrder,
    target_seconds: float,
    client: Client = LOADER_CLIENT,
    split: SplitForHeat = DEFAULT_SPLIT,
    item_bytes: float = DEFAULT_ITEM_BYTES,
) -> dict[str, Any]:
    """The smallest ``warmWriteUnitsPerSecond`` (a multiple of 1,000) that writes ``order`` in time.

    Its answer was simulated, so feeding it back finishes in time. When no
    pre-warming can, it says which limit stands in the way instead.
    """
    if target_seconds <= 0:
        raise ValueError(f"the target must be a positive number of seconds, not {target_seconds}")
    units = write_units_per_item(item_bytes)
    answer: dict[str, Any] = {"target_seconds": target_seconds, "warm_write_units_per_second": None}
    needed_rate = order.items / target_seconds
    if client.writes_per_second < needed_rate:
        return answer | {"reason": f"{Limit.CLIENT}: {client.writes_per_second:,.0f} writes/s at most"}
    one_key_seconds = _one_key_seconds(order, units)
    if one_key_seconds > target_seconds:
        return answer | {
            "reason": f"{Limit.ONE_KEY}: at 1,000 write units/s a key, the buckets alone need "
            f"{one_key_seconds:,.0f} s"
        }

    def estimate(partitions: int) -> LoadEstimate:
        warm = TableSetup.on_demand(partitions * PARTITION_WRITE_UNITS)
        return estimate_load(order, warm, client, split, item_bytes)

    fewest = max(ON_DEMAND_START_PARTITIONS, math.ceil(needed_rate * units / PARTITION_WRITE_UNITS))
    # More partitions than keys hashed ten to a partition would spread nothing further.
    most = max(fewest, KEYS_PER_PARTITION * len(order.items_per_bucket()))
    too_few, enough = fewest - 1, fewest
    found = estimate(enough)
    while found.seconds > target_seconds:
        if enough >= most:
            return answer | {"reason": f"{found.limited_by} even at {enough:,} partitions"}
        too_few, enough = enough, min(most, enough * 2)
        found = estimate(enough)
    while enough - too_few > 1:
        middle = (too_few + enough) // 2
        trial = estimate(middle)
        if trial.seconds <= target_seconds:
            enough, found = middle, trial
        else:
            too_few = middle
    return answer | {
        "warm_write_units_per_second": enough * PARTITION_WRITE_UNITS,
        "pre_warming_needed": enough > ON_DEMAND_START_PARTITIONS,
        "estimate": found.to_json(),
    }


def _one_key_seconds(order: WriteOrder, units: int) -> float:
    """A lower bound of the load's time that no partition count lowers: one key takes 1,000 WU/s at most.

    In a written order, a second spans consecutive runs, so every run but the
    second it shares with each neighbour is its key's alone.
    """
    per_key_second = PARTITION_WRITE_UNITS / units
    if order.kind is OrderKind.SHUFFLED:
        return max((count for _, count in order.runs), default=0) / per_key_second
    return sum(max(0.0, count / per_key_second - 2) for _, count in order.runs)
