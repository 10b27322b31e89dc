"""The table as the loader uses it: the lookup's reads, and the loader's writes by concern.

``LoaderTable`` holds one client and one dataset's keys, and hands them to a
small class per concern (each its own module): ``versions`` (the pointer, the
version counter, version metadata, the list of datasets), ``loads`` (load items
and their chunk marks), ``lock`` (the load lock), ``manifests``, ``covers``
(cover lists and cover heads), ``partitions`` (whole partitions counted, read,
deleted), ``counts`` (a version's counts, resumed where they stopped), ``feed_states``
(``list_states``: the network lists'), ``regions``
(home's pointer with its generation, and each replica region's own) and
``writer`` (batched puts and deletes). Reads the lookup makes too (the active
version, version metadata, cover lists) go through ``lookup``, the lookup's own
``ipmeta.store.dynamodb.Store`` on the same client.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import Store, make_client
from loader.records import dataset_of
from loader.store.batch_writes import BatchWriter
from loader.store.cover_lists import CoverLists
from loader.store.feed_states import FeedStates, ListStates
from loader.store.load_lock import LoadLock
from loader.store.loads import Loads
from loader.store.manifests import Manifests
from loader.store.partition_counts import PartitionCounts
from loader.store.partition_items import PartitionItems
from loader.store.region_pointers import RegionPointers
from loader.store.versions import Versions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


class LoaderTable:
    """One table and one dataset's keys, as each of the loader's concerns reaches them."""

    #: How the table was reached, when from settings: what a pool worker reaches it by again.
    settings: Settings | None = None

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        space: keys.KeySpace | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        lookup: Store | None = None,
    ) -> None:
        self.client = client
        self.table_name = table_name
        #: The lookup's reads of this table, in the same keys: one cover catalog per dataset and table.
        self.lookup = lookup if lookup is not None else Store(client, table_name, space)
        self._sleep = sleep
        self.writer = BatchWriter(client, table_name, sleep=sleep)
        space = self.lookup.space
        self.versions = Versions(client, table_name, space)
        self.loads = Loads(client, table_name, space)
        self.lock = LoadLock(client, table_name, space)
        self.manifests = Manifests(client, table_name, space)
        self.covers = CoverLists(client, table_name, space, self.writer)
        self.partitions = PartitionItems(client, table_name, space, self.writer)
        self.counts = PartitionCounts(client, table_name, space, self.partitions)
        self.feed_states = FeedStates(client, table_name, space)
        self.list_states = ListStates(client, table_name, space)
        self.regions = RegionPointers(client, table_name, space)

    @classmethod
    def from_settings(cls, settings: Settings, *, max_pool_connections: int = 32) -> LoaderTable:
        table = cls(make_client(settings, max_pool_connections=max_pool_connections), settings.table_name)
        table.settings = settings
        return table

    @property
    def space(self) -> keys.KeySpace:
        return self.lookup.space

    @property
    def dataset(self) -> str:
        return self.lookup.dataset

    def for_dataset(self, dataset: str) -> LoaderTable:
        """The same table and client in ``dataset``'s keys (``DatasetNameInvalid`` for a bad name)."""
        if dataset == self.dataset:
            return self
        view = LoaderTable(
            self.client, self.table_name, sleep=self._sleep, lookup=self.lookup.for_dataset(dataset)
        )
        view.settings = self.settings
        return view

    def for_load(self, load_id: str) -> LoaderTable:
        """The table in the keys of the dataset ``load_id`` writes (``loader.records.load_id_of``)."""
        return self.for_dataset(dataset_of(load_id))
