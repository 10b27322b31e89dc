"""``start``: the first state of a load. Unchanged? Resumable? Otherwise a new version, locked.

It reads the sources once, streaming, for their checksum (S3 objects are not
downloaded: their bodies are hashed as they arrive), compares with the active
version, finds an unfinished load of the same sources to resume, and else
allocates a version, takes the lock, writes the load item and stages the
load's descriptor for every later task. A dry run allocates nothing: its
files are staged under a ``dry-run-`` id and the table is never written.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipmeta.schema.records import VersionMeta, VersionStatus
from loader.errors import LoadNotFound, LoadNotWritable, SourceError
from loader.options import LoadOptions
from loader.pipeline.abort import fail
from loader.pipeline.descriptor import LoadDescriptor, Source
from loader.records import LoadItem, LoadStatus, load_id_of, version_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.store import s3
from loader.store.source import is_s3_uri, split_s3_uri
from loader.store.staging import Staging
from loader.store.table import LoaderTable

#: What ``start`` says a load is.
STARTED, UNCHANGED, DRY_RUN = "started", "unchanged", "dry-run"


@dataclass(frozen=True)
class Started:
    status: str  #: "started" (a new or resumed load), "unchanged" or "dry-run"
    load_id: str
    version: int
    sources: int  #: how many source files the scan reads
    load_status: LoadStatus | None = None  #: a resumed load's status: preparing or prepared
    done: frozenset[int] = frozenset()  #: a resumed load's written chunks

    def to_event(self) -> dict[str, object]:
        """The Step Functions output: the scan Map iterates over ``scans``."""
        return {
            "status": self.status,
            "load_id": self.load_id,
            "version": self.version,
            "prepared": self.load_status == LoadStatus.PREPARED,
            "scans": [{"load_id": self.load_id, "source": index} for index in range(self.sources)],
        }


def start(
    sources: Sequence[str | Path],
    options: LoadOptions,
    table: LoaderTable | None,
    staging: Staging,
    *,
    now: float | None = None,
) -> Started:
    """A load to run: a new version, the unfinished load of the same sources, or none (unchanged).

    A dry run reads and writes no table (``table`` may be None).
    """
    if not sources:
        raise SourceError("no source files given")
    named = tuple(Source.of(source) for source in sources)
    # The Locations file a GeoIP2 load joins is as much its data as the blocks: a new one is a change.
    extra = (options.locations,) if options.locations else ()
    checksum = sha256_of([*(source.uri for source in named), *extra])
    fingerprint = options.fingerprint()
    at = time.time() if now is None else now
    if options.dry_run:
        load_id = f"dry-run-{secrets.token_hex(6)}"
        LoadDescriptor(load_id, 0, named, options, checksum, fingerprint, at).stage(staging)
        return Started(DRY_RUN, load_id, 0, len(named))
    if table is None:
        raise ValueError("a load that writes needs a table; only a dry run goes without")
    table = table.for_dataset(options.dataset)
    active = table.lookup.read_active_version(consistent=True)
    meta = table.lookup.get_version_meta(active) if active is not None else None
    if meta is not None and meta.sha256 == checksum and (meta.fingerprint or fingerprint) == fingerprint:
        return Started(UNCHANGED, load_id_of(meta.version, table.dataset), meta.version, 0)
    resumable = _resumable_load(table, checksum, fingerprint, active or 0)
    if resumable is not None:
        return resume(resumable.load_id, table, options, now=at)
    # Named before anything is written, so a cleanup visits this dataset even if its load fails.
    table.versions.register_dataset(serving=False)
    bases = compared_versions(table, options, meta)
    version = table.versions.allocate()
    load_id = load_id_of(version, table.dataset)
    table.lock.acquire(load_id, lease_seconds=options.lock_lease_seconds, now=at)
    try:
        load = LoadItem(
            version=version,
            status=LoadStatus.PREPARING,
            sha256=checksum,
            fingerprint=fingerprint,
            options=options,
            sources=tuple(source.uri for source in named),
            previous=active or 0,
            created_at=at,
            updated_at=int(at),
        )
        table.loads.put(load)
        LoadDescriptor(load_id, version, named, options, checksum, fingerprint, at, *bases).stage(staging)
    except BaseException as error:
        fail(load_id, f"start failed: {error!r}"[:1000], table)
        raise
    return Started(STARTED, load_id, version, len(named), LoadStatus.PREPARING)


def compared_versions(
    table: LoaderTable, options: LoadOptions, active: VersionMeta | None
) -> tuple[int, int]:
    """The version a reload diffs against as a delta (``delta_base``), or else the one it is only
    measured against for the guard (``guard_base``): ``(base, measured)``, at most one of them set."""
    base = delta_base(table, options, active)
    return base, 0 if base else guard_base(table, options, active)


def delta_base(table: LoaderTable, options: LoadOptions, active: VersionMeta | None) -> int:
    """The full version a reload diffs against, or 0: the load is written as a full version.

    A delta sits on a full version, never on another delta: over an active delta,
    its base. None when the policy says never, when the load builds reverse
    indexes (their shard plans are whole-version: the index of a delta would not
    answer like a full load's, so such loads stay full), or when the base already
    carries ``delta_max_chain`` deltas (a full version compacts the chain).
    """
    if options.delta == "never" or options.index_field or options.flag_column or active is None:
        return 0
    base = active.base or active.version
    metas = table.lookup.list_version_metas()
    base_meta = next((meta for meta in metas if meta.version == base), None)
    if base_meta is None or not base_meta.retained or base_meta.value_index or base_meta.flag_index:
        return 0
    chain = sum(1 for meta in metas if meta.base == base and meta.status != VersionStatus.FAILED)
    if options.delta == "auto" and chain >= options.delta_max_chain:
        return 0
    return base


def guard_base(table: LoaderTable, options: LoadOptions, active: VersionMeta | None) -> int:
    """The full version a release written full is measured against for the guard, or 0.

    A load with a ``max_change_ratio`` that ``delta_base`` writes full (``--delta never``,
    reverse indexes) still has its change measured: resolve diffs each partition against this
    version (counts only, bounded by the partition as a delta's diff is), and the guard reads the
    share. The active version's base, as for a delta: what the release would replace.
    """
    if options.max_change_ratio is None or active is None:
        return 0
    base = active.base or active.version
    base_meta = table.lookup.get_version_meta(base)
    return base if base_meta is not None and base_meta.retained else 0


def _resumable_load(table: LoaderTable, checksum: str, fingerprint: str, active: int) -> LoadItem | None:
    candidates = [
        load
        for load in table.loads.list_all()
        if load.status in (LoadStatus.PREPARING, LoadStatus.PREPARED)
        and load.sha256 == checksum
        and load.fingerprint == fingerprint
        # Started from another active version, it would lose activation anyway.
        and load.previous == active
    ]
    return max(candidates, key=lambda load: load.version) if candidates else None


def resume(
    load_id: str, table: LoaderTable, options: LoadOptions | None = None, *, now: float | None = None
) -> Started:
    """Take an unfinished load back: its lock, and whatever phases and chunks remain."""
    table = table.for_load(load_id)
    load = table.loads.get(version_of(load_id))
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load.status not in (LoadStatus.PREPARING, LoadStatus.PREPARED):
        raise LoadNotWritable(f"load {load_id} is {load.status}; only an unfinished load resumes")
    lease = options.lock_lease_seconds if options else DEFAULT_LOCK_LEASE_SECONDS
    table.lock.acquire(load_id, lease_seconds=lease, now=time.time() if now is None else now)
    return Started(STARTED, load_id, load.version, len(load.sources), load.status, load.done)


def sha256_of(uris: Iterable[str]) -> str:
    """One checksum over every source's bytes, streamed (S3 bodies are hashed as they arrive)."""
    digest = hashlib.sha256()
    for uri in uris:
        for block in _blocks(uri):
            digest.update(block)
    return digest.hexdigest()


def _blocks(uri: str) -> Iterator[bytes]:
    if is_s3_uri(uri):
        bucket, key = split_s3_uri(uri)
        yield from s3.stream(bucket, key)
        return
    path = Path(uri)
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    with path.open("rb") as handle:
        yield from iter(lambda: handle.read(1 << 20), b"")
