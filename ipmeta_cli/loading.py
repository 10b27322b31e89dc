"""`ipmeta load`: CSV or MaxMind DB files (paths or s3:// URIs) become one new dataset version."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta_cli.arguments import dataset_name, non_negative_int, positive_float, positive_int, share
from ipmeta_cli.backend import add_backend_arguments, backend

if TYPE_CHECKING:
    from loader.options import LoadOptions
    from loader.store.edge_cache import FoundEdge

REPORTS_DIR = "reports"


def load_files(
    settings: Settings,
    sources: Sequence[str | Path],
    columns: Sequence[str] | None,
    data_dir: Path,
    *,
    options: Any = None,
    resume: str | None = None,
    parallel_chunks: int | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Run a load on the local driver; returns the outcome with its report (also saved as JSON).

    The distribution in front of the table (``find_edge``) is invalidated once the version answers;
    ``edge`` in the outcome says which, or plainly why none was.
    """
    from loader.options import LoadOptions
    from loader.pipeline import driver
    from loader.settings import DEFAULT_PARALLEL_CHUNKS, default_workers
    from loader.store.edge_cache import find_edge
    from loader.store.staging import LocalStaging
    from loader.store.table import LoaderTable

    load_options = options if options is not None else LoadOptions(columns=columns)
    edge = find_edge(settings.table_name, local=bool(settings.dynamodb_endpoint))
    result = driver.run_load(
        sources,
        load_options,
        LoaderTable.from_settings(settings),
        LocalStaging(data_dir / "staging"),
        resume=resume,
        parallel_chunks=parallel_chunks or DEFAULT_PARALLEL_CHUNKS,
        workers=workers or default_workers(),
        progress=True,
        edge=edge.cache,
    )
    report = {**result.report.to_dict(), "status": result.status}
    report_path = data_dir / REPORTS_DIR / f"{result.load_id or 'dry-run'}.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    return {
        "status": result.status,
        "dataset": load_options.dataset,
        "version": result.load_id or None,
        "items": result.items,
        "seconds": result.seconds,
        "write": result.write,
        "report": report,
        "report_path": str(report_path),
        "edge": edge_line(edge) if result.status == "activated" else None,
    }


def edge_line(edge: FoundEdge) -> str | None:
    """What happened to the edge cache, in words: invalidated, or plainly not and why (None: a local
    table, which no distribution serves)."""
    if edge.local:
        return None
    if edge.cache is not None:
        return f"edge cache: invalidated distribution {edge.cache.distribution_id} ({edge.reason})"
    return (
        f"edge cache: NOT invalidated ({edge.reason}). If a CloudFront distribution serves this table, "
        "it keeps the old answers until edgeCacheSeconds pass: "
        "aws cloudfront create-invalidation --distribution-id ID --paths '/*'"
    )


