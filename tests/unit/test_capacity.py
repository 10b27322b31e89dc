"""The capacity model: partitions, the client, split for heat, the blog's four loads, and the bills."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest

from ipmeta.schema.settings import Front
from loader.planning.blog import reproduce_blog, synthetic_blog_file
from loader.planning.costs import (
    Batching,
    IndexWrites,
    UrlLogging,
    diff_read_costs,
    load_costs,
    lookup_costs,
    reload_month_costs,
)
from loader.planning.load_plan import index_shards, plan_load
from loader.planning.write_model import (
    LOADER_CLIENT,
    ON_DEMAND_START_PARTITIONS,
    PARTITION_WRITE_UNITS,
    Client,
    Limit,
    OrderKind,
    SplitForHeat,
    TableSetup,
    WriteOrder,
    estimate_load,
    hottest_share_series,
    key_hash,
    warm_throughput_for,
)

FAST_CLIENT = Client(concurrent_requests=400, batch_latency_ms=10.0)  # 1 M writes/s: never the limit
NEVER_SPLITS = SplitForHeat(after_seconds=math.inf)
EVEN_KEYS = {f"4#{number}": 1_000 for number in range(1, 1_001)}  # 1,000 keys of 1,000 items


def keys_sharing_a_start_partition(count: int) -> list[str]:
    """Bucket names that hash into the same one of a new on-demand table's partitions."""
    by_partition: dict[int, list[str]] = {}
    for number in itertools.count():
        name = f"4#{number}"
        group = by_partition.setdefault(key_hash(name) * ON_DEMAND_START_PARTITIONS >> 64, [])
        group.append(name)
        if len(group) == count:
            return group
    raise AssertionError("unreachable")


# -- partitions and the client ---------------------------------------------------------


@pytest.mark.parametrize(
    "table", [TableSetup.on_demand(), TableSetup.on_demand(100_000), TableSetup.provisioned(40_000)]
)
def test_one_key_never_takes_more_than_a_partition_a_second(table: TableSetup) -> None:
    # Given every item under one key, a client that could write a million a second,
    # and split for heat after a minute of a four-minute load
    order = WriteOrder.sorted({"0": 240_000})
    # When the load runs
    load = estimate_load(order, table, FAST_CLIENT, SplitForHeat(after_seconds=60))
    # Then no second holds more than one partition's 1,000 writes, and no split helped
    assert load.items <= PARTITION_WRITE_UNITS * math.ceil(load.seconds)
    assert load.writes_per_second == pytest.approx(PARTITION_WRITE_UNITS, rel=0.01)
    assert load.limited_by is Limit.ONE_KEY
    assert load.splits == 0


def test_items_over_a_kilobyte_take_more_write_units_each() -> None:
    load = estimate_load(
        WriteOrder.sorted({"0": 50_000}), TableSetup.on_demand(), FAST_CLIENT, item_bytes=1_500
    )

    assert load.writes_per_second == pytest.approx(PARTITION_WRITE_UNITS / 2, rel=0.01)


def test_shuffled_beats_sorted_on_the_same_file() -> None:
    per_bucket = synthetic_blog_file()

    sorted_load = estimate_load(WriteOrder.sorted(per_bucket), TableSetup.on_demand())
    shuffled_load = estimate_load(WriteOrder.shuffled(per_bucket), TableSetup.on_demand())

    assert shuffled_load.writes_per_second > 2 * sorted_load.writes_per_second
    assert sorted_load.limited_by is Limit.ONE_KEY
    assert shuffled_load.limited_by is Limit.HOTTEST_PARTITION


def test_the_hottest_partition_sets_a_shuffled_loads_rate() -> None:
    # Given three equal keys, two of them in one partition
    first, second = keys_sharing_a_start_partition(2)
    third = next(
        name
        for name in (f"6#{number:06x}" for number in itertools.count())
        if key_hash(name) >> 62 != key_hash(first) >> 62
    )
    order = WriteOrder.shuffled({first: 30_000, second: 30_000, third: 30_000})
    # When they are written evenly
    load = estimate_load(order, TableSetup.on_demand(), FAST_CLIENT, NEVER_SPLITS)
    # Then the shared partition takes 2/3 of every second's writes, and stops at 1,000 of them
    assert load.writes_per_second == pytest.approx(1_500)
    assert load.limited_by is Limit.HOTTEST_PARTITION


