"""`ipmeta plan`: before a load, how fast it will go, what gets hot, and what it and its lookups cost.

``ipmeta plan FILES…`` prepares the load exactly as ``ipmeta load`` would (a
dry run: nothing is written) and runs its real write order through the
write model of ``loader.planning``. ``--previous FILES…`` names the release
before it: both are prepared, diffed as a delta load would diff them
(``loader.pipeline.diff``), and the cost of a full reload is printed next to
the delta's. ``--reproduce-blog`` runs the AWS blog's four experiments through
the same model; ``--lookups-per-month N`` adds the monthly bill of N lookups
behind each API front, ``--batch-size`` and ``--batch-share`` how many of them
arrive in ``POST /v1/batch`` requests (which API Gateway and Lambda count once).
``--enrich-rows N`` prices annotating N addresses on AWS (``ipmeta enrich s3://…``, the
enrich state machine) next to the same addresses through the API, single and batched.
``--regions N`` prices all of it served from N regions (``replicaRegions``: home and
N - 1 replicas): replicated writes, storage, the arrival checks, lookups per region.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipmeta_cli.arguments import non_negative_float, positive_int, share
from ipmeta_cli.loading import add_source_arguments, load_options
from loader.planning.costs import (
    DEFAULT_EDGE_HIT_RATIO,
    DEFAULT_METRIC_CONTAINERS,
    DEFAULT_READS_PER_LOOKUP,
    NO_BATCHES,
    TWICE_A_WEEK_PER_MONTH,
    Batching,
    CountedBytes,
    IndexWrites,
    UrlLogging,
)
from loader.planning.regions import DEFAULT_ARRIVING_SECONDS
from loader.planning.write_model import DEFAULT_ITEM_BYTES


def planned_load(args: argparse.Namespace) -> tuple[dict[str, Any], Any, CountedBytes]:
    """The load's report, its write order and what a count of it reads, from a dry run in a
    temporary folder."""
    from ipmeta.schema import keys
    from loader.pipeline import driver
    from loader.pipeline.write import chunk_buckets
    from loader.planning.write_model import WriteOrder
    from loader.store.staging import LocalStaging

    with tempfile.TemporaryDirectory(prefix="ipmeta-plan-") as folder:
        staging = LocalStaging(Path(folder))
        prepared = driver.prepare(
            args.files, load_options(args, dry_run=True), None, staging, workers=args.workers
        )
        written = [
            keys.bucket_name(family, bucket)
            for index in range(prepared.chunks)
            for family, bucket in chunk_buckets(prepared.load_id, index, staging)
        ]
        report = prepared.report.to_dict()
        counted = counted_bytes(prepared.load_id, prepared.chunks, staging)
        if args.previous:
            report["delta_estimate"] = delta_estimate(args, prepared, staging)
    return report, WriteOrder.as_written(written), counted


def counted_bytes(load_id: str, chunks: int, staging: Any) -> CountedBytes:
    """What a count of the version reads (``costs.count_read_costs``): each table partition's
    items, and each index key's entries (their projected attributes), sized as DynamoDB sizes
    them, from the dry run's items as the load writes them (its cover list's few items aside);
    and the write units those items take, their index keys included (an item the keys push
    over 1 KB takes two)."""
    from collections import Counter

    from ipmeta.schema import keys
    from ipmeta.store.dynamodb import deserialize_item
    from loader.item_units import item_units
    from loader.pipeline.write import chunk_items

    partitions: Counter[str] = Counter()
    index_keys: Counter[tuple[str, str]] = Counter()
    write_units = 0
    indexes = {index.name: index for index in keys.INDEXES}
    for chunk in range(chunks):
        for wire in chunk_items(load_id, chunk, staging):
            item = deserialize_item(wire)
            units = item_units(item)
            partitions[str(item[keys.PARTITION_KEY])] += units.item_bytes
            write_units += units.table
            for name, entry in units.entries:
                index_keys[(name, str(item[indexes[name].partition_key]))] += entry
    return CountedBytes(list(partitions.values()), list(index_keys.values()), write_units)


def delta_estimate(args: argparse.Namespace, prepared: Any, staging: Any) -> dict[str, Any]:
    """What a delta over the previous release would write: both prepared, diffed as a load diffs."""
    from ipmeta.schema.ips import Family
    from loader.pipeline import driver, staged
    from loader.pipeline.diff import StagedBase, diff_partition
    from loader.pipeline.resolve import read_plan
    from loader.pipeline.write import chunk_items

    previous = driver.prepare(
        args.previous, load_options(args, dry_run=True), None, staging, workers=args.workers
    )
    items = (
        item for chunk in range(previous.chunks) for item in chunk_items(previous.load_id, chunk, staging)
    )
    base = StagedBase(items, previous.covers)
    plan = read_plan(staging, prepared.load_id)
    written = len(prepared.covers)  # a delta writes its own cover list and heads
    for spec in plan.partitions:
        lines = staged.decode_lines(staging.get(prepared.load_id, staged.items_name(spec.index)))
        pairs = [(int(line.split(",", 3)[2]), line) for line in lines]
        family: Family = 4 if spec.family == 4 else 6
        _, counts = diff_partition(
            family, pairs, spec.buckets, base, columns=plan.columns, column_types=plan.column_types
        )
        written += counts.items
    kept = {(spec.family, bucket) for spec in plan.partitions for bucket in spec.buckets}
    dropped = {bucket for bucket in base.buckets - kept if not _covered(bucket, prepared.covers)}
    return {
        "previous_items": previous.items,
        "delta_items": written,
        "buckets_only_the_previous_holds": len(dropped),
        "share_of_previous": round(written / max(1, previous.items), 4),
    }


def _covered(bucket: tuple[int, int], covers: Any) -> bool:
    return any(
        cover.family == bucket[0] and cover.first_bucket <= bucket[1] <= cover.last_bucket for cover in covers
    )


def load_report(args: argparse.Namespace) -> dict[str, Any]:
    """The plan of the load of ``args.files``: its writes, its count, its reload and charts."""
    from loader.planning.costs import count_read_costs
    from loader.planning.load_plan import plan_load

    report: dict[str, Any] = {}
    load, order, counted = planned_load(args)
    hottest = (load.get("value_index") or {}).get("hottest_values", {})
    measured = {"item_bytes": load["item_bytes"] / order.items} if load.get("item_bytes") else {}
    index = IndexWrites.of_report(load, measured.get("item_bytes", DEFAULT_ITEM_BYTES))
    report["load"] = plan_load(
        order,
        warm_write_units=args.warm_write_units,
        provisioned_write_units=args.provisioned_write_units,
        target_seconds=args.target_minutes * 60,
        frequent_values={value: figures["entries"] for value, figures in hottest.items()} or None,
        write_units=counted.write_units,
        index=index,
        **measured,
    )
    # Activation's count in home, as each replica region's arrival check counts again there
    report["load"]["count_reads"] = count_read_costs(
        counted, items=order.items, item_bytes=report["load"]["item_bytes"], index=index
    )
    report["load"] |= {
        "indexed": index is not None,
        "index_entries": index.entries if index else 0,
        "index_entry_bytes": round(index.entry_bytes, 1) if index else 0,
        "index_keys": index.keys if index else 0,
        "columns": len(load.get("column_types", {})),
        "rows": load.get("rows_read"),
    }
    if "delta_estimate" in load:
        report["reload"] = reload_costs(load["delta_estimate"], report["load"], args, index)
    if args.chart:
        report["charts"] = draw_plan_charts(report["load"], order, Path(args.chart))
    return report


def plan_report(args: argparse.Namespace) -> dict[str, Any]:
    from loader.planning.blog import reproduce_blog
    from loader.planning.costs import lookup_costs
    from loader.planning.fixed_bill import DEFAULT_STACK, fixed_bill

    report: dict[str, Any] = load_report(args) if args.files else {}
    if args.reproduce_blog:
        report["blog"] = reproduce_blog()
    if args.enrich_rows:
        report["enrich"] = enrich_report(args)
    if args.lookups_per_month:
        report["lookups"] = lookup_costs(
            args.lookups_per_month,
            batching=lookup_batching(args),
            dynamodb_reads_per_lookup=args.reads_per_lookup,
            edge_hit_ratio=args.edge_hit_ratio,
            url_logging=UrlLogging(args.access_log_sample_rate, args.error_share),
            metric_containers=args.metric_containers,
        )
    if args.regions > 1:
        report["regions"] = region_report(report, args)
    if args.feed:
        report["feeds"] = feed_report(args.feed)
    if not args.files:
        resources = DEFAULT_STACK.with_dashboard() if args.dashboard else DEFAULT_STACK
        stored = args.stored_gb
        report["fixed"] = fixed_bill(resources) if stored is None else fixed_bill(resources, stored)
    return report


def feed_report(spec: str) -> dict[str, Any]:
    """``--feed network:aws,tor``: a month of the set's scheduled checks (``loader.planning.feed_costs``)."""
    from loader.feeds.catalogue import parse_network_lists, period_seconds
    from loader.feeds.errors import FeedConfigInvalid
    from loader.planning.feed_costs import ListPace, feed_check_costs

    vendor, _, lists = spec.partition(":")
    if vendor != "network" or not lists:
        raise FeedConfigInvalid(f"--feed {spec!r}: expected network:LIST[,LIST...], such as network:aws,tor")
    chosen = parse_network_lists(lists)
    return feed_check_costs(
        [ListPace(c.entry.name, period_seconds(c.entry.schedule), max(1, len(c.urls))) for c in chosen]
    )


