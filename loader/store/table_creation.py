"""The table's creation for local runs (dynalite, a test's table); in AWS the CDK stack owns it.

Both build the key schema and the indexes from ``ipmeta.schema.keys``
(``keys.INDEXES``), so the local table is the deployed one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from ipmeta.schema import keys

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeDefinitionTypeDef


def create_table_if_missing(client: DynamoDBClient, table_name: str) -> bool:
    """Create the table from the key schema; False if it already existed."""
    try:
        client.create_table(
            TableName=table_name,
            KeySchema=[
                {"AttributeName": keys.PARTITION_KEY, "KeyType": "HASH"},
                {"AttributeName": keys.SORT_KEY, "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": keys.PARTITION_KEY, "AttributeType": keys.PARTITION_KEY_TYPE},
                {"AttributeName": keys.SORT_KEY, "AttributeType": keys.SORT_KEY_TYPE},
                *_index_attribute_definitions(),
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": index.name,
                    "KeySchema": [
                        {"AttributeName": index.partition_key, "KeyType": "HASH"},
                        {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                    ],
                    "Projection": {
                        "ProjectionType": "INCLUDE",
                        "NonKeyAttributes": list(index.projected),
                    },
                }
                for index in keys.INDEXES
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        return False
    client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    return True


def _index_attribute_definitions() -> list[AttributeDefinitionTypeDef]:
    definitions: list[AttributeDefinitionTypeDef] = []
    for index in keys.INDEXES:
        definitions.append({"AttributeName": index.partition_key, "AttributeType": index.partition_key_type})  # type: ignore[typeddict-item]
        definitions.append({"AttributeName": index.sort_key, "AttributeType": index.sort_key_type})  # type: ignore[typeddict-item]
    return definitions