def test_more_partitions_raise_throughput_until_the_client_ceiling() -> None:
    client = Client(concurrent_requests=8, batch_latency_ms=10.0)  # 20,000 writes/s
    order = WriteOrder.shuffled(EVEN_KEYS)

    loads = [
        estimate_load(order, TableSetup.provisioned(wcu), client, NEVER_SPLITS)
        for wcu in (4_000, 8_000, 16_000, 32_000, 64_000)
    ]

    rates = [load.writes_per_second for load in loads]
    assert rates == sorted(rates)
    assert rates[0] < rates[2] < client.writes_per_second
    assert loads[-1].writes_per_second == pytest.approx(client.writes_per_second)
    assert loads[-1].limited_by is Limit.CLIENT
    assert all(load.limited_by is Limit.HOTTEST_PARTITION for load in loads[:3])


def test_the_client_ceiling_caps_however_many_partitions() -> None:
    one_thread = Client(concurrent_requests=1, batch_latency_ms=10.0)  # 2,500 writes/s

    load = estimate_load(WriteOrder.shuffled(EVEN_KEYS), TableSetup.provisioned(40_000), one_thread)

    assert load.writes_per_second == pytest.approx(2_500)
    assert load.limited_by is Limit.CLIENT


def test_a_provisioned_table_takes_no_more_than_its_capacity() -> None:
    load = estimate_load(WriteOrder.shuffled(EVEN_KEYS), TableSetup.provisioned(2_500), FAST_CLIENT)

    assert load.partitions_at_start == 3
    assert load.writes_per_second == pytest.approx(2_500)
    assert load.limited_by is Limit.TABLE


def test_table_setups_start_with_the_documented_partitions() -> None:
    assert TableSetup.on_demand().partitions == 4
    assert TableSetup.on_demand(2_000).partitions == 4
    assert TableSetup.on_demand(12_500).partitions == 13
    assert TableSetup.provisioned(10_000).partitions == 10


# -- split for heat -------------------------------------------------------------------


def test_split_for_heat_raises_a_shared_hot_partition_only_after_its_delay() -> None:
    # Given two keys in one partition, written evenly at a rate the client could double
    first, second = keys_sharing_a_start_partition(2)
    order = WriteOrder.shuffled({first: 150_000, second: 150_000})
    split = SplitForHeat(after_seconds=60)
    # When the load runs with and without split for heat
    split_load = estimate_load(order, TableSetup.on_demand(), FAST_CLIENT, split)
    unsplit_load = estimate_load(order, TableSetup.on_demand(), FAST_CLIENT, NEVER_SPLITS)
    short_load = estimate_load(
        WriteOrder.shuffled({first: 25_000, second: 25_000}), TableSetup.on_demand(), FAST_CLIENT, split
    )
    # Then the partition shares 1,000 writes/s for 60 s, and each key has its own after
    assert unsplit_load.seconds == pytest.approx(300)
    assert split_load.seconds == pytest.approx(60 + (300_000 - 60_000) / 2_000)
    assert (split_load.splits, split_load.partitions_at_end) == (1, 5)
    # And a load shorter than the delay never sees the split
    assert short_load.seconds == pytest.approx(50)
    assert short_load.splits == 0


def test_split_for_heat_in_write_order_follows_the_same_delay() -> None:
    first, second = keys_sharing_a_start_partition(2)
    alternating = [(first, 100), (second, 100)] * 1_000  # 200,000 items, interleaved
    order = WriteOrder(OrderKind.AS_WRITTEN, tuple(alternating))

    load = estimate_load(order, TableSetup.on_demand(), FAST_CLIENT, SplitForHeat(after_seconds=30))

    assert load.splits == 1
    assert load.seconds == pytest.approx(30 + (200_000 - 30_000) / 2_000, abs=1)


