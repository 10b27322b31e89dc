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
from typing import Any

from ipmeta.store import Store, WriteStats
from loader import tasks
from loader.staging import Staging

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
    report: dict[str, Any] = field(default_factory=dict)


def run_load(
    sources: Sequence[str | Path],
    options: tasks.LoadOptions,
    store: Store,
    staging: Staging,
    *,
    parallel_chunks: int = DEFAULT_PARALLEL_CHUNKS,
    on_items_written: Callable[[int], None] | None = None,
    on_prepared: Callable[[tasks.Prepared], None] | None = None,
    resume: str | None = None,
) -> LoadResult:
    started = time.monotonic()
    if resume is not None:
        prepared = tasks.resume(resume, store, options)
    else:
        prepared = tasks.prepare(sources, options, store, staging)
    if on_prepared is not None:
        on_prepared(prepared)
    if prepared.status != tasks.PREPARED:
        return LoadResult(
            prepared.status,
            prepared.load_id,
            prepared.version,
            prepared.items,
            round(time.monotonic() - started, 3),
            report=prepared.report,
        )

    totals = WriteStats()
    done = set(prepared.done)

    def write(index: int) -> None:
        stats = tasks.write_chunk(
            prepared.load_id,
            index,
            store,
            staging,
            workers=options.write_workers,
            lease_seconds=options.lock_lease_seconds,
        )
        totals.merge(stats)
        if on_items_written is not None:
            on_items_written(stats.items)

    with ThreadPoolExecutor(max_workers=parallel_chunks) as pool:
        for _ in pool.map(write, [index for index in range(prepared.chunks) if index not in done]):
            pass
    outcome = tasks.activate(prepared.load_id, store, staging, lease_seconds=options.lock_lease_seconds)
    return LoadResult(
        tasks.ACTIVATED,
        prepared.load_id,
        prepared.version,
        prepared.items,
        round(time.monotonic() - started, 3),
        totals.as_dict(),
        outcome["report"],
    )
