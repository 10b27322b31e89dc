"""Per-container singletons: the data store, the dataset catalog, the range cache, the API settings,
and the counts of what the lookups did.

Built on first use, so importing the API costs no network and tests (and the
local server) can install their own before the first request. The counts
(``counts``) live beside them for the container's whole life, whatever is
installed: the metrics line (``ipmeta.api.observability``) takes them once a
minute at most, so a lookup pays an addition, never a line of its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipmeta.lookup.catalog import DatasetCatalog, Targets, select_targets
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.records import Cover
from ipmeta.schema.settings import (
    DEFAULT_POINTER_CACHE_SECONDS,
    DEFAULT_RANGE_CACHE_BYTES,
    ENV_RANGE_CACHE_BYTES,
    METRIC_QUERIES,
    ApiSettings,
    Settings,
)
from ipmeta.store.dynamodb import Store

if TYPE_CHECKING:
    # Imported by ``index_catalog``, on the first reverse listing: not every container lists.
    from ipmeta.lookup.reverse import IndexCatalog


class LookupCounts:
    """What the lookups of this container did since the metrics line last took them.

    Thread-safe: a batch sends its Queries from the container's pool. An addition
    under a lock costs well under a microsecond; nothing is printed here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + count

    def take(self) -> dict[str, int]:
        """The counts so far, and zero from now on: each count is published once."""
        with self._lock:
            taken, self._counts = self._counts, {}
            return taken


#: One per container, for its whole life.
counts = LookupCounts()


class CountedReader:
    """One dataset's reader as the lookup uses it (``ipmeta.lookup.runs.RangeReader``), counting
    the Queries it sends: the lookup module stays pure, and the count is of what DynamoDB bills."""

    __slots__ = ("_reader",)

    def __init__(self, reader: Store) -> None:
        self._reader = reader

    @property
    def space(self) -> keys.KeySpace:
        return self._reader.space

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        counts.add(METRIC_QUERIES)
        return self._reader.find_range_piece(partition_key, sort_key)

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None:
        return self._reader.find_cover(version, family, bucket)


@dataclass
class Dependencies:
    store: Store
    #: How long the catalog trusts the datasets' pointers (0 in tests: read on every request).
    pointer_cache_seconds: float = DEFAULT_POINTER_CACHE_SECONDS
    api: ApiSettings = field(default_factory=ApiSettings.from_environment)
    #: Off unless given: a test or a benchmark that builds its own dependencies
    #: counts one Query per lookup. A container gets one sized by the environment.
    ranges: RangeCache = field(default_factory=lambda: RangeCache(0))
    catalog: DatasetCatalog = field(init=False)
    _executor: ThreadPoolExecutor | None = field(default=None, repr=False)
    _indexes: dict[str, IndexCatalog] = field(default_factory=dict, repr=False)
    _counted: dict[str, CountedReader] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.catalog = DatasetCatalog(self.store, self.pointer_cache_seconds, self.api.datasets)

    def reader(self, dataset: str) -> Store:
        """The table in one dataset's keys (one view per dataset: its cover lists are read once)."""
        return self.store.for_dataset(dataset)

    def lookup_reader(self, dataset: str) -> CountedReader:
        """What the lookup reads one dataset through: ``reader``, its Queries counted."""
        counted = self._counted.get(dataset)
        if counted is None:
            counted = self._counted.setdefault(dataset, CountedReader(self.reader(dataset)))
        return counted

    def targets(self, datasets: str | None = None, version: str | None = None) -> Targets:
        """The (dataset, version) pairs a request reads (``ipmeta.lookup.catalog.select_targets``)."""
        return select_targets(self.catalog.get(), self.reader, datasets, version)

    @property
    def batch_executor(self) -> ThreadPoolExecutor:
        """One pool per container: its width bounds the Queries a batch runs at once."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.api.batch_concurrency, thread_name_prefix="batch"
                )
            return self._executor

    def index_catalog(self, dataset: str) -> IndexCatalog:
        """The reverse indexes of each version of ``dataset``, read once per container."""
        from ipmeta.lookup.reverse import IndexCatalog

        with self._lock:
            if dataset not in self._indexes:
                store = self.reader(dataset)
                self._indexes[dataset] = IndexCatalog(
                    lambda version: store.get_version_meta(version, consistent=False)
                )
            return self._indexes[dataset]


def range_cache_bytes() -> int:
    """The range cache's bound for this container; 0 turns the cache off.

    A value that is not an integer fails the cold start, loudly, rather than
    silently running without the cache the stack asked for.
    """
    return int(os.environ.get(ENV_RANGE_CACHE_BYTES, DEFAULT_RANGE_CACHE_BYTES))


_current: Dependencies | None = None


def current() -> Dependencies:
    global _current  # noqa: PLW0603 - one set of clients per Lambda container, reused across invocations
    if _current is None:
        settings = Settings.from_environment()
        _current = Dependencies(
            store=Store.from_settings(settings),
            pointer_cache_seconds=settings.pointer_cache_seconds,
            ranges=RangeCache(range_cache_bytes()),
        )
    return _current


def built() -> Dependencies | None:
    """The singletons if a request has built (or a caller installed) them; never builds them."""
    return _current


def install(dependencies: Dependencies | None) -> None:
    """Replace the singletons (tests, the local server); None resets to the environment's."""
    global _current  # noqa: PLW0603
    _current = dependencies
