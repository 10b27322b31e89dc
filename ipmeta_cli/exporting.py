"""`ipmeta export`: a retained dataset version written out as a MaxMind DB, a CSV or Parquet."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.versions import add_dataset_argument

if TYPE_CHECKING:
    from ipmeta.schema.records import VersionMeta
    from loader.export.files import ExportRange, ExportStats
    from loader.store.table import LoaderTable

DEFAULT_DATABASE_TYPE = "ipmeta"


def command_export(args: argparse.Namespace) -> int:
    from ipmeta_cli.versions import the_dataset
    from loader.export.version_ranges import ranges_of_version
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        table = the_dataset(LoaderTable.from_settings(settings), args.dataset)
        meta = _retained_version(table, args.version)
        ranges = _with_progress(ranges_of_version(table, meta), meta.items)
        stats = _write(args, table.dataset, meta, ranges)
    summary = {
        "dataset": table.dataset,
        "version": f"v{meta.version}",
        "format": args.format,
        "out": str(args.out),
        **vars(stats),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_describe(summary))
    return 0


def _retained_version(table: LoaderTable, version_text: str | None) -> VersionMeta:
    from loader.errors import LoadNotFound
    from loader.records import version_of

    version = version_of(version_text) if version_text else table.lookup.read_active_version(consistent=True)
    if version is None:
        raise LoadNotFound("no version is active yet; load one, or name one with --version vN")
    meta = table.lookup.get_version_meta(version)
    if meta is None or not meta.retained:
        status = meta.status if meta is not None else "unknown"
        raise LoadNotFound(f"v{version} is {status}; only retained versions (see `ipmeta versions`) export")
    return meta


def _write(
    args: argparse.Namespace, dataset: str, meta: VersionMeta, ranges: Iterable[ExportRange]
) -> ExportStats:
    from loader.export.files import write_csv, write_mmdb
    from loader.export.parquet import write_parquet
    from loader.export.snapshots import snapshot_info
    from loader.pipeline.export_task import mmdb_description

    if args.format == "parquet":  # a local path or s3://bucket/key (docs/parquet.md)
        return write_parquet(ranges, args.out, snapshot_info(dataset, meta))
    out = Path(args.out)
    if args.format == "csv":
        return write_csv(ranges, out, list(meta.column_types), meta.column_types)
    return write_mmdb(
        ranges,
        out,
        database_type=args.database_type,
        description={"en": mmdb_description(meta)},
        build_epoch=meta.created_at or None,
        ipv4_aliases=args.ipv4_aliases,
    )


def _with_progress(ranges: Iterator[ExportRange], items: int) -> Iterator[ExportRange]:
    from tqdm import tqdm

    # Items count each bucket piece of a range, so the bar may end a little short of its total.
    with tqdm(total=items or None, unit=" ranges", desc="export", leave=False, mininterval=0.5) as bar:
        for item in ranges:
            bar.update()
            yield item


def _label(summary: dict[str, Any]) -> str:
    """``v3`` in the default dataset, ``city v3`` in another."""
    from ipmeta.schema import keys

    named = summary["dataset"] != keys.DEFAULT_DATASET
    return f"{summary['dataset']} {summary['version']}" if named else str(summary["version"])


def _describe(summary: dict[str, Any]) -> str:
    lines = [
        f"exported {_label(summary)} to {summary['out']}: "
        f"{summary['ranges']:,} ranges, {summary['file_bytes']:,} bytes in {summary['seconds']}s"
    ]
    details = summary["details"]
    if summary["format"] == "mmdb":
        lines.append(
            f"  {details['networks']:,} networks, {details['records']:,} records, "
            f"{details['node_count']:,} nodes of {details['record_size']} bits; "
            f"IPv4 aliases: {', '.join(details['aliases']) or 'none'}"
        )
        if details["ipv6_ranges_in_ipv4_space"]:
            lines.append(
                f"  left out {details['ipv6_ranges_in_ipv4_space']} IPv6 ranges in ::/96, "
                "where a MaxMind DB keeps IPv4"
            )
    elif details.get("reload_types"):
        types = ",".join(f"{column}={kind}" for column, kind in details["reload_types"].items())
        lines.append(f"  to load it back with the same types: ipmeta load --types {types} {summary['out']}")
    return "\n".join(lines)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from loader.export.files import EXPORT_FORMATS

    export = commands.add_parser("export", help="write a dataset version as a MaxMind DB, a CSV or Parquet")
    add_backend_arguments(export)
    export.add_argument(
        "out", metavar="OUT", help="the file to write (.mmdb; .csv, .csv.gz; .parquet, s3://)"
    )
    export.add_argument("--format", choices=(*EXPORT_FORMATS, "parquet"), required=True)
    add_dataset_argument(export, "the only dataset the table serves")
    export.add_argument("--version", metavar="VERSION", help="e.g. v3 (default: the active version)")
    export.add_argument(
        "--database-type",
        default=DEFAULT_DATABASE_TYPE,
        help=f"mmdb: the metadata's database_type (default {DEFAULT_DATABASE_TYPE})",
    )
    export.add_argument(
        "--ipv4-aliases",
        action="store_true",
        help="mmdb: also answer IPv4 at ::ffff:0:0/96 and 2002::/16, as MaxMind's databases do",
    )
    export.add_argument("--json", action="store_true", help="print the summary as JSON")
    export.set_defaults(run=command_export)
