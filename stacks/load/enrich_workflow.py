"""``ipmeta enrich`` on AWS: a file of addresses, annotated by a Distributed Map of sort-merge tasks.

With ``enrichInputs`` and ``enrichOutputs`` (the ``s3://bucket/prefix/`` a job may read and
write), the stack holds a second state machine::

    PlanEnrich ── Snapshots (a Map over the pinned versions) ── EnrichParts ── Summarize ── Enriched
        └──────────────── every state: Catch ── EnrichAbort ── EnrichFailed

- PlanEnrich pins each dataset's version, lists the input (a prefix or a manifest), cuts
  large objects into byte ranges or row groups and stages the parts list in the loader's
  bucket (``loader.pipeline.enrich_parts``);
- Snapshots writes each pinned version's Parquet snapshot once: a version never changes, so a
  later job finds it and reads the table not at all;
- EnrichParts is a Distributed Map over the parts list (ItemReader); each child runs the
  engine every ``ipmeta enrich`` runs on one part and writes its output part; their summaries
  go to S3 (ResultWriter), never into the parent's state;
- Summarize adds the children's summaries (rows, invalid rows, unmatched rows, seconds) and
  writes ``_SUMMARY.json`` beside the parts, or fails the job if any child failed: the map
  tolerates failed children so that every child has finished when EnrichAbort deletes the
  job's parts (a child stopped mid-write could otherwise leave its part behind).

The tasks are ``loader.pipeline.handlers.enrich_*``: the loader's code asset plus the public
AWS SDK for pandas layer, which brings pyarrow and numpy built for arm64 (docs/decisions.md).
Timeouts, retries and the children's concurrency are the loader's (``stacks.load.loader_workflow``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Aws, CfnMapping, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from loader.pipeline.enrich_parts import S3Location
from loader.pipeline.enrich_task import (
    ENRICH_TASKS,
    PART_MEMORY_MB,
    RESULTS_PREFIX,
    SNAPSHOT_PREFIX,
    STAGING_PREFIX,
)
from stacks.config import IpmetaConfig
from stacks.constants import (
    CHUNK_PREFIX,
)
from stacks.function import PythonFunction, loader_code
from stacks.load.loader_functions import Sizing, loader_environment, task_function
from stacks.load.loader_workflow import STATE_MACHINE_TIMEOUT, lambda_task
from stacks.nag import acknowledge, acknowledge_map_children, arn_ref

#: The AWS SDK for pandas managed layer for Python 3.13 on arm64: pyarrow and numpy, built and
#: trimmed by AWS to fit Lambda's 250 MB beside a function. Its version number differs per region;
#: each is a published ARN (aws-sdk-pandas.readthedocs.io, "AWS Lambda Managed Layers"), and a
#: region not listed fails the deploy at the mapping, not at run time.
PANDAS_LAYER_ACCOUNT: Final = "336392948345"
PANDAS_LAYER_NAME: Final = "AWSSDKPandas-Python313-Arm64"
PANDAS_LAYER_VERSIONS: Final[Mapping[str, int]] = {
    "us-east-1": 16,
    "ap-southeast-1": 16,
    "ca-central-1": 15,
    "af-south-1": 11,
}
#: Errors S3 answers a busy prefix with; a part rewrites its whole output, so a retry is safe.
S3_SLOW_DOWN_ERRORS: Final = ("SlowDown", "S3.SlowDown", "ServiceUnavailable", "InternalError")


#: Memory, timeout and /tmp of each task. A part is sized in ``enrich_parts`` so that its
#: sorted addresses fit ``PART_MEMORY_MB``; the snapshot pages a version out of the table.
SIZING: Final[Mapping[str, Sizing]] = {
    "enrich_plan": Sizing(512, Duration.minutes(5)),
    "enrich_snapshot": Sizing(3008, Duration.minutes(15), ephemeral_storage_mb=4096),
    "enrich_part": Sizing(PART_MEMORY_MB, Duration.minutes(15), ephemeral_storage_mb=4096),
    "enrich_summary": Sizing(512, Duration.minutes(5)),
    "enrich_abort": Sizing(512, Duration.minutes(5)),
}


class EnrichWorkflow(Construct):
    """The enrich state machine, its five functions, and an alarm on its failed executions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
        bucket: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._bucket = bucket
        self._inputs = [S3Location.parse(uri).prefix() for uri in config.enrich_inputs]
        self._outputs = [S3Location.parse(uri).prefix() for uri in config.enrich_outputs]
        self.functions = self._build_functions(table)
        self._grant_table(table)
        self._grant_buckets()
        self.logs = logs.LogGroup(
            self, "StateMachineLogs", retention=config.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Annotate files of addresses with a pinned version of each dataset",
            definition_body=sfn.DefinitionBody.from_chainable(self._build_definition()),
            timeout=STATE_MACHINE_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.logs, level=sfn.LogLevel.ALL, include_execution_data=True),
        )
        self.failed = self._build_alarm()
        self._acknowledge_state_machine_findings()

    # --- functions -------------------------------------------------------------------

    def _pandas_layer(self) -> lambda_.ILayerVersion:
        mapping = CfnMapping(
            self,
            "PandasLayerVersions",
            mapping={region: {"version": str(version)} for region, version in PANDAS_LAYER_VERSIONS.items()},
        )
        version = mapping.find_in_map(Aws.REGION, "version")
        layer = f"{PANDAS_LAYER_ACCOUNT}:layer:{PANDAS_LAYER_NAME}:{version}"
        arn = f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{layer}"
        return lambda_.LayerVersion.from_layer_version_arn(self, "PandasLayer", arn)

    def _build_functions(self, table: dynamodb.ITableV2) -> dict[str, PythonFunction]:
        code = loader_code()
        layer = self._pandas_layer()
        environment = loader_environment(table, self._bucket)
        functions = {}
        for task in ENRICH_TASKS:
            function = task_function(
                self,
                task,
                code=code,
                description=f"ipmeta enrich: {task.removeprefix('enrich_')}",
                environment=environment,
                size=SIZING[task],
                config=self._config,
            )
            function.function.add_layers(layer)
            functions[task] = function
        return functions

    def _grant_table(self, table: dynamodb.ITableV2) -> None:
        """The plan reads pointers and version metadata to pin versions; the snapshot pages a version."""
        for task in ("enrich_plan", "enrich_snapshot"):
            self.functions[task].role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:GetItem", "dynamodb:Query"], resources=[table.table_arn]
                )
            )

    def _objects(self, bucket: s3.IBucket | str, prefix: str) -> tuple[str, str]:
        """The objects under ``prefix``: the resource, and how cdk-nag names it in a finding."""
        if isinstance(bucket, str):
            return (
                f"arn:{Aws.PARTITION}:s3:::{bucket}/{prefix}*",
                f"arn:<AWS::Partition>:s3:::{bucket}/{prefix}*",
            )
        return bucket.arn_for_objects(f"{prefix}*"), f"{arn_ref(bucket)}/{prefix}*"

    def _allow(self, task: str, actions: list[str], resources: list[tuple[str, str]], reason: str) -> None:
        role = self.functions[task].role
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=actions, resources=[resource for resource, _ in resources])
        )
        for _, finding in resources:
            acknowledge(role, f"IAM5[Resource::{finding}]", reason)

    def _allow_listing(self, task: str, prefixes: list[S3Location]) -> None:
        """ListBucket on each bucket, only under its prefix (HeadObject answers 404, not 403, with it)."""
        for bucket in sorted({prefix.bucket for prefix in prefixes}):
            under = [f"{prefix.key}*" for prefix in prefixes if prefix.bucket == bucket]
            self.functions[task].role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}"],
                    conditions={"StringLike": {"s3:prefix": under}},
                )
            )

    def _grant_buckets(self) -> None:
        inputs = [self._objects(prefix.bucket, prefix.key) for prefix in self._inputs]
        outputs = [self._objects(prefix.bucket, prefix.key) for prefix in self._outputs]
        staged = self._objects(self._bucket, f"{CHUNK_PREFIX}/{STAGING_PREFIX}/")
        results = self._objects(self._bucket, f"{CHUNK_PREFIX}/{RESULTS_PREFIX}/")
        snapshots = self._objects(self._bucket, f"{SNAPSHOT_PREFIX}/")
        named = "Objects are named at run time by the job's input; the grant is limited to"
        self._allow("enrich_plan", ["s3:GetObject"], inputs, f"{named} the enrichInputs prefixes.")
        self._allow_listing("enrich_plan", [*self._inputs, *self._outputs])
        self._allow("enrich_plan", ["s3:PutObject"], [staged], f"{named} the job's staging prefix.")
        self._allow(
            "enrich_snapshot", ["s3:GetObject", "s3:PutObject"], [snapshots], f"{named} the snapshots."
        )
        # HeadObject answers 404 rather than 403 for a snapshot not yet written.
        self.functions["enrich_snapshot"].role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self._bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{SNAPSHOT_PREFIX}/*"]}},
            )
        )
        self._allow("enrich_part", ["s3:GetObject"], [*inputs, snapshots], f"{named} inputs and snapshots.")
        self._allow(
            "enrich_part", ["s3:PutObject", "s3:AbortMultipartUpload"], outputs, f"{named} enrichOutputs."
        )
        self._allow("enrich_summary", ["s3:GetObject"], [results], f"{named} the map's results.")
        self._allow("enrich_summary", ["s3:PutObject"], outputs, f"{named} enrichOutputs.")
        self._allow("enrich_abort", ["s3:DeleteObject"], outputs, f"{named} enrichOutputs.")
        self._allow_listing("enrich_abort", self._outputs)

    # --- the state machine -----------------------------------------------------------

    def _invoke(
        self, task: str, state_name: str, payload: sfn.TaskInput | None, result_path: str | None
    ) -> tasks.LambdaInvoke:
        function = self.functions[task].function
        return lambda_task(
            self, state_name, function, SIZING[task].timeout, payload=payload, result_path=result_path
        )

    def _enrich_parts(self) -> sfn.DistributedMap:
        """Children over the staged parts list; their summaries to S3, where Summarize reads them."""
        part = self._invoke("enrich_part", "EnrichPart", None, None)
        part.add_retry(
            errors=list(S3_SLOW_DOWN_ERRORS),
            interval=Duration.seconds(5),
            backoff_rate=2.0,
            max_attempts=5,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return sfn.DistributedMap(
            self,
            "EnrichParts",
            item_reader=sfn.S3JsonItemReader(
                bucket=self._bucket, key=sfn.JsonPath.string_at("$.plan.parts.key")
            ),
            max_concurrency=self._config.map_max_concurrency,
            map_execution_type=sfn.StateMachineType.STANDARD,
            # Every child runs to its end, failed or not, before Summarize reads the results and
            # fails the job: an abort while a child still writes would leave its part behind.
            tolerated_failure_percentage=100,
            result_writer_v2=sfn.ResultWriterV2(
                bucket=self._bucket, prefix=f"{CHUNK_PREFIX}/{RESULTS_PREFIX}"
            ),
            result_path="$.parts",
        ).item_processor(part)

    def _build_definition(self) -> sfn.IChainable:
        failed = sfn.Fail(self, "EnrichFailed", error_path="$.error.Error", cause_path="$.error.Cause")
        abort = self._invoke("enrich_abort", "EnrichAbort", None, sfn.JsonPath.DISCARD)
        abort.add_catch(failed, errors=["States.ALL"], result_path="$.abortError")
        abort.next(failed)

        plan = self._invoke("enrich_plan", "PlanEnrich", None, "$.plan")
        snapshots = sfn.Map(
            self,
            "Snapshots",
            items_path="$.plan.snapshots",
            max_concurrency=min(40, self._config.map_max_concurrency),
            result_path=sfn.JsonPath.DISCARD,
        ).item_processor(self._invoke("enrich_snapshot", "Snapshot", None, None))
        parts = self._enrich_parts()
        summary = self._invoke(
            "enrich_summary",
            "Summarize",
            sfn.TaskInput.from_object(
                {
                    "plan": sfn.JsonPath.object_at("$.plan"),
                    "results": sfn.JsonPath.object_at("$.parts.ResultWriterDetails"),
                }
            ),
            "$.summary",
        )
        for step in (plan, snapshots, parts, summary):
            step.add_catch(abort, errors=["States.ALL"], result_path="$.error")
        done = sfn.Succeed(self, "Enriched", output_path="$.summary")
        plan.next(snapshots).next(parts).next(summary).next(done)
        return plan

    def _build_alarm(self) -> cloudwatch.Alarm:
        machine = self.state_machine
        failed = cloudwatch.MathExpression(
            expression="failed + timedOut + aborted",
            using_metrics={
                "failed": machine.metric_failed(statistic=cloudwatch.Stats.SUM),
                "timedOut": machine.metric_timed_out(statistic=cloudwatch.Stats.SUM),
                "aborted": machine.metric_aborted(statistic=cloudwatch.Stats.SUM),
            },
            label="enrich executions failed, timed out or aborted",
            period=Duration.minutes(5),
        )
        return failed.create_alarm(
            self,
            "EnrichFailedAlarm",
            alarm_description="An enrich execution failed, timed out or was aborted",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def notify(self, topic: sns.ITopic) -> None:
        """The failure alarm goes to the stack's alarm topic, and so does its return to OK."""
        self.failed.add_alarm_action(cloudwatch_actions.SnsAction(topic))
        self.failed.add_ok_action(cloudwatch_actions.SnsAction(topic))

    def _acknowledge_state_machine_findings(self) -> None:
        role = self.state_machine.role
        for function in self.functions.values():
            acknowledge(
                role,
                f"IAM5[Resource::{arn_ref(function.function)}:*]",
                "CDK's LambdaInvoke grant covers the function's versions and aliases; it stays "
                "scoped to this one function.",
            )
        acknowledge(
            role,
            "IAM5[Resource::*]",
            "X-Ray tracing and CloudWatch Logs delivery support no resource-level permissions.",
        )
        stack = Stack.of(self)
        bucket = stack.resolve(stack.get_logical_id(self._bucket.node.default_child))  # type: ignore[arg-type]
        acknowledge(
            role,
            f"IAM5[Resource::arn:<AWS::Partition>:s3:::<{bucket}>/*]",
            "The Distributed Map reads the parts list a job stages and writes its children's "
            "results (ItemReader, ResultWriter); the keys are chosen at run time, in the loader's bucket.",
        )
        acknowledge_map_children(self.state_machine)
