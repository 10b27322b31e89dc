"""Per-container singletons: the data store, the dataset catalog, the range cache, the API settings.

Built on first use, so importing the API costs no network and tests (and the
local server) can install their own before the first request.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ipmeta.lookup.catalog import DatasetCatalog, Targets, select_targets
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import (
    DEFAULT_POINTER_CACHE_SECONDS,
    DEFAULT_RANGE_CACHE_BYTES,
    ENV_RANGE_CACHE_BYTES,
    ApiSettings,
    Settings,
)
from ipmeta.store.dynamodb import Store

if TYPE_CHECKING:
    # Imported by ``index_catalog``, on the first reverse listing: not every container lists.
    from ipmeta.lookup.reverse import IndexCatalog


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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.catalog = DatasetCatalog(self.store, self.pointer_cache_seconds, self.api.datasets)

    def reader(self, dataset: str) -> Store:
        """The table in one dataset's keys (one view per dataset: its cover lists are read once)."""
        return self.store.for_dataset(dataset)

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


def install(dependencies: Dependencies | None) -> None:
    """Replace the singletons (tests, the local server); None resets to the environment's."""
    global _current  # noqa: PLW0603
    _current = dependencies
