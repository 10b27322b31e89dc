"""A dataset's pointers across regions: home's, read with its generation, and each replica region's own.

With ``replicaRegions`` the table is a global table: every item written in home
arrives in each replica region item by item, in no order. A replica region's
lookups read that region's own pointer (``keys.KeySpace.region_pointer``), which
only that region's arrival check writes (``loader.pipeline.arrival``), so the item
has one writer and the last-writer-wins of global tables never decides it. The
same partition records, one item per version, that the version wholly arrived in
that region. Cleanup in home reads every region's pointer (``loader.pipeline.retention``), the
regions being the table's own replicas (``replicas``).
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.store.dynamodb import serialize_item
from loader.records import Pointer
from loader.store.dataset_items import DatasetItems, condition_failed


class RegionPointers(DatasetItems):
    """Home's pointer with its generation; a replica region's pointer and its arrived versions."""

    def replicas(self) -> tuple[str, ...]:
        """The table's replica regions, as the table itself says (``DescribeTable``'s ``Replicas``),
        this client's region aside: what cleanup holds versions for, with no list to keep in step."""
        described = self.client.describe_table(TableName=self.table_name)["Table"]
        own = self.client.meta.region_name
        return tuple(
            sorted(
                replica["RegionName"]
                for replica in described.get("Replicas", [])
                if "RegionName" in replica and replica["RegionName"] != own
            )
        )

    def home(self) -> Pointer | None:
        item = self._get(self.space.pointer, keys.META_SORT_KEY)
        return Pointer.from_item(item) if item else None

    def of(self, region: str) -> Pointer | None:
        item = self._get(self.space.region_pointer(region), keys.META_SORT_KEY)
        return Pointer.from_item(item) if item else None

    def follow(self, region: str, home: Pointer, at: int) -> bool:
        """Make ``region``'s pointer name what ``home`` names, unless it already follows a generation
        as new or newer (a stale read of home's pointer must never move a region back)."""
        item = {
            keys.PARTITION_KEY: self.space.region_pointer(region),
            keys.SORT_KEY: keys.META_SORT_KEY,
            "version": home.version,
            "generation": home.generation,
            "activated_at": at,
            "home_activated_at": home.at,
        }
        if home.base:
            item["base"] = home.base
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(item),
                ConditionExpression="attribute_not_exists(#pk) OR #generation < :generation",
                ExpressionAttributeNames={"#pk": keys.PARTITION_KEY, "#generation": "generation"},
                ExpressionAttributeValues={":generation": {"N": str(home.generation)}},
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True

    def arrived(self, region: str, version: int, uid: str) -> bool:
        """Whether ``region`` recorded this very version (``VersionMeta.uid``) as wholly arrived."""
        item = self._get(self.space.region_pointer(region), version)
        return item is not None and str(item.get("uid", "")) == uid

    def unindexed(self, region: str) -> dict[int, str]:
        """The versions ``region`` recorded as arrived whose index entries it has not counted yet,
        each with its ``uid``."""
        return {
            int(item[keys.SORT_KEY]): str(item.get("uid", ""))
            for item in self._query_partition(self.space.region_pointer(region))
            if int(item[keys.SORT_KEY]) != keys.META_SORT_KEY and not item.get("indexed")
        }

    def mark_indexed(self, region: str, version: int, uid: str, *, entries: int, at: int) -> bool:
        """Every index entry of ``version`` counted in ``region``'s GSIs: its reverse lookups may
        read them (``ipmeta.lookup.catalog.indexes_arrived``). Only on the arrival record of this
        very version (its ``uid``); False if there is none. A conditional PutItem of the whole
        record: the one write the region's role may make (``stacks/regions/arrival_check.py``)."""
        record = self._get(self.space.region_pointer(region), version)
        if record is None or str(record.get("uid", "")) != uid:
            return False
        item = {**record, "indexed": True, "index_entries": entries, "indexed_at": at}
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(item),
                ConditionExpression="#uid = :uid",
                ExpressionAttributeNames={"#uid": "uid"},
                ExpressionAttributeValues={":uid": {"S": uid}},
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True

    def mark_arrived(self, region: str, version: int, uid: str, *, items: int, at: int) -> None:
        """``version``'s items all counted in ``region``: its later deltas need not count it again,
        and the region's lookups may read it (``ipmeta.lookup.catalog.may_read``)."""
        item = {
            keys.PARTITION_KEY: self.space.region_pointer(region),
            keys.SORT_KEY: version,
            "items": items,
            "arrived_at": at,
            "uid": uid,
        }
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))
