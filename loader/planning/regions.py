"""What serving from several regions costs (``replicaRegions``): what each region adds to one region's bill.

List prices in us-east-1, as ``costs`` uses; docs/deploy.md ("Several regions") has the arithmetic.

- **Replicated writes.** Every write in home is written again in each replica
  region, billed there as a replicated write request unit at the write price (on
  demand): a load's write bill, and its old version's deletes, once per region.
- **Replication transfer.** The replicated items' bytes leave home for each replica
  region, at the inter-region transfer price.
- **The counts**: home's activation reads every item of each new version once, and
  each replica region's arrival check again, with its index entries in that region's
  GSIs (``costs.count_read_costs``: a ``Select=COUNT`` Query is billed on what it
  reads, consistently in the table); and one run a minute that finds the region
  current (a few consistent GetItems). While a version's items are still arriving in a
  region, its check counts again every ``DEFAULT_POLL_SECONDS`` for ``ARRIVAL_WAIT_SECONDS``
  of each run, a run a minute (``arrival_count_passes``); each pass is priced as a whole
  count, since items replicate in no order and any partition may be short until the last
  one arrives (a pass recounts only the short partitions, so this is an upper bound).
- **Storage** (and point-in-time recovery) in every region.
- **Lookups** split across the regions; each region's API Gateway tiers its own requests.
- **Fixed, per replica region:** its alarms, its topic's key, its copies of the secrets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from ipmeta.schema.settings import Front
from loader.planning.costs import (
    LAMBDA_PRICE_PER_GB_SECOND,
    LAMBDA_PRICE_PER_MILLION,
    NO_BATCHES,
    READ_PRICE_PER_MILLION,
    TWICE_A_WEEK_PER_MONTH,
    Batching,
    IndexWrites,
    ReloadCycle,
    count_read_costs,
    load_costs,
    lookup_costs,
    table_bytes,
)
from loader.planning.write_model import GB, KB, MILLION
from loader.settings import ARRIVAL_PERIOD_SECONDS, ARRIVAL_WAIT_SECONDS, DEFAULT_POLL_SECONDS

#: Data transfer from us-east-1 to another AWS region, per GB.
INTER_REGION_TRANSFER_PER_GB: Final = 0.02
#: Continuous backups (point-in-time recovery) of each replica, per GB-month.
PITR_PRICE_PER_GB_MONTH: Final = 0.20
#: A secret's replica is billed as a secret.
SECRET_PER_MONTH: Final = 0.40
#: The region's alarm topic's customer-managed key (``alarmTopicEncryption``).
TOPIC_KEY_PER_MONTH: Final = 1.00
ALARM_METRIC_PER_MONTH: Final = 0.10
#: A replica region's alarm metrics (``stacks/monitoring/alarm_table.py``): the front's 5xx, the
#: lookup's throttles, the replica's throttled reads (three operations), and RegionBehind.
REGION_ALARM_METRICS: Final = 1 + 1 + 3 + 1
#: Secrets each replica region holds a copy of: the page-token key, and the front's keys.
REGION_SECRETS: Final = 2
#: The arrival check runs every minute (``stacks/regions/arrival_check.py``): its size, and a run
#: that finds every pointer current (a consistent read of the datasets' list and, per dataset,
#: of home's pointer and the region's).
ARRIVAL_MEMORY_MB: Final = 512
ARRIVAL_RUNS_PER_MONTH: Final = 60 * 24 * 30
ARRIVAL_IDLE_SECONDS: Final = 0.2
CONSISTENT_READ_UNITS: Final = 1.0
#: How long after a version's pointer reaches a replica region its last items may still be
#: arriving, by default: the longest delay of the simulation's late items (``bench.replication``,
#: 5 to 30 s), well past global tables' usual lag of about a second (``--arrival-seconds``).
DEFAULT_ARRIVING_SECONDS: Final = 30.0


def arrival_count_passes(
    arriving_seconds: float,
    *,
    period: float = ARRIVAL_PERIOD_SECONDS,
    wait: float = ARRIVAL_WAIT_SECONDS,
    poll: float = DEFAULT_POLL_SECONDS,
) -> int:
    """The counts a replica region's check makes of a version whose items are still arriving
    ``arriving_seconds`` after its pointer did: a run every ``period`` counts at once, then again
    every ``poll`` until ``wait``; the first pass at or after the last arrival finds it whole.
    At most: a run is taken to start as the pointer arrives (a later start counts fewer times)."""
    per_run = math.floor(wait / poll) + 1  # passes at 0, poll, ... up to wait into a run
    run = math.floor(arriving_seconds / period)
    into = math.ceil((arriving_seconds - run * period) / poll)  # the pass in that run at or after it
    if into < per_run:
        return run * per_run + into + 1
    return (run + 1) * per_run + 1  # that run's passes all came first: the next run's first


def replicated_load_costs(
    items: int,
    item_bytes: float,
    regions: int,
    index: IndexWrites | None = None,
    count: Mapping[str, Any] | None = None,
    *,
    arriving_seconds: float = DEFAULT_ARRIVING_SECONDS,
) -> dict[str, Any]:
    """One load written in home and replicated to ``regions`` - 1 replica regions.

    Each region's GSIs are its own: a replicated item is written again into them there, so the
    index entries are written (and billed) in every region as the items are. ``count`` is one
    region's count of the version (``costs.count_read_costs``, the plan's from each partition's
    items; else the items as one partition): made once in home, and in every replica region at
    each pass of its check while the items are still arriving (``arrival_count_passes``)."""
    one = load_costs(items, item_bytes, index.entries if index else 0, index.entry_bytes if index else 0)
    replicas = regions - 1
    transfer_gb = table_bytes(items, item_bytes, index.entries if index else 0) / GB * replicas
    check = (
        count
        if count is not None
        else count_read_costs(None, items=items, item_bytes=item_bytes, index=index)
    )
    passes = arrival_count_passes(arriving_seconds) if replicas else 0
    return {
        "regions": regions,
        "write_units": one["write_units"] * regions,
        "write_usd": round(one["write_usd"] * regions, 4),
        "write_usd_replacing_a_version": round(one["write_usd_replacing_a_version"] * regions, 4),
        "replication_transfer_gb": round(transfer_gb, 3),
        "replication_transfer_usd": round(transfer_gb * INTER_REGION_TRANSFER_PER_GB, 4),
        "count_read_units_per_region": check["read_units"],
        "count_reads_usd": round(check["read_usd"] * (1 + replicas * passes), 4),
        "arrival_seconds": arriving_seconds,
        "arrival_check_passes": passes,
        "arrival_check_read_units_per_region": check["read_units"] * passes,
        "arrival_check_usd": round(check["read_usd"] * replicas * passes, 4),
        "storage_gb_per_region": one["storage_gb"],
        "storage_usd_per_month": round(one["storage_usd_per_month"] * regions, 4),
        "pitr_usd_per_month": round(one["storage_gb"] * PITR_PRICE_PER_GB_MONTH * regions, 4),
    }


def replicated_reload_costs(
    cycle: ReloadCycle,
    regions: int,
    *,
    releases_per_month: float = TWICE_A_WEEK_PER_MONTH,
    arriving_seconds: float = DEFAULT_ARRIVING_SECONDS,
) -> dict[str, Any]:
    """Following every release in ``regions`` regions: ``cycle``'s full version and its deltas
    (``costs.reload_cycle``), their writes in every region, their diff's reads in home alone, per
    replica region the bytes replicated there, and each new version's count: once in home, and
    in every replica region at each pass of its check while it arrives (``arrival_count_passes``)."""
    one = cycle.lines()
    replicas = regions - 1
    passes = arrival_count_passes(arriving_seconds) if replicas else 0
    per_month = releases_per_month / cycle.versions
    lines = {
        "writes": one["writes"] * regions,
        "diff_reads": one["diff_reads"],
        "replication_transfer": cycle.written_bytes() / GB * replicas * INTER_REGION_TRANSFER_PER_GB,
        # Each version counted in home before activation, and in every replica region again at
        # each pass of its check while the version's items are still arriving there
        "counts": one["counts"] * (1 + replicas * passes),
    }
    return {
        "regions": regions,
        "one_region_usd_per_month": round(sum(one.values()) * per_month, 2),
        "releases_per_full_load": cycle.versions,
        "breakdown": {line: round(usd * per_month, 2) for line, usd in lines.items()},
        "usd_per_month": round(sum(lines.values()) * per_month, 2),
    }


def region_fixed_costs(datasets: int = 1) -> dict[str, Any]:
    """What a replica region costs a month before any lookup or load: alarms, key, secrets, idle checks."""
    idle_reads = ARRIVAL_RUNS_PER_MONTH * CONSISTENT_READ_UNITS * (1 + 2 * datasets)
    idle_gb_seconds = ARRIVAL_RUNS_PER_MONTH * ARRIVAL_MEMORY_MB / KB * ARRIVAL_IDLE_SECONDS
    lines = {
        "alarms": REGION_ALARM_METRICS * ALARM_METRIC_PER_MONTH,
        "topic_key": TOPIC_KEY_PER_MONTH,
        "secret_replicas": REGION_SECRETS * SECRET_PER_MONTH,
        "arrival_check_runs": ARRIVAL_RUNS_PER_MONTH / MILLION * LAMBDA_PRICE_PER_MILLION
        + idle_gb_seconds * LAMBDA_PRICE_PER_GB_SECOND
        + idle_reads / MILLION * READ_PRICE_PER_MILLION,
    }
    return {
        "breakdown": {line: round(usd, 3) for line, usd in lines.items()},
        "usd_per_month": round(sum(lines.values()), 2),
    }


def regional_lookup_costs(
    lookups_per_month: int, regions: int, batching: Batching = NO_BATCHES
) -> dict[str, Any]:
    """``lookups_per_month`` spread evenly over ``regions``, each region billing its own share.

    API Gateway's tiers count each region's requests apart; the 100 GB of free transfer out is
    the account's, once, whatever the regions.
    """
    share = lookup_costs(lookups_per_month // regions, batching=batching)
    whole = lookup_costs(lookups_per_month, batching=batching)
    fronts: dict[str, Mapping[str, Any]] = {}
    for front in Front:
        one = share["fronts"][str(front)]
        transfer = whole["fronts"][str(front)]["breakdown"]["data_transfer"]
        per_region = one["total"] - one["breakdown"]["data_transfer"]
        total = per_region * regions + transfer
        fronts[str(front)] = {
            "total": round(total, 2),
            "per_million": round(total / lookups_per_month * MILLION, 4) if lookups_per_month else 0.0,
            "per_region": round(per_region, 2),
            "data_transfer": round(transfer, 2),
        }
    return {"lookups_per_month": lookups_per_month, "regions": regions, "fronts": fronts}
