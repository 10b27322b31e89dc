"""The loader's own records: the load item, its report, the manifest, the lock, a feed's state, pointers.

The version metadata the lookup reads is in ``ipmeta.schema.records``; these are the
loader's bookkeeping, which the lookup never reads. ``loader.store`` stores and
returns them (``loads``, ``manifests``, ``load_lock``, ``feed_states``,
``region_pointers``); nothing else spells their attributes.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ipmeta.schema import keys
from loader.errors import LoadNotFound
from loader.options import LoadOptions
from loader.reverse_index import IndexCensus


class LoadStatus(StrEnum):
    """preparing → prepared → activated (or held, then activated), or failed; deleted once cleanup removed it.

    A load that never left ``preparing`` did not stage all its chunks and cannot resume.
    """

    PREPARING = "preparing"
    PREPARED = "prepared"
    #: Written and verified, but the guard held it: ``ipmeta activate`` accepts it.
    HELD = "held"
    ACTIVATED = "activated"
    FAILED = "failed"
    DELETED = "deleted"


#: Between a dataset's name and the version in a load id: a name never holds one.
_LOAD_ID_SEPARATOR = "."


def load_id_of(version: int, dataset: str) -> str:
    """A load is named after the version it writes: ``v7`` in ``default``, ``city.v7`` in ``city``.

    The dataset travels in the id, so every state of a load (and its staging
    folder) knows whose keys it writes from the one id the state machine passes.
    """
    label = keys.format_version(version)
    return label if dataset == keys.DEFAULT_DATASET else f"{dataset}{_LOAD_ID_SEPARATOR}{label}"


def _split_load_id(load_id: str) -> tuple[str, int]:
    dataset, _, label = load_id.rpartition(_LOAD_ID_SEPARATOR)
    dataset = dataset or keys.DEFAULT_DATASET
    if not label.startswith("v") or not label[1:].isdigit() or not keys.DATASET_NAME.fullmatch(dataset):
        raise LoadNotFound(f"{load_id[:80]!r} is not a load id (expected v<number> or <dataset>.v<number>)")
    return dataset, int(label[1:])


def version_of(load_id: str) -> int:
    return _split_load_id(load_id)[1]


def dataset_of(load_id: str) -> str:
    return _split_load_id(load_id)[0]


#: Report entries too large for a load item or a state machine's output; the saved report keeps them.
_DETAILS: tuple[str, ...] = ("items_per_bucket", "rejected")
#: Entries a report holds only when there is something to say.
_WHEN_ANY: tuple[str, ...] = ("mixed_columns",)


@dataclass(frozen=True)
class LoadReport:
    """What a load read, decided and wrote: printed, saved as JSON, summarized in the load item."""

    status: str | None = None
    load_id: str | None = None
    version: str | None = None
    sources: tuple[str, ...] = ()
    sha256: str | None = None
    rows_read: int | None = None
    rows_rejected: int | None = None
    rejected: tuple[str, ...] = ()
    overlap_policy: str | None = None
    overlaps_resolved: int | None = None
    segments: int | None = None
    coalesced: int | None = None  #: segments merged into a neighbour with equal data
    splits: int | None = None
    covers: int | None = None  #: runs of whole buckets answered from the cover list
    partitions: int | None = None
    items: int | None = None
    #: DynamoDB's size of the range items (cover heads and index attributes aside); their write
    #: units are counted on the items as written, index keys and all (``ipmeta plan``)
    item_bytes: int | None = None
    max_item_bytes: int | None = None
    chunks: int | None = None
    column_types: Mapping[str, str] = field(default_factory=dict)
    #: column -> why it is text though it holds numbers: the first row of text, named
    mixed_columns: Mapping[str, str] = field(default_factory=dict)
    items_per_bucket: Mapping[str, int] = field(default_factory=dict)
    buckets: int | None = None
    hottest_bucket: str | None = None
    hottest_bucket_share: float | None = None
    value_index: Mapping[str, Any] | None = None
    flag_index: Mapping[str, Any] | None = None
    #: A reload over a base (``loader.pipeline.diff``): written as a delta or full, why, and the counts
    delta: Mapping[str, Any] | None = None
    #: Why the guard held the release (``loader.pipeline.guard``), when it did.
    held: str | None = None
    #: seconds and counts of each phase (scan, resolve, write), and their rates
    phases: Mapping[str, Any] | None = None
    prepare_seconds: float | None = None
    resumed: bool | None = None
    chunks_already_written: int | None = None
    items_written: int | None = None
    #: What the written items took in write units, index keys included, with their GSI entries';
    #: ``index_write_units`` is the GSI entries' part (``loader.item_units``)
    write_units: int | None = None
    index_write_units: int | None = None
    retries: int | None = None
    throttles: int | None = None
    duration_seconds: float | None = None
    items_per_second: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every entry that is set, JSON-ready."""
        entries = {entry.name: getattr(self, entry.name) for entry in dataclasses.fields(self)}
        return {
            name: list(value)
            if isinstance(value, tuple)
            else dict(value)
            if isinstance(value, Mapping)
            else value
            for name, value in entries.items()
            if value is not None and value != () and not (name in (*_DETAILS, *_WHEN_ANY) and not value)
        }

    def summary(self) -> dict[str, Any]:
        """The report without its per-bucket table and rejected rows: small enough for any item."""
        return {name: value for name, value in self.to_dict().items() if name not in _DETAILS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadReport:
        known = {entry.name for entry in dataclasses.fields(cls)}
        values = {name: value for name, value in data.items() if name in known}
        for name in ("sources", "rejected"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)

    def with_(self, **changes: Any) -> LoadReport:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict()).encode()


