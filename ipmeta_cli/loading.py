"""`ipmeta load`: CSV files become one new dataset version."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ipmeta.settings import Settings
from ipmeta_cli.backend import add_backend_arguments, backend


def load_files(
    settings: Settings, sources: Sequence[Path], columns: Sequence[str] | None, data_dir: Path
) -> dict[str, Any]:
    from tqdm import tqdm

    from ipmeta.store import Store
    from loader import driver, tasks
    from loader.staging import LocalStaging

    store = Store.from_settings(settings)
    bar = tqdm(total=0, unit="items", desc="writing", disable=None)

    def advance(count: int) -> None:
        bar.update(count)

    def prepared(result: tasks.Prepared) -> None:
        bar.reset(total=result.items if result.status == "prepared" else 0)

    result = driver.run_load(
        sources,
        tasks.LoadOptions(columns=columns),
        store,
        LocalStaging(data_dir / "staging"),
        on_items_written=advance,
        on_prepared=prepared,
    )
    bar.close()
    return {
        "status": result.status,
        "version": f"v{result.version}",
        "items": result.items,
        "seconds": result.seconds,
        "write": result.write,
        "report": result.report,
    }


def command_load(args: argparse.Namespace) -> int:
    columns = [column.strip() for column in args.columns.split(",")] if args.columns else None
    with backend(args) as settings:
        outcome = load_files(settings, [Path(name) for name in args.files], columns, Path(args.data_dir))
    print(json.dumps(outcome, indent=2))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    load = commands.add_parser("load", help="load CSV files as one new dataset version")
    add_backend_arguments(load)
    load.add_argument("files", nargs="+")
    load.add_argument("--columns", help="column names for files without a header row, e.g. start,end,asn,org")
    load.set_defaults(run=command_load)