def summarize(outcome: Mapping[str, Any]) -> str:
    """The report a person reads; the full JSON is in the saved file."""
    report = outcome["report"]
    lines = [f"load {outcome['version'] or '(dry run)'}: {outcome['status']}"]
    if "rows_read" in report:
        lines.append(
            f"  rows read {report['rows_read']:,}, rejected {report['rows_rejected']:,}; "
            f"overlaps resolved {report['overlaps_resolved']:,} ({report['overlap_policy']}); "
            f"splits {report['splits']:,}"
        )
        # A delta that only removes writes no item, so it has no hottest bucket.
        hottest = (
            f"hottest {report['hottest_bucket']} holds {report['hottest_bucket_share']:.1%}"
            if report.get("hottest_bucket")
            else "no hottest bucket"
        )
        lines.append(
            f"  items {report['items']:,} in {report['buckets']:,} buckets; {hottest}; "
            f"coalesced {report.get('coalesced', 0):,}, covers {report.get('covers', 0):,}"
        )
        lines.extend(f"  skipped {reason}" for reason in report.get("rejected", [])[:20])
        if report.get("delta"):
            lines.append(_delta_line(report["delta"]))
        lines.extend(f"  mixed: {reason}" for reason in report.get("mixed_columns", {}).values())
        if "value_index" in report:
            index = report["value_index"]
            lines.append(
                f"  index {index['field']}: {index['values']:,} values in {index['keys']:,} keys: "
                f"{index['shards']:,} shards of {index['values_with_own_keys']:,} frequent values and "
                f"{index['packs']:,} packs of the rest (~{index['target_entries_per_shard']:,} ranges a "
                f"key, by the {index['shard_rule']} rule; largest key ~{index['predicted_spread']}x the mean)"
            )
        if "flag_index" in report:
            flags = report["flag_index"]
            lines.append(
                f"  flagged by {flags['column']}: {flags['items']:,} ranges in {flags['shards']} shards"
            )
    if "items_written" in report and outcome["status"] == "activated":
        lines.append(
            f"  written {report['items_written']:,} items in {report['duration_seconds']}s "
            f"({report['items_per_second']:,.0f} items/s); retries {report['retries']}, "
            f"throttles {report['throttles']}"
        )
        if "write_units" in report:
            lines.append(
                f"  write units {report['write_units']:,} (index keys included), "
                f"{report.get('index_write_units', 0):,} of them GSI entries"
            )
    lines.append(f"  report: {outcome['report_path']}")
    return "\n".join(lines)


def _delta_line(delta: Mapping[str, Any]) -> str:
    """How a reload over a base was written, and why (docs/loader.md, "Delta versions")."""
    if delta["written_as"] != "delta":
        return f"  written full, not as a delta over {delta['base']}: {delta['reason']}" + _change(delta)
    return (
        f"  written as a delta over {delta['base']}: {delta['items']:,} items, "
        f"{delta['share_of_base']:.1%} of the base ({delta['unchanged']:,} unchanged, "
        f"{delta['replaced']:,} replaced, {delta['added']:,} added, {delta['gaps']:,} gaps)" + _change(delta)
    )


def _change(delta: Mapping[str, Any]) -> str:
    """What the guard measures: ranges added, replaced and removed, over the base's items."""
    if "change_of_base" not in delta:
        return ""
    return (
        f"\n  changed {delta['changed']:,} of the base's {delta['base_items']:,} items "
        f"({delta['change_of_base']:.1%}), {delta['removed']:,} removed "
        f"({delta['vacated']:,} in buckets left empty)"
    )