@dataclass(frozen=True)
class LoadItem:
    """A load's progress pointer in the base table, read with ConsistentRead."""

    version: int
    status: LoadStatus
    sha256: str = ""
    fingerprint: str = ""
    options: LoadOptions = field(default_factory=LoadOptions)
    sources: tuple[str, ...] = ()
    previous: int = 0
    chunks: int = 0
    items: int = 0
    created_at: float = 0.0
    updated_at: int = 0
    done: frozenset[int] = frozenset()  #: chunks written, each exactly once
    items_written: int = 0
    write_units: int = 0
    index_write_units: int = 0
    retries: int = 0
    throttles: int = 0
    report: LoadReport = field(default_factory=LoadReport)
    error: str | None = None

    @property
    def load_id(self) -> str:
        return load_id_of(self.version, self.options.dataset)

    @property
    def unrecorded_chunks(self) -> list[int]:
        """The chunks not in ``done``, in order: what a resume writes and activation waits for."""
        return sorted(set(range(self.chunks)) - self.done)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LoadItem:
        return cls(
            version=int(item["version"]),
            status=LoadStatus(item["status"]),
            sha256=str(item.get("sha256", "")),
            fingerprint=str(item.get("fingerprint", "")),
            options=LoadOptions.from_event(item.get("options")),
            sources=tuple(str(source) for source in item.get("sources", ())),
            previous=int(item.get("previous", 0)),
            chunks=int(item.get("chunks", 0)),
            items=int(item.get("items", 0)),
            created_at=float(item.get("created_at", 0)),
            updated_at=int(item.get("updated_at", 0)),
            done=frozenset(int(index) for index in item.get("done", ())),
            items_written=int(item.get("items_written", 0)),
            write_units=int(item.get("write_units", 0)),
            index_write_units=int(item.get("index_write_units", 0)),
            retries=int(item.get("retries", 0)),
            throttles=int(item.get("throttles", 0)),
            report=LoadReport.from_dict(item.get("report") or {}),
            error=item.get("error"),
        )

    def to_item(self) -> dict[str, Any]:
        """What ``Loads.put`` stores; ``done`` and the counters change only by ``Loads.mark_chunk_done``."""
        item: dict[str, Any] = {
            "version": self.version,
            "load_id": self.load_id,
            "status": str(self.status),
            "sha256": self.sha256,
            "fingerprint": self.fingerprint,
            "options": self.options.to_event(),
            "sources": list(self.sources),
            "previous": self.previous,
            "chunks": self.chunks,
            "items": self.items,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "report": self.report.summary(),
        }
        if self.error is not None:
            item["error"] = self.error
        return item


