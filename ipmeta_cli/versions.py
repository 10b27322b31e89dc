"""`ipmeta versions`, `ipmeta activate`, `ipmeta rollback` and `ipmeta cleanup`: the versions a table keeps.

``activate`` switches to a version the guard held (``loader.pipeline.guard``):
a release that changed more than its feed allows, loaded whole and verified.

Each dataset has its own versions. Without ``--dataset``, ``versions`` and
``cleanup`` visit every dataset of the table, and ``rollback`` the only one
that serves (it asks for ``--dataset`` when there are several).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ipmeta_cli.arguments import dataset_name, non_negative_int
from ipmeta_cli.backend import add_backend_arguments, backend
from loader.settings import DEFAULT_CLEANUP_GRACE_SECONDS, DEFAULT_RETENTION

if TYPE_CHECKING:
    from loader.store.table import LoaderTable


def the_dataset(table: LoaderTable, requested: str | None) -> LoaderTable:
    """The table in the keys of ``requested``, or of the only dataset that serves."""
    from loader.errors import LoadNotFound

    if requested is not None:
        return table.for_dataset(requested)
    names = table.lookup.read_dataset_names(consistent=True)
    if len(names) != 1:
        raise LoadNotFound(f"the table holds datasets {', '.join(names)}: name one with --dataset NAME")
    return table.for_dataset(names[0])


def command_versions(args: argparse.Namespace) -> int:
    from loader.pipeline import retention
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        table = LoaderTable.from_settings(settings)
        names = [args.dataset] if args.dataset else table.versions.started_datasets()
        rows = [row for name in names for row in retention.list_versions(table.for_dataset(name))]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no versions")
    for row in rows:
        marker = "*" if row["active"] else " "
        over = f"  delta over {row['base']}" if row["base"] else ""
        over += "  (held: ipmeta activate to serve it)" if row["status"] == "held" else ""
        print(
            f"{marker} {row['dataset']:>12} {row['version']:>6}  {row['status']:<8}  "
            f"{row['items'] or 0:>9,} items  {row['sha256']}{over}"
        )
    return 0


def command_activate(args: argparse.Namespace) -> int:
    from ipmeta_cli.loading import edge_line
    from loader.pipeline.activate import activate
    from loader.store.edge_cache import find_edge
    from loader.store.staging import LocalStaging
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        # As rollback: the distribution in front of this table is found, or the caller is told.
        edge = find_edge(settings.table_name, local=bool(settings.dynamodb_endpoint))
        table = LoaderTable.from_settings(settings)
        staging = LocalStaging(Path(args.data_dir) / "staging")
        outcome = activate(args.load_id, table, staging, edge=edge.cache, accept_held=True)
    print(json.dumps({"load_id": outcome.load_id, "status": str(outcome.status)}, indent=2))
    said = edge_line(edge)
    if said:
        print(said, file=sys.stderr)
    return 0


def command_rollback(args: argparse.Namespace) -> int:
    from ipmeta_cli.loading import edge_line
    from loader.pipeline import retention
    from loader.records import version_of
    from loader.store.edge_cache import find_edge
    from loader.store.table import LoaderTable

    target = version_of(args.to) if args.to else None
    with backend(args) as settings:
        edge = find_edge(settings.table_name, local=bool(settings.dynamodb_endpoint))
        table = the_dataset(LoaderTable.from_settings(settings), args.dataset)
        outcome = retention.rollback(table, target, edge=edge.cache)
    print(json.dumps(outcome, indent=2))
    said = edge_line(edge)
    if said:
        print(said, file=sys.stderr)
    return 0


def command_cleanup(args: argparse.Namespace) -> int:
    from loader.pipeline import retention
    from loader.store.staging import LocalStaging
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        table = LoaderTable.from_settings(settings)
        names = [args.dataset] if args.dataset else table.versions.started_datasets()
        outcomes = [
            retention.cleanup(
                table.for_dataset(name),
                LocalStaging(Path(args.data_dir) / "staging"),
                retention=args.retention,
                grace_seconds=args.grace_seconds,
            )
            for name in names
        ]
    print(json.dumps(outcomes[0] if args.dataset else {"datasets": outcomes}, indent=2))
    return 0


def add_dataset_argument(parser: argparse.ArgumentParser, default_meaning: str) -> None:
    parser.add_argument("--dataset", type=dataset_name, help=f"e.g. city (default: {default_meaning})")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    versions = commands.add_parser("versions", help="list the dataset versions (* marks the active one)")
    add_backend_arguments(versions)
    add_dataset_argument(versions, "every dataset")
    versions.add_argument("--json", action="store_true")
    versions.set_defaults(run=command_versions)

    activate = commands.add_parser(
        "activate", help="activate a version the guard held (a release that changed more than allowed)"
    )
    add_backend_arguments(activate)
    activate.add_argument("load_id", metavar="LOAD_ID", help="e.g. network.v2, as `ipmeta versions` names it")
    activate.set_defaults(run=command_activate)

    rollback = commands.add_parser("rollback", help="switch back to a retained version, instantly")
    add_backend_arguments(rollback)
    add_dataset_argument(rollback, "the only dataset the table serves")
    rollback.add_argument("--to", metavar="VERSION", help="e.g. v3 (default: the latest retired version)")
    rollback.set_defaults(run=command_rollback)

    cleanup = commands.add_parser(
        "cleanup",
        help="delete versions beyond retention and failed loads; with replicas (the table's own), "
        "only what every region moved past",
    )
    add_backend_arguments(cleanup)
    add_dataset_argument(cleanup, "every dataset")
    cleanup.add_argument(
        "--retention", type=non_negative_int, default=DEFAULT_RETENTION, help="retired versions to keep"
    )
    cleanup.add_argument(
        "--grace-seconds",
        type=float,
        default=DEFAULT_CLEANUP_GRACE_SECONDS,
        help="only delete what stopped being served this long ago (longer than the pointer cache)",
    )
    cleanup.set_defaults(run=command_cleanup)
