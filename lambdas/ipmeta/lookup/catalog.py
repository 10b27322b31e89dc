"""Which datasets a lookup answers from, and at which version: the catalog and a request's targets.

A table holds named datasets (``ipmeta.schema.keys``: ``city``, ``asn``, ``blocklist``),
each with its own active-version pointer. A lookup answers from every active
dataset at once, or from those ``?datasets=`` names. The catalog is what a
container knows of them: their names, in precedence order, and each one's
active version, re-read at most once per ``ttl_seconds`` (the pointer cache
of a single dataset, widened to all of them: one GetItem of the table's list
of datasets and one BatchGetItem of their pointers).

**Precedence.** The merged, flat view of an answer takes each field from the
first dataset in precedence order that holds the address and has the field.
The order is set at deploy time (``IPMETA_DATASETS``, the stack's
``lookupDatasets``): an operator decides once that ``blocklist`` overrides
``city``, and every client sees the same answer. That list is also what a
request without ``?datasets=`` reads; without one, every dataset of the table
answers, in name order. Datasets the deployment does not list follow the
declared ones, in name order, and answer when ``?datasets=`` names them. Each
dataset's own section of the answer is never merged, so a client that needs
to tell the sources apart reads those (``docs/decisions.md``, "Several
datasets, one answer").

**Versions.** ``?version=v3`` reads a retained version instead of the active
one when the request has one dataset; with several, each is named:
``?version=city:v3,asn:v12``. Naming a version costs one GetItem of its
metadata (and, in a replica region, one Query of the region's arrival records);
the default path costs nothing beyond the cached pointers.

**May this version be read here** (``may_read``): one rule for the pointer,
``?version=``, page tokens, cover lists and ``/v1/datasets``. A version is read
only while its metadata says it is retained (``active`` or ``retired``: never
``deleting``), and, in a replica region, only once that region's own arrival
record says it wholly arrived there, for this very version (its ``uid``). A
delta needs the same of its base. The pointer obeys it by construction (a
region's pointer moves only after arrival, ``loader.pipeline.arrival``); every
other way of naming a version goes through ``readable_version``, before any
item or cover list of the version is read, so no container caches a part of a
version that had not arrived.

**Reverse lookups** read the version's GSIs, which DynamoDB updates after the
table, asynchronously, and never reads consistently: a version whose items all
arrived in a region may still miss index entries there. So a listing of a
version (``/v1/ranges``, ``/v1/flagged``, a page token's) reads it in a replica
region only once the region's arrival check also counted its index entries
there (``indexes_arrived``); until then it answers ``INDEX_NOT_ARRIVED`` (503).
In home the same count is made before the version is activated
(``loader.pipeline.activate``), so any version home may read has its entries there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ipmeta.schema import keys
from ipmeta.schema.errors import (
    DatasetInvalid,
    DatasetNotFound,
    IndexNotArrived,
    NoDataset,
    VersionInvalid,
    VersionNotFound,
)
from ipmeta.schema.records import ActiveVersion, VersionMeta

#: Longest ``?datasets=`` / ``?version=`` value read: names are short, and a table holds few datasets.
MAX_SELECTOR_LENGTH = 1024


class PointerReader(Protocol):
    """What the catalog reads (``ipmeta.store.dynamodb.Store`` provides it)."""

    def read_dataset_names(self, *, consistent: bool = False) -> list[str]: ...

    def read_active_versions(self, datasets: list[str]) -> dict[str, ActiveVersion | None]: ...


class VersionMetaReader(Protocol):
    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None: ...

    def arrivals(self) -> Mapping[int, str] | None:
        """The versions that wholly arrived where this reader reads, each with its ``uid``;
        None in home, where every version written is whole once activated."""
        ...


class IndexArrivalReader(Protocol):
    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None: ...

    def indexed_arrivals(self) -> Mapping[int, str] | None:
        """The arrived versions whose index entries all reached the GSIs here; None in home."""
        ...


@dataclass(frozen=True, slots=True)
class ActiveDatasets:
    """A snapshot of the catalog: every known dataset in precedence order, and its active version."""

    order: tuple[str, ...]
    versions: Mapping[str, int | None]
    #: What a request without ``?datasets=`` reads: the declared datasets, or every one.
    defaults: tuple[str, ...] = ()
    #: The base of each active version that is a delta (``ipmeta.lookup.runs``, "Delta versions").
    bases: Mapping[str, int] = field(default_factory=dict)

    def knows(self, name: str) -> bool:
        return name in self.versions


def precedence(declared: Sequence[str], stored: Sequence[str]) -> tuple[str, ...]:
    """The declared datasets in their order, then the table's others by name."""
    return (*declared, *sorted(set(stored) - set(declared)))


