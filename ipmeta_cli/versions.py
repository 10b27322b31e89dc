"""`ipmeta versions`, `ipmeta rollback` and `ipmeta cleanup`: the dataset versions a table keeps."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ipmeta_cli.arguments import non_negative_int
from ipmeta_cli.backend import add_backend_arguments, backend
from loader.settings import DEFAULT_CLEANUP_GRACE_SECONDS, DEFAULT_RETENTION


def command_versions(args: argparse.Namespace) -> int:
    from loader.pipeline import retention
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        rows = retention.list_versions(LoaderTable.from_settings(settings))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no versions")
    for row in rows:
        marker = "*" if row["active"] else " "
        print(
            f"{marker} {row['version']:>6}  {row['status']:<8}  "
            f"{row['items'] or 0:>9,} items  {row['sha256']}"
        )
    return 0


def command_rollback(args: argparse.Namespace) -> int:
    from loader.pipeline import retention
    from loader.records import version_of
    from loader.store.table import LoaderTable

    target = version_of(args.to) if args.to else None
    with backend(args) as settings:
        outcome = retention.rollback(LoaderTable.from_settings(settings), target)
    print(json.dumps(outcome, indent=2))
    return 0


def command_cleanup(args: argparse.Namespace) -> int:
    from loader.pipeline import retention
    from loader.store.staging import LocalStaging
    from loader.store.table import LoaderTable

    with backend(args) as settings:
        outcome = retention.cleanup(
            LoaderTable.from_settings(settings),
            LocalStaging(Path(args.data_dir) / "staging"),
            retention=args.retention,
            grace_seconds=args.grace_seconds,
        )
    print(json.dumps(outcome, indent=2))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    versions = commands.add_parser("versions", help="list the dataset versions (* marks the active one)")
    add_backend_arguments(versions)
    versions.add_argument("--json", action="store_true")
    versions.set_defaults(run=command_versions)

    rollback = commands.add_parser("rollback", help="switch back to a retained version, instantly")
    add_backend_arguments(rollback)
    rollback.add_argument("--to", metavar="VERSION", help="e.g. v3 (default: the latest retired version)")
    rollback.set_defaults(run=command_rollback)

    cleanup = commands.add_parser("cleanup", help="delete versions beyond retention and failed loads")
    add_backend_arguments(cleanup)
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
