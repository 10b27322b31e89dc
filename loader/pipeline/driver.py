"""Runs a load locally with the same task functions the state machine runs in AWS.

``start`` → ``scan_source`` for each source → ``plan_partitions`` →
``resolve_partition`` for each partition → ``plan_writes`` → ``write_chunk``
for each chunk → ``activate``. The scans and the resolves run in a pool of
processes over all cores (``workers``), as the Map states run them in
parallel Lambdas, so the CPU-bound phases are not capped by the GIL; the
writes run in threads (they wait on DynamoDB). Every phase has a progress bar.

A crash leaves the load item and the staged files behind. Running the same
sources again, or ``--resume``, finishes the load: each task skips work whose
result is already staged (a scan, a partition) or recorded (a chunk in the
load item's ``done`` set, read with ConsistentRead).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from loader.errors import LoadRejected
from loader.options import LoadOptions
from loader.pipeline import start as starting
from loader.pipeline.abort import discard, fail
from loader.pipeline.activate import activate
from loader.pipeline.partitions import plan_partitions
from loader.pipeline.plan_writes import Prepared, plan_writes
from loader.pipeline.resolve import resolve_partition
from loader.pipeline.scan import scan_source
from loader.pipeline.write import write_chunk
from loader.records import LoadReport, LoadStatus
from loader.settings import DEFAULT_PARALLEL_CHUNKS
from loader.store.batch_writes import WriteStats
from loader.store.edge_cache import EdgeCache
from loader.store.staging import Staging
from loader.store.table import LoaderTable

#: Passes over the chunks a write pass left unrecorded, before activation refuses the load.
UNRECORDED_PASSES = 2

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class LoadResult:
    status: str  #: "activated", "held" (by the guard), "unchanged" or "dry-run"
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
    workers: int = 1,
    on_items_written: Callable[[int], None] | None = None,
    on_prepared: Callable[[Prepared], None] | None = None,
    resume: str | None = None,
    progress: bool = False,
    edge: EdgeCache | None = None,
) -> LoadResult:
    """Load ``sources`` as a new version (or finish the load ``resume`` names); ``edge`` (default:
    the environment's distribution) is invalidated once it answers."""
    began = time.monotonic()
    started = (
        starting.resume(resume, table, options)
        if resume
        else starting.start(sources, options, table, staging)
    )
    if started.status == starting.UNCHANGED:
        report = LoadReport(status="unchanged", version=started.load_id, items_written=0)
        meta = table.for_load(started.load_id).lookup.get_version_meta(started.version)
        items = meta.items if meta else 0
        return LoadResult("unchanged", started.load_id, started.version, items, _since(began), report=report)
    try:
        prepared = _prepare(started, table, staging, workers=workers, progress=progress, began=time.time())
    except BaseException as error:
        _give_up(started, error, table, staging)
        raise
    if on_prepared is not None:
        on_prepared(prepared)
    if prepared.status == starting.DRY_RUN:
        staging.delete_load(started.load_id)
        return LoadResult("dry-run", "", 0, prepared.items, _since(began), report=prepared.report)
    write_pass = functools.partial(
        _write_chunks,
        options=options,
        table=table,
        staging=staging,
        parallel_chunks=parallel_chunks,
        on_items_written=on_items_written,
        progress=progress,
    )
    totals = _write_until_recorded(prepared, write_pass, table)
    outcome = activate(prepared.load_id, table, staging, lease_seconds=options.lock_lease_seconds, edge=edge)
    return LoadResult(
        str(outcome.status),
        prepared.load_id,
        prepared.version,
        prepared.items,
        _since(began),
        totals.as_dict(),
        outcome.report,
    )


def _give_up(started: starting.Started, error: BaseException, table: LoaderTable, staging: Staging) -> None:
    """A preparation broke: nothing of the load can be live yet, so free the lock now, not after the lease.

    Refused sources leave no trace but the error; any other failure marks the load
    failed, and cleanup removes what it staged. A dry run only leaves files.
    """
    if started.status == starting.DRY_RUN:
        staging.delete_load(started.load_id)
    elif isinstance(error, LoadRejected) and discard(started.load_id, table, staging):
        return
    elif not isinstance(error, KeyboardInterrupt):
        fail(started.load_id, f"prepare failed: {error!r}"[:1000], table)


def prepare(
    sources: Sequence[str | Path],
    options: LoadOptions,
    table: LoaderTable | None,
    staging: Staging,
    *,
    workers: int = 1,
    now: float | None = None,
) -> Prepared:
    """Every step before the writes (``start`` to ``plan_writes``): a load ready to write, or why not."""
    started = starting.start(sources, options, table, staging, now=now)
    if started.status == starting.UNCHANGED:
        assert table is not None  # only a load against a table can find itself unchanged
        meta = table.for_load(started.load_id).lookup.get_version_meta(started.version)
        report = LoadReport(status="unchanged", version=started.load_id, items_written=0)
        return Prepared("unchanged", started.load_id, started.version, 0, meta.items if meta else 0, report)
    return _prepare(started, table, staging, workers=workers, progress=False, began=time.time())


def _since(began: float) -> float:
    return round(time.monotonic() - began, 3)


def _prepare(
    started: starting.Started,
    table: LoaderTable | None,
    staging: Staging,
    *,
    workers: int,
    progress: bool,
    began: float,
) -> Prepared:
    """Scan, plan the partitions, resolve them, plan the writes (each step skips what is done)."""
    if started.load_status == LoadStatus.PREPARED:
        assert table is not None  # a resumed load has a table
        load = table.for_load(started.load_id).loads.get(started.version)
        assert load is not None
        return Prepared(
            "prepared", started.load_id, started.version, load.chunks, load.items, load.report, load.done
        )
    load_id = started.load_id
    with _pool(workers) as pool:
        _run_all(
            pool,
            task=scan_source,
            load_id=load_id,
            indexes=range(started.sources),
            staging=staging,
            phase="scanning sources",
            progress=progress,
        )
        plan = plan_partitions(load_id, staging)
        partitions = range(len(plan.partitions))
        # A load over a base reads it while resolving: the table itself on a thread, its
        # settings in a process (a boto3 client does not cross to another process).
        reach = table if workers <= 1 or table is None else table.settings
        _run_all(
            pool,
            task=functools.partial(resolve_partition, table=reach),
            load_id=load_id,
            indexes=partitions,
            staging=staging,
            phase="resolving partitions",
            progress=progress,
        )
    return plan_writes(load_id, None if started.status == starting.DRY_RUN else table, staging, started=began)


def _pool(workers: int) -> Executor:
    if workers <= 1:
        return ThreadPoolExecutor(max_workers=1)
    # Spawned, not forked: the parent holds boto3 clients and threads.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _run_all(
    pool: Executor,
    *,
    task: Callable[[str, int, Staging], Any],
    load_id: str,
    indexes: Iterable[int],
    staging: Staging,
    phase: str,
    progress: bool,
) -> None:
    futures = [pool.submit(task, load_id, index, staging) for index in indexes]
    with tqdm(total=len(futures), desc=phase, unit="task", disable=not progress or None) as bar:
        for future in as_completed(futures):
            future.result()
            bar.update(1)


