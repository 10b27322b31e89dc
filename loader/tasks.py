"""The loader's tasks, one function per Step Functions state.

``prepare`` → ``write_chunk`` (once per chunk, in parallel) → ``activate``.
``loader.handlers`` wraps them for Lambda; ``loader.driver`` runs them locally
with a thread pool standing in for the Map state. Each task takes and returns
plain data, so the same code runs in both places.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipmeta import keys
from ipmeta.errors import IpmetaError
from ipmeta.store import BATCH_WRITE_LIMIT, Store, WriteStats
from loader import normalize
from loader.source import SourceError, read_rows, sha256_of
from loader.staging import MANIFEST, Staging, chunk_name, decode_chunk, encode_chunk

log = logging.getLogger(__name__)

#: Items per chunk: one Map iteration, about 100 BatchWriteItem calls.
DEFAULT_CHUNK_SIZE = 2500
DEFAULT_WRITE_WORKERS = 8


class VerificationFailed(IpmetaError):
    status = 500
    code = "LOAD_VERIFICATION_FAILED"


@dataclass(frozen=True)
class LoadOptions:
    columns: Sequence[str] | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    write_workers: int = DEFAULT_WRITE_WORKERS


@dataclass(frozen=True)
class Prepared:
    status: str  #: "prepared", or "unchanged" when the active version has the same source
    load_id: str
    version: int
    chunks: int
    items: int
    report: dict[str, Any] = field(default_factory=dict)

    def to_event(self) -> dict[str, Any]:
        """The Step Functions output: the Map state iterates over ``chunks``."""
        return {
            "status": self.status,
            "load_id": self.load_id,
            "version": self.version,
            "chunks": [{"load_id": self.load_id, "chunk": index} for index in range(self.chunks)],
        }


def load_id_of(version: int) -> str:
    return keys.format_version(version)


def version_of(load_id: str) -> int:
    if not load_id.startswith("v") or not load_id[1:].isdigit():
        raise ValueError(f"{load_id!r} is not a load id (expected v<number>)")
    return int(load_id[1:])


def prepare(sources: Sequence[Path], options: LoadOptions, store: Store, staging: Staging) -> Prepared:
    """Read, validate and normalize the sources; stage shuffled chunks for a new version."""
    started = time.monotonic()
    checksum = sha256_of(sources)
    active = store.read_active_version(consistent=True)
    if active is not None:
        active_meta = store.get_version_meta(active) or {}
        if active_meta.get("sha256") == checksum:
            return Prepared("unchanged", load_id_of(active), active, 0, int(active_meta.get("items", 0)))

    rows = [row for path in sources for row in read_rows(path, options.columns)]
    if not rows:
        raise SourceError(f"{', '.join(map(str, sources))}: no ranges to load")
    segments, overlapping_rows = normalize.resolve_last_wins(rows)
    column_types = normalize.infer_column_types(rows)
    version = store.allocate_version()
    items = list(normalize.build_items(version, rows, segments, column_types))
    per_partition = normalize.items_per_partition(items)
    normalize.shuffle_items(items, seed=checksum)
    chunks = normalize.chunk(items, options.chunk_size)

    load_id = load_id_of(version)
    for index, chunk_items in enumerate(chunks):
        staging.put(load_id, chunk_name(index), encode_chunk(chunk_items))
    hottest = max(per_partition.values())
    report = {
        "rows": len(rows),
        "segments": len(segments),
        "overlapping_rows": overlapping_rows,
        "splits": normalize.count_splits(segments),
        "items": len(items),
        "partitions": len(per_partition),
        "hottest_partition_share": round(hottest / len(items), 4),
        "prepare_seconds": round(time.monotonic() - started, 3),
    }
    staging.put(load_id, MANIFEST, json.dumps({"items_per_partition": per_partition}).encode())
    store.put_version_meta(
        version,
        {
            "status": "loading",
            "load_id": load_id,
            "sha256": checksum,
            "sources": [path.name for path in sources],
            "columns": list(column_types),
            "column_types": column_types,
            "previous": active if active is not None else 0,
            "created_at": int(time.time()),
            "chunks": len(chunks),
            **report,
        },
    )
    return Prepared("prepared", load_id, version, len(chunks), len(items), report)


def write_chunk(
    load_id: str, index: int, store: Store, staging: Staging, *, workers: int = DEFAULT_WRITE_WORKERS
) -> WriteStats:
    """Write one staged chunk with parallel BatchWriteItem calls of 25 items.

    Writing a chunk twice is harmless: items are whole-item puts keyed by
    (partition, offset), so a second write stores the same item again.
    """
    items = decode_chunk(staging.get(load_id, chunk_name(index)))
    batches = [
        items[offset : offset + BATCH_WRITE_LIMIT] for offset in range(0, len(items), BATCH_WRITE_LIMIT)
    ]
    stats = WriteStats()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(lambda batch: store.batch_write(batch, stats), batches):
            pass
    return stats


def verify(load_id: str, store: Store, staging: Staging, *, workers: int = 16) -> None:
    """Every partition holds exactly the items ``prepare`` staged for it."""
    expected: dict[str, int] = json.loads(staging.get(load_id, MANIFEST))["items_per_partition"]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = dict(zip(expected, pool.map(store.count_partition, expected), strict=True))
    wrong = {pk: (count, found[pk]) for pk, count in expected.items() if found[pk] != count}
    if wrong:
        sample = ", ".join(
            f"{pk}: expected {want}, found {got}" for pk, (want, got) in list(wrong.items())[:5]
        )
        raise VerificationFailed(f"{len(wrong)} partitions do not hold the staged items ({sample})")


def activate(load_id: str, store: Store, staging: Staging) -> dict[str, Any]:
    """Verify the counts, then switch the pointer, only if it still names the version we started from."""
    version = version_of(load_id)
    meta = store.get_version_meta(version)
    if meta is None:
        raise ValueError(f"load {load_id} was never prepared")
    verify(load_id, store, staging)
    previous = int(meta.get("previous", 0)) or None
    store.activate_version(version, expected_current=previous)
    store.put_version_meta(version, {**meta, "status": "active", "activated_at": int(time.time())})
    if previous is not None:
        previous_meta = store.get_version_meta(previous)
        if previous_meta is not None:
            store.put_version_meta(previous, {**previous_meta, "status": "retired"})
    event = {
        "event": "dataset.activated",
        "version": keys.format_version(version),
        "items": meta.get("items"),
    }
    log.info(json.dumps(event))
    return {"load_id": load_id, "version": version, "activated": True, "items": meta.get("items")}