def test_a_partitions_heat_counts_from_when_it_got_hot_whichever_key_heated_it() -> None:
    # Given a minute of one key, then that key and a neighbour of its partition taking turns
    first, second = keys_sharing_a_start_partition(2)
    order = WriteOrder(OrderKind.AS_WRITTEN, ((first, 60_000), *[(second, 100), (first, 100)] * 300))
    # When split for heat waits 30 s
    load = estimate_load(order, TableSetup.on_demand(), FAST_CLIENT, SplitForHeat(after_seconds=30))
    # Then the partition, hot for a minute already, splits as soon as it has two keys to part
    assert load.splits == 1
    assert load.seconds == pytest.approx(60 + 60_000 / 2_000, abs=1)


def test_a_cool_partition_never_splits() -> None:
    first, second = keys_sharing_a_start_partition(2)
    slow_client = Client(concurrent_requests=1, batch_latency_ms=50.0)  # 500 writes/s, half a partition

    load = estimate_load(
        WriteOrder.shuffled({first: 60_000, second: 60_000}),
        TableSetup.on_demand(),
        slow_client,
        SplitForHeat(after_seconds=10),
    )

    assert load.splits == 0


# -- the blog -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blog() -> dict[str, Any]:
    return reproduce_blog()


def test_the_blogs_four_loads_each_come_within_15_percent(blog: dict[str, Any]) -> None:
    scenarios = blog["scenarios"]

    assert len(scenarios) == 4
    for scenario in scenarios:
        assert abs(scenario["model"] / scenario["blog"] - 1) <= scenario["within"] == 0.15, scenario


def test_each_blog_figure_comes_from_its_own_limit(blog: dict[str, Any]) -> None:
    limits = [scenario["limited_by"] for scenario in blog["scenarios"]]

    assert limits == [Limit.ONE_KEY, Limit.ONE_KEY, Limit.HOTTEST_PARTITION, Limit.CLIENT]
    # Sorted gains only where the key changes; shuffled loses what hashing leaves uneven
    # among the new table's four partitions.
    one_key, sorted_keys, shuffled, _ = (scenario["model"] for scenario in blog["scenarios"])
    assert one_key < sorted_keys < 1.5 * one_key
    assert 3_000 < shuffled < ON_DEMAND_START_PARTITIONS * PARTITION_WRITE_UNITS
    assert json.loads(json.dumps(blog)) == blog


def test_synthetic_files_share_their_sizes_and_differ_in_where_they_put_them() -> None:
    first, second = synthetic_blog_file(seed=0), synthetic_blog_file(seed=1)

    assert sum(first.values()) == sum(second.values()) == 360_000
    assert sorted(first.values()) == pytest.approx(sorted(second.values()), abs=2)
    assert first != second
    assert max(first.values()) / 360_000 < 0.06  # the ASN file's largest /8 holds 5.4%


# -- pre-warming ----------------------------------------------------------------------


def test_the_suggested_warm_throughput_finishes_in_time_when_fed_back() -> None:
    order = WriteOrder.shuffled(EVEN_KEYS)  # 1 M items
    client = Client(concurrent_requests=20, batch_latency_ms=10.0)  # 50,000 writes/s

    suggestion = warm_throughput_for(order, 60, client, NEVER_SPLITS)

    warm = suggestion["warm_write_units_per_second"]
    assert suggestion["pre_warming_needed"]
    assert estimate_load(order, TableSetup.on_demand(warm), client, NEVER_SPLITS).seconds <= 60
    assert estimate_load(order, TableSetup.on_demand(warm - 1_000), client, NEVER_SPLITS).seconds > 60


def test_no_pre_warming_is_suggested_when_a_new_table_is_fast_enough() -> None:
    suggestion = warm_throughput_for(WriteOrder.shuffled(EVEN_KEYS), 3_600)

    assert suggestion["warm_write_units_per_second"] == ON_DEMAND_START_PARTITIONS * 1_000
    assert not suggestion["pre_warming_needed"]


