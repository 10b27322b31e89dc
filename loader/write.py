"""``write_chunk``: one staged chunk into the table, exactly once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from loader.batching import batched
from loader.errors import LoadNotFound, LoadNotWritable
from loader.options import DEFAULT_WRITE_WORKERS
from loader.records import LoadStatus, version_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.staging import Staging, chunk_name, decode_chunk
from loader.table import BATCH_WRITE_LIMIT, LoaderTable, WriteStats


def write_chunk(
    load_id: str,
    index: int,
    table: LoaderTable,
    staging: Staging,
    *,
    workers: int = DEFAULT_WRITE_WORKERS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
) -> WriteStats:
    """Write one staged chunk with parallel BatchWriteItem calls of 25 items, once.

    A chunk already in the load item's ``done`` set is skipped. Writing one
    twice (a crash between the writes and the mark) is harmless anyway: items
    are whole-item puts keyed by (partition, offset).
    """
    version = version_of(load_id)
    load = table.get_load(version)
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load.status != LoadStatus.PREPARED:
        raise LoadNotWritable(f"load {load_id} is {load.status}; chunk {index} is not written")
    if index in load.done:
        return WriteStats()
    at = time.time() if now is None else now
    # Renewing the lease also proves the lock is still ours.
    table.acquire_lock(load_id, lease_seconds=lease_seconds, now=at)
    items = decode_chunk(staging.get(load_id, chunk_name(index)))
    stats = WriteStats()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(lambda batch: table.batch_write(batch, stats), batched(items, BATCH_WRITE_LIMIT)):
            pass
    table.mark_chunk_done(version, index, stats.as_dict(), time.time() if now is None else now)
    return stats
