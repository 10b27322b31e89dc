"""What a load decides for the reverse-lookup indexes: which key each entry goes to.

**The goal.** A GSI keyed on a field's value puts every range of a value under
one partition key, and one key lives in one partition (at most 1,000 writes/s,
3,000 reads/s). The index should instead be many keys of about the same size,
*T* entries each: no key hotter than the rest, none much larger than the mean.
Two moves get there from a field's value counts *c(v)*, *N* in all:

- **Frequent values are split (write sharding).** A value with ``2·c(v) >= T``
  gets keys of its own, ``v{version}#{field}#{value}#{shard}``, and

      shards(v) = min(max_shards, ceil(c(v) / T))

  of them, so shards follow frequency: a value with 35% of the entries gets
  more shards than one with 1%. A range's shard is a hash of its start
  (``ipmeta.schema.keys.shard_of``), so a reload of the same data puts it in the same shard.
- **Rare values share keys (packing).** The others, ordered by a hash of the
  value, fill *packs* of at most *T* entries, ``v{version}#{field}##{pack}``; a
  value's entries carry its hash at the head of their sort key, so a query reads
  only them (``begins_with``), and finds its pack from the first hash of every
  pack, stored in the version's metadata with the shard counts.

Packing is what makes the spread goal (largest key ≤ 2× the mean key) reachable
for a high-cardinality field. ``asn`` on the ASN data has 91k values, 90% of
them with at most eight ranges; with a key per value the mean key holds 5.5
entries whatever the hot values do (18× at best with 66 shards for AS174, 853×
unsharded). Packed, every key holds between T/2 and T entries, plus hash noise
on the shards of split values.

**Choosing T.**

1. **Heat (the ten-keys-per-partition guideline).** A hot value's shards should
   be about ten times the partitions its writes must spread over: with ten keys
   a partition, hashing spreads keys evenly; with one, some partitions get two
   and some none. A load writes ``LOAD_WRITES_PER_SECOND`` entries a second, so
   value *v* needs ``c(v)/N × rate / 1000`` partitions and ten times as many
   shards, which is ``ceil(c(v) / T)`` for ``T = 100 × N / rate``. It is the
   largest T that keeps every key at a tenth of a partition's writes, and the
   largest T means the fewest Queries a page. At 40,000 writes/s, ``asn`` on the
   ASN data gets T = 1,287: AS174 (0.94% of the entries) has 4 shards, 43
   values have keys of their own, and the other 91,022 share 359 packs. T is
   at least ``MIN_TARGET``: below it a key's whole load is a burst any
   partition absorbs, and splitting only adds fan-out.
2. **Budget.** The index may use ``budget`` keys in all (shards and packs); when
   T gives more, T grows until they fit. ``max_shards`` caps one value's fan-out.

The plan predicts its spread (largest key / mean key; a split value's shards are
allowed three standard deviations of hash noise), and the load report shows it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ipmeta.schema import keys
from ipmeta.schema.ips import Family
from ipmeta.schema.records import FlagIndexMeta, ValueIndexMeta

#: Keys (shards and packs) the index may use in all.
DEFAULT_SHARD_BUDGET = 2048
#: The most shards (and so the widest query fan-out) of one value.
DEFAULT_MAX_SHARDS = 256
#: Entries a load may write a second: the state machine runs up to 40 chunk writers
#: (``mapMaxConcurrency``, 8 by default) at ~1,000 items/s each, which is also DynamoDB's
#: default on-demand write quota of a table (40,000 WRU/s). The plan holds for the fastest.
LOAD_WRITES_PER_SECOND = 40_000
#: What one partition absorbs, and how many keys the guideline puts on it.
PARTITION_WRITES_PER_SECOND = 1_000
KEYS_PER_PARTITION = 10
#: The smallest target: 25 entries, one BatchWriteItem's worth, is a burst for any partition.
MIN_TARGET = 25

ShardRule = Literal["heat", "budget"]


@dataclass(frozen=True)
class ShardPlan:
    shards: dict[str, int]  #: the values with keys of their own, and how many
    pack_starts: tuple[int, ...]  #: the first value hash of each pack, ascending
    target: int  #: T, the entries a key is planned to hold
    rule: ShardRule  #: which step decided T
    predicted_spread: float  #: largest key / mean key, as planned

    @property
    def key_count(self) -> int:
        return sum(self.shards.values()) + len(self.pack_starts)


def heat_target(total: int) -> int:
    """The largest T that gives each value ten keys per partition its load writes need."""
    partitions_per_entry = LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND / max(1, total)
    return max(1, math.floor(1 / (KEYS_PER_PARTITION * partitions_per_entry)))


def has_own_keys(count: int, target: int) -> bool:
    """At least half a key's worth of entries: packing it would not make keys more even."""
    return 2 * count >= target