def _write_until_recorded(
    prepared: Prepared, write_pass: Callable[[Prepared], WriteStats], table: LoaderTable
) -> WriteStats:
    """Write every chunk, then again each one the load item does not record, as ``--resume`` would.

    Activation refuses a load while a chunk is missing from ``done``. Once, a
    75-minute load into dynalite ended its write pass with 104 chunks written
    but not recorded (their items in the table, their marks nowhere), so the
    driver reads the load item back (ConsistentRead) and writes what it lacks,
    a bounded number of times, instead of leaving a finished load to a manual
    resume. A chunk write is whole-item puts and its mark is conditional, so a
    second pass changes no item and counts each chunk once.
    """
    totals = WriteStats()
    pending = prepared
    for _ in range(1 + UNRECORDED_PASSES):
        totals.merge(write_pass(pending))
        load = table.for_load(prepared.load_id).loads.get(prepared.version)
        missing = load.unrecorded_chunks if load is not None else []
        if load is None or not missing:
            break  # all recorded (or the load is gone, which activation reports)
        logger.warning(
            "load %s: %d chunks written but not recorded (first: %s); writing them again",
            prepared.load_id,
            len(missing),
            missing[:5],
        )
        pending = dataclasses.replace(prepared, done=load.done)
    return totals


def _write_chunks(
    prepared: Prepared,
    *,
    options: LoadOptions,
    table: LoaderTable,
    staging: Staging,
    parallel_chunks: int,
    on_items_written: Callable[[int], None] | None,
    progress: bool,
) -> WriteStats:
    totals = WriteStats()
    remaining = [index for index in range(prepared.chunks) if index not in prepared.done]
    described = (
        f"writing items ({len(prepared.done)} chunks already written)" if prepared.done else "writing items"
    )
    with tqdm(total=prepared.items, desc=described, unit="item", disable=not progress or None) as bar:

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
            bar.update(stats.items)
            if on_items_written is not None:
                on_items_written(stats.items)

        with ThreadPoolExecutor(max_workers=parallel_chunks) as pool:
            for _ in pool.map(write, remaining):
                pass
    return totals
