"""The plan of a load: everything ``ipmeta plan`` reports, JSON-ready, from the write model and the costs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from loader.planning import write_model
from loader.planning.costs import IndexWrites, load_costs
from loader.planning.write_model import OrderKind, TableSetup, WriteOrder, hottest_share_series
from loader.reverse_index import KEYS_PER_PARTITION

# -- the plan of a load ------------------------------------------------------------------


def index_shards(
    frequent_values: Mapping[str, int], items: int, writes_per_second: float
) -> list[dict[str, Any]]:
    """K ≥ 10N for the reverse index's most frequent values.

    A value's index entries arrive at its share of the load's write rate; N is
    the partitions that rate needs, and ten keys a partition let hashing spread them.
    """
    shards = []
    for value, entries in sorted(frequent_values.items(), key=lambda pair: -pair[1]):
        rate = entries / items * writes_per_second
        needed = max(1, math.ceil(rate / write_model.PARTITION_WRITE_UNITS))
        shards.append(
            {
                "value": value,
                "entries": entries,
                "share": round(entries / items, 4),
                "writes_per_second": round(rate),
                "partitions_needed": needed,
                "shards_at_least": KEYS_PER_PARTITION * needed,
            }
        )
    return shards


def plan_load(
    order: WriteOrder,
    *,
    warm_write_units: int = 10_000,
    provisioned_write_units: int = 10_000,
    target_seconds: float = 600.0,
    client: write_model.Client = write_model.LOADER_CLIENT,
    split: write_model.SplitForHeat = write_model.DEFAULT_SPLIT,
    item_bytes: float = write_model.DEFAULT_ITEM_BYTES,
    index: IndexWrites | None = None,
    frequent_values: Mapping[str, int] | None = None,
    window: int = 1_000,
    write_units: int | None = None,
) -> dict[str, Any]:
    """Everything ``ipmeta plan`` reports about a load, JSON-ready.

    ``item_bytes`` is the mean item size, and ``write_units`` the load's own
    count (an item takes one per KB begun), when the dry run measured them (``index``: its GSIs').
    """
    entries, entry_bytes = (index.entries, index.entry_bytes) if index else (0, 0.0)
    per_bucket = order.items_per_bucket()
    items = order.items
    hottest = max(per_bucket, key=per_bucket.__getitem__) if per_bucket else None
    tables = {
        "on_demand_cold": TableSetup.on_demand(),
        "on_demand_warm": TableSetup.on_demand(warm_write_units),
        "provisioned": TableSetup.provisioned(provisioned_write_units),
    }
    loads = {
        name: write_model.estimate_load(order, table, client, split, item_bytes)
        for name, table in tables.items()
    }
    fastest = max(load.writes_per_second for load in loads.values())
    series = {
        str(OrderKind.SORTED): hottest_share_series(WriteOrder.sorted(per_bucket), window),
        str(OrderKind.SHUFFLED): hottest_share_series(WriteOrder.shuffled(per_bucket), window),
    }
    if order.kind is OrderKind.AS_WRITTEN:
        series[str(OrderKind.AS_WRITTEN)] = hottest_share_series(order, window)
    return {
        "items": items,
        "buckets": len(per_bucket),
        "hottest_bucket": {
            "name": hottest,
            "items": per_bucket[hottest] if hottest else 0,
            "share": round(per_bucket[hottest] / items, 4) if hottest else 0.0,
        },
        "order": str(order.kind),
        "client": client.to_json(),
        "split_for_heat": split.to_json(),
        "loads": {name: load.to_json() for name, load in loads.items()},
        "warm_throughput_for_target": write_model.warm_throughput_for(
            order, target_seconds, client, split, item_bytes
        ),
        "item_bytes": round(item_bytes, 1),
        "cost": load_costs(items, item_bytes, entries, entry_bytes, write_units=write_units),
        # The fastest load is the hottest the index's keys get.
        "reverse_index": index_shards(frequent_values, items, fastest) if frequent_values else None,
        "chart": {"window": window, "hottest_bucket_share": series},
    }