def _types(text: str) -> dict[str, str]:
    from loader.formats import parse_declared_types

    try:
        # Column names are matched as the CSV reader keys them: lower case.
        return {column.lower(): kind for column, kind in parse_declared_types(text).items()}
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _field_map(text: str) -> dict[str, str]:
    from loader.formats import parse_field_map

    try:
        return parse_field_map(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def load_options(args: argparse.Namespace, *, dry_run: bool = False) -> LoadOptions:
    """The options ``add_source_arguments`` declared, as the loader takes them."""
    from loader.options import LoadOptions

    return LoadOptions(
        dataset=args.dataset,
        columns=[column.strip() for column in args.columns.split(",")] if args.columns else None,
        types=args.types or {},
        format=args.format,
        mmdb_fields=args.mmdb_fields,
        locations=str(args.locations) if args.locations else None,
        overlaps=args.overlaps,
        max_errors=args.max_errors,
        dry_run=dry_run or args.dry_run,
        chunk_size=args.chunk_size,
        index_field=args.index_field.strip().lower() if args.index_field else None,
        flag_column=args.flag_column.strip().lower() if args.flag_column else None,
        shard_budget=args.shard_budget,
        max_shards=args.max_shards,
        coalesce=args.coalesce,
        partition_rows=args.partition_rows,
        delta=args.delta,
        delta_threshold=args.delta_threshold,
        max_change_ratio=args.max_change_ratio,
        min_size_ratio=args.min_size_ratio,
    )


def command_load(args: argparse.Namespace) -> int:
    if not args.files and not args.resume:
        print("ipmeta load: give FILE... or --resume LOAD_ID", file=sys.stderr)
        return 2
    # The change event is a log line locally; show it.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("loader.store.events").setLevel(logging.INFO)
    options = load_options(args)
    with backend(args) as settings:
        outcome = load_files(
            settings,
            args.files,
            options.columns,
            Path(args.data_dir),
            options=options,
            resume=args.resume,
            parallel_chunks=args.parallel_chunks,
            workers=args.workers,
        )
        if args.chart and outcome["status"] == "activated":
            outcome["charts"] = draw_load_charts(outcome, Path(args.data_dir), Path(args.chart))
    if args.json:
        print(json.dumps(outcome["report"], indent=2))
    else:
        print(summarize(outcome))
        for chart in outcome.get("charts", []):
            print(f"  chart: {chart}")
    if outcome["edge"]:
        print(outcome["edge"], file=sys.stderr)
    return 0


def draw_load_charts(outcome: Mapping[str, Any], data_dir: Path, folder: Path) -> list[str]:
    """Items per bucket, and the hottest bucket's share of each 1,000 writes of this load's order."""
    from ipmeta.schema import keys
    from ipmeta_cli import charts
    from loader.pipeline.write import chunk_buckets
    from loader.planning.write_model import WriteOrder, hottest_share_series
    from loader.store.staging import LocalStaging

    report, load_id = outcome["report"], str(outcome["version"])
    staging = LocalStaging(data_dir / "staging")
    written = (
        keys.bucket_name(family, bucket)
        for index in range(int(report["chunks"]))
        for family, bucket in chunk_buckets(load_id, index, staging)
    )
    order = WriteOrder.as_written(written)
    per_bucket = order.items_per_bucket()
    series = {
        "sorted": hottest_share_series(WriteOrder.sorted(dict(sorted(per_bucket.items())))),
        "as-written": hottest_share_series(order),
    }
    share = max(per_bucket.values()) / max(1, order.items)
    return [
        str(
            charts.items_per_bucket_chart(
                per_bucket, folder / charts.ITEMS_PER_BUCKET, f"Items per bucket, {load_id}"
            )
        ),
        str(charts.write_order_chart(series, share, 1_000, folder / charts.WRITE_ORDER_HEAT)),
    ]


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """How the sources are read and what the load builds: shared by ``load`` and ``plan``."""
    from loader import reverse_index
    from loader.options import DEFAULT_CHUNK_SIZE, DEFAULT_PARTITION_ROWS, OVERLAP_POLICIES
    from loader.settings import default_workers

    parser.add_argument(
        "--columns", help="column names for files without a header row, e.g. start,end,asn,org"
    )
    _add_format_arguments(parser)
    _add_delta_arguments(parser)
    parser.add_argument("--overlaps", choices=OVERLAP_POLICIES, default="last-wins")
    parser.add_argument(
        "--max-errors", type=non_negative_int, default=0, help="skip up to N bad rows (listed in the report)"
    )
    parser.add_argument("--chunk-size", type=positive_int, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=default_workers(),
        help="processes that scan sources and resolve partitions (default: one per core)",
    )
    parser.add_argument(
        "--partition-rows",
        type=positive_int,
        default=DEFAULT_PARTITION_ROWS,
        help="pieces one resolve task holds at most: its memory bound (default 250,000)",
    )
    parser.add_argument(
        "--no-coalesce",
        dest="coalesce",
        action="store_false",
        help="keep adjacent ranges with identical data as separate items",
    )
    parser.add_argument(
        "--index-field", metavar="FIELD", help="index ranges by this column's value (GET /v1/ranges)"
    )
    parser.add_argument(
        "--flag-column", metavar="COL", help="list ranges whose COL is not empty (GET /v1/flagged)"
    )
    parser.add_argument(
        "--shard-budget",
        type=positive_int,
        default=reverse_index.DEFAULT_SHARD_BUDGET,
        help="most keys of the value index, shards and packs together (see docs/reverse.md)",
    )
    parser.add_argument(
        "--max-shards",
        type=positive_int,
        default=reverse_index.DEFAULT_MAX_SHARDS,
        help="most shards of one value",
    )
    parser.add_argument(
        "--chart", metavar="DIR", help="write PNG charts of the load's buckets and write order"
    )
    parser.add_argument("--json", action="store_true", help="print the whole JSON report")


def _add_delta_arguments(parser: argparse.ArgumentParser) -> None:
    """How a reload over the active version is written (docs/loader.md, "Delta versions")."""
    from loader.options import DEFAULT_DELTA_THRESHOLD, DELTA_POLICIES

    parser.add_argument(
        "--delta",
        choices=DELTA_POLICIES,
        default="auto",
        help="write a reload as what changed over the active full version: auto (when the delta is "
        "small enough, see --delta-threshold), always, or never (docs/loader.md, Delta versions)",
    )
    parser.add_argument(
        "--delta-threshold",
        type=share,
        default=DEFAULT_DELTA_THRESHOLD,
        help="auto: the largest delta, as a share of its base, still written as a delta (default 0.25)",
    )
    parser.add_argument(
        "--max-change-ratio",
        type=positive_float,
        metavar="SHARE",
        help="the guard: hold, not activate, a release that changes more than this share of the active "
        "version; `ipmeta activate` serves it (default: no limit; docs/feeds.md, The guard)",
    )
    parser.add_argument(
        "--min-size-ratio",
        type=positive_float,
        metavar="SHARE",
        help="the guard: hold a release with fewer items than this share of the active version's",
    )


def _add_format_arguments(parser: argparse.ArgumentParser) -> None:
    """Which dataset the files are a version of, and how each file is read and typed (docs/loader.md)."""
    from loader.formats import FORMATS

    parser.add_argument(
        "--dataset",
        type=dataset_name,
        default=keys.DEFAULT_DATASET,
        help="the dataset the files are a version of, e.g. city or asn (default: default); "
        "each dataset has its own versions, and lookups answer from all of them",
    )
    parser.add_argument(
        "--types",
        type=_types,
        help="declared metadata types, e.g. asn=int,lat=float,postcode=str (default: inferred)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="how the files are read (default auto: mmdb for .mmdb/.mmdb.gz, geoip2-csv with "
        "--locations, else csv); see docs/loader.md",
    )
    parser.add_argument(
        "--mmdb-fields",
        type=_field_map,
        metavar="COL=PATH,...",
        help="mmdb: columns to keep, e.g. country=country.iso_code,lat=location.latitude, or all "
        "(every field of every record: every locale, every trait; default: the database type's usual fields)",
    )
    parser.add_argument(
        "--locations",
        metavar="FILE",
        help="geoip2-csv: the Locations-<lang>.csv the blocks join on geoname_id (path or s3://)",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Only what the arguments need: the driver brings boto3, which every command would pay for.
    from loader.settings import DEFAULT_PARALLEL_CHUNKS

    load = commands.add_parser(
        "load", help="load CSV or MaxMind DB files (paths or s3:// URIs) as one new dataset version"
    )
    add_backend_arguments(load)
    load.add_argument("files", nargs="*", help="CSV files, .csv.gz, .mmdb, .mmdb.gz, or s3://bucket/key")
    add_source_arguments(load)
    load.add_argument("--dry-run", action="store_true", help="validate and report; write nothing")
    load.add_argument(
        "--resume", metavar="LOAD_ID", help="finish an interrupted load (e.g. v7, or city.v7 in dataset city)"
    )
    load.add_argument("--parallel-chunks", type=positive_int, default=DEFAULT_PARALLEL_CHUNKS)
    load.set_defaults(run=command_load)
