"""What a load's writes and storage cost, and what lookups cost a month behind each API front.

List prices in us-east-1; docs/deploy.md ("What a month costs") has the
arithmetic and ``docs/capacity.md`` the sources.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ipmeta.schema.settings import LOOKUP_METRICS, Front
from loader.item_units import write_units as write_units_per_item
from loader.planning.write_model import (
    GB,
    INDEX_KEY_BYTES,
    ITEM_OVERHEAD_BYTES,
    KB,
    MILLION,
)

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
#: A function URL has no charge of its own: the Lambda request it makes is the bill.
URL_TIERS: Final = ((math.inf, 0.0),)
#: CloudFront (``edge``), North America and Europe: HTTPS requests ($0.0100 per 10,000), the first
#: 10 M a month free; transfer out $0.085 per GB for the first 10 TB, the first 1 TB free. Origin
#: fetches (AWS origins to CloudFront) cost nothing. CloudFront Functions $0.10 per million, 2 M free.
CLOUDFRONT_REQUEST_TIERS: Final = ((10, 0.0), (math.inf, 1.00))
CLOUDFRONT_TRANSFER_PRICE_PER_GB: Final = 0.085
CLOUDFRONT_TRANSFER_FREE_GB: Final = 1024
CLOUDFRONT_FUNCTION_TIERS: Final = ((2, 0.0), (math.inf, 0.10))


# -- costs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexWrites:
    """A load's reverse-lookup index entries: each a GSI write of its own, in every region's GSIs.

    ``entries`` counts the ranges-by-value entries and the flagged ones; ``entry_bytes`` is an
    entry's size (the item's projected attributes and the index keys)."""

    entries: int
    entry_bytes: float
    #: The indexes' partition keys (value shards and packs, flag shards): what their count queries.
    keys: int = 0

    @classmethod
    def of_report(cls, report: Mapping[str, Any], item_bytes: float) -> IndexWrites | None:
        """From a load report's ``value_index`` and ``flag_index``; None for a load with neither."""
        value_index, flag_index = report.get("value_index"), report.get("flag_index")
        if not value_index and not flag_index:
            return None
        entries = (value_index or {}).get("entries", 0) + (flag_index or {}).get("items", 0)
        index_keys = (value_index or {}).get("keys", 0) + (flag_index or {}).get("shards", 0)
        return cls(entries, item_bytes + INDEX_KEY_BYTES, index_keys)


def table_bytes(items: int, item_bytes: float, index_entries: int = 0) -> float:
    """A version's table items by the model: ``items`` of the mean size, and the index keys that
    ``index_entries`` of them carry (``INDEX_KEY_BYTES`` each, as an entry holds them). The dry
    run's ``item_bytes`` sizes an item before the load gives it its index keys."""
    return items * item_bytes + index_entries * INDEX_KEY_BYTES


def load_costs(
    items: int,
    item_bytes: float,
    index_entries: int = 0,
    index_entry_bytes: float = 0,
    *,
    write_units: int | None = None,
) -> dict[str, Any]:
    """What writing a load costs on demand, and what storing it costs a month.

    ``item_bytes`` is the mean item size before its index keys (``table_bytes``); ``write_units``
    the items' own count when measured (items of a mean size under 1 KB may still take two units
    each when some are larger).
    """
    stored_bytes = table_bytes(items, item_bytes, index_entries) + items * ITEM_OVERHEAD_BYTES
    if write_units is None:
        write_units = items * write_units_per_item(stored_bytes / items - ITEM_OVERHEAD_BYTES) if items else 0
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


#: A strongly consistent read of up to 4 KB, as the counts make in the table; a GSI reads half that.
CONSISTENT_READ_UNITS_PER_4KB: Final = 1.0
EVENTUAL_READ_UNITS_PER_4KB: Final = 0.5


