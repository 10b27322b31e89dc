"""The loader: source bucket, one Lambda per loader task, and the state machine.

Prepare -> [unchanged? done] -> Map(WriteChunk) -> Activate -> Wait(grace) -> Cleanup,
with a Catch on every task that runs Abort (the failed-load cleanup) and then Fail.
The functions are the ones in ``loader/handlers.py``; this module only wires them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import (
    CHUNK_PREFIX,
    DEFAULT_EVENT_BUS,
    ENV_CHUNK_PREFIX,
    ENV_EVENT_BUS_NAME,
    ENV_SOURCE_BUCKET,
    ENV_SOURCE_KEY,
    ENV_SOURCE_URL,
    ENV_TABLE_NAME,
    FETCH_SOURCE_TASK,
    LOADER_MODULE,
    LOADER_SERVICE_NAME,
    LOADER_TASKS,
    METRICS_NAMESPACE,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
)
from stacks.function import PythonFunction, loader_code
from stacks.nag import acknowledge, arn_ref

#: DynamoDB actions each task needs on the table, and nothing else (see the
#: ``loader.table`` calls each task makes in ``loader/<task>.py``).
TABLE_ACTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    # Version counter, load and version items, the load lock, the manifest.
    "prepare": ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"),
    # Range pieces, the chunk's done mark, and renewing the lock.
    "write_chunk": (
        "dynamodb:BatchWriteItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:GetItem",
    ),
    # Counts every partition against the manifest (Query), swaps the pointer
    # conditionally (PutItem), then releases the lock (DeleteItem).
    "activate": (
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:DeleteItem",
    ),
    # Deletes whole versions: partitions (Query + BatchWriteItem) and manifests.
    "cleanup": (
        "dynamodb:Query",
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    ),
    # Marks the load failed and frees the lock; cleanup deletes its items later.
    "abort": ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    FETCH_SOURCE_TASK: (),
}

_TIMEOUTS: Final[Mapping[str, Duration]] = {
    FETCH_SOURCE_TASK: Duration.minutes(15),
    # Reads, normalizes and chunks the whole CSV.
    "prepare": Duration.minutes(15),
    "write_chunk": Duration.minutes(5),
    "activate": Duration.minutes(2),
    "cleanup": Duration.minutes(15),
    "abort": Duration.minutes(15),
}

#: Errors the Lambda service itself raises; retrying them is always safe.
LAMBDA_SERVICE_ERRORS: Final = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.TooManyRequestsException",
)
#: DynamoDB asks writers to back off with these; a chunk write is idempotent.
THROTTLING_ERRORS: Final = (
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "WritesThrottled",
)
THROTTLE_RETRY_MAX_ATTEMPTS: Final = 8
THROTTLE_RETRY_BACKOFF_RATE: Final = 2.0
THROTTLE_RETRY_INTERVAL: Final = Duration.seconds(2)
THROTTLE_RETRY_MAX_DELAY: Final = Duration.minutes(1)
STATE_MACHINE_TIMEOUT: Final = Duration.hours(6)


def _construct_name(task: str) -> str:
    return "".join(part.capitalize() for part in task.split("_"))


class LoaderWorkflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.bucket = self._build_bucket()
        # Activation announces each new version on the account's default bus, where
        # consumers (caches, copies) subscribe with rules of their own.
        self.change_events = events.EventBus.from_event_bus_name(self, "ChangeEvents", DEFAULT_EVENT_BUS)
        self.functions = self._build_functions(table)
        self.change_events.grant_put_events_to(self.functions["activate"].role)
        self._grant_table(table)
        self._grant_bucket()
        acknowledge(
            self.bucket,
            "S1",
            "Server access logs would need a second bucket; writes to this bucket are "
            "loads, which the state machine's history and logs already record. Enable "
            "CloudTrail S3 data events for an object-level audit trail.",
        )
        self.logs = logs.LogGroup(
            self,
            "StateMachineLogs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Load an IP metadata CSV into a new table version and activate it",
            definition_body=sfn.DefinitionBody.from_chainable(self._build_definition()),
            timeout=STATE_MACHINE_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.logs, level=sfn.LogLevel.ALL, include_execution_data=True),
        )
        self._acknowledge_state_machine_findings()

    # --- resources -------------------------------------------------------

    def _build_bucket(self) -> s3.Bucket:
        return s3.Bucket(
            self,
            "SourceBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            # SSE-S3 keeps the loader's grants to S3 alone (no KMS key policy).
            encryption=s3.BucketEncryption.S3_MANAGED,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                # Chunks only matter while their load runs; a crashed load's
                # leftovers expire even if no cleanup ever ran.
                s3.LifecycleRule(
                    id="ExpireChunks",
                    prefix=f"{CHUNK_PREFIX}/",
                    expiration=Duration.days(7),
                    noncurrent_version_expiration=Duration.days(1),
                ),
                # Old datasets stay restorable for a while, not forever.
                s3.LifecycleRule(
                    id="ExpireReplacedDatasets",
                    noncurrent_version_expiration=Duration.days(90),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                ),
            ],
        )

    def _build_functions(self, table: dynamodb.ITableV2) -> dict[str, PythonFunction]:
        code = loader_code()
        environment = {
            ENV_TABLE_NAME: table.table_name,
            ENV_SOURCE_BUCKET: self.bucket.bucket_name,
            ENV_CHUNK_PREFIX: CHUNK_PREFIX,
            POWERTOOLS_SERVICE_NAME_ENV: LOADER_SERVICE_NAME,
            POWERTOOLS_METRICS_NAMESPACE_ENV: METRICS_NAMESPACE,
        }
        names = list(LOADER_TASKS)
        if self._config.source_url:
            names.insert(0, FETCH_SOURCE_TASK)
        return {
            task: PythonFunction(
                self,
                f"{_construct_name(task)}Function",
                code=code,
                handler=f"{LOADER_MODULE}.{task}",
                description=f"ipmeta loader: {task}",
                environment={**environment, **self._task_environment(task)},
                memory_mb=self._config.loader_memory_mb,
                timeout=_TIMEOUTS[task],
                log_retention=self._config.log_retention,
            )
            for task in names
        }

    def _task_environment(self, task: str) -> dict[str, str]:
        if task == "activate":
            return {ENV_EVENT_BUS_NAME: self.change_events.event_bus_name}
        if task != FETCH_SOURCE_TASK:
            return {}
        # The download lands on the key the schedule loads, so both name one object.
        return {ENV_SOURCE_URL: self._config.source_url, ENV_SOURCE_KEY: self._config.source_key}

    def _grant_table(self, table: dynamodb.ITableV2) -> None:
        for task, function in self.functions.items():
            actions = TABLE_ACTIONS[task]
            if actions:
                function.role.add_to_principal_policy(
                    iam.PolicyStatement(actions=list(actions), resources=[table.table_arn])
                )

    def _grant_bucket(self) -> None:
        chunks = self.bucket.arn_for_objects(f"{CHUNK_PREFIX}/*")
        roles = {task: function.role for task, function in self.functions.items()}
        bucket_arn = arn_ref(self.bucket)
        roles["prepare"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects("*")])
        )
        acknowledge(
            roles["prepare"],
            f"IAM5[Resource::{bucket_arn}/*]",
            "The source object is named by the execution input at run time; Prepare may "
            "read any object of the loader's own bucket and no other bucket.",
        )
        roles["prepare"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[chunks])
        )
        roles["write_chunk"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[chunks])
        )
        # Activation rewrites the load's report, which Prepare staged with the chunks.
        roles["activate"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[chunks])
        )
        roles["cleanup"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[chunks])
        )
        roles["cleanup"].add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{CHUNK_PREFIX}/*"]}},
            )
        )
        for task in ("prepare", "write_chunk", "activate", "cleanup"):
            acknowledge(
                roles[task],
                f"IAM5[Resource::{bucket_arn}/{CHUNK_PREFIX}/*]",
                "Chunk objects are named after a load id chosen at run time; the grant is "
                "limited to the chunk prefix of the loader's own bucket.",
            )
        if FETCH_SOURCE_TASK in roles:
            roles[FETCH_SOURCE_TASK].add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:PutObject"],
                    resources=[self.bucket.arn_for_objects(self._config.source_key)],
                )
            )

    # --- state machine ---------------------------------------------------

    def _acknowledge_state_machine_findings(self) -> None:
        role = self.state_machine.role
        for function in self.functions.values():
            acknowledge(
                role,
                f"IAM5[Resource::{arn_ref(function.function)}:*]",
                "CDK's LambdaInvoke grant covers the function's versions and aliases "
                "(<arn>:*); it stays scoped to this one function.",
            )
        acknowledge(
            role,
            "IAM5[Resource::*]",
            "X-Ray tracing (xray:PutTraceSegments, PutTelemetryRecords, GetSampling*) and "
            "CloudWatch Logs delivery (logs:*LogDelivery*, DescribeLogGroups, resource "
            "policies) support no resource-level permissions.",
        )

    def _invoke(
        self, task: str, state_name: str, payload: sfn.TaskInput | None, result_path: str | None
    ) -> tasks.LambdaInvoke:
        """A Lambda task; with no ``payload`` the function receives the whole state."""
        invoke = tasks.LambdaInvoke(
            self,
            state_name,
            lambda_function=self.functions[task].function,
            payload=payload,
            payload_response_only=True,
            # Replaced by the jittered retry below.
            retry_on_service_exceptions=False,
            result_path=result_path,
        )
        invoke.add_retry(
            errors=list(LAMBDA_SERVICE_ERRORS),
            interval=Duration.seconds(2),
            backoff_rate=2.0,
            max_attempts=6,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return invoke

    def _build_definition(self) -> sfn.IChainable:
        load_id = sfn.TaskInput.from_object({"load_id": sfn.JsonPath.string_at("$.load_id")})

        failed = sfn.Fail(self, "LoadFailed", error_path="$.error.Error", cause_path="$.error.Cause")
        # Abort gets everything known so far: load_id once Prepare has run, the
        # error, and whether Activate already succeeded.
        abort = self._invoke("abort", "Abort", None, sfn.JsonPath.DISCARD)
        abort.add_catch(failed, errors=["States.ALL"], result_path="$.abortError")
        abort.next(failed)

        prepare = self._invoke("prepare", "Prepare", None, None)
        write_chunk = self._invoke("write_chunk", "WriteChunk", None, None)
        write_chunk.add_retry(
            errors=list(THROTTLING_ERRORS),
            interval=THROTTLE_RETRY_INTERVAL,
            backoff_rate=THROTTLE_RETRY_BACKOFF_RATE,
            max_attempts=THROTTLE_RETRY_MAX_ATTEMPTS,
            max_delay=THROTTLE_RETRY_MAX_DELAY,
            jitter_strategy=sfn.JitterType.FULL,
        )
        write_chunks = sfn.Map(
            self,
            "WriteChunks",
            items_path="$.chunks",
            max_concurrency=self._config.map_max_concurrency,
            # Each iteration's result is dropped so the state stays small.
            result_path=sfn.JsonPath.DISCARD,
        ).item_processor(write_chunk)
        activate = self._invoke("activate", "Activate", load_id, "$.activation")
        grace = sfn.Wait(
            self,
            "Grace",
            comment="Let lookups holding the previous pointer finish before its items go",
            time=sfn.WaitTime.duration(Duration.seconds(self._config.activation_grace_seconds)),
        )
        cleanup = self._invoke("cleanup", "Cleanup", load_id, "$.cleanup")

        # Before the new version is live, a failure aborts the load. After it, the
        # load has succeeded: a failed Cleanup must not mark it failed, and the
        # next cleanup run deletes what this one left.
        steps: list[tasks.LambdaInvoke | sfn.Map] = [prepare, write_chunks, activate]
        start: sfn.IChainable = prepare
        if FETCH_SOURCE_TASK in self.functions:
            # Returns {"source", "options"} naming the downloaded object: Prepare's input.
            fetch = self._invoke(FETCH_SOURCE_TASK, "FetchSource", None, None)
            fetch.next(prepare)
            steps.insert(0, fetch)
            start = fetch
        for step in steps:
            step.add_catch(abort, errors=["States.ALL"], result_path="$.error")
        cleanup.add_catch(
            sfn.Fail(self, "CleanupFailed", error_path="$.error.Error", cause_path="$.error.Cause"),
            errors=["States.ALL"],
            result_path="$.error",
        )

        prepare.next(
            sfn.Choice(self, "Prepared?")
            .when(sfn.Condition.string_equals("$.status", "prepared"), write_chunks)
            .otherwise(
                sfn.Succeed(
                    self,
                    "NothingToWrite",
                    comment="The source matches the active version, or this was a dry run",
                )
            )
        )
        write_chunks.next(activate).next(grace).next(cleanup).next(sfn.Succeed(self, "Loaded"))
        return start