def plan_keys(
    counts: Mapping[str, int], hash_order: list[tuple[int, str]], target: int, max_shards: int
) -> tuple[dict[str, int], tuple[int, ...], float]:
    """Shards of the split values, the packs of the others, and the predicted spread."""
    shards: dict[str, int] = {}
    largest = 0.0
    for value, count in counts.items():
        if has_own_keys(count, target):
            shards[value] = min(max_shards, -(-count // target))
            per_shard = count / shards[value]
            noise = 3 * math.sqrt(per_shard) if shards[value] > 1 else 0.0
            largest = max(largest, per_shard + noise)
    starts: list[int] = []
    filled = 0
    previous_hash = -1
    for value_hash, value in hash_order:
        count = counts[value]
        if has_own_keys(count, target):
            continue
        # A pack closes before the value that would overfill it (never between equal
        # hashes: a query finds its pack by hash alone).
        if not starts or (filled + count > target and value_hash != previous_hash):
            largest = max(largest, filled)
            starts.append(0 if not starts else value_hash)
            filled = 0
        filled += count
        previous_hash = value_hash
    largest = max(largest, filled)
    key_count = sum(shards.values()) + len(starts)
    spread = largest * key_count / max(1, sum(counts.values()))
    return shards, tuple(starts), round(spread, 2)


def plan_shard_counts(
    counts: Mapping[str, int], *, budget: int = DEFAULT_SHARD_BUDGET, max_shards: int = DEFAULT_MAX_SHARDS
) -> ShardPlan:
    """Own shards and packs, by the two steps of the module's rule."""
    if not counts:
        return ShardPlan({}, (), MIN_TARGET, "heat", 1.0)
    total = sum(counts.values())
    hash_order = sorted((keys.value_hash(value), value) for value in counts)

    def plan(target: int, rule: ShardRule) -> ShardPlan:
        shards, starts, spread = plan_keys(counts, hash_order, target, max_shards)
        return ShardPlan(shards, starts, target, rule, spread)

    target = max(MIN_TARGET, heat_target(total))
    chosen = plan(target, "heat")
    if chosen.key_count <= budget:
        return chosen
    low, high = target + 1, max(target + 1, total)
    while low < high:  # the smallest T whose keys fit the budget
        middle = (low + high) // 2
        if plan(middle, "budget").key_count <= budget:
            high = middle
        else:
            low = middle + 1
    return plan(low, "budget")


@dataclass(frozen=True)
class IndexCensus:
    """The entries of one reverse-lookup index (a GSI) a version must hold: the index's partition
    keys of the version, and how many entries they hold in all (``IndexPlan.census``)."""

    partition_keys: tuple[str, ...]
    entries: int


@dataclass(frozen=True)
class IndexPlan:
    """The reverse-index attributes ``write_chunk`` gives each range's first item."""

    value_field: str | None = None
    values: ShardPlan | None = None
    value_counts: Mapping[str, int] = field(default_factory=dict)
    flag_column: str | None = None
    flag_shards: int = 1
    flagged: int = 0
    values_too_long: int = 0  #: ranges left out of ``ranges-by-value``: value over the length limit
    _keys_of: dict[tuple[str, str], keys.ValueKeys] = field(default_factory=dict, repr=False, compare=False)

    def _value_keys(
        self, space: keys.KeySpace, version: int, field: str, plan: ShardPlan, label: str
    ) -> keys.ValueKeys:
        cached = (space.version_key(version), label)
        found = self._keys_of.get(cached)
        if found is None:  # once per value, not once per range
            found = space.value_keys(version, field, label, plan.shards.get(label), plan.pack_starts)
            self._keys_of[cached] = found
        return found

    def attributes(
        self, space: keys.KeySpace, version: int, family: Family, start: int, values: Mapping[str, Any]
    ) -> dict[str, str]:
        attributes: dict[str, str] = {}
        value = values.get(self.value_field) if self.value_field else None
        if self.value_field and self.values is not None and keys.is_indexable_value(value):
            where = self._value_keys(space, version, self.value_field, self.values, keys.value_label(value))
            shard = keys.shard_of(family, start, len(where.partition_keys))
            attributes[keys.GSI1_PARTITION_KEY] = where.partition_keys[shard]
            attributes[keys.GSI1_SORT_KEY] = keys.index_sort_key(family, start, where.sort_key_prefix)
        if self.flag_column and not keys.is_blank(values.get(self.flag_column)):
            shard = keys.shard_of(family, start, self.flag_shards)
            attributes[keys.GSI2_PARTITION_KEY] = space.flagged_partition_key(
                version, self.flag_column, shard
            )
            attributes[keys.GSI2_SORT_KEY] = keys.index_sort_key(family, start)
        return attributes

    def census(
        self, space: keys.KeySpace, version: int, *, unwritten: tuple[int, int] = (0, 0)
    ) -> dict[str, IndexCensus]:
        """Each index's partition keys of ``version`` and its entries in all: what home's activation
        and a replica region count in the GSIs before reverse lookups read them. ``unwritten``:
        the value entries and flagged ranges counted per segment that no item carries (a segment
        that continues a range begun before it: ``plan_writes.unwritten_index_entries``)."""
        census: dict[str, IndexCensus] = {}
        if self.value_field and self.values is not None:
            plan, field_ = self.values, self.value_field
            own = [
                key
                for label, shards in sorted(plan.shards.items())
                for key in space.value_keys(version, field_, label, shards, ()).partition_keys
            ]
            packs = [space.pack_partition_key(version, field_, pack) for pack in range(len(plan.pack_starts))]
            census[keys.RANGES_BY_VALUE.name] = IndexCensus(
                tuple(own + packs), sum(self.value_counts.values()) - unwritten[0]
            )
        if self.flag_column:
            flagged = (
                space.flagged_partition_key(version, self.flag_column, s) for s in range(self.flag_shards)
            )
            census[keys.FLAGGED.name] = IndexCensus(tuple(flagged), self.flagged - unwritten[1])
        return census

    def value_index_meta(self, column_types: Mapping[str, str]) -> ValueIndexMeta | None:
        """What a query needs to find a value's keys, stored in the version's metadata."""
        if not self.value_field or self.values is None:
            return None
        return ValueIndexMeta(
            field=self.value_field,
            column_type=column_types.get(self.value_field, "S"),
            own_shards=keys.encode_own_shards(self.values.shards),
            packs=keys.encode_pack_starts(self.values.pack_starts),
            values=len(self.value_counts),
            target=self.values.target,
        )

    def flag_index_meta(self) -> FlagIndexMeta | None:
        if not self.flag_column:
            return None
        return FlagIndexMeta(self.flag_column, self.flag_shards, self.flagged)

    def report(self, hottest: int = 5) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        if self.value_field and self.values is not None:
            plan = self.values
            top = sorted(self.value_counts.items(), key=lambda entry: (-entry[1], entry[0]))[:hottest]
            figures["value_index"] = {
                "field": self.value_field,
                "values": len(self.value_counts),
                # Each an entry of the ranges-by-value index: a write of its own in every region
                "entries": sum(self.value_counts.values()),
                "keys": plan.key_count,
                "values_with_own_keys": len(plan.shards),
                "shards": sum(plan.shards.values()),
                "packs": len(plan.pack_starts),
                "target_entries_per_shard": plan.target,
                "shard_rule": plan.rule,
                "predicted_spread": plan.predicted_spread,
                "hottest_values": {
                    value: {"entries": count, "shards": plan.shards.get(value, 1)} for value, count in top
                },
                "ranges_not_indexed_value_too_long": self.values_too_long,
            }
        if self.flag_column:
            figures["flag_index"] = {
                "column": self.flag_column,
                "items": self.flagged,
                "shards": self.flag_shards,
            }
        return figures


@dataclass(frozen=True)
class IndexCounts:
    """What the indexes are planned from: one entry per range (``loader.pipeline.resolve`` counts them)."""

    value_counts: Mapping[str, int]
    ranges: int
    flagged: int = 0
    values_too_long: int = 0


def count_index_values(
    values_of_ranges: Iterable[Mapping[str, Any]], value_field: str | None, flag_column: str | None
) -> IndexCounts:
    """A blank cell (empty or only whitespace) puts a range in neither index; a value longer
    than ``keys.MAX_INDEXED_VALUE_BYTES`` is left out of ``ranges-by-value`` and counted."""
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
    return IndexCounts(counts, ranges, flagged, too_long)


def plan_index(
    counts: IndexCounts,
    *,
    value_field: str | None,
    flag_column: str | None,
    budget: int = DEFAULT_SHARD_BUDGET,
    max_shards: int = DEFAULT_MAX_SHARDS,
) -> IndexPlan:
    """Keys from the frequency of each value among the ranges.

    The flagged ranges form one "value" whose spread is even by construction, so
    only the heat step decides their shards.
    """
    plan = (
        plan_shard_counts(counts.value_counts, budget=budget, max_shards=max_shards) if value_field else None
    )
    flag_shards = (
        min(max_shards, max(1, -(-counts.flagged // heat_target(counts.ranges)))) if flag_column else 1
    )
    return IndexPlan(
        value_field,
        plan,
        counts.value_counts,
        flag_column,
        flag_shards,
        counts.flagged,
        counts.values_too_long,
    )


def index_plan_to_json(plan: IndexPlan) -> dict[str, Any]:
    """What a chunk writer needs to key index entries (not the value counts: they are only for reports)."""
    values = plan.values
    return {
        "value_field": plan.value_field,
        "shards": dict(values.shards) if values else None,
        "pack_starts": list(values.pack_starts) if values else None,
        "flag_column": plan.flag_column,
        "flag_shards": plan.flag_shards,
    }


def index_plan_from_json(data: Mapping[str, Any]) -> IndexPlan:
    values = None
    if data["shards"] is not None:
        values = ShardPlan(dict(data["shards"]), tuple(data["pack_starts"]), 0, "heat", 0.0)
    return IndexPlan(data["value_field"], values, {}, data["flag_column"], int(data["flag_shards"]))
