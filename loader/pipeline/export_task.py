"""``export``: the version a load wrote, as a MaxMind DB at ``exports/<version>.mmdb`` in the source bucket.

With ``exportMmdb`` on, the state machine runs this between WriteChunks and
Activate, and Activate's change event names the file (``export``).

**Why before activation.** Activation is the one conditional pointer write
that makes a version live, followed by its change event. Exporting after it
would leave a live version with no file and no event (or an event naming a
file that never came) whenever the export failed. Exported first, a failed
export is a failed load: the Catch runs Abort, the previous version keeps
serving, and nothing was announced. The version is verified here, with the
very check Activate runs (``activate.verify``), so the file never holds a
version that then fails its own activation's check. It is one count, not two:
both save each partition found complete under the version's ``uid``
(``loader.store.partition_counts``), and Activate counts only what the export
did not find complete (nothing, once the export passed). Like Activate's, the
check stops at ``until`` with ``VerificationPending``, what it counted saved,
and the state machine's retried Export counts on from there: no invocation's
time grows with the version. Between the two, the
export renews the load lock, so no other load starts and no cleanup takes
this load for abandoned while the file is written.

The file streams: ranges come from the table a page at a time and the writer
spools to ``/tmp`` (``loader.export.mmdb_writer``), so memory does not grow with the
version; ``/tmp`` holds the database and the writer's two temporary files.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from ipmeta.schema.keys import format_version
from ipmeta.schema.records import VersionMeta
from loader.errors import ExportTooLarge, LoadNotFound
from loader.export.files import ExportStats, write_mmdb
from loader.export.version_ranges import ranges_of_version
from loader.pipeline.activate import activatable_load, verify
from loader.records import LoadStatus, load_id_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.store import s3
from loader.store.table import LoaderTable

#: Exports live under ``exports/`` of the source bucket; the stack grants PutObject there only.
EXPORT_PREFIX: Final = "exports"
DATABASE_TYPE: Final = "ipmeta"
#: CPU seconds an exported item takes: the writer's 30.83 µs a range (``bench.mmdb_export``, its
#: slope from 1 M to 2 M ranges, ``bench/results/mmdb_export.json``), doubled for reading the
#: version from the table and uploading the file, which were not measured at that size.
EXPORT_CPU_SECONDS_PER_ITEM: Final = 2 * 30.83e-6
#: The Export function's timeout (``stacks/load/loader_functions.py``: 15 minutes, Lambda's most).
EXPORT_INVOCATION_SECONDS: Final = 900.0
#: Lambda's memory that buys one whole vCPU; less buys a share of one (the writer is one thread).
FULL_VCPU_MB: Final = 1_769


def max_export_items(memory_mb: int, seconds: float) -> int:
    """The most items one Export invocation of ``memory_mb`` writes as a file in ``seconds``
    (docs/decisions.md, "One Export task's limit"); a larger version is refused before any work."""
    return int(seconds * min(1.0, memory_mb / FULL_VCPU_MB) / EXPORT_CPU_SECONDS_PER_ITEM)


@dataclass(frozen=True)
class Exported:
    """Where the export went and what it holds: the change event's ``export``."""

    bucket: str
    key: str
    format: str
    bytes: int
    ranges: int
    #: IPv6 ranges in ``::/96``, left out: a MaxMind DB keeps IPv4 there
    ipv6_left_out: int
    seconds: float

    def to_event(self) -> dict[str, Any]:
        return asdict(self)


def export_key(version: int, dataset: str) -> str:
    """``exports/v7.mmdb`` for ``default``, ``exports/city.v7.mmdb`` for ``city``: named after the load."""
    return f"{EXPORT_PREFIX}/{load_id_of(version, dataset)}.mmdb"


def export_version(
    load_id: str,
    table: LoaderTable,
    bucket: str,
    *,
    workdir: Path | None = None,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
    until: float | None = None,
    max_items: int | None = None,
) -> Exported:
    """Verify the load's version, write it as a MaxMind DB under ``workdir`` (/tmp), upload it, delete it.

    ``until`` bounds the verification (``VerificationPending`` past it, its progress saved);
    without it (locally) the check runs to the end. ``max_items`` (the Lambda's
    ``MAX_EXPORT_ITEMS``) refuses a larger version before any of it is counted or written.
    """
    table = table.for_load(load_id)
    load = activatable_load(load_id, table)
    if max_items is not None:
        _refuse_past(load_id, table, load.version, max_items)
    if load.status == LoadStatus.PREPARED:
        table.lock.acquire(load_id, lease_seconds=lease_seconds, now=time.time() if now is None else now)
        verify(load, table, until=until)
    meta = table.lookup.get_version_meta(load.version)
    if meta is None:
        raise LoadNotFound(f"load {load_id} has no version metadata to export")
    key = export_key(load.version, table.dataset)
    with tempfile.TemporaryDirectory(prefix="ipmeta-export-", dir=workdir) as folder:
        out = Path(folder) / Path(key).name
        stats = write_version_mmdb(table, meta, out)
        s3.upload(out, bucket, key)
    left_out = int(stats.details.get("ipv6_ranges_in_ipv4_space", 0))
    return Exported(bucket, key, "mmdb", stats.file_bytes, stats.ranges, left_out, stats.seconds)


def _refuse_past(load_id: str, table: LoaderTable, version: int, max_items: int) -> None:
    """``ExportTooLarge`` when the version's items (a delta's with its base's: the file holds
    both) are more than ``max_items``."""
    meta = table.lookup.get_version_meta(version)
    base = table.lookup.get_version_meta(meta.base) if meta is not None and meta.base else None
    items = (meta.items if meta else 0) + (base.items if base else 0)
    if items > max_items:
        raise ExportTooLarge(
            f"load {load_id}: {items:,} items are more than the {max_items:,} the Export task writes "
            "within its time (docs/decisions.md, the MaxMind DB export); write this version's file "
            "with ipmeta export on a machine"
        )


def write_version_mmdb(table: LoaderTable, meta: VersionMeta, out: Path) -> ExportStats:
    """The version as a MaxMind DB: records as the API answers; metadata with version, source, time."""
    return write_mmdb(
        ranges_of_version(table, meta),
        out,
        database_type=DATABASE_TYPE,
        description={"en": mmdb_description(meta)},
        build_epoch=meta.created_at or None,
    )


def mmdb_description(meta: VersionMeta) -> str:
    loaded = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(meta.created_at))
    name = meta.load_id or format_version(meta.version)
    return f"ipmeta dataset {name}; source sha256 {meta.sha256}; loaded {loaded}"
