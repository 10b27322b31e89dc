"""What ``prepare`` decides for the reverse-lookup indexes: shard counts and index keys.

**The shard-count rule.** A GSI keyed on a field's value puts every range of a
value under one partition key, and one key lives in one partition (at most
1,000 writes/s, 3,000 reads/s). Write sharding spreads a value over several
keys. ``prepare`` counts the index entries of each value (one per range) and
gives value *v* with *c(v)* entries

    shards(v) = min(max_shards, ceil(c(v) / T))

where *T*, the target entries per shard, is the smallest integer for which
the shards beyond one per value fit the budget: ``sum(shards(v) - 1) <= budget``.
Frequent values get shards in proportion to their frequency and rare ones get
one (a value with 35% of the items gets more shards than one with 1%, until the
cap), and *T* is never below what the cap forces: ``max(c) / max_shards``.

**Why a cap of 64.** A query fans out over every shard of its value, so the
cap is the fan-out a page may cost. The guideline is that a hot value's shards
should be about ten times the partitions they must spread over: ten keys per
partition make the hash spread even (one key per partition would leave some
partitions with two keys and some with none). 64 shards spread a value over
about six partitions, 6,000 writes/s during a load and 18,000 reads/s, which is
more than any single value of an IP dataset receives; a larger dataset raises
``max_shards`` and the budget together.

**Assignment.** ``ipmeta.keys.shard_of`` hashes the range start, so a reload of
the same data puts every range in the same shard.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipmeta import keys
from ipmeta.ips import Family

#: Shards beyond one per value that the index may use.
DEFAULT_SHARD_BUDGET = 2048
#: The most shards (and so the widest query fan-out) of one value.
DEFAULT_MAX_SHARDS = 64


def plan_shard_counts(
    counts: Mapping[str, int], *, budget: int = DEFAULT_SHARD_BUDGET, max_shards: int = DEFAULT_MAX_SHARDS
) -> tuple[dict[str, int], int]:
    """Shards per value and the target entries per shard *T* (see the module's rule)."""
    if not counts:
        return {}, 1

    def extra(target: int) -> int:
        return sum(min(max_shards, -(-count // target)) - 1 for count in counts.values())

    largest = max(counts.values())
    low, high = max(1, math.ceil(largest / max_shards)), max(1, largest)
    while low < high:  # the smallest target whose extra shards fit the budget
        middle = (low + high) // 2
        if extra(middle) <= budget:
            high = middle
        else:
            low = middle + 1
    return {value: min(max_shards, -(-count // low)) for value, count in counts.items()}, low


@dataclass(frozen=True)
class IndexPlan:
    """The reverse-index attributes ``prepare`` gives each range's first item."""

    value_field: str | None = None
    shards: Mapping[str, int] = field(default_factory=dict)
    target: int = 1
    flag_column: str | None = None
    flag_shards: int = 1
    flagged: int = 0

    def attributes(
        self, version: int, family: Family, start: int, values: Mapping[str, Any]
    ) -> dict[str, str]:
        sort_key = keys.index_sort_key(family, start)
        attributes: dict[str, str] = {}
        value = values.get(self.value_field) if self.value_field else None
        if self.value_field and value not in (None, ""):
            label = keys.value_label(value)
            shard = keys.shard_of(family, start, self.shards.get(label, 1))
            attributes[keys.GSI1_PARTITION_KEY] = keys.value_partition_key(
                version, self.value_field, label, shard
            )
            attributes[keys.GSI1_SORT_KEY] = sort_key
        if self.flag_column and values.get(self.flag_column) not in (None, ""):
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
                "most_shards": dict(top),
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

    The flag index is sharded by the same target: its flagged ranges are one
    "value" of the same rule.
    """
    counts: Counter[str] = Counter()
    flagged = 0
    for values in values_of_ranges:
        if value_field and values.get(value_field) not in (None, ""):
            counts[keys.value_label(values[value_field])] += 1
        if flag_column and values.get(flag_column) not in (None, ""):
            flagged += 1
    shards, target = plan_shard_counts(counts, budget=budget, max_shards=max_shards)
    flag_shards = min(max_shards, max(1, -(-flagged // target))) if flag_column else 1
    return IndexPlan(value_field, shards, target, flag_column, flag_shards, flagged)
