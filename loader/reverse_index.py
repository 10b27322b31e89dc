"""What ``prepare`` decides for the reverse-lookup indexes: shard counts and index keys.

**The shard-count rule.** A GSI keyed on a field's value puts every range of a
value under one partition key, and one key lives in one partition (at most
1,000 writes/s, 3,000 reads/s). Write sharding spreads a value over several
keys. ``prepare`` counts the index entries of each value (one per range), *c(v)*
of *N* in all, and gives value *v*

    shards(v) = min(max_shards, ceil(c(v) / T))

so frequent values get shards in proportion to their frequency and rare ones get
one (a value with 35% of the items gets more shards than one with 1%). All the
choice is in *T*, the target entries per shard, taken in this order:

1. **Heat (the ten-keys-per-partition guideline).** A hot value's shards should
   be about ten times the partitions its writes must spread over: with ten keys
   a partition, hashing spreads keys evenly; with one, some partitions get two
   and some none. A load writes ``LOAD_WRITES_PER_SECOND`` entries a second, so
   value *v* needs ``c(v)/N × rate / 1000`` partitions and ten times as many
   shards, which is ``ceil(c(v) / T)`` for ``T <= 100 × N / rate``.
2. **Spread.** Below that bound, *T* is the largest target (the fewest Queries
   a page) for which the largest shard is predicted to stay within
   ``PLANNED_SPREAD`` (1.6×) of the mean shard over every key of the index. The
   acceptance goal is 2×; the margin is for hash noise, estimated as three
   standard deviations, ``c/k + 3·sqrt(c/k)``, for a value split *k* ways.
3. **Budget.** Shards beyond one per value must fit ``budget`` and no value may
   exceed ``max_shards`` (its fan-out per page). When no *T* meets the spread
   goal within them, *T* is the smallest target the budget allows, which makes
   the hot values' shards as small as the budget affords.

Step 3 is what a high-cardinality field gets. On the ASN data, ``asn`` has 91k
values, 90% of them with at most eight ranges, so the mean key holds about 5.5
entries whatever the rule; reaching 2× would mean shards of about ten entries
and AS174 fanning out over ~500 Queries a page. A low-cardinality field
(country, a rule name) meets the goal in step 2 with a fan-out in the tens.

**Assignment.** ``ipmeta.keys.shard_of`` hashes the range start, so a reload of
the same data puts every range in the same shard.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ipmeta import keys
from ipmeta.ips import Family

#: Shards beyond one per value that the index may use.
DEFAULT_SHARD_BUDGET = 2048
#: The most shards (and so the widest query fan-out) of one value.
DEFAULT_MAX_SHARDS = 256
#: Entries a load writes a second: the state machine's 8 concurrent chunk writers at
#: ~1,000 items/s each (the blog measured 3,600/s from one shuffled writer).
LOAD_WRITES_PER_SECOND = 8_000
#: What one partition absorbs, and how many keys the guideline puts on it.
PARTITION_WRITES_PER_SECOND = 1_000
KEYS_PER_PARTITION = 10
#: Largest shard / mean shard that step 2 plans for; the goal is 2.0.
PLANNED_SPREAD = 1.6
#: Successive candidate targets differ by this factor (step 2 scans them all).
_TARGET_STEP = 1.03

ShardRule = Literal["spread", "budget"]


@dataclass(frozen=True)
class ShardPlan:
    shards: dict[str, int]
    target: int  #: T, the entries per shard a value is split by
    rule: ShardRule  #: which step decided T
    predicted_spread: float  #: largest shard / mean shard, as planned


def heat_target(total: int) -> int:
    """The largest T that gives each value ten keys per partition its load writes need."""
    partitions_per_entry = LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND / max(1, total)
    return max(1, math.floor(1 / (KEYS_PER_PARTITION * partitions_per_entry)))


def predicted_spread(values_by_count: Mapping[int, int], target: int, max_shards: int) -> float:
    """Largest shard (with three standard deviations of hash noise) / mean shard."""
    entries = keys_total = 0
    largest = 0.0
    for count, values in values_by_count.items():
        shards = min(max_shards, -(-count // target))
        entries += count * values
        keys_total += shards * values
        per_shard = count / shards
        largest = max(largest, per_shard + 3 * math.sqrt(per_shard) if shards > 1 else per_shard)
    return largest * keys_total / max(1, entries)


def plan_shard_counts(
    counts: Mapping[str, int], *, budget: int = DEFAULT_SHARD_BUDGET, max_shards: int = DEFAULT_MAX_SHARDS
) -> ShardPlan:
    """Shards per value, by the three steps of the module's rule."""
    if not counts:
        return ShardPlan({}, 1, "spread", 1.0)
    values_by_count = Counter(counts.values())
    largest, total, value_count = max(values_by_count), sum(counts.values()), len(counts)
    lowest = max(1, math.ceil(largest / max_shards))  # below it the cap, not T, would decide
    highest = max(lowest, min(largest, heat_target(total)))

    def extra(target: int) -> int:
        return (
            sum(min(max_shards, -(-count // target)) * n for count, n in values_by_count.items())
            - value_count
        )

    candidates = {highest, lowest}
    candidate = float(highest)
    while candidate > lowest:
        candidates.add(int(candidate))
        candidate /= _TARGET_STEP
    for target in sorted(candidates, reverse=True):
        spread = predicted_spread(values_by_count, target, max_shards)
        if spread <= PLANNED_SPREAD and extra(target) <= budget:
            return _plan(counts, target, max_shards, "spread", spread)

    low, high = lowest, max(lowest, largest)
    while low < high:  # the smallest target whose extra shards fit the budget
        middle = (low + high) // 2
        if extra(middle) <= budget:
            high = middle
        else:
            low = middle + 1
    spread = predicted_spread(values_by_count, low, max_shards)
    return _plan(counts, low, max_shards, "budget", spread)


def _plan(
    counts: Mapping[str, int], target: int, max_shards: int, rule: ShardRule, spread: float
) -> ShardPlan:
    shards = {value: min(max_shards, -(-count // target)) for value, count in counts.items()}
    return ShardPlan(shards, target, rule, round(spread, 2))


@dataclass(frozen=True)
class IndexPlan:
    """The reverse-index attributes ``prepare`` gives each range's first item."""

    value_field: str | None = None
    shards: Mapping[str, int] = field(default_factory=dict)
    target: int = 1
    flag_column: str | None = None
    flag_shards: int = 1
    flagged: int = 0
    rule: ShardRule = "spread"
    predicted_spread: float = 1.0
    values_too_long: int = 0  #: ranges left out of ``ranges-by-value``: value over the length limit

    def attributes(
        self, version: int, family: Family, start: int, values: Mapping[str, Any]
    ) -> dict[str, str]:
        sort_key = keys.index_sort_key(family, start)
        attributes: dict[str, str] = {}
        value = values.get(self.value_field) if self.value_field else None
        if self.value_field and keys.is_indexable_value(value):
            label = keys.value_label(value)
            shard = keys.shard_of(family, start, self.shards.get(label, 1))
            attributes[keys.GSI1_PARTITION_KEY] = keys.value_partition_key(
                version, self.value_field, label, shard
            )
            attributes[keys.GSI1_SORT_KEY] = sort_key
        if self.flag_column and not keys.is_blank(values.get(self.flag_column)):
            shard = keys.shard_of(family, start, self.flag_shards)
            attributes[keys.GSI2_PARTITION_KEY] = keys.flagged_partition_key(version, self.flag_column, shard)
            attributes[keys.GSI2_SORT_KEY] = sort_key
        return attributes

    def metadata(self, column_types: Mapping[str, str]) -> dict[str, Any]:
        """What a query needs to know, stored in the version's metadata item."""
        meta: dict[str, Any] = {}
        if self.value_field:
            meta["value_index"] = {
                "field": self.value_field,
                "type": column_types.get(self.value_field, "S"),
                "shards": keys.encode_shard_counts(self.shards),
                "values": len(self.shards),
                "target": self.target,
            }
        if self.flag_column:
            meta["flag_index"] = {
                "column": self.flag_column,
                "shards": self.flag_shards,
                "items": self.flagged,
            }
        return meta

    def report(self, hottest: int = 5) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        if self.value_field:
            top = sorted(self.shards.items(), key=lambda entry: -entry[1])[:hottest]
            figures["value_index"] = {
                "field": self.value_field,
                "values": len(self.shards),
                "shards": sum(self.shards.values()),
                "target_entries_per_shard": self.target,
                "shard_rule": self.rule,
                "predicted_spread": self.predicted_spread,
                "most_shards": dict(top),
                "ranges_not_indexed_value_too_long": self.values_too_long,
            }
        if self.flag_column:
            figures["flag_index"] = {
                "column": self.flag_column,
                "items": self.flagged,
                "shards": self.flag_shards,
            }
        return figures


def plan_index(
    values_of_ranges: Iterable[Mapping[str, Any]],
    *,
    value_field: str | None,
    flag_column: str | None,
    budget: int = DEFAULT_SHARD_BUDGET,
    max_shards: int = DEFAULT_MAX_SHARDS,
) -> IndexPlan:
    """Shard counts from the frequency of each value among the ranges (one entry per range).

    A blank cell (empty or only whitespace) puts a range in neither index; a value
    longer than ``keys.MAX_INDEXED_VALUE_BYTES`` is left out of ``ranges-by-value``
    and counted in the report. The flagged ranges form one "value" whose spread is
    even by construction, so only the heat step decides their shards.
    """
    counts: Counter[str] = Counter()
    flagged = too_long = ranges = 0
    for values in values_of_ranges:
        ranges += 1
        value = values.get(value_field) if value_field else None
        if keys.is_indexable_value(value):
            counts[keys.value_label(value)] += 1
        elif not keys.is_blank(value):
            too_long += 1
        if flag_column and not keys.is_blank(values.get(flag_column)):
            flagged += 1
    plan = plan_shard_counts(counts, budget=budget, max_shards=max_shards)
    flag_shards = min(max_shards, max(1, -(-flagged // heat_target(ranges)))) if flag_column else 1
    return IndexPlan(
        value_field,
        plan.shards,
        plan.target,
        flag_column,
        flag_shards,
        flagged,
        plan.rule,
        plan.predicted_spread,
        too_long,
    )
