"""A dataset's load lock: at most one load prepares, writes or activates at a time.

One item (``KeySpace.meta("lock")``, sort key 0) names the load holding the lock
and when its lease ends; each state renews it, and an expired lease is free to take.
"""

from __future__ import annotations

import time
from typing import Final

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_item
from loader.errors import LoadInProgress
from loader.records import LockItem
from loader.store.dataset_items import DatasetItems, condition_failed

#: The dataset's single lock item, under its ``meta#`` keys (sort key 0).
LOCK: Final = "lock"


class LoadLock(DatasetItems):
    """Take, renew, release and read the dataset's load lock."""

    def acquire(self, owner: str, *, lease_seconds: float, now: float) -> None:
        """Take (or renew) the load lock: free, expired, or already ours."""
        lock = {
            keys.PARTITION_KEY: self.space.meta(LOCK),
            keys.SORT_KEY: keys.META_SORT_KEY,
            "owner": owner,
            "expires_at": int(now + lease_seconds),
            "renewed_at": int(now),
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(lock),
                ConditionExpression="attribute_not_exists(#pk) OR #owner = :owner OR #expires < :now",
                ExpressionAttributeNames={
                    "#pk": keys.PARTITION_KEY,
                    "#owner": "owner",
                    "#expires": "expires_at",
                },
                ExpressionAttributeValues={":owner": {"S": owner}, ":now": {"N": str(int(now))}},
            )
        except ClientError as error:
            if not condition_failed(error):
                raise
            holder = self.read() or LockItem("?", 0)
            until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(holder.expires_at))
            raise LoadInProgress(
                f"load {holder.owner} holds the load lock until {until}; "
                f"resume it with `ipmeta load --resume {holder.owner}` or wait for its lease"
            ) from error

    def release(self, owner: str) -> bool:
        """Free the lock if ``owner`` holds it; False if another load does (or nobody)."""
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key=item_key(self.space.meta(LOCK), keys.META_SORT_KEY),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True

    def read(self) -> LockItem | None:
        item = self._get(self.space.meta(LOCK), keys.META_SORT_KEY)
        return LockItem.from_item(item) if item is not None else None
