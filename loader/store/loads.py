"""A dataset's load items: one per load (sort key: the version it writes), its progress and chunk marks.

The load item is a load's progress pointer (``loader.records.LoadItem``):
its status, the chunks planned and the ones written (``done``), and what the
writes cost. Every read of it is consistent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_item
from loader.records import LoadItem, LoadReport, LoadStatus
from loader.store.dataset_items import DatasetItems, condition_failed

#: The loads' partition beside the version metadata, under each dataset's ``meta#`` keys
#: (``KeySpace.meta``), so two datasets load without touching each other.
LOADS: Final = "loads"


class Loads(DatasetItems):
    """Each load's item: written when it starts, marked as its chunks are written, closed by its status."""

    def put(self, load: LoadItem) -> None:
        item = {**load.to_item(), keys.PARTITION_KEY: self.space.meta(LOADS), keys.SORT_KEY: load.version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get(self, version: int) -> LoadItem | None:
        """The load item, read with ConsistentRead: it is the progress pointer of a load."""
        item = self._get(self.space.meta(LOADS), version)
        return LoadItem.from_item(item) if item is not None else None

    def delete(self, version: int) -> None:
        self.client.delete_item(TableName=self.table_name, Key=item_key(self.space.meta(LOADS), version))

    def list_all(self) -> list[LoadItem]:
        return [LoadItem.from_item(item) for item in self._query_partition(self.space.meta(LOADS))]

    def previous_of(self, version: int) -> int:
        """The version that was active when a load started (0 for none)."""
        load = self.get(version)
        return load.previous if load is not None else 0

    def set_status(
        self,
        version: int,
        status: LoadStatus,
        at: int,
        *,
        report: LoadReport | None = None,
        error: str | None = None,
    ) -> None:
        fields: dict[str, Any] = {"status": str(status), "updated_at": at}
        if report is not None:
            fields["report"] = report.summary()
        if error is not None:
            fields["error"] = error[:1000]
        self._update(self.space.meta(LOADS), version, fields)

    def mark_prepared(self, version: int, *, chunks: int, items: int, report: LoadReport, at: int) -> None:
        """The load's chunks are planned: it may be written, and resumed."""
        fields = {"status": str(LoadStatus.PREPARED), "chunks": chunks, "items": items, "updated_at": at}
        self._update(self.space.meta(LOADS), version, {**fields, "report": report.summary()})

    def mark_chunk_done(self, version: int, chunk: int, stats: Mapping[str, int], now: float) -> bool:
        """Record a written chunk once: its index joins ``done`` and its counts add up.

        The condition makes a second completion of the same chunk (a retried
        Map iteration, a resumed load) a no-op, so the counters stay exact.
        """
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=item_key(self.space.meta(LOADS), version),
                UpdateExpression=(
                    "ADD #done :chunk, #items :items, #retries :retries, #throttles :throttles, "
                    "#units :units, #index_units :index_units SET #updated = :now"
                ),
                ConditionExpression="attribute_exists(#pk) AND NOT contains(#done, :index)",
                ExpressionAttributeNames={
                    "#pk": keys.PARTITION_KEY,
                    "#done": "done",
                    "#items": "items_written",
                    "#retries": "retries",
                    "#throttles": "throttles",
                    "#units": "write_units",
                    "#index_units": "index_write_units",
                    "#updated": "updated_at",
                },
                ExpressionAttributeValues={
                    ":chunk": {"NS": [str(chunk)]},
                    ":index": {"N": str(chunk)},
                    ":items": {"N": str(stats.get("items", 0))},
                    ":retries": {"N": str(stats.get("retries", 0))},
                    ":throttles": {"N": str(stats.get("throttles", 0))},
                    ":units": {"N": str(stats.get("write_units", 0))},
                    ":index_units": {"N": str(stats.get("index_write_units", 0))},
                    ":now": {"N": str(int(now))},
                },
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True