@dataclass(frozen=True)
class CountedBytes:
    """What one count of a version reads: the bytes of each of its table partitions' items, and
    of each index key's entries (their projected attributes), as the dry run built them."""

    partitions: Sequence[int]
    index_keys: Sequence[int] = ()
    #: The write units of the version's items as the load writes them, index keys and all (a unit
    #: per KB begun of each item): what the plan bills its items' writes by.
    write_units: int | None = None


def count_read_costs(
    counted: CountedBytes | None,
    *,
    items: int = 0,
    item_bytes: float = 0.0,
    index: IndexWrites | None = None,
) -> dict[str, Any]:
    """What one count of a version reads in one region: home's before activation, and each replica
    region's arrival check again (``loader.store.partition_counts``).

    A ``Select=COUNT`` Query is billed as a Query that returned the items it counted: their
    sizes summed and rounded up to 4 KB per request. The table's counts read consistently
    (a unit per 4 KB), a partition at a time (a page of 1 MB is whole 4 KB steps, so a
    partition rounds up once); a GSI is read eventually consistent (half a unit), a key at a
    time. Without ``counted`` (a model of ``items`` of ``item_bytes``, and ``index``): the
    version's ``table_bytes``, its index keys included, as one partition, and each index key
    rounded up once, an upper bound. A region
    whose items are still arriving counts the short partitions again: not priced.
    """
    if counted is not None:
        table = sum(math.ceil(read / 4096) for read in counted.partitions)
        steps = sum(math.ceil(read / 4096) for read in counted.index_keys)
    else:
        table = math.ceil(table_bytes(items, item_bytes, index.entries if index else 0) / 4096)
        steps = 0
        if index is not None and index.entries:
            steps = math.ceil(index.entries * index.entry_bytes / 4096) + index.keys
    table_units = table * CONSISTENT_READ_UNITS_PER_4KB
    index_units = steps * EVENTUAL_READ_UNITS_PER_4KB
    units = table_units + index_units
    return {
        "read_units": units,
        "table_read_units": table_units,
        "index_read_units": index_units,
        "read_usd": round(units / MILLION * READ_PRICE_PER_MILLION, 4),
    }


#: MaxMind publishes GeoLite2 twice a week.
TWICE_A_WEEK_PER_MONTH: Final = 2 * 52 / 12


@dataclass(frozen=True)
class ReloadCycle:
    """A full version and the deltas ``--delta auto`` writes on it before the next full one: what
    each version costs in one region (``reload_month_costs``; ``regions`` bills its lines per region).

    ``written`` holds each version's items, the full one first; ``count`` is the full version's
    count as the dry run measured it (``count_read_costs``), else modelled."""

    items: int
    item_bytes: float
    written: tuple[int, ...]
    index: IndexWrites | None = None
    count: Mapping[str, Any] | None = None

    @property
    def versions(self) -> int:
        return len(self.written)

    def full_only(self) -> ReloadCycle:
        """The same version written full at every release."""
        return dataclasses.replace(self, written=(self.items,))

    def written_bytes(self) -> float:
        """What the cycle's versions write to the table, the full one's index keys included."""
        full, *deltas = self.written
        entries = self.index.entries if self.index else 0
        return table_bytes(full, self.item_bytes, entries) + sum(
            table_bytes(n, self.item_bytes) for n in deltas
        )

    def lines(self) -> dict[str, float]:
        """Dollars of one cycle in one region: each version's writes (and their deletes once it is
        replaced), the deltas' diffs reading the base, and activation's count of each version."""
        entries, entry_bytes = (self.index.entries, self.index.entry_bytes) if self.index else (0, 0.0)
        full, *deltas = self.written
        full_count = self.count or count_read_costs(
            None, items=full, item_bytes=self.item_bytes, index=self.index
        )
        return {
            # An indexed load has no deltas, so the index entries are the full version's alone
            "writes": load_costs(full, self.item_bytes, entries, entry_bytes)["write_usd_replacing_a_version"]
            + sum(load_costs(n, self.item_bytes)["write_usd_replacing_a_version"] for n in deltas),
            "diff_reads": len(deltas) * diff_read_costs(self.items, self.item_bytes)["read_usd"],
            "counts": full_count["read_usd"]
            + sum(count_read_costs(None, items=n, item_bytes=self.item_bytes)["read_usd"] for n in deltas),
        }