@pytest.mark.parametrize(
    ("order", "client", "limit"),
    [
        (WriteOrder.shuffled(EVEN_KEYS), LOADER_CLIENT, Limit.CLIENT),
        (WriteOrder.sorted({"4#1": 40_000, "4#2": 40_000}), FAST_CLIENT, Limit.ONE_KEY),
        (WriteOrder.shuffled({"big": 200_000, "small": 1_000}), FAST_CLIENT, Limit.ONE_KEY),
    ],
)
def test_no_warm_throughput_is_suggested_when_none_can_do(
    order: WriteOrder, client: Client, limit: Limit
) -> None:
    suggestion = warm_throughput_for(order, 60, client)

    assert suggestion["warm_write_units_per_second"] is None
    assert suggestion["reason"].startswith(str(limit))


# -- orders and the chart -------------------------------------------------------------


def test_a_written_sequence_becomes_runs_of_one_bucket() -> None:
    order = WriteOrder.as_written(["4#1", "4#1", "4#2", "4#1"])

    assert order.runs == (("4#1", 2), ("4#2", 1), ("4#1", 1))
    assert order.items_per_bucket() == {"4#1": 3, "4#2": 1}


def test_the_chart_shows_each_windows_hottest_bucket() -> None:
    per_bucket = {"4#1": 1_500, "4#2": 500}

    assert hottest_share_series(WriteOrder.sorted(per_bucket)) == [1.0, 0.5]
    assert hottest_share_series(WriteOrder.shuffled(per_bucket)) == [0.75, 0.75]


# -- the plan's costs and shards ------------------------------------------------------


def test_a_loads_write_and_storage_cost() -> None:
    costs = load_costs(1_000_000, item_bytes=1_500, index_entries=100_000, index_entry_bytes=200)

    assert costs["write_units"] == 2 * 1_000_000 + 100_000
    assert costs["write_usd"] == pytest.approx(2.1 * 0.625)
    stored = 1_000_000 * (1_500 + 100) + 100_000 * (200 + 100)
    assert costs["storage_usd_per_month"] == pytest.approx(stored / 2**30 * 0.25, abs=1e-4)


def test_a_deltas_diff_reads_its_base_by_size_not_by_item() -> None:
    # 3.6 M items of 600 bytes (700 stored): 2.5 GB, read eventually consistent in 4 KB steps
    costs = diff_read_costs(3_600_000, item_bytes=600)

    assert costs["read_units"] == math.ceil(3_600_000 * 700 / 4096 / 2)
    assert costs["read_usd"] == pytest.approx(costs["read_units"] / 1e6 * 0.125, abs=1e-4)
    assert costs["read_usd"] < load_costs(3_600_000, item_bytes=600)["write_usd"] / 10


def test_a_frequent_value_gets_ten_shards_per_partition_its_writes_need() -> None:
    shards = index_shards({"13335": 35_000, "174": 1_000}, items=100_000, writes_per_second=40_000)

    assert shards[0] == {
        "value": "13335",
        "entries": 35_000,
        "share": 0.35,
        "writes_per_second": 14_000,
        "partitions_needed": 14,
        "shards_at_least": 140,
    }
    assert (shards[1]["partitions_needed"], shards[1]["shards_at_least"]) == (1, 10)


def test_the_plan_is_json_and_names_the_hottest_bucket() -> None:
    order = WriteOrder.shuffled(synthetic_blog_file())

    plan = plan_load(order, frequent_values={"13335": 5_000}, index=IndexWrites(1_000, 120))

    assert json.loads(json.dumps(plan)) == plan
    assert plan["items"] == 360_000
    assert plan["buckets"] == 221
    assert plan["hottest_bucket"]["items"] == max(synthetic_blog_file().values())
    assert set(plan["loads"]) == {"on_demand_cold", "on_demand_warm", "provisioned"}
    assert len(plan["chart"]["hottest_bucket_share"]["sorted"]) == 360
    assert plan["reverse_index"][0]["shards_at_least"] == 10


# -- lookups --------------------------------------------------------------------------

