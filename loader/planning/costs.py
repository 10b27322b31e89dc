"""What a load's writes and storage cost, and what lookups cost a month behind each API front.

List prices in us-east-1; docs/deploy.md ("What a month costs") has the
arithmetic and ``docs/capacity.md`` the sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from ipmeta.schema.settings import LOOKUP_METRICS
from loader.planning.write_model import GB, ITEM_OVERHEAD_BYTES, KB, MILLION, write_units_per_item

WRITE_PRICE_PER_MILLION: Final = 0.625
READ_PRICE_PER_MILLION: Final = 0.125
STORAGE_PRICE_PER_GB_MONTH: Final = 0.25
#: An eventually consistent read of up to 4 KB.
READ_UNITS_PER_LOOKUP_READ: Final = 0.5
LAMBDA_PRICE_PER_MILLION: Final = 0.20
LAMBDA_PRICE_PER_GB_SECOND: Final = 0.0000133334
LOGS_PRICE_PER_GB: Final = 0.50
TRANSFER_PRICE_PER_GB: Final = 0.09
TRANSFER_FREE_GB: Final = 100
#: (millions of requests in the tier, dollars per million), cheapest tier last.
REST_API_TIERS: Final = ((333, 3.50), (667, 2.80), (math.inf, 2.38))
HTTP_API_TIERS: Final = ((300, 1.00), (math.inf, 0.90))


class ApiFront(StrEnum):
    REST = "rest"
    HTTP = "http"


# -- costs -------------------------------------------------------------------------------


def load_costs(
    items: int,
    item_bytes: float,
    index_entries: int = 0,
    index_entry_bytes: float = 0,
    *,
    write_units: int | None = None,
) -> dict[str, Any]:
    """What writing a load costs on demand, and what storing it costs a month.

    ``item_bytes`` is the mean item size; ``write_units`` the items' own count when measured
    (items of a mean size under 1 KB may still take two units each when some are larger).
    """
    write_units = write_units if write_units is not None else items * write_units_per_item(item_bytes)
    stored_bytes = items * (item_bytes + ITEM_OVERHEAD_BYTES)
    if index_entries:
        write_units += index_entries * write_units_per_item(index_entry_bytes)
        stored_bytes += index_entries * (index_entry_bytes + ITEM_OVERHEAD_BYTES)
    write_usd = write_units / MILLION * WRITE_PRICE_PER_MILLION
    return {
        "write_units": write_units,
        "write_usd": round(write_usd, 4),
        # The previous version's items are deleted after activation: as many write units again.
        "write_usd_replacing_a_version": round(2 * write_usd, 4),
        "storage_gb": round(stored_bytes / GB, 4),
        "storage_usd_per_month": round(stored_bytes / GB * STORAGE_PRICE_PER_GB_MONTH, 4),
    }


def diff_read_costs(base_items: int, item_bytes: float) -> dict[str, Any]:
    """What a delta's diff pays to read its base: every base item once, by eventually consistent Query.

    A Query is billed on the bytes it returns, in 4 KB steps of half a read unit, so the
    base costs its size, not its item count (``loader.pipeline.diff``).
    """
    read_units = math.ceil(
        base_items * (item_bytes + ITEM_OVERHEAD_BYTES) / 4096 * READ_UNITS_PER_LOOKUP_READ
    )
    return {"read_units": read_units, "read_usd": round(read_units / MILLION * READ_PRICE_PER_MILLION, 4)}


#: MaxMind publishes GeoLite2 twice a week.
TWICE_A_WEEK_PER_MONTH: Final = 2 * 52 / 12


def reload_month_costs(
    items: int,
    item_bytes: float,
    share_per_release: float,
    *,
    releases_per_month: float = TWICE_A_WEEK_PER_MONTH,
    max_chain: int,
    threshold: float,
) -> dict[str, Any]:
    """What following every release costs a month: full reloads, against deltas under ``--delta auto``.

    Every delta is computed against its base, so the k-th after a full version
    holds about k × ``share_per_release`` of it (releases drift apart). A
    delta's items are written, and deleted once it is superseded; its diff
    reads the base once. ``auto`` writes a full version again (whose items are
    deleted when it is replaced) once ``max_chain`` deltas sit on the base or
    the next would exceed ``threshold``: a cycle of one full load and its deltas.
    """
    replacing = load_costs(items, item_bytes)["write_usd_replacing_a_version"]
    reading_the_base = diff_read_costs(items, item_bytes)["read_usd"]
    cycle_usd, deltas = replacing, 0
    while deltas < max_chain and (deltas + 1) * share_per_release <= threshold:
        deltas += 1
        written = round(deltas * share_per_release * items)
        cycle_usd += load_costs(written, item_bytes)["write_usd_replacing_a_version"] + reading_the_base
    return {
        "releases_per_month": round(releases_per_month, 2),
        "full_usd_per_month": round(replacing * releases_per_month, 2),
        "delta_usd_per_month": round(cycle_usd / (deltas + 1) * releases_per_month, 2),
        "releases_per_full_load": deltas + 1,
    }


def tiered_cost(millions: float, tiers: Sequence[tuple[float, float]]) -> float:
    """Dollars for ``millions`` of requests priced by volume tiers, cheapest last."""
    cost, left = 0.0, millions
    for size, price in tiers:
        inside = min(left, size)
        cost += inside * price
        left -= inside
        if left <= 0:
            break
    return cost


#: CloudWatch Logs bills each event's bytes plus this much.
LOG_EVENT_OVERHEAD_BYTES: Final = 26
#: One access-log line: about 210 bytes with typical values, rounded up;
#: ``tests/infra/test_lookup_api.py`` renders both fronts' synthesized formats to check it.
ACCESS_LOG_LINE_BYTES: Final = 230
#: What one request logs: its access-log line only, since the lookup function drops
#: Lambda's START, END and REPORT lines and publishes no per-request metric line (``stacks/api.py``).
DEFAULT_LOG_BYTES: Final = dict.fromkeys(ApiFront, ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES)
#: A warm lookup's billed duration at 256 MB: ~0.9 ms of handler CPU measured locally
#: (``bench/lookup.py``), about 6.9× longer on the 0.145 vCPU that 256 MB buys, plus a
#: ~5 ms in-region Query; rounded up (docs/deploy.md, "One lookup").
DEFAULT_LOOKUP_MS: Final = 12.0
_API_TIERS: Final = {ApiFront.REST: REST_API_TIERS, ApiFront.HTTP: HTTP_API_TIERS}


@dataclass(frozen=True)
class Batching:
    """How lookups arrive: ``share`` of them in ``POST /v1/batch`` requests of ``size`` addresses
    on average, the rest one per request. A batch is one API request, one Lambda invocation and
    one access-log line, but a Query per address and dataset, and the duration of every lookup."""

    share: float = 0.0
    size: float = 1.0

    def requests(self, lookups: float) -> float:
        return lookups * (1 - self.share) + lookups * self.share / self.size


NO_BATCHES: Final = Batching()

#: CloudWatch custom metrics, per metric-month (first 10,000 metrics; billed by the hour a metric
#: receives data, so this is the bound of a metric published every hour).
METRIC_PRICE_PER_MONTH: Final = 0.30
#: The lookup function's metrics line (``ipmeta.api.observability``): its metrics, all of them in
#: every line; the line's bytes, rounded up (``tests/unit/test_capacity.py`` measures a real one);
#: at most one line a minute per container.
LOOKUP_METRICS_COUNT: Final = len(LOOKUP_METRICS)
METRICS_LINE_BYTES: Final = 750
MINUTES_PER_MONTH: Final = 730 * 60
#: Containers the model prices lines for, each publishing every minute of the month: about ten
#: times the concurrency a billion lookups a month need (386 a second × 12 ms ≈ 4.6 busy containers).
DEFAULT_METRIC_CONTAINERS: Final = 10


def metrics_month_costs(containers: int = DEFAULT_METRIC_CONTAINERS) -> dict[str, Any]:
    """What the lookup function's metrics cost a month: the same at any number of lookups.

    A container publishes one line a minute at most, whatever it served in that minute, so the
    bound is containers × minutes × the line's bytes, plus the metrics themselves; a request adds
    nothing (an addition in memory).
    """
    lines = containers * MINUTES_PER_MONTH
    logs = lines * (METRICS_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES) / GB * LOGS_PRICE_PER_GB
    metrics = LOOKUP_METRICS_COUNT * METRIC_PRICE_PER_MONTH
    return {
        "containers": containers,
        "lines_per_month": lines,
        "line_bytes": METRICS_LINE_BYTES,
        "custom_metrics": LOOKUP_METRICS_COUNT,
        "breakdown": {"metrics": round(metrics, 4), "logs": round(logs, 4)},
        "total": round(metrics + logs, 4),
    }


def lookup_costs(
    lookups_per_month: int,
    *,
    lambda_memory_mb: int = 256,
    lambda_ms: float = DEFAULT_LOOKUP_MS,
    dynamodb_reads_per_lookup: float = 1.0,
    log_bytes_per_request: Mapping[ApiFront, float] = DEFAULT_LOG_BYTES,
    response_bytes: float = 0.4 * KB,
    batching: Batching = NO_BATCHES,
    metric_containers: int = DEFAULT_METRIC_CONTAINERS,
) -> dict[str, Any]:
    """The monthly bill of ``lookups_per_month`` lookups behind each API front (docs/deploy.md's model).

    API Gateway, Lambda's requests and the access logs count API requests; DynamoDB's reads, Lambda's
    duration and the bytes answered count lookups (``batching`` says how many requests they take).
    ``per_million`` is per million lookups. ``metrics`` (``metrics_month_costs``) is beside the fronts.
    """
    log_bytes = {**DEFAULT_LOG_BYTES, **log_bytes_per_request}
    requests = batching.requests(lookups_per_month)
    gb_seconds = lookups_per_month * lambda_memory_mb / KB * lambda_ms / 1_000
    transfer_gb = lookups_per_month * response_bytes / GB
    shared = {
        "lambda_requests": requests / MILLION * LAMBDA_PRICE_PER_MILLION,
        "lambda_duration": gb_seconds * LAMBDA_PRICE_PER_GB_SECOND,
        "dynamodb_reads": lookups_per_month
        / MILLION
        * dynamodb_reads_per_lookup
        * READ_UNITS_PER_LOOKUP_READ
        * READ_PRICE_PER_MILLION,
        "data_transfer": max(0.0, transfer_gb - TRANSFER_FREE_GB) * TRANSFER_PRICE_PER_GB,
    }
    fronts = {}
    for front in ApiFront:
        breakdown = {
            "api_gateway": tiered_cost(requests / MILLION, _API_TIERS[front]),
            **shared,
            "logs": requests * log_bytes[front] / GB * LOGS_PRICE_PER_GB,
        }
        total = sum(breakdown.values())
        fronts[str(front)] = {
            "total": round(total, 4),
            "per_million": round(total / lookups_per_month * MILLION, 4) if lookups_per_month else 0.0,
            "breakdown": {line: round(cost, 4) for line, cost in breakdown.items()},
        }
    return {
        "lookups_per_month": lookups_per_month,
        "requests_per_month": round(requests),
        "assumptions": {
            "lambda_memory_mb": lambda_memory_mb,
            "lambda_ms": lambda_ms,
            "dynamodb_reads_per_lookup": dynamodb_reads_per_lookup,
            "log_bytes_per_request": {str(front): size for front, size in log_bytes.items()},
            "response_bytes": response_bytes,
            "transfer_gb": round(transfer_gb, 2),
            "batch_share": batching.share,
            "batch_size": batching.size,
        },
        "fronts": fronts,
        "metrics": metrics_month_costs(metric_containers),
    }
