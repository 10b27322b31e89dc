"""The loader: the source bucket and the state machine over the loader's functions.

Start -> [unchanged? done | prepared? write] -> ScanSources (a Map over the
source files) -> PlanPartitions -> ResolvePartitions (a Distributed Map over
the staged partition list) -> PlanWrites -> [dry run? done] -> WriteChunks (a
Distributed Map over the staged chunk list) -> [Export, with ``exportMmdb``] ->
Activate -> Wait(grace) -> Cleanup, with a Catch on every step before
activation that runs Abort (the failed-load cleanup) and then Fail.

Export comes before Activate (``loader/pipeline/export_task.py`` says why): a failed
export is a failed load, and the previous version keeps serving.

With feeds (context ``feeds``, or ``sourceUrl``), a run whose input names one
(``{"feed": "city"}``) starts with Fetch: an unchanged release ends the run as
FeedUnchanged; a new one is streamed into the bucket and becomes Start's input.
Once the load is active (Activate, or Start finding those bytes already active),
RecordRelease remembers the release for the feed's next run. Any other input
goes straight to Start, as without feeds::

    Feed? ── Fetch ── Fetched? ── FeedUnchanged
      │                  └─ Start ... Activate ── FromAFeed? ── RecordRelease ── Grace ...
      └─ Start

Distributed Map runs each partition and each batch of chunks as a child
execution, so the parent's history holds a few dozen events whatever the
dataset's size (an execution may hold 25,000), and every payload between
states is a few ids and an S3 key (far below 256 KB). The functions are the
ones in ``loader/pipeline/handlers.py``; ``stacks.load.loader_functions`` sizes and grants them.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import (
    CHUNK_PREFIX,
    DEFAULT_EVENT_BUS,
    ENV_EDGE_DISTRIBUTION_ID,
    FEED_RUN_UNCHANGED,
    FETCH_TASK,
    RECORD_RELEASE_TASK,
)
from stacks.load.loader_functions import EXPORT_TASK, LoaderFunctions, sizing
from stacks.nag import acknowledge, acknowledge_map_children, arn_ref

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
#: A vendor that stayed unavailable through the fetch function's own retries (seconds apart) may
#: answer minutes later; anything else (a refused key, a bad checksum) fails at once.
FEED_RETRY_ERRORS: Final = ("FeedUnavailable", "FeedTimeout", "DownloadTruncated")
FEED_RETRY_INTERVAL: Final = Duration.minutes(5)
FEED_RETRY_MAX_ATTEMPTS: Final = 2
#: A refused or throttled CloudFront invalidation (``loader.errors.EdgeInvalidationFailed``): CloudFront
#: allows 15 ``/*`` invalidations in progress at once, each done within minutes.
EDGE_INVALIDATION_ERROR: Final = "EdgeInvalidationFailed"
#: Activate's count of the version stopped short of the timeout (``loader.errors.VerificationPending``).
VERIFICATION_PENDING_ERROR: Final = "VerificationPending"
#: Attempts of up to 15 minutes each: as many as the state machine's timeout leaves room for.
VERIFICATION_MAX_ATTEMPTS: Final = 24
EDGE_RETRY_INTERVAL: Final = Duration.seconds(30)
EDGE_RETRY_MAX_ATTEMPTS: Final = 5
THROTTLE_RETRY_MAX_ATTEMPTS: Final = 8
THROTTLE_RETRY_BACKOFF_RATE: Final = 2.0
THROTTLE_RETRY_INTERVAL: Final = Duration.seconds(2)
THROTTLE_RETRY_MAX_DELAY: Final = Duration.minutes(1)
STATE_MACHINE_TIMEOUT: Final = Duration.hours(6)
#: Chunks one child execution of WriteChunks writes (about 10,000 items, ten seconds or so
#: at one Lambda's ~1,000 items/s: fewer children, and each still retries alone).
CHUNKS_PER_CHILD: Final = 4
#: A Task's TimeoutSeconds is its function's timeout plus this margin, so the Lambda's own
#: timeout (a clean, retried error) comes first and a lost invocation still ends.
TASK_TIMEOUT_MARGIN: Final = Duration.seconds(30)


def lambda_task(
    scope: Construct,
    state_name: str,
    function: lambda_.IFunction,
    timeout: Duration,
    *,
    payload: sfn.TaskInput | None,
    result_path: str | None,
) -> tasks.LambdaInvoke:
    """A Lambda task that times out after its function (``TASK_TIMEOUT_MARGIN``) and retries the
    Lambda service's own errors with full jitter."""
    invoke = tasks.LambdaInvoke(
        scope,
        state_name,
        lambda_function=function,
        payload=payload,
        payload_response_only=True,
        # Replaced by the jittered retry below.
        retry_on_service_exceptions=False,
        result_path=result_path,
        task_timeout=sfn.Timeout.duration(timeout.plus(TASK_TIMEOUT_MARGIN)),
    )
    invoke.add_retry(
        errors=list(LAMBDA_SERVICE_ERRORS),
        interval=Duration.seconds(2),
        backoff_rate=2.0,
        max_attempts=6,
        jitter_strategy=sfn.JitterType.FULL,
    )
    return invoke


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
        self.tasks = LoaderFunctions(
            self,
            "Functions",
            config=config,
            table=table,
            bucket=self.bucket,
            change_events=self.change_events,
        )
        self.functions = self.tasks.functions
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
            comment="Load IP metadata files into a new table version and activate it",
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
        stack = Stack.of(self)
        bucket = stack.resolve(stack.get_logical_id(self.bucket.node.default_child))  # type: ignore[arg-type]
        acknowledge(
            role,
            f"IAM5[Resource::arn:<AWS::Partition>:s3:::<{bucket}>/*]",
            "The Distributed Maps read the item lists a load stages and write their children's "
            "results (ItemReader, ResultWriter); the keys are chosen at run time, in the "
            "loader's own bucket only.",
        )
        acknowledge_map_children(self.state_machine)

    def _invoke(
        self, task: str, state_name: str, payload: sfn.TaskInput | None, result_path: str | None
    ) -> tasks.LambdaInvoke:
        """A Lambda task; with no ``payload`` the function receives the whole state."""
        timeout = sizing(task, self._config).timeout
        return lambda_task(
            self, state_name, self.functions[task].function, timeout, payload=payload, result_path=result_path
        )

    def _distributed_map(
        self, state_name: str, items_key: str, processor: sfn.IChainable, *, batch: int = 1
    ) -> sfn.DistributedMap:
        """A Distributed Map over a JSON array staged in the bucket; no failure is tolerated (the default).

        Children are Standard executions: an Express child ends after five minutes,
        retries included, and a task may take up to fifteen. The children's results
        go to S3 (ResultWriter), never into this state: it stays a few ids at any size.
        """
        return sfn.DistributedMap(
            self,
            state_name,
            item_reader=sfn.S3JsonItemReader(bucket=self.bucket, key=sfn.JsonPath.string_at(items_key)),
            item_batcher=sfn.ItemBatcher(max_items_per_batch=batch) if batch > 1 else None,
            max_concurrency=self._config.map_max_concurrency,
            map_execution_type=sfn.StateMachineType.STANDARD,
            result_writer_v2=sfn.ResultWriterV2(bucket=self.bucket, prefix=f"{CHUNK_PREFIX}/map-results"),
            result_path=sfn.JsonPath.DISCARD,
        ).item_processor(processor)

    def _abort(self) -> sfn.TaskStateBase:
        failed = sfn.Fail(self, "LoadFailed", error_path="$.error.Error", cause_path="$.error.Cause")
        # Abort gets everything known so far: load_id once Start has run, the
        # error, and whether Activate already succeeded.
        abort = self._invoke("abort", "Abort", None, sfn.JsonPath.DISCARD)
        abort.add_catch(failed, errors=["States.ALL"], result_path="$.abortError")
        abort.next(failed)
        return abort

    def _write_chunks(self) -> sfn.DistributedMap:
        write_chunk = self._invoke("write_chunks", "WriteChunk", None, sfn.JsonPath.DISCARD)
        write_chunk.add_retry(
            errors=list(THROTTLING_ERRORS),
            interval=THROTTLE_RETRY_INTERVAL,
            backoff_rate=THROTTLE_RETRY_BACKOFF_RATE,
            max_attempts=THROTTLE_RETRY_MAX_ATTEMPTS,
            max_delay=THROTTLE_RETRY_MAX_DELAY,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return self._distributed_map("WriteChunks", "$.writes.items.key", write_chunk, batch=CHUNKS_PER_CHILD)

    def _after_activation(self, activate: sfn.TaskStateBase, load_id: sfn.TaskInput) -> None:
        """[RecordRelease,] Grace, then Cleanup. The load has succeeded by now: a failed Cleanup must
        not mark it failed, and the next cleanup run deletes what this one left."""
        grace = sfn.Wait(
            self,
            "Grace",
            comment="Let lookups holding the previous pointer finish before its items go",
            time=sfn.WaitTime.duration(Duration.seconds(self._config.activation_grace_seconds)),
        )
        cleanup = self._invoke("cleanup", "Cleanup", load_id, "$.cleanup")
        cleanup.add_catch(
            sfn.Fail(self, "CleanupFailed", error_path="$.error.Error", cause_path="$.error.Cause"),
            errors=["States.ALL"],
            result_path="$.error",
        )
        grace.next(cleanup).next(sfn.Succeed(self, "Loaded"))
        activate.next(self._record_release("FromAFeed?", "RecordRelease", grace))

    def _record_release(
        self, choice: str, state_name: str, then: sfn.State, run: str | None = None
    ) -> sfn.IChainable:
        """With feeds: a feed's run remembers its release, then goes on to ``then``; any other load goes on.

        The version is live by now, so a failure to record must not fail the load: the
        next run fetches the release again, Start finds it active, and records it then.
        ``run`` names how the run ended for its metric when it did not load (the handler's
        default is a load).
        """
        if RECORD_RELEASE_TASK not in self.functions:
            return then
        fields: dict[str, Any] = {
            "feed": sfn.JsonPath.object_at("$.feed"),
            "load_id": sfn.JsonPath.string_at("$.load_id"),
        }
        if run is not None:
            fields["run"] = run
        release = sfn.TaskInput.from_object(fields)
        record = self._invoke(RECORD_RELEASE_TASK, state_name, release, sfn.JsonPath.DISCARD)
        record.add_catch(then, errors=["States.ALL"], result_path="$.recordError")
        record.next(then)
        return sfn.Choice(self, choice).when(sfn.Condition.is_present("$.feed"), record).otherwise(then)

    def _fetch(self, start: sfn.TaskStateBase) -> sfn.TaskStateBase:
        """A feed's run: its latest release unchanged (the run ends), or streamed to S3 for Start."""
        fetch = self._invoke(FETCH_TASK, "Fetch", None, None)
        fetch.add_retry(
            errors=list(FEED_RETRY_ERRORS),
            interval=FEED_RETRY_INTERVAL,
            backoff_rate=2.0,
            max_attempts=FEED_RETRY_MAX_ATTEMPTS,
            jitter_strategy=sfn.JitterType.FULL,
        )
        fetch.next(
            sfn.Choice(self, "Fetched?")
            .when(
                sfn.Condition.string_equals("$.status", "unchanged"),
                sfn.Succeed(self, "FeedUnchanged", comment="The vendor's latest release is the one loaded"),
            )
            .otherwise(start)
        )
        return fetch

    def _activation(self, load_id: sfn.TaskInput) -> list[sfn.TaskStateBase]:
        """Activate, preceded by Export with ``exportMmdb``: the states after WriteChunks, chained."""
        if EXPORT_TASK not in self.functions:
            return [self._activate(load_id)]
        export = self._invoke(EXPORT_TASK, "Export", load_id, "$.export")
        announce = sfn.TaskInput.from_object(
            {"load_id": sfn.JsonPath.string_at("$.load_id"), "export": sfn.JsonPath.object_at("$.export")}
        )
        activate = self._activate(announce)
        export.next(activate)
        return [export, activate]

    def _activate(self, payload: sfn.TaskInput) -> tasks.LambdaInvoke:
        """With ``edge``, CloudFront's cache is invalidated once the version answers: a refused or
        throttled invalidation retries Activate, which asks again under the same reference."""
        activate = self._invoke("activate", "Activate", payload, "$.activation")
        # A version too big to count in one invocation: each attempt counts on from the saved progress.
        activate.add_retry(
            errors=[VERIFICATION_PENDING_ERROR],
            interval=Duration.seconds(1),
            backoff_rate=1.0,
            max_attempts=VERIFICATION_MAX_ATTEMPTS,
        )
        if self._config.edge:
            activate.add_retry(
                errors=[EDGE_INVALIDATION_ERROR],
                interval=EDGE_RETRY_INTERVAL,
                backoff_rate=2.0,
                max_attempts=EDGE_RETRY_MAX_ATTEMPTS,
                jitter_strategy=sfn.JitterType.FULL,
            )
        return activate

    def invalidate_on_activation(self, distribution: cloudfront.IDistribution) -> None:
        """``edge``: the activate function names the distribution and may invalidate it, no other."""
        activate = self.functions["activate"]
        activate.function.add_environment(ENV_EDGE_DISTRIBUTION_ID, distribution.distribution_id)
        distribution.grant_create_invalidation(activate.role)

    def _build_definition(self) -> sfn.IChainable:
        load_id = sfn.TaskInput.from_object({"load_id": sfn.JsonPath.string_at("$.load_id")})

        abort = self._abort()
        start = self._invoke("start", "Start", None, None)
        scan_sources = sfn.Map(
            self,
            "ScanSources",
            items_path="$.scans",
            # An inline Map runs at most 40 iterations at once; a load has a few source files.
            max_concurrency=min(40, self._config.map_max_concurrency),
            result_path=sfn.JsonPath.DISCARD,
        ).item_processor(self._invoke("scan", "Scan", None, sfn.JsonPath.DISCARD))
        plan_partitions = self._invoke("plan_partitions", "PlanPartitions", load_id, "$.partitions")
        resolve = self._distributed_map(
            "ResolvePartitions",
            "$.partitions.items.key",
            self._invoke("resolve", "Resolve", None, sfn.JsonPath.DISCARD),
        )
        plan_writes = self._invoke("plan_writes", "PlanWrites", load_id, "$.writes")
        write_chunks = self._write_chunks()
        activation = self._activation(load_id)

        # Before the new version is live, a failure aborts the load (_after_activation: after it).
        steps: list[sfn.TaskStateBase | sfn.Map | sfn.DistributedMap]
        steps = [start, scan_sources, plan_partitions, resolve, plan_writes, write_chunks, *activation]
        first: sfn.IChainable = start
        if FETCH_TASK in self.functions:
            fetch = self._fetch(start)
            steps.insert(0, fetch)
            first = sfn.Choice(self, "Feed?").when(sfn.Condition.is_present("$.feed"), fetch).otherwise(start)
        for step in steps:
            step.add_catch(abort, errors=["States.ALL"], result_path="$.error")
        nothing_to_write = sfn.Succeed(self, "NothingToWrite", comment="The sources match the active version")
        start.next(
            sfn.Choice(self, "Started?")
            .when(
                sfn.Condition.string_equals("$.status", "unchanged"),
                self._record_release(
                    "UnchangedFromAFeed?", "RecordUnchangedRelease", nothing_to_write, FEED_RUN_UNCHANGED
                ),
            )
            .when(sfn.Condition.boolean_equals("$.prepared", True), write_chunks)
            .otherwise(scan_sources)
        )
        scan_sources.next(plan_partitions).next(resolve).next(plan_writes).next(
            sfn.Choice(self, "Written?")
            .when(
                sfn.Condition.string_equals("$.writes.status", "dry-run"),
                sfn.Succeed(self, "DryRunDone", comment="A dry run checks and reports; it writes nothing"),
            )
            .otherwise(write_chunks)
        )
        write_chunks.next(activation[0])
        self._after_activation(activation[-1], load_id)
        return first