@dataclass(frozen=True)
class Manifest:
    """The items each partition of a version must hold: ``activate`` verifies, ``cleanup`` deletes.
    ``indexes``: by index name, the entries each GSI must hold (what a replica region counts)."""

    items_per_partition: Mapping[str, int]
    indexes: Mapping[str, IndexCensus] = field(default_factory=dict)

    @property
    def partitions(self) -> Sequence[str]:
        return list(self.items_per_partition)

    def encode(self) -> bytes:
        """Compressed: IPv6 data has thousands of partitions, and an item holds 400 KB."""
        return zlib.compress(json.dumps(dict(self.items_per_partition), separators=(",", ":")).encode())

    @classmethod
    def decode(cls, data: bytes, indexes: bytes | None = None) -> Manifest:
        return cls(json.loads(zlib.decompress(data)), decode_indexes(indexes) if indexes else {})

    def encode_indexes(self) -> bytes | None:
        """Compressed, as the partitions are: an index has up to a few thousand keys."""
        if not self.indexes:
            return None
        census = {name: [list(c.partition_keys), c.entries] for name, c in self.indexes.items()}
        return zlib.compress(json.dumps(census, separators=(",", ":")).encode())


def decode_indexes(data: bytes) -> dict[str, IndexCensus]:
    census = json.loads(zlib.decompress(data))
    return {
        name: IndexCensus(tuple(partition_keys), int(entries))
        for name, (partition_keys, entries) in census.items()
    }


@dataclass(frozen=True)
class Pointer:
    """A dataset's pointer as the loader reads it: home's, or a replica region's own.

    ``generation`` counts the writes of home's pointer (activations and rollbacks); a
    region's pointer carries the generation of the home pointer it copied, so "this
    region has followed home at least up to generation g" is one comparison. ``at`` is
    when this pointer item was written (``activated_at``).
    """

    version: int
    base: int = 0
    generation: int = 0
    at: int = 0

    @property
    def names(self) -> frozenset[int]:
        """The versions a lookup following this pointer reads: the version, and a delta's base."""
        return frozenset(version for version in (self.version, self.base) if version)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Pointer:
        return cls(
            int(item["version"]),
            int(item.get("base", 0)),
            int(item.get("generation", 0)),
            int(item.get("activated_at", 0)),
        )


@dataclass(frozen=True)
class PointerMove:
    """One write of home's pointer: what it named before (None: nothing), and what it names now."""

    previous: Pointer | None
    current: Pointer

    @property
    def released(self) -> frozenset[int]:
        """The versions home's lookups stopped reading with this write (a version, a delta's base)."""
        return (self.previous.names if self.previous else frozenset()) - self.current.names


@dataclass(frozen=True)
class LockItem:
    """The load lock: at most one load prepares, writes or activates at a time."""

    owner: str  #: the load id holding it
    expires_at: int
    renewed_at: int = 0

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LockItem:
        return cls(str(item["owner"]), int(item["expires_at"]), int(item.get("renewed_at", 0)))


@dataclass(frozen=True)
class FeedState:
    """The release of a feed loaded last: what a scheduled run compares the vendor's latest with.

    The feeds compare it (``loader.feeds``), the table keeps it (``loader.store.feed_states``),
    and a feed's run carries it from ``fetch`` to ``record_release`` as ``to_dict()``.
    """

    feed: str
    release_id: str
    #: ``algorithm:hex`` of the vendor's checksum, when it published one.
    checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    #: When it was fetched (ISO 8601, UTC).
    fetched_at: str = ""

    def to_dict(self) -> dict[str, str]:
        return {key: value for key, value in self.__dict__.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> FeedState:
        return cls(
            feed=data["feed"],
            release_id=data["release_id"],
            checksum=data.get("checksum"),
            etag=data.get("etag"),
            last_modified=data.get("last_modified"),
            fetched_at=data.get("fetched_at", ""),
        )