class DatasetCatalog:
    """The datasets and their active versions, re-read at most once per ``ttl_seconds`` per container.

    A pointer read per request would double the reads of every lookup; a few
    seconds of staleness after an activation is harmless because old versions
    are kept for a grace period longer than this TTL.
    """

    def __init__(
        self,
        reader: PointerReader,
        ttl_seconds: float,
        declared: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.ttl_seconds = ttl_seconds
        self.declared = tuple(keys.check_dataset_name(name) for name in declared)
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot = ActiveDatasets((), {})
        self._read_at = float("-inf")

    def get(self) -> ActiveDatasets:
        if self._clock() - self._read_at < self.ttl_seconds:
            return self._snapshot
        with self._lock:
            # Another thread may have refreshed while this one waited for the lock.
            if self._clock() - self._read_at >= self.ttl_seconds:
                self._snapshot = self._read()
                self._read_at = self._clock()
            return self._snapshot

    def invalidate(self) -> None:
        with self._lock:
            self._read_at = float("-inf")

    def _read(self) -> ActiveDatasets:
        order = precedence(self.declared, self.reader.read_dataset_names())
        active = self.reader.read_active_versions(list(order))
        versions = {name: pointer.version if pointer else None for name, pointer in active.items()}
        bases = {name: pointer.base for name, pointer in active.items() if pointer and pointer.base}
        return ActiveDatasets(order, versions, self.declared or order, bases)


# -- what one request reads ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One dataset version a request reads, and its base when it is a delta (else 0)."""

    dataset: str
    version: int
    base: int = 0


@dataclass(frozen=True, slots=True)
class Targets:
    """The dataset versions a request reads, in precedence order, and the datasets left out."""

    versions: tuple[Target, ...]
    inactive: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(target.dataset for target in self.versions)


def parse_dataset_names(text: str | None) -> frozenset[str] | None:
    """``?datasets=city,asn``: the names, or None (every dataset) when absent or empty."""
    if text is None:
        return None
    if len(text) > MAX_SELECTOR_LENGTH:
        raise DatasetInvalid(f"datasets: at most {MAX_SELECTOR_LENGTH} characters")
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        _check_name(name)
    return names or None


def _check_name(name: str) -> str:
    try:
        return keys.check_dataset_name(name)
    except keys.DatasetNameInvalid as error:
        raise DatasetInvalid(str(error)) from None


def parse_version(text: str) -> int:
    """``v3`` or ``3``, as the API prints versions and as people type them."""
    digits = text[1:] if text[:1] in ("v", "V") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:
        raise VersionInvalid(f"{text[:40]!r} is not a dataset version; versions look like v3")
    return int(digits)


def parse_version_selector(text: str | None, names: Sequence[str]) -> dict[str, int]:
    """``?version=``: ``v3`` when the request reads one dataset, else ``city:v3,asn:v12``."""
    if text is None or not text.strip():
        return {}
    if len(text) > MAX_SELECTOR_LENGTH:
        raise VersionInvalid(f"version: at most {MAX_SELECTOR_LENGTH} characters")
    wanted: dict[str, int] = {}
    for part in (part.strip() for part in text.split(",") if part.strip()):
        name, colon, label = part.rpartition(":")
        if not colon:
            if len(names) != 1:
                raise VersionInvalid(
                    f"version={part[:40]} names no dataset, and this request reads {len(names)}; "
                    "name each one: version=city:v3,asn:v12 (or narrow with ?datasets=)"
                )
            name = names[0]
        if _check_name(name) not in names:
            raise VersionInvalid(f"version names {name!r}, which this request does not read")
        wanted[name] = parse_version(label)
    return wanted


def select_targets(
    snapshot: ActiveDatasets,
    metas: Callable[[str], VersionMetaReader],
    datasets: str | None = None,
    version: str | None = None,
) -> Targets:
    """The (dataset, version) pairs a request reads, from its ``?datasets=`` and ``?version=``.

    Raises ``DatasetNotFound`` for a name neither the deployment nor the table
    knows, ``VersionNotFound`` for a version that is not retained, and
    ``NoDataset`` when none of the datasets read has an active version.
    """
    wanted = parse_dataset_names(datasets)
    unknown = sorted(name for name in wanted or () if not snapshot.knows(name))
    if unknown:
        raise DatasetNotFound(
            f"no dataset {', '.join(repr(name) for name in unknown)}; GET /v1/datasets lists them"
        )
    names = list(snapshot.defaults) if wanted is None else [name for name in snapshot.order if name in wanted]
    pinned = parse_version_selector(version, names)
    chosen: list[Target] = []
    inactive: list[str] = []
    for name in names:
        if name in pinned:
            meta = retained_version(metas(name), name, pinned[name])
            chosen.append(Target(name, meta.version, meta.base))
        elif (active := snapshot.versions.get(name)) is not None:
            chosen.append(Target(name, active, snapshot.bases.get(name, 0)))
        else:
            inactive.append(name)
    if not chosen:
        raise NoDataset(
            "no dataset is active yet; load one with `ipmeta load`"
            if not names
            else f"no active version in {', '.join(names)}; load one with `ipmeta load --dataset NAME`"
        )
    return Targets(tuple(chosen), tuple(inactive))


def may_read(meta: VersionMeta | None, arrivals: Mapping[int, str] | None) -> bool:
    """The rule (module docstring): retained, and, in a replica region, wholly arrived there."""
    if meta is None or not meta.retained:
        return False
    return arrivals is None or arrivals.get(meta.version) == meta.uid


def indexes_arrived(reader: IndexArrivalReader, dataset: str, version: int) -> None:
    """``IndexNotArrived`` unless a listing of ``version`` may read its GSIs here (module docstring).

    ``version`` already passed ``may_read`` (it is the pointer's, or ``retained_version``'s)."""
    indexed = reader.indexed_arrivals()
    if indexed is None:
        return
    # The one rule, asked of the records whose index entries the check counted here.
    if not may_read(reader.get_version_meta(version, consistent=True), indexed):
        raise IndexNotArrived(
            f"{dataset} {keys.format_version(version)}'s reverse-lookup index has not wholly reached "
            "this region yet (its items have); ask again in a minute"
        )


def retained_version(reader: VersionMetaReader, dataset: str, version: int) -> VersionMeta:
    """``version``'s metadata if it may be read here, and its base too; else ``VersionNotFound``.

    Read consistently: cleanup marks a version ``deleting`` before it deletes a single item.
    """
    meta = reader.get_version_meta(version, consistent=True)
    arrivals = reader.arrivals()
    base = reader.get_version_meta(meta.base, consistent=True) if meta and meta.base else None
    if not may_read(meta, arrivals) or (meta and meta.base and not may_read(base, arrivals)):
        raise VersionNotFound(
            f"{dataset} {keys.format_version(version)} is not retained here; "
            f"GET /v1/datasets/{dataset} lists the versions that are"
        )
    assert meta is not None
    return meta