# docs/deploy.md's lookup: a 256 MB Lambda for 12 ms, 0.139 Queries of 0.5 RRU after the range
# cache, 256 B of API Gateway access log (the url front: its own 216 B line, for 1% of the answers
# and every 4xx/5xx, 5% of the requests), 0.4 KB out.
LAMBDA_PER_MILLION = 0.20 + 1_000_000 * 0.25 * 0.012 * 0.0000133334
READS_PER_MILLION = 0.139 * 0.5 * 0.125
LOGS_PER_MILLION = 1_000_000 * 256 / 2**30 * 0.50
URL_LOGS_PER_MILLION = 1_000_000 * (190 + 26) * (0.05 + 0.95 * 0.01) / 2**30 * 0.50


@pytest.mark.parametrize(
    ("millions", "rest_api", "http_api"),
    [(1, 3.50, 1.00), (100, 350.00, 100.00)],
)
def test_lookup_costs_match_the_hand_computed_bill(millions: int, rest_api: float, http_api: float) -> None:
    costs = lookup_costs(millions * 1_000_000)

    shared = millions * (LAMBDA_PER_MILLION + READS_PER_MILLION)  # transfer: under 100 GB
    rest, http, url = costs["fronts"]["rest"], costs["fronts"]["http"], costs["fronts"]["url"]
    assert rest["total"] == pytest.approx(rest_api + shared + millions * LOGS_PER_MILLION, abs=1e-3)
    assert http["total"] == pytest.approx(http_api + shared + millions * LOGS_PER_MILLION, abs=1e-3)
    assert url["total"] == pytest.approx(shared + millions * URL_LOGS_PER_MILLION, abs=1e-3)
    assert url["breakdown"]["api_gateway"] == 0
    assert rest["per_million"] == pytest.approx(rest["total"] / millions, abs=1e-3)
    assert rest["breakdown"]["data_transfer"] == 0


def test_lookup_costs_agree_with_the_deploy_guide_and_meet_the_goals() -> None:
    # docs/deploy.md, "What a month costs": REST ≈ $3.87, HTTP API ≈ $1.37, url ≈ $0.25 per million
    at_100m = lookup_costs(100_000_000)["fronts"]
    assert round(at_100m["rest"]["per_million"], 2) == 3.87
    assert round(at_100m["http"]["per_million"], 2) == 1.37
    assert round(at_100m["url"]["per_million"], 2) == 0.25
    assert at_100m["rest"]["per_million"] <= 4.00
    assert at_100m["http"]["per_million"] <= 2.00
    # Issue 27's goal: the function URL at the floor of the bill
    assert at_100m["url"]["per_million"] <= 0.30


def test_api_gateway_tiers_and_paid_transfer_at_a_billion() -> None:
    costs = lookup_costs(1_000_000_000)

    assert costs["fronts"]["rest"]["breakdown"]["api_gateway"] == pytest.approx(333 * 3.50 + 667 * 2.80)
    assert costs["fronts"]["http"]["breakdown"]["api_gateway"] == pytest.approx(300 * 1.00 + 700 * 0.90)
    transfer_gb = 1_000_000_000 * 0.4 * 1_024 / 2**30
    for front in ("rest", "url"):
        assert costs["fronts"][front]["breakdown"]["data_transfer"] == pytest.approx(
            (transfer_gb - 100) * 0.09, abs=1e-3
        )


def test_a_cache_that_halves_reads_halves_the_read_bill() -> None:
    full, cached = (
        lookup_costs(100_000_000, dynamodb_reads_per_lookup=1.0),
        lookup_costs(100_000_000, dynamodb_reads_per_lookup=0.5),
    )

    assert cached["fronts"]["http"]["breakdown"]["dynamodb_reads"] == pytest.approx(
        full["fronts"]["http"]["breakdown"]["dynamodb_reads"] / 2
    )
    assert full["fronts"]["url"]["breakdown"]["dynamodb_reads"] == pytest.approx(6.25)


