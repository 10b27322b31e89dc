"""Runs a load locally with the same tasks the state machine runs in AWS.

A thread pool over the chunks stands in for the Map state; each chunk's writes
are themselves parallel, as in the ``write_chunk`` Lambda. A crash leaves the
load item and the staged chunks behind, so ``resume`` (or running the same
source again) finishes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from loader.activate import activate
from loader.options import LoadOptions
from loader.prepare import Prepared, prepare
from loader.prepare import resume as resume_load
from loader.records import LoadReport, LoadStatus
from loader.staging import Staging
from loader.table import LoaderTable, WriteStats
from loader.write import write_chunk

#: Chunks written at once; with DEFAULT_WRITE_WORKERS each, 16 requests are in flight.
DEFAULT_PARALLEL_CHUNKS = 2


@dataclass
class LoadResult:
    status: str  #: "activated", "unchanged" or "dry-run"
    load_id: str
    version: int
    items: int
    seconds: float
    write: dict[str, int] = field(default_factory=dict)
    report: LoadReport = field(default_factory=LoadReport)


def run_load(
    sources: Sequence[str | Path],
    options: LoadOptions,
    table: LoaderTable,
    staging: Staging,
    *,
    parallel_chunks: int = DEFAULT_PARALLEL_CHUNKS,
    on_items_written: Callable[[int], None] | None = None,
    on_prepared: Callable[[Prepared], None] | None = None,
    resume: str | None = None,
) -> LoadResult:
    started = time.monotonic()
    prepared = resume_load(resume, table, options) if resume else prepare(sources, options, table, staging)
    if on_prepared is not None:
        on_prepared(prepared)
    if prepared.status != LoadStatus.PREPARED:
        seconds = round(time.monotonic() - started, 3)
        return LoadResult(
            prepared.status,
            prepared.load_id,
            prepared.version,
            prepared.items,
            seconds,
            report=prepared.report,
        )
    totals = WriteStats()

    def write(index: int) -> None:
        stats = write_chunk(
            prepared.load_id,
            index,
            table,
            staging,
            workers=options.write_workers,
            lease_seconds=options.lock_lease_seconds,
        )
        totals.merge(stats)
        if on_items_written is not None:
            on_items_written(stats.items)

    with ThreadPoolExecutor(max_workers=parallel_chunks) as pool:
        for _ in pool.map(write, [index for index in range(prepared.chunks) if index not in prepared.done]):
            pass
    outcome = activate(prepared.load_id, table, staging, lease_seconds=options.lock_lease_seconds)
    seconds = round(time.monotonic() - started, 3)
    return LoadResult(
        str(LoadStatus.ACTIVATED),
        prepared.load_id,
        prepared.version,
        prepared.items,
        seconds,
        totals.as_dict(),
        outcome.report,
    )
