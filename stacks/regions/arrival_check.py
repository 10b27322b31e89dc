"""A replica region's arrival check: every minute, its pointers follow home's, each version once it arrived.

``loader.pipeline.handlers.arrive`` (``loader.pipeline.arrival``) on a schedule in
the region, against the region's own replica: it reads, and it writes nothing but
this region's pointer items (``{d}meta#pointer#{region}``) and its counts' saved
progress (``{d}meta#pointer#{region}#counted``), which IAM holds it to with
``dynamodb:LeadingKeys``. A run recounts what is still short for at most
``ARRIVAL_WAIT_SECONDS`` (less than the minute between runs), so runs do not overlap
unless one round of counting a big version outlasts the minute: then two runs count
at once, which costs reads and changes nothing (every write is idempotent and
conditional). No retries, by the scheduler or by Lambda: the next minute is the retry.
Why a function per region rather than a step of home's state machine:
docs/decisions.md, "Replicas: a version serves in a region only once it has arrived".
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from constructs import Construct

from ipmeta.schema import keys
from loader.planning.regions import ARRIVAL_MEMORY_MB
from stacks.config import IpmetaConfig
from stacks.constants import (
    ARRIVAL_TASK,
    ENV_POINTER_REGION,
    ENV_TABLE_NAME,
    LOADER_MODULE,
    LOADER_SERVICE_NAME,
    METRICS_NAMESPACE,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
)
from stacks.function import PythonFunction, loader_code
from stacks.nag import acknowledge, arn_ref

#: Reads: the datasets' list, both pointers, manifests, version metadata (GetItem); counts of items
#: and of the GSIs' entries (Query).
ARRIVAL_READ_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:Query")
#: Writes: the region's pointer and its arrival records, one partition per dataset, nothing else.
ARRIVAL_WRITE_ACTIONS: Final = ("dynamodb:PutItem",)
#: A minute, EventBridge Scheduler's finest rate: how far a region may trail the moment a version arrived.
ARRIVAL_RATE: Final = Duration.minutes(1)
ARRIVAL_TIMEOUT: Final = Duration.minutes(15)


def own_pointer_keys(region: str) -> list[str]:
    """The partition keys the region's check may write: its pointer and its counts' progress, in
    ``default``'s keys and any dataset's."""
    space = keys.key_space()
    own = [space.region_pointer(region), space.counted(region)]
    return [*own, *(f"ds#*#{key}" for key in own)]


class ArrivalCheck(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
        region: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = PythonFunction(
            self,
            "Function",
            code=loader_code(),
            handler=f"{LOADER_MODULE}.{ARRIVAL_TASK}",
            description=f"ipmeta: {region}'s pointers follow home's, each version once it wholly arrived",
            environment={
                ENV_TABLE_NAME: table.table_name,
                ENV_POINTER_REGION: region,
                POWERTOOLS_SERVICE_NAME_ENV: LOADER_SERVICE_NAME,
                POWERTOOLS_METRICS_NAMESPACE_ENV: METRICS_NAMESPACE,
            },
            memory_mb=ARRIVAL_MEMORY_MB,
            timeout=ARRIVAL_TIMEOUT,
            log_retention=config.log_retention,
        )
        self.function = self.handler.function
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=ARRIVAL_RATE.plus(ARRIVAL_RATE))
        self._grant(table, region)
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description=f"Run {region}'s arrival check",
            schedule=scheduler.ScheduleExpression.rate(ARRIVAL_RATE),
            # A missed minute is the next minute's work: no retries to pile up behind a long count.
            target=scheduler_targets.LambdaInvoke(self.function, retry_attempts=0),
        )
        # The schedule's role is the stack's own (CDK makes one per target), so is its finding.
        acknowledge(
            Stack.of(self),
            f"IAM5[Resource::{arn_ref(self.function)}:*]",
            "CDK's grant to the schedule's role covers the function's versions and aliases (<arn>:*); "
            "it stays scoped to this one function.",
        )

    def _grant(self, table: dynamodb.ITableV2, region: str) -> None:
        role = self.handler.role
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(ARRIVAL_READ_ACTIONS),
                # The GSIs too: it counts each version's index entries there before the region's
                # reverse lookups read them (``loader.pipeline.arrival``).
                resources=[
                    table.table_arn,
                    *(f"{table.table_arn}/index/{index.name}" for index in keys.INDEXES),
                ],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(ARRIVAL_WRITE_ACTIONS),
                resources=[table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": own_pointer_keys(region)}},
            )
        )
