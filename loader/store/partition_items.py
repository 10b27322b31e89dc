"""Whole partitions of a version: counted (``activate`` verifies), read in order (export, a delta's
base), deleted (cleanup); and its entries in the reverse-lookup indexes, counted. A version's
counts resume where they stopped: ``partition_counts``.

A partition is one bucket of a version's range items, or its cover list; the
version's manifest (``manifests``) names them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ipmeta.schema import keys
from ipmeta.store.dynamodb import serialize_value, stored_value
from loader.batching import batched
from loader.store.batch_writes import BATCH_WRITE_LIMIT, BatchWriter, WriteStats
from loader.store.dataset_items import DatasetItems

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


class PartitionItems(DatasetItems):
    """Count, read or delete every item of one partition."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, space: keys.KeySpace, writer: BatchWriter
    ) -> None:
        super().__init__(client, table_name, space)
        self.writer = writer

    def count(self, partition_key: str, *, consistent: bool = True) -> int:
        """The partition's items, by ``Select=COUNT`` Queries (billed as reading every one)."""
        pages = self._partition_pages(partition_key, Select="COUNT", ConsistentRead=consistent)
        return sum(int(page["Count"]) for page in pages)

    def index_count(self, index: keys.IndexSchema, partition_key: str) -> int:
        """The entries ``index`` holds under ``partition_key``, by ``Select=COUNT`` Queries of it.

        A GSI is updated asynchronously and cannot be read consistently: what it counts is a lower
        bound of what it will hold (``partition_counts`` adds them up to what the load wrote)."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table_name,
            IndexName=index.name,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": index.partition_key},
            ExpressionAttributeValues={":pk": {"S": partition_key}},
            Select="COUNT",
        )
        return sum(int(page["Count"]) for page in pages)

    def read(self, partition_key: str, *, consistent: bool = True) -> Iterator[dict[str, Any]]:
        """Every item of one partition in ascending sort-key order, a page at a time.

        Numbers stay exact (``deserialize_item``: an export writes them back out), binary as ``bytes``.
        """
        return self._query_partition(partition_key, consistent=consistent)

    def delete(self, partition_key: str, stats: WriteStats | None = None) -> int:
        """Delete every item of one partition (keys-only Query, then batched deletes)."""
        deleted = 0
        pages = self._partition_pages(
            partition_key, ProjectionExpression="#pk, #sk", ExpressionAttributeNames={"#sk": keys.SORT_KEY}
        )
        for page in pages:
            for batch in batched(page.get("Items", []), BATCH_WRITE_LIMIT):
                self.writer.delete(batch, stats)
                deleted += len(batch)
        return deleted


def canonical_data(data: Mapping[str, Any]) -> Any:
    """``data`` as a read of the item holding it gives it back (``PartitionItems.read``): what two
    versions compare, so that ``1.5`` and ``Decimal("1.50")``, written alike, compare equal."""
    return stored_value(serialize_value(dict(data)))