def test_each_front_pays_for_its_own_log_lines() -> None:
    costs = lookup_costs(1_000_000, log_bytes_per_request={Front.REST: 512})

    assert costs["fronts"]["rest"]["breakdown"]["logs"] == pytest.approx(2 * LOGS_PER_MILLION, abs=1e-4)
    assert costs["fronts"]["http"]["breakdown"]["logs"] == pytest.approx(LOGS_PER_MILLION, abs=1e-4)
    assert costs["fronts"]["url"]["breakdown"]["logs"] == pytest.approx(URL_LOGS_PER_MILLION, abs=1e-4)


def test_the_url_fronts_log_is_a_sample_and_every_error() -> None:
    # Every answer logged costs what an API Gateway line costs, about; a 1% sample a small share of it
    everything = lookup_costs(100_000_000, url_logging=UrlLogging(sample_rate=1.0, error_share=0.05))
    sampled = lookup_costs(100_000_000, url_logging=UrlLogging(sample_rate=0.01, error_share=0.0))
    per_line = 100 * 216 / 2**30 * 0.5 * 1e6
    assert everything["fronts"]["url"]["breakdown"]["logs"] == pytest.approx(per_line, abs=1e-3)
    assert sampled["fronts"]["url"]["breakdown"]["logs"] == pytest.approx(per_line / 100, abs=1e-3)


def test_behind_the_edge_cloudfront_counts_every_request_and_the_origin_the_misses() -> None:
    # Given 100 M single lookups, 40% answered by CloudFront's cache
    costs = lookup_costs(100_000_000, edge_hit_ratio=0.4)
    alone, edge = costs["fronts"]["rest"]["breakdown"], costs["fronts"]["rest+edge"]["breakdown"]
    # Then CloudFront bills every request past its 10 M free ones, at $1.00 per million (HTTPS)
    assert edge["cloudfront_requests"] == pytest.approx(90.0)
    # And the origin sees 60% of the requests and lookups
    for line in ("api_gateway", "lambda_requests", "lambda_duration", "dynamodb_reads", "logs"):
        assert edge[line] == pytest.approx(alone[line] * 0.6, abs=1e-3), line
    # The function URL's edge runs the Authorization-moving function on every request (2 M free)
    assert costs["fronts"]["url+edge"]["breakdown"]["cloudfront_functions"] == pytest.approx(9.8)
    assert costs["fronts"]["rest+edge"]["breakdown"]["cloudfront_functions"] == 0
    # Under 10 M requests a month CloudFront's requests cost nothing: the API Gateway fronts are
    # cheaper behind it; the function URL's pays its CloudFront Function past 2 M requests
    small = lookup_costs(5_000_000, edge_hit_ratio=0.2)["fronts"]
    for front in ("rest", "http"):
        assert small[f"{front}+edge"]["total"] < small[front]["total"], front
    assert small["url+edge"]["breakdown"]["cloudfront_requests"] == 0
    # Origin to CloudFront transfer is free, CloudFront's own first terabyte too
    assert lookup_costs(1_000_000_000)["fronts"]["url+edge"]["breakdown"]["data_transfer"] == 0


def test_a_batch_is_never_answered_by_the_edge() -> None:
    # Given every lookup in batches of 100: POSTs, never cached
    costs = lookup_costs(100_000_000, batching=Batching(share=1.0, size=100), edge_hit_ratio=0.9)
    direct, edge = costs["fronts"]["http"]["breakdown"], costs["fronts"]["http+edge"]["breakdown"]
    assert edge["dynamodb_reads"] == direct["dynamodb_reads"]
    assert edge["api_gateway"] == direct["api_gateway"]
    assert edge["cloudfront_requests"] == 0  # 1 M requests, within the free 10 M