def reload_cycle(
    items: int,
    item_bytes: float,
    share_per_release: float,
    *,
    max_chain: int,
    threshold: float,
    index: IndexWrites | None = None,
    count: Mapping[str, Any] | None = None,
) -> ReloadCycle:
    """The cycle ``--delta auto`` follows when each release drifts ``share_per_release`` from the last.

    An indexed load (``index``) is always written full, index entries and all: its shard plans
    are whole-version, so ``--delta auto`` writes no delta for it. Every delta is computed
    against its base, so the k-th after a full version holds about k × ``share_per_release``
    of it (releases drift apart). ``auto`` writes a full version again once ``max_chain``
    deltas sit on the base or the next would exceed ``threshold``.
    """
    deltas = 0
    while index is None and deltas < max_chain and (deltas + 1) * share_per_release <= threshold:
        deltas += 1
    written = (items, *(round(k * share_per_release * items) for k in range(1, deltas + 1)))
    return ReloadCycle(items, item_bytes, written, index, count)


def reload_month_costs(
    items: int,
    item_bytes: float,
    share_per_release: float,
    *,
    releases_per_month: float = TWICE_A_WEEK_PER_MONTH,
    max_chain: int,
    threshold: float,
    index: IndexWrites | None = None,
    count: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What following every release costs a month in one region: full reloads, against deltas
    under ``--delta auto`` (``reload_cycle``).

    A delta's items are written, and deleted once it is superseded; its diff reads the base
    once; a full version's items are deleted when it is replaced. Every new version is
    counted before activation (``count_read_costs``; ``count``: the full version's, measured).
    """
    cycle = reload_cycle(
        items,
        item_bytes,
        share_per_release,
        max_chain=max_chain,
        threshold=threshold,
        index=index,
        count=count,
    )
    lines = cycle.lines()
    per_release = releases_per_month / cycle.versions
    return {
        "releases_per_month": round(releases_per_month, 2),
        "full_usd_per_month": round(sum(cycle.full_only().lines().values()) * releases_per_month, 2),
        "delta_usd_per_month": round(sum(lines.values()) * per_release, 2),
        "releases_per_full_load": cycle.versions,
        "breakdown": {line: round(usd * per_release, 2) for line, usd in lines.items()},
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
#: One API Gateway access-log line: about 210 bytes with typical values, rounded up;
#: ``tests/infra/test_lookup_api.py`` renders both gateways' synthesized formats to check it.
ACCESS_LOG_LINE_BYTES: Final = 230
#: One line of the function's own access log (the url front, ``ipmeta.api.fronts.access_log``): the
#: largest of its shapes, measured (an IPv6 caller refused on an IPv6 address: 189 bytes; a lookup
#: 141 to 166; ``bench/access_log.py``, bench/results/access_log.json), rounded up.
FUNCTION_ACCESS_LOG_LINE_BYTES: Final = 190
#: What one request logs behind API Gateway: its access-log line only, since the lookup function
#: drops Lambda's START, END and REPORT lines and publishes no per-request metric line
#: (``stacks/fronts/lookup_api.py``). Behind the url front: the function's line, for a sample
#: (``UrlLogging``).
DEFAULT_LOG_BYTES: Final = {
    Front.REST: ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES,
    Front.HTTP: ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES,
    Front.URL: FUNCTION_ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES,
}
#: A warm lookup's billed duration at 256 MB: ~0.9 ms of handler CPU for an uncached lookup,
#: measured locally through each front's event (``bench/lookup.py``), about 6.9x longer on the
#: 0.145 vCPU that 256 MB buys, plus a ~5 ms in-region Query; rounded up (docs/deploy.md, "One
#: lookup"). An upper bound: a lookup the range cache answers takes about a tenth of the CPU.
DEFAULT_LOOKUP_MS: Final = 12.0
#: DynamoDB Queries per lookup and dataset after each container's range cache (32 MB): a
#: Zipf(1.1) workload over the ASN dataset's ranges, 1 M lookups (bench/results/cache.json,
#: ``zipf.cache_on.queries_per_lookup``). The uniform worst case is 0.93 (``--reads-per-lookup 1``).
DEFAULT_READS_PER_LOOKUP: Final = 0.139
#: The share of edge requests answered from CloudFront's cache: the same Zipf(1.1) workload's
#: lookups whose exact address (and key) was asked within the hour before, at 100 M lookups a
#: month (``bench/edge.py``, bench/results/edge.json: 0.3658; 0.22 at 10 M, 0.43 at 300 M); a
#: cache entry is one address, not a range. An upper bound for one key (many keys split it).
DEFAULT_EDGE_HIT_RATIO: Final = 0.3658
_API_TIERS: Final = {Front.REST: REST_API_TIERS, Front.HTTP: HTTP_API_TIERS, Front.URL: URL_TIERS}


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


@dataclass(frozen=True)
class UrlLogging:
    """The function's access log behind the url front: ``sample_rate`` of the answers, and every
    answer of 4xx or 5xx, which ``error_share`` of the requests get (a workload's property: each
    10% more costs about $0.01 per million requests)."""

    sample_rate: float = 0.01
    error_share: float = 0.05

    @property
    def logged_share(self) -> float:
        return self.error_share + (1 - self.error_share) * self.sample_rate


@dataclass(frozen=True)
class Traffic:
    """What reaches the origin: every request, or behind ``edge`` the ones CloudFront's cache did not
    answer (a single lookup is cacheable, a batch is a POST and never is)."""

    lookups: float
    requests: float

    @classmethod
    def at_origin(cls, lookups: float, batching: Batching, hit_ratio: float) -> Traffic:
        single = lookups * (1 - batching.share)
        batched = lookups * batching.share
        return cls(single * (1 - hit_ratio) + batched, single * (1 - hit_ratio) + batched / batching.size)


def _origin_bill(
    front: Front, traffic: Traffic, unit: dict[str, float], log_bytes: float
) -> dict[str, float]:
    """API Gateway, Lambda, DynamoDB and logs for what reaches the function."""
    return {
        "api_gateway": tiered_cost(traffic.requests / MILLION, _API_TIERS[front]),
        "lambda_requests": traffic.requests / MILLION * LAMBDA_PRICE_PER_MILLION,
        "lambda_duration": traffic.lookups * unit["gb_seconds"] * LAMBDA_PRICE_PER_GB_SECOND,
        "dynamodb_reads": traffic.lookups / MILLION * unit["read_units"] * READ_PRICE_PER_MILLION,
        "logs": traffic.requests * log_bytes / GB * LOGS_PRICE_PER_GB,
    }


def _edge_bill(requests: float, transfer_gb: float, *, functions: bool) -> dict[str, float]:
    """CloudFront's own lines: every request, the key-moving function behind the URL, transfer out."""
    return {
        "cloudfront_requests": tiered_cost(requests / MILLION, CLOUDFRONT_REQUEST_TIERS),
        "cloudfront_functions": tiered_cost(requests / MILLION, CLOUDFRONT_FUNCTION_TIERS)
        if functions
        else 0.0,
        "data_transfer": max(0.0, transfer_gb - CLOUDFRONT_TRANSFER_FREE_GB)
        * CLOUDFRONT_TRANSFER_PRICE_PER_GB,
    }


def _priced(breakdown: dict[str, float], lookups: float) -> dict[str, Any]:
    total = sum(breakdown.values())
    return {
        "total": round(total, 4),
        "per_million": round(total / lookups * MILLION, 4) if lookups else 0.0,
        "breakdown": {line: round(cost, 4) for line, cost in breakdown.items()},
    }


def _traffic_assumptions(
    url_logging: UrlLogging, batching: Batching, edge_hit_ratio: float
) -> dict[str, Any]:
    return {
        "url_access_log": dataclasses.asdict(url_logging)
        | {"logged_share": round(url_logging.logged_share, 4)},
        "batch_share": batching.share,
        "batch_size": batching.size,
        "edge_hit_ratio": edge_hit_ratio,
    }


def lookup_costs(
    lookups_per_month: int,
    *,
    lambda_memory_mb: int = 256,
    lambda_ms: float = DEFAULT_LOOKUP_MS,
    dynamodb_reads_per_lookup: float = DEFAULT_READS_PER_LOOKUP,
    log_bytes_per_request: Mapping[Front, float] = DEFAULT_LOG_BYTES,
    response_bytes: float = 0.4 * KB,
    batching: Batching = NO_BATCHES,
    metric_containers: int = DEFAULT_METRIC_CONTAINERS,
    url_logging: UrlLogging = UrlLogging(),
    edge_hit_ratio: float = DEFAULT_EDGE_HIT_RATIO,
) -> dict[str, Any]:
    """The monthly bill of ``lookups_per_month`` lookups behind each front, and behind CloudFront.

    API Gateway, Lambda's requests and the access logs count API requests; DynamoDB's reads, Lambda's
    duration and the bytes answered count lookups (``batching`` says how many requests they take).
    Behind ``edge`` (``<front>+edge``) CloudFront counts every request and the bytes out, and the
    origin only what its cache did not answer (``edge_hit_ratio`` of the single lookups).
    ``per_million`` is per million lookups. ``metrics`` (``metrics_month_costs``) is beside the fronts.
    """
    log_bytes = {**DEFAULT_LOG_BYTES, **log_bytes_per_request}
    logged = dict.fromkeys(Front, 1.0) | {Front.URL: url_logging.logged_share}
    unit = {
        "gb_seconds": lambda_memory_mb / KB * lambda_ms / 1_000,
        "read_units": dynamodb_reads_per_lookup * READ_UNITS_PER_LOOKUP_READ,
    }
    transfer_gb = lookups_per_month * response_bytes / GB
    direct = Traffic(lookups_per_month, batching.requests(lookups_per_month))
    cached = Traffic.at_origin(lookups_per_month, batching, edge_hit_ratio)
    bills: dict[str, dict[str, float]] = {}
    for front in Front:
        bytes_per_request = log_bytes[front] * logged[front]
        bills[str(front)] = {
            **_origin_bill(front, direct, unit, bytes_per_request),
            "data_transfer": max(0.0, transfer_gb - TRANSFER_FREE_GB) * TRANSFER_PRICE_PER_GB,
        }
        bills[f"{front}+edge"] = {
            **_origin_bill(front, cached, unit, bytes_per_request),
            **_edge_bill(direct.requests, transfer_gb, functions=front is Front.URL),
        }
    # The fronts first, then each behind CloudFront
    fronts = {name: _priced(bills[name], lookups_per_month) for name in sorted(bills, key=lambda n: "+" in n)}
    return {
        "lookups_per_month": lookups_per_month,
        "requests_per_month": round(direct.requests),
        "assumptions": {
            "lambda_memory_mb": lambda_memory_mb,
            "lambda_ms": lambda_ms,
            "dynamodb_reads_per_lookup": dynamodb_reads_per_lookup,
            "log_bytes_per_request": {str(front): size for front, size in log_bytes.items()},
            **_traffic_assumptions(url_logging, batching, edge_hit_ratio),
            "response_bytes": response_bytes,
            "transfer_gb": round(transfer_gb, 2),
            "edge_origin_requests_per_month": round(cached.requests),
        },
        "fronts": fronts,
        "metrics": metrics_month_costs(metric_containers),
    }