def region_report(report: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """What ``report`` costs served from ``--regions`` regions (``loader.planning.regions``)."""
    from loader.options import DEFAULT_DELTA_MAX_CHAIN
    from loader.planning.costs import reload_cycle
    from loader.planning.regions import (
        region_fixed_costs,
        regional_lookup_costs,
        replicated_load_costs,
        replicated_reload_costs,
    )

    regions = args.regions
    fixed = region_fixed_costs()
    found: dict[str, Any] = {
        "regions": regions,
        "fixed_per_replica_region": fixed,
        "fixed_usd_per_month": round(fixed["usd_per_month"] * (regions - 1), 2),
    }
    index = None
    if "load" in report:
        load = report["load"]
        index = _index_of(load)
        found["load"] = replicated_load_costs(
            load["items"],
            load["item_bytes"],
            regions,
            index,
            load["count_reads"],
            arriving_seconds=args.arrival_seconds,
        )
    if "reload" in report:
        cycle = reload_cycle(
            report["load"]["items"],
            report["load"]["item_bytes"],
            report["reload"]["share_of_previous"],
            max_chain=DEFAULT_DELTA_MAX_CHAIN,
            threshold=args.delta_threshold,
            index=index,
            count=report["load"]["count_reads"],
        )
        found["reload"] = replicated_reload_costs(
            cycle, regions, releases_per_month=args.releases_per_month, arriving_seconds=args.arrival_seconds
        )
    if args.lookups_per_month:
        found["lookups"] = regional_lookup_costs(args.lookups_per_month, regions, lookup_batching(args))
    return found


def enrich_report(args: argparse.Namespace) -> dict[str, Any]:
    """An enrich job of ``--enrich-rows`` addresses on AWS, beside the same addresses through the API."""
    from loader.planning.enrich_costs import MEASURED, api_costs, enrich_costs

    job = enrich_costs(args.enrich_rows, MEASURED, datasets=args.enrich_datasets)
    api = api_costs(
        args.enrich_rows,
        dynamodb_reads_per_lookup=args.reads_per_lookup * args.enrich_datasets,
        edge_hit_ratio=args.edge_hit_ratio,
        url_logging=UrlLogging(args.access_log_sample_rate, args.error_share),
    )
    return {"job": job, "api": api}


def lookup_batching(args: argparse.Namespace) -> Batching:
    """``--batch-size N`` alone: every lookup in batches of N; ``--batch-share F``: that share of them."""
    if args.batch_size is None:
        return NO_BATCHES
    return Batching(share=1.0 if args.batch_share is None else args.batch_share, size=args.batch_size)


def batching_problem(args: argparse.Namespace) -> str | None:
    """Why the batch options cannot be priced, or None."""
    from ipmeta.schema.settings import ApiSettings

    largest = ApiSettings().batch_max_ips
    if args.batch_size is None and args.batch_share is None:
        return None
    if not args.lookups_per_month:
        return "--batch-size and --batch-share price lookups: give --lookups-per-month N"
    if args.batch_size is None:
        return "--batch-share needs --batch-size, the mean number of addresses in a batch"
    if args.batch_size > largest:
        return f"--batch-size {args.batch_size}: a batch holds at most {largest:,} addresses"
    return None


def _index_of(load: Mapping[str, Any]) -> IndexWrites | None:
    """The plan's own index figures back as ``IndexWrites`` (None: a load without an index)."""
    if not load.get("indexed"):
        return None
    return IndexWrites(load["index_entries"], load["index_entry_bytes"], load.get("index_keys", 0))


def reload_costs(
    estimate: Mapping[str, Any],
    load: Mapping[str, Any],
    args: argparse.Namespace,
    index: IndexWrites | None = None,
) -> dict[str, Any]:
    """A full reload's cost beside the delta's, what ``--delta auto`` would write, and the month
    (each full version counted as the plan's ``load.count_reads`` measured it).

    An indexed load (``index``) is written full whatever ``--delta`` says, entries and all."""
    from loader.options import DEFAULT_DELTA_MAX_CHAIN
    from loader.planning.costs import diff_read_costs, load_costs, reload_month_costs

    items, item_bytes = load["items"], load["item_bytes"]
    full = load_costs(items, item_bytes, index.entries if index else 0, index.entry_bytes if index else 0)
    delta = load_costs(estimate["delta_items"], item_bytes)
    reading_the_base = diff_read_costs(estimate["previous_items"], item_bytes)
    # A delta replaces the previous delta (its own items deleted) and reads its base once to diff
    delta["reload_usd"] = round(delta["write_usd_replacing_a_version"] + reading_the_base["read_usd"], 4)
    delta["diff_read_usd"] = reading_the_base["read_usd"]
    share = estimate["share_of_previous"]
    return {
        **estimate,
        "full": full,
        "delta": delta,
        "auto_writes": "delta" if share <= args.delta_threshold and index is None else "full",
        "delta_over_full": round(estimate["delta_items"] / max(1, items), 4),
        # Each release drifting from the last as this one did
        "following_every_release": reload_month_costs(
            items,
            item_bytes,
            share,
            releases_per_month=args.releases_per_month,
            max_chain=DEFAULT_DELTA_MAX_CHAIN,
            threshold=args.delta_threshold,
            index=index,
            count=load.get("count_reads"),
        ),
    }


def draw_plan_charts(plan: Mapping[str, Any], order: Any, folder: Path) -> list[str]:
    from ipmeta_cli import charts

    series = plan["chart"]["hottest_bucket_share"]
    return [
        str(
            charts.items_per_bucket_chart(
                order.items_per_bucket(), folder / charts.ITEMS_PER_BUCKET, "Items per bucket"
            )
        ),
        str(
            charts.write_order_chart(
                series,
                plan["hottest_bucket"]["share"],
                plan["chart"]["window"],
                folder / charts.WRITE_ORDER_HEAT,
            )
        ),
    ]


def summarize(report: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if "load" in report:
        lines.extend(_load_lines(report["load"]))
    if "reload" in report:
        lines.extend(_reload_lines(report["reload"]))
    for chart in report.get("charts", []):
        lines.append(f"  chart: {chart}")
    if "blog" in report:
        lines.append("The blog's experiments through the same model (writes/s):")
        for scenario in report["blog"]["scenarios"]:
            lines.append(
                f"  {scenario['name']:<48} model {scenario['model']:>6,}  blog {scenario['blog']:>6,}  "
                f"({scenario['off_by']:+.1%}; limited by {scenario['limited_by']})"
            )
    if "lookups" in report:
        lines.extend(_lookup_lines(report["lookups"]))
    if "enrich" in report:
        lines.extend(_enrich_lines(report["enrich"]))
    if "regions" in report:
        lines.extend(_region_lines(report["regions"]))
    if "feeds" in report:
        lines.extend(_feed_lines(report["feeds"]))
    if "fixed" in report:
        lines.extend(_fixed_lines(report["fixed"]))
    return "\n".join(lines)


#: The fixed bill's lines, as ``ipmeta plan`` prints them.
_FIXED_LINES = {
    "alarms": "alarms ({alarm_metrics} alarm metrics)",
    "custom_metrics": "custom metrics (the lookup's, in hours with lookups only)",
    "dashboard": "the dashboard ({dashboards}; -c dashboard=true builds one)",
    "keys": "keys (the alarm topic's KMS key)",
    "secrets": "secrets ({secrets}: the API keys, the page-token key)",
    "storage": "storage ({stored_gb:g} GB)",
    "backups": "backups (point-in-time recovery)",
}


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def _fixed_lines(fixed: Mapping[str, Any]) -> list[str]:
    """The default stack's fixed monthly bill, one line each, and its total against the target."""
    lines = ["The default stack's fixed bill, one region, before lookups and loads (list prices):"]
    for line, usd in fixed["breakdown"].items():
        lines.append(f"  {_FIXED_LINES[line].format(**fixed['resources']):<60} {_usd(usd):>8}")
    total, target = fixed["usd_per_month"], fixed["target_usd_per_month"]
    verdict = "within" if total <= target else "over"
    lines.append(f"  {'total a month':<60} {_usd(total):>8}  ({verdict} the {_usd(target)} target)")
    busy = fixed["custom_metrics_with_traffic_usd"]
    lines.append(f"  with lookups every hour the lookup's metrics add up to ${busy:,.2f}")
    return lines


def _region_lines(regions: Mapping[str, Any]) -> list[str]:
    count = regions["regions"]
    lines = [f"Served from {count} regions (home and {count - 1} replicas):"]
    if "load" in regions:
        load = regions["load"]
        lines.append(
            f"  a load: ${load['write_usd_replacing_a_version']:,.2f} of writes and the old version's "
            f"deletes in every region, ${load['replication_transfer_usd']:,.2f} of transfer, "
            f"${load['count_reads_usd']:,.2f} of counts in home and the arrival checks "
            f"({load['count_read_units_per_region']:,g} read units a count; "
            f"{load['arrival_check_passes']} counts in each replica for items up to "
            f"{load['arrival_seconds']:g} s late); storage "
            f"${load['storage_usd_per_month']:,.2f} and backups ${load['pitr_usd_per_month']:,.2f} a month"
        )
    if "reload" in regions:
        reload = regions["reload"]
        bill = ", ".join(f"{line} ${usd:,.2f}" for line, usd in reload["breakdown"].items())
        lines.append(
            f"  following every release: ${reload['usd_per_month']:,.2f} a month "
            f"(one region: ${reload['one_region_usd_per_month']:,.2f}): {bill}"
        )
    if "lookups" in regions:
        for front, cost in regions["lookups"]["fronts"].items():
            lines.append(
                f"  lookups, {front:<4} ${cost['total']:>12,.2f} (${cost['per_million']:.2f} per million; "
                f"${cost['per_region']:,.2f} a region)"
            )
    lines.append(
        f"  each replica region's fixed costs: ${regions['fixed_per_replica_region']['usd_per_month']:,.2f} "
        f"a month (alarms, topic key, secret copies, a check a minute)"
    )
    return lines


#: How the text report names each line of a front's bill.
_BILL_LINES = {
    "api_gateway": "API Gateway",
    "cloudfront_requests": "CloudFront requests",
    "cloudfront_functions": "CloudFront Functions",
    "lambda_requests": "Lambda requests",
    "lambda_duration": "Lambda duration",
    "dynamodb_reads": "DynamoDB reads",
    "data_transfer": "transfer out",
    "logs": "logs",
}


def _feed_lines(feeds: Mapping[str, Any]) -> list[str]:
    one, each = feeds["set"], feeds["per_list"]
    bill = ", ".join(f"{name} {_usd(usd)}" for name, usd in one["breakdown"].items())
    return [
        f"Keeping network:{','.join(feeds['lists'])} current on AWS (the runs that find nothing new):",
        f"  one schedule for the set, every {one['every_seconds'] / 3600:g} h: {one['runs']:,} runs, "
        f"{one['requests']:,} conditional GETs a month, {_usd(one['usd_per_month'])} ({bill})",
        f"  one schedule per list (not built), each at its own pace: {each['runs']:,} runs, "
        f"{each['requests']:,} GETs, {_usd(each['usd_per_month'])} with two alarms per list",
        "  a run that finds a change loads the dataset: the same either way (ipmeta plan FILES prices it)",
    ]


def _enrich_lines(enrich: Mapping[str, Any]) -> list[str]:
    job, api = enrich["job"], enrich["api"]
    measured, bill, snapshot = job["assumptions"], job["breakdown"], job["snapshot"]
    lambda_usd = bill["lambda_duration"] + bill["lambda_requests"]
    s3_usd = bill["s3_gets"] + bill["s3_puts"]
    lines = [
        f"Annotating {job['rows']:,} addresses on AWS (ipmeta enrich s3://…): "
        f"${job['total']:,.4f} in {job['parts']:,} parts",
        f"  Lambda      ${lambda_usd:.4f}: {job['lambda_seconds']:,.1f} s at "
        f"{measured['rows_per_second']:,.0f} addresses/s of {measured['memory_mb']:,} MB "
        f"({job['gb_seconds']:,.1f} GB-s)",
        f"  S3          ${s3_usd:.4f}: {job['s3_gets']:,} GETs, {job['s3_puts']:,} PUTs "
        f"({measured['input_bytes_per_row']:.1f} bytes in, "
        f"{measured['output_bytes_per_row']:.1f} out per address)",
        f"  transitions ${bill['step_functions']:.4f}: {job['transitions']:,} state transitions",
        f"  snapshot    ${bill['snapshot']:.4f}: once per version, {snapshot['ranges']:,} ranges "
        f"read from the table ({snapshot['read_units']:,} read units); later jobs reuse it",
        f"  (measured: {measured['source']})",
        "The same addresses through the API:",
    ]
    for way, fronts in api.items():
        cost = ", ".join(f"{front} ${usd:,.2f}" for front, usd in fronts.items())
        lines.append(f"  {way:<18} {cost}")
    return lines


def _lookup_lines(lookups: Mapping[str, Any]) -> list[str]:
    assumptions = lookups["assumptions"]
    batches = (
        f" in {lookups['requests_per_month']:,} API requests ({assumptions['batch_share']:.0%} of the "
        f"lookups in batches of {assumptions['batch_size']:,g})"
        if assumptions["batch_share"]
        else ""
    )
    lines = [f"A month of {lookups['lookups_per_month']:,} lookups{batches}:"]
    for front, cost in lookups["fronts"].items():
        lines.append(f"  {front:<9} ${cost['total']:>12,.2f}  (${cost['per_million']:.2f} per million)")
        bill = ", ".join(f"{_BILL_LINES[line]} ${usd:,.2f}" for line, usd in cost["breakdown"].items() if usd)
        lines.append(f"            {bill}")
    lines.append(
        f"  (reads per lookup {assumptions['dynamodb_reads_per_lookup']:g} after the range cache; behind "
        f"edge, CloudFront answers {assumptions['edge_hit_ratio']:.0%} of the single lookups)"
    )
    metrics = lookups["metrics"]
    lines.append(
        f"  and the lookup metrics (lookupMetrics), whatever the lookups: ${metrics['total']:,.2f} a month "
        f"at most ({metrics['custom_metrics']} metrics ${metrics['breakdown']['metrics']:,.2f}, "
        f"{metrics['lines_per_month']:,} lines from {metrics['containers']} containers "
        f"${metrics['breakdown']['logs']:,.2f})"
    )
    return lines


def _load_lines(plan: Mapping[str, Any]) -> list[str]:
    hottest = plan["hottest_bucket"]
    lines = [
        f"items {plan['items']:,} in {plan['buckets']:,} buckets; hottest {hottest['name']} "
        f"holds {hottest['share']:.1%} ({hottest['items']:,} items)"
    ]
    for name, load in plan["loads"].items():
        lines.append(
            f"  {name:<16} {load['seconds']:>9,.0f} s at {load['writes_per_second']:>8,.0f} writes/s "
            f"(limited by {load['limited_by']})"
        )
    warm = plan["warm_throughput_for_target"]
    minutes = warm["target_seconds"] / 60
    if warm["pre_warming_needed"]:
        lines.append(
            f"  to finish in {minutes:g} min: pre-warm with warmWriteUnitsPerSecond="
            f"{warm['warm_write_units_per_second']:,} ({warm['estimate']['seconds']:,.0f} s)"
        )
    else:
        lines.append(f"  finishes within {minutes:g} min on a new on-demand table: no pre-warming needed")
    cost = plan["cost"]
    lines.append(
        f"  items of {plan['item_bytes']:,.0f} bytes on average ({plan.get('columns', '?')} columns): "
        f"{cost['write_units']:,} write units"
        + (f" (with {plan['index_entries']:,} index entries' GSI writes)" if plan.get("indexed") else "")
    )
    lines.append(
        f"  write cost ${cost['write_usd']:,.2f} (${cost['write_usd_replacing_a_version']:,.2f} replacing "
        f"a version); storage {cost['storage_gb']:,.2f} GB, ${cost['storage_usd_per_month']:,.2f}/month"
    )
    if "count_reads" in plan:
        count = plan["count_reads"]
        lines.append(
            f"  activation counts it: {count['read_units']:,g} read units "
            f"(table {count['table_read_units']:,g}, indexes {count['index_read_units']:,g}), "
            f"${count['read_usd']:,.2f}; again in each replica region"
        )
    for entry in (plan.get("reverse_index") or [])[:3]:
        lines.append(
            f"  reverse index: value {entry['value']} has {entry['entries']:,} entries "
            f"({entry['share']:.1%}): at least {entry['shards_at_least']} shards (K >= 10N)"
        )
    return lines


def _reload_lines(reload: Mapping[str, Any]) -> list[str]:
    full, delta, month = reload["full"], reload["delta"], reload["following_every_release"]
    return [
        f"reload over the previous release ({reload['previous_items']:,} items): "
        f"a delta writes {reload['delta_items']:,} items ({reload['share_of_previous']:.1%} of it), "
        f"--delta auto writes {reload['auto_writes']}",
        f"  full reload ${full['write_usd_replacing_a_version']:,.2f} (writes and the old version's "
        f"deletes); delta ${delta['reload_usd']:,.2f} (writes, the previous delta's deletes, "
        f"${delta['diff_read_usd']:,.2f} of reads of its base)",
        f"  following {month['releases_per_month']:g} releases a month that drift as these two do: "
        f"full reloads ${month['full_usd_per_month']:,.2f} a month, --delta auto "
        f"${month['delta_usd_per_month']:,.2f} "
        f"(a full version every {month['releases_per_full_load']} releases; counts before activation "
        f"${month['breakdown']['counts']:,.2f})",
    ]


def command_plan(args: argparse.Namespace) -> int:
    if problem := batching_problem(args):
        print(f"ipmeta plan: {problem}")
        return 2
    report = plan_report(args)
    print(json.dumps(report, indent=2) if args.json else summarize(report))
    return 0


def add_lookup_arguments(plan: argparse.ArgumentParser) -> None:
    """What the lookup bill assumes, each defaulting to its measurement (``loader.planning.costs``)."""
    plan.add_argument(
        "--reads-per-lookup",
        type=float,
        default=DEFAULT_READS_PER_LOOKUP,
        metavar="R",
        help=f"DynamoDB Queries per lookup after the range cache (default {DEFAULT_READS_PER_LOOKUP}: a "
        "Zipf workload, bench/results/cache.json; 1 is no cache at all)",
    )
    plan.add_argument(
        "--edge-hit-ratio",
        type=share,
        default=DEFAULT_EDGE_HIT_RATIO,
        metavar="F",
        help=f"behind edge, the share of single lookups CloudFront's cache answers (default "
        f"{DEFAULT_EDGE_HIT_RATIO}: the same workload by exact address, an hour's TTL, 100 M a month, "
        "bench/results/edge.json)",
    )
    plan.add_argument(
        "--access-log-sample-rate",
        type=share,
        default=UrlLogging().sample_rate,
        metavar="F",
        help="the url front: the share of answers its access log keeps (accessLogSampleRate)",
    )
    plan.add_argument(
        "--error-share",
        type=share,
        default=UrlLogging().error_share,
        metavar="F",
        help="the url front: the share of requests answered 4xx or 5xx, every one of them logged",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = commands.add_parser(
        "plan",
        help="predict a load's speed, hot partitions and costs, a month of lookups' bill, and the "
        "default stack's fixed bill (alone, with no FILE)",
    )
    plan.add_argument("files", nargs="*", help="the files `ipmeta load` would load (nothing is written)")
    plan.add_argument(
        "--previous",
        nargs="+",
        metavar="FILE",
        help="the release before it: print a delta reload's cost next to a full one's",
    )
    plan.add_argument(
        "--releases-per-month",
        type=float,
        default=TWICE_A_WEEK_PER_MONTH,
        help="how often the vendor publishes, for a month of reloads (default: twice a week, as GeoLite2)",
    )
    add_source_arguments(plan)
    plan.add_argument(
        "--reproduce-blog", action="store_true", help="the AWS blog's four loads through the model"
    )
    _add_lookup_arguments(plan)
    plan.add_argument(
        "--stored-gb",
        type=float,
        default=None,
        help="data the table holds, for the fixed bill's storage and backups (default: the demo ASN dataset)",
    )
    plan.add_argument(
        "--dashboard",
        action="store_true",
        help="the fixed bill of a stack deployed with -c dashboard=true (the dashboard is off by default)",
    )
    plan.add_argument(
        "--enrich-rows",
        type=positive_int,
        metavar="N",
        help="price annotating N addresses on AWS (ipmeta enrich s3://...) next to the API, "
        "single and batched",
    )
    plan.add_argument(
        "--enrich-datasets",
        type=positive_int,
        default=1,
        metavar="K",
        help="with --enrich-rows: how many datasets each address is annotated with (default 1)",
    )
    plan.add_argument(
        "--feed",
        metavar="network:LIST,...",
        help="price a month of the stack's scheduled checks of these network lists (one schedule for "
        "the set), next to one schedule per list",
    )
    _add_capacity_arguments(plan)
    plan.set_defaults(run=command_plan, dry_run=True)


def _add_capacity_arguments(plan: argparse.ArgumentParser) -> None:
    """The write capacity a load is sized against."""
    plan.add_argument(
        "--target-minutes", type=float, default=10.0, help="the load time to size pre-warming for"
    )
    plan.add_argument(
        "--warm-write-units", type=positive_int, default=10_000, help="pre-warmed on-demand WRU/s"
    )
    plan.add_argument(
        "--provisioned-write-units", type=positive_int, default=10_000, help="provisioned WCU to model"
    )


def _add_lookup_arguments(plan: argparse.ArgumentParser) -> None:
    """What a month of lookups costs: how many, how they arrive, from how many regions."""
    plan.add_argument(
        "--lookups-per-month", type=positive_int, help="the monthly cost of N lookups per API front"
    )
    plan.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        help="with --lookups-per-month: the mean number of addresses per POST /v1/batch (at most 1,000); "
        "API Gateway, Lambda invocations and access logs count requests, reads and duration count lookups",
    )
    plan.add_argument(
        "--batch-share",
        type=share,
        metavar="F",
        help="the share of the lookups that arrive in batches of --batch-size (default: all of them)",
    )
    add_lookup_arguments(plan)
    plan.add_argument(
        "--metric-containers",
        type=positive_int,
        default=DEFAULT_METRIC_CONTAINERS,
        metavar="N",
        help="with --lookups-per-month: lookup containers publishing their metrics line every minute "
        f"of the month (default {DEFAULT_METRIC_CONTAINERS}); the metrics cost grows with these, not lookups",
    )
    plan.add_argument(
        "--arrival-seconds",
        type=non_negative_float,
        default=DEFAULT_ARRIVING_SECONDS,
        metavar="S",
        help="with --regions: how long after a version's pointer its last items may still arrive in a "
        "replica region; its arrival check counts again every 5 s for 40 s of each run a minute, "
        f"each pass priced as a whole count (default {DEFAULT_ARRIVING_SECONDS:g})",
    )
    plan.add_argument(
        "--regions",
        type=positive_int,
        default=1,
        metavar="N",
        help="price it served from N regions (replicaRegions: home and N - 1 replicas): replicated "
        "writes, storage and arrival checks in each, lookups spread over them",
    )
