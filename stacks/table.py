"""The ranges table: key schema from ``ipmeta.schema.keys``, capacity from context."""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from ipmeta.schema import keys
from stacks.config import IpmetaConfig

_ATTRIBUTE_TYPES: Final = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def attribute(name: str, type_code: str) -> dynamodb.Attribute:
    """A key attribute, typed by its DynamoDB type code (``S``, ``N``, ``B``)."""
    return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[type_code])


class RangesTable(Construct):
    """One TableV2 holding every version's range pieces and the pointer items."""

    def __init__(self, scope: Construct, construct_id: str, *, config: IpmetaConfig) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        indexes = self._build_indexes()
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=attribute(keys.PARTITION_KEY, keys.PARTITION_KEY_TYPE),
            sort_key=attribute(keys.SORT_KEY, keys.SORT_KEY_TYPE),
            billing=self._build_billing(),
            warm_throughput=self._build_warm_throughput(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=config.deletion_protection,
            # The table is the service's data: keep it if the stack goes away.
            removal_policy=RemovalPolicy.RETAIN,
            global_secondary_indexes=indexes,
        )
        #: Names of the table's indexes, for grants scoped to their ARNs.
        self.index_names: list[str] = [index.index_name for index in indexes]

    def _build_billing(self) -> dynamodb.Billing:
        if not self._config.provisioned:
            return dynamodb.Billing.on_demand()
        return dynamodb.Billing.provisioned(
            read_capacity=dynamodb.Capacity.fixed(self._config.provisioned_read_capacity),
            # TableV2 only autoscales provisioned writes; loads scale them up.
            write_capacity=dynamodb.Capacity.autoscaled(
                max_capacity=self._config.provisioned_write_max_capacity
            ),
        )

    def _build_warm_throughput(self) -> dynamodb.WarmThroughput | None:
        read = self._config.warm_read_units_per_second
        write = self._config.warm_write_units_per_second
        if not read and not write:
            return None
        # Pre-warming lets the first big load write at full speed instead of
        # waiting for on-demand partitions to split.
        return dynamodb.WarmThroughput(
            read_units_per_second=read or None,
            write_units_per_second=write or None,
        )

    def _build_indexes(self) -> list[dynamodb.GlobalSecondaryIndexPropsV2]:
        """The reverse-lookup indexes, built from the index section of ``ipmeta.schema.keys``.

        Both project exactly the attributes an answer shows (INCLUDE): a page is
        one Query per shard, with no fetch from the table (docs/reverse.md).
        """
        return [
            dynamodb.GlobalSecondaryIndexPropsV2(
                index_name=index.name,
                partition_key=attribute(index.partition_key, index.partition_key_type),
                sort_key=attribute(index.sort_key, index.sort_key_type),
                projection_type=dynamodb.ProjectionType.INCLUDE,
                non_key_attributes=list(index.projected),
            )
            for index in keys.INDEXES
        ]
