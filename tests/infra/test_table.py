"""The table: key schema from ipmeta.schema.keys, capacity and safety from context."""

from __future__ import annotations

from aws_cdk.assertions import Match

from ipmeta.schema import keys
from tests.infra.cfn import only
from tests.infra.conftest import SOURCE_URL, Synthesized


def test_key_schema_and_attribute_types_come_from_the_key_module(synthesized: Synthesized) -> None:
    _, table = only(synthesized.templates["default"], "AWS::DynamoDB::GlobalTable")
    properties = table["Properties"]

    assert properties["KeySchema"] == [
        {"AttributeName": keys.PARTITION_KEY, "KeyType": "HASH"},
        {"AttributeName": keys.SORT_KEY, "KeyType": "RANGE"},
    ]
    assert sorted(properties["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        [
            {"AttributeName": keys.PARTITION_KEY, "AttributeType": keys.PARTITION_KEY_TYPE},
            {"AttributeName": keys.SORT_KEY, "AttributeType": keys.SORT_KEY_TYPE},
            *(
                {"AttributeName": name, "AttributeType": kind}
                for index in keys.INDEXES
                for name, kind in (
                    (index.partition_key, index.partition_key_type),
                    (index.sort_key, index.sort_key_type),
                )
            ),
        ],
        key=lambda a: a["AttributeName"],
    )


def test_reverse_lookup_indexes_come_from_the_key_module_and_project_what_answers_show(
    synthesized: Synthesized,
) -> None:
    _, table = only(synthesized.templates["default"], "AWS::DynamoDB::GlobalTable")
    indexes = {index["IndexName"]: index for index in table["Properties"]["GlobalSecondaryIndexes"]}

    assert set(indexes) == {keys.RANGES_BY_VALUE_INDEX, keys.FLAGGED_INDEX}
    for schema in keys.INDEXES:
        index = indexes[schema.name]
        assert index["KeySchema"] == [
            {"AttributeName": schema.partition_key, "KeyType": "HASH"},
            {"AttributeName": schema.sort_key, "KeyType": "RANGE"},
        ]
        assert index["Projection"] == {
            "ProjectionType": "INCLUDE",
            "NonKeyAttributes": list(keys.INDEX_PROJECTED_ATTRIBUTES),
        }


def test_default_table_is_on_demand_with_pitr_and_deletion_protection(synthesized: Synthesized) -> None:
    synthesized.template().has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "Replicas": [
                Match.object_like(
                    {
                        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                        "DeletionProtectionEnabled": True,
                    }
                )
            ],
        },
    )
    _, table = only(synthesized.templates["default"], "AWS::DynamoDB::GlobalTable")
    assert "WarmThroughput" not in table["Properties"]
    assert table["DeletionPolicy"] == "Retain"


def test_context_switches_to_provisioned_capacity_warm_throughput_and_no_protection(
    synthesized: Synthesized,
) -> None:
    synthesized.template(SOURCE_URL).has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "BillingMode": "PROVISIONED",
            "WarmThroughput": {"ReadUnitsPerSecond": 13000, "WriteUnitsPerSecond": 5000},
            "WriteProvisionedThroughputSettings": {
                "WriteCapacityAutoScalingSettings": Match.object_like({"MaxCapacity": 321})
            },
            "Replicas": [
                Match.object_like(
                    {
                        "ReadProvisionedThroughputSettings": {"ReadCapacityUnits": 7},
                        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                        "DeletionProtectionEnabled": False,
                    }
                )
            ],
        },
    )
