"""The loader's whole preparation, run in a temporary folder with no table: rows in, items out.

Tests that check the key design, the gap rule or the overlap policies end to
end feed rows through the very code a load runs (scan, partitions, resolve,
write plan, chunk items) and read the items the writers would send.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ipmeta.schema.ips import format_address
from ipmeta.schema.records import Cover
from ipmeta.store.dynamodb import deserialize_item
from loader.options import LoadOptions
from loader.pipeline import start as starting
from loader.pipeline.partitions import plan_partitions
from loader.pipeline.plan_writes import plan_writes
from loader.pipeline.resolve import resolve_partition
from loader.pipeline.scan import scan_source
from loader.pipeline.write import chunk_items
from loader.store.staging import LocalStaging


@dataclasses.dataclass
class Staged:
    items: list[dict[str, Any]]
    covers: list[Cover]
    report: Any


def write_csv(rows: Sequence[Any], path: Path) -> Path:
    """Rows with ``family``, ``start``, ``end`` and ``values`` as a CSV with a header."""
    columns = list(rows[0].values) if rows else []
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["start", "end", *columns])
        for row in rows:
            writer.writerow(
                [
                    format_address(row.family, row.start),
                    format_address(row.family, row.end),
                    *row.values.values(),
                ]
            )
    return path


def stage(rows: Sequence[Any], folder: Path, options: LoadOptions | None = None) -> Staged:
    """Every item (deserialized) and cover a load of ``rows`` would write, in one dry run."""
    return stage_files([write_csv(rows, folder / "rows.csv")], folder, options)


def stage_files(sources: Iterable[Path], folder: Path, options: LoadOptions | None = None) -> Staged:
    options = dataclasses.replace(options or LoadOptions(), dry_run=True)
    staging = LocalStaging(folder / "staging")
    started = starting.start(list(sources), options, None, staging)
    for source in range(started.sources):
        scan_source(started.load_id, source, staging)
    plan = plan_partitions(started.load_id, staging)
    for partition in range(len(plan.partitions)):
        resolve_partition(started.load_id, partition, staging)
    prepared = plan_writes(started.load_id, None, staging)
    items = [
        deserialize_item(item)
        for chunk in range(prepared.chunks)
        for item in chunk_items(started.load_id, chunk, staging)
    ]
    return Staged(items, list(prepared.covers), prepared.report)
