"""A dataset's version manifests: the items each partition of a version must hold.

Written once the writes are planned (``loader.records.Manifest``); ``activate``
verifies the counts against it, cleanup deletes the partitions it names, and an
export or a delta's base finds the version's partitions in it.
"""

from __future__ import annotations

from typing import Final

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_item
from loader.records import Manifest
from loader.store.dataset_items import DatasetItems

#: One manifest per version (sort key: the version), under the dataset's ``meta#`` keys.
MANIFESTS: Final = "manifests"


class Manifests(DatasetItems):
    """Put, read and delete a version's manifest."""

    def put(self, version: int, manifest: Manifest) -> None:
        item = {
            keys.PARTITION_KEY: self.space.meta(MANIFESTS),
            keys.SORT_KEY: version,
            "partitions": manifest.encode(),
        }
        indexes = manifest.encode_indexes()
        if indexes is not None:
            item["indexes"] = indexes
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get(self, version: int) -> Manifest | None:
        item = self._get(self.space.meta(MANIFESTS), version)
        return Manifest.decode(item["partitions"], item.get("indexes")) if item is not None else None

    def delete(self, version: int) -> None:
        self.client.delete_item(TableName=self.table_name, Key=item_key(self.space.meta(MANIFESTS), version))
