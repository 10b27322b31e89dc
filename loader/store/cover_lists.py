"""A version's covers as the loader writes them: its cover list, and one item at the head of each run.

A cover is a run of whole buckets with one answer (``ipmeta.schema.records.Cover``).
The version's cover list, in pages, is what a lookup reads once per version
(``ipmeta.store.dynamodb.Store.read_covers``); a head item answers at the run's
first bucket and carries the reverse index's entry for the run
(``loader.reverse_index.IndexPlan``), so every range the index names has an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ipmeta.schema import keys
from ipmeta.schema.ips import format_address
from ipmeta.schema.records import Cover
from loader.batching import batched
from loader.reverse_index import IndexPlan
from loader.store.batch_writes import BATCH_WRITE_LIMIT, BatchWriter
from loader.store.dataset_items import DatasetItems

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: Covers per item of a version's cover list: far below 400 KB with the data of a city database.
COVERS_PER_PAGE: Final = 200


class CoverLists(DatasetItems):
    """Write a version's cover list and its cover heads, in batches."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, space: keys.KeySpace, writer: BatchWriter
    ) -> None:
        super().__init__(client, table_name, space)
        self.writer = writer

    def put(self, version: int, covers: Sequence[Cover]) -> int:
        """The version's cover list in pages of at most ``COVERS_PER_PAGE``; returns the pages written."""
        partition = self.space.covers_partition_key(version)
        pages = [
            {
                keys.PARTITION_KEY: partition,
                keys.SORT_KEY: page,
                "covers": [cover.to_item() for cover in group],
            }
            for page, group in enumerate(batched(covers, COVERS_PER_PAGE))
        ]
        for group in batched(pages, BATCH_WRITE_LIMIT):
            self.writer.put(group)
        return len(pages)

    def put_heads(self, version: int, covers: Sequence[Cover], index: IndexPlan | None) -> None:
        """One item at the first bucket of each cover run: it answers there, and carries the index entry.

        A delta's gap covers have none: its Query finds nothing in their buckets, and the cover answers.
        """
        heads = []
        for cover in covers:
            if cover.data is None:
                continue
            first = keys.bucket_bounds(cover.family, cover.first_bucket)[0]
            item: dict[str, Any] = {
                keys.PARTITION_KEY: self.space.partition_key(version, cover.family, cover.first_bucket),
                keys.SORT_KEY: 0,
                keys.ATTR_START: format_address(cover.family, cover.start),
                keys.ATTR_END: format_address(cover.family, cover.end),
                keys.ATTR_DATA: cover.data,
            }
            if index is not None and first == cover.start:
                item.update(index.attributes(self.space, version, cover.family, cover.start, cover.data))  # type: ignore[arg-type]
            heads.append(item)
        for group in batched(heads, BATCH_WRITE_LIMIT):
            self.writer.put(group)
