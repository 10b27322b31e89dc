"""One dataset's items in the table, as each of the loader's concerns reaches them.

``DatasetItems`` holds what every concern shares: the client, the table's name
and the dataset's keys (``ipmeta.schema.keys.KeySpace``), with the three
requests they all make: a consistent read of one item, a ``SET`` of some of its
attributes, and a Query of one partition. Each concern (``versions``, ``loads``,
``load_lock``, ``manifests``, ``cover_lists``, ``partition_items``,
``feed_states``) extends it with its own few requests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.store.dynamodb import get_item, item_key, partition_pages, query_partition, serialize_value

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


def condition_failed(error: ClientError) -> bool:
    """Whether DynamoDB refused a write for its condition: the answer each conditional write turns into."""
    return error.response["Error"]["Code"] == "ConditionalCheckFailedException"


class DatasetItems:
    """The table in one dataset's keys, reached through one client."""

    def __init__(self, client: DynamoDBClient, table_name: str, space: keys.KeySpace) -> None:
        self.client = client
        self.table_name = table_name
        self.space = space

    def _get(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        # Consistent: the loader reads back its own bookkeeping, often right after writing it.
        return get_item(self.client, self.table_name, partition_key, sort_key, consistent=True)

    def _update(self, partition_key: str, sort_key: int, fields: Mapping[str, Any]) -> None:
        names = {f"#f{index}": name for index, name in enumerate(fields)}
        values: dict[str, AttributeValueTypeDef] = {
            f":v{index}": serialize_value(value) for index, value in enumerate(fields.values())
        }
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(partition_key, sort_key),
            UpdateExpression="SET " + ", ".join(f"#f{index} = :v{index}" for index in range(len(fields))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _partition_pages(self, partition_key: str, **extra: Any) -> Iterator[Any]:
        """The Query pages of one partition, read consistently unless ``ConsistentRead`` says otherwise."""
        return partition_pages(self.client, self.table_name, partition_key, **extra)

    def _query_partition(self, partition_key: str, *, consistent: bool = True) -> Iterator[dict[str, Any]]:
        """Every item of one partition in ascending sort-key order, a page at a time."""
        return query_partition(self.client, self.table_name, partition_key, consistent=consistent)