def test_following_every_release_as_deltas_costs_a_fraction_of_full_reloads() -> None:
    # GeoLite2-City: 3.59 M items, about 1.2% drifting per release, twice a week
    month = reload_month_costs(3_591_359, 584, 0.012, max_chain=8, threshold=0.25)

    full_release = load_costs(3_591_359, 584)["write_usd_replacing_a_version"]
    assert month["full_usd_per_month"] == pytest.approx(full_release * 104 / 12, abs=0.01)
    assert month["releases_per_full_load"] == 9  # a full load, then 8 deltas on it
    deltas = sum(
        load_costs(round(k * 0.012 * 3_591_359), 584)["write_usd_replacing_a_version"]
        + diff_read_costs(3_591_359, 584)["read_usd"]
        for k in range(1, 9)
    )
    assert month["delta_usd_per_month"] == pytest.approx((full_release + deltas) / 9 * 104 / 12, abs=0.01)
    assert month["delta_usd_per_month"] < month["full_usd_per_month"] / 4
    # Releases drifting fast reach the threshold first: fewer deltas per full load
    assert reload_month_costs(3_591_359, 584, 0.1, max_chain=8, threshold=0.25)["releases_per_full_load"] == 3


def test_a_batch_is_one_request_but_a_read_and_a_duration_per_lookup() -> None:
    # Given 100 M lookups, a quarter of them in batches of 50
    batching = Batching(share=0.25, size=50)
    costs = lookup_costs(100_000_000, batching=batching)
    requests = 75_000_000 + 25_000_000 / 50
    assert costs["requests_per_month"] == requests
    rest = costs["fronts"]["rest"]["breakdown"]
    # Then per request: API Gateway, Lambda's request fee, one access-log line
    assert rest["api_gateway"] == pytest.approx(requests / 1e6 * 3.50, abs=1e-3)
    assert rest["lambda_requests"] == pytest.approx(requests / 1e6 * 0.20, abs=1e-3)
    assert rest["logs"] == pytest.approx(requests / 1e6 * LOGS_PER_MILLION, abs=1e-3)
    # And per lookup: the reads, the duration and the bytes answered
    alone = lookup_costs(100_000_000)["fronts"]["rest"]["breakdown"]
    for line in ("dynamodb_reads", "lambda_duration", "data_transfer"):
        assert rest[line] == alone[line], line
    total = costs["fronts"]["rest"]["total"]
    assert costs["fronts"]["rest"]["per_million"] == pytest.approx(total / 100, abs=1e-3)


def test_the_lookup_metrics_cost_the_same_from_a_million_to_a_billion_lookups() -> None:
    from loader.planning.costs import METRICS_LINE_BYTES, metrics_month_costs

    # Given the same containers, whatever the volume
    bills = [lookup_costs(lookups) for lookups in (1_000_000, 10_000_000, 100_000_000, 1_000_000_000)]
    metrics = [bill["metrics"] for bill in bills]
    # Then the metrics cost does not move: it is containers × minutes, and 8 metrics
    assert all(entry == metrics[0] for entry in metrics)
    lines = 10 * 730 * 60
    logs = lines * (METRICS_LINE_BYTES + 26) / 2**30 * 0.50
    assert metrics[0]["breakdown"] == {"metrics": 8 * 0.30, "logs": pytest.approx(logs, abs=1e-4)}
    assert metrics[0]["total"] == pytest.approx(2.56, abs=0.01)
    # And a request logs only its access line (the url front its own, sampled): no metric line per request
    for bill in bills:
        assert bill["assumptions"]["log_bytes_per_request"] == {"rest": 256, "http": 256, "url": 216}
    # And it grows with the containers that publish, every minute
    assert metrics_month_costs(20)["breakdown"]["logs"] == pytest.approx(2 * logs, abs=1e-4)


def test_the_modelled_metrics_line_holds_a_real_one_at_any_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipmeta.api.dependencies import LookupCounts
    from ipmeta.api.observability import MinuteMetrics
    from ipmeta.schema.settings import LOOKUP_METRICS
    from loader.planning.costs import METRICS_LINE_BYTES

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    counts, written = LookupCounts(), list[str]()
    for name in LOOKUP_METRICS:
        counts.add(name, 10**15)  # a container's counts could never reach this in a minute
    MinuteMetrics(counts, write=written.append).publish()
    [line] = written
    assert len(line.encode()) + 1 <= METRICS_LINE_BYTES
