"""The loader's Lambda functions: one per task, each sized and granted for its task alone.

Sizes come from measurements on the largest public datasets (docs/loader.md,
"Lambda sizing"): the scan and the resolve are CPU-bound Python, so they get
the memory that buys a whole vCPU (1,769 MB and up) plus what their peak RSS
needs; the planning steps and the writers mostly wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from loader.pipeline.export_task import EXPORT_PREFIX
from loader.pipeline.fetch import DeployedFeed, encode_feeds
from stacks.config import IpmetaConfig
from stacks.constants import (
    CHUNK_PREFIX,
    ENV_CHUNK_PREFIX,
    ENV_EVENT_BUS_NAME,
    ENV_EXPORTS_ENABLED,
    ENV_FEEDS,
    ENV_SOURCE_BUCKET,
    ENV_TABLE_NAME,
    FEED_TASKS,
    FEEDS_PREFIX,
    FETCH_TASK,
    LOADER_MODULE,
    LOADER_SERVICE_NAME,
    LOADER_TASKS,
    METRICS_NAMESPACE,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
    RECORD_RELEASE_TASK,
)
from stacks.function import PythonFunction, loader_code
from stacks.nag import acknowledge, arn_ref

#: The optional task (``exportMmdb``) that writes the new version as a MaxMind DB before Activate.
EXPORT_TASK: Final = "export"

_READ_BOOKKEEPING: Final = ("dynamodb:GetItem", "dynamodb:Query")
#: DynamoDB actions each task needs on the table, and nothing else (the
#: ``loader.store`` calls each task makes in ``loader/pipeline/<state>.py``).
TABLE_ACTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    # Pointer and version reads, the version counter, the lock and the load item;
    # failing a load it could not start frees the lock.
    "start": (*_READ_BOOKKEEPING, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    # Reads and writes only staged files.
    "scan": (),
    "plan_partitions": (),
    # Staged files; a reload over a base reads the base's items and cover list (Query).
    "resolve": ("dynamodb:Query",),
    # Version metadata, manifest, cover list and cover head items, the load item; over a
    # base, the base's metadata, manifest and cover list (GetItem, Query).
    "plan_writes": (
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:BatchWriteItem",
    ),
    # Range items, the chunk's done mark, and renewing the lock.
    "write_chunks": (
        "dynamodb:BatchWriteItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:GetItem",
    ),
    # Counts partitions against the manifest (Query), swaps the pointer conditionally
    # (PutItem), then releases the lock (DeleteItem).
    "activate": (*_READ_BOOKKEEPING, "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"),
    # Deletes whole versions: partitions (Query + BatchWriteItem) and manifests.
    # DescribeTable: the replica regions it holds versions for are the table's own.
    "cleanup": (
        *_READ_BOOKKEEPING,
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:UpdateItem",
        "dynamodb:DescribeTable",
    ),
    # Marks the load failed and frees the lock; cleanup deletes its items later.
    # Also counts a feed's failed run (UpdateItem).
    "abort": ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    # Reads the feed's state (GetItem); an unchanged release resets its failures (UpdateItem).
    FETCH_TASK: ("dynamodb:GetItem", "dynamodb:UpdateItem"),
    RECORD_RELEASE_TASK: ("dynamodb:UpdateItem",),
    # Verifies like activate (GetItem, Query), reads the version (Query) and renews the lock (PutItem).
    EXPORT_TASK: (*_READ_BOOKKEEPING, "dynamodb:PutItem"),
}
#: Bucket actions on the staging prefix (``chunks/``) of each task.
STAGING_ACTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "start": ("s3:PutObject",),
    # A task whose result is staged already skips it: it asks whether the file exists
    # (HeadObject answers 403, not 404, without ListBucket).
    "scan": ("s3:GetObject", "s3:PutObject", "s3:ListBucket"),
    "plan_partitions": ("s3:GetObject", "s3:PutObject"),
    "resolve": ("s3:GetObject", "s3:PutObject", "s3:ListBucket"),
    "plan_writes": ("s3:GetObject", "s3:PutObject"),
    "write_chunks": ("s3:GetObject",),
    # Activation rewrites the load's report.
    "activate": ("s3:GetObject", "s3:PutObject"),
    "cleanup": ("s3:DeleteObject", "s3:ListBucket"),
    "abort": (),
    # Writes only under FEEDS_PREFIX (``_grant_feeds``).
    FETCH_TASK: (),
    RECORD_RELEASE_TASK: (),
    # Writes only under EXPORT_PREFIX (``_grant_export``).
    EXPORT_TASK: (),
}
#: Tasks that read the source objects themselves (anywhere in the loader's bucket).
SOURCE_READERS: Final = ("start", "scan")


@dataclass(frozen=True)
class Sizing:
    memory_mb: int
    timeout: Duration
    ephemeral_storage_mb: int | None = None


def sizing(task: str, config: IpmetaConfig) -> Sizing:
    """Memory, timeout and /tmp of each task (docs/loader.md, "Lambda sizing")."""
    heavy = config.loader_memory_mb
    sizes = {
        # Hashes the sources as they stream from S3.
        "start": Sizing(512, Duration.minutes(15)),
        # One pass over a source: the download and the bucket-ordered rows sit in /tmp.
        "scan": Sizing(heavy, Duration.minutes(15), ephemeral_storage_mb=10_240),
        "plan_partitions": Sizing(1024, Duration.minutes(5)),
        "resolve": Sizing(heavy, Duration.minutes(15), ephemeral_storage_mb=4096),
        "plan_writes": Sizing(1024, Duration.minutes(10)),
        "write_chunks": Sizing(1024, Duration.minutes(10)),
        "activate": Sizing(512, Duration.minutes(10)),
        "cleanup": Sizing(512, Duration.minutes(15)),
        "abort": Sizing(256, Duration.minutes(2)),
        # Streams a release to S3 a part at a time; an archive waits in /tmp (capped at 4 GiB) to be unpacked.
        FETCH_TASK: Sizing(512, Duration.minutes(15), ephemeral_storage_mb=10_240),
        RECORD_RELEASE_TASK: Sizing(256, Duration.minutes(1)),
        # CPU-bound Python (Query pages in, the tree out) with memory bounded by the writer;
        # /tmp holds the database plus the writer's data and spool files (about 3x the file).
        EXPORT_TASK: Sizing(heavy, Duration.minutes(15), ephemeral_storage_mb=4096),
    }
    return sizes[task]


def construct_name(task: str) -> str:
    return "".join(part.capitalize() for part in task.split("_"))


def loader_environment(table: dynamodb.ITableV2, bucket: s3.IBucket) -> dict[str, str]:
    """What every task of the loader's code reads: the table, the bucket and its telemetry names."""
    return {
        ENV_TABLE_NAME: table.table_name,
        ENV_SOURCE_BUCKET: bucket.bucket_name,
        ENV_CHUNK_PREFIX: CHUNK_PREFIX,
        POWERTOOLS_SERVICE_NAME_ENV: LOADER_SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE_ENV: METRICS_NAMESPACE,
    }


def task_function(
    scope: Construct,
    task: str,
    *,
    code: lambda_.Code,
    description: str,
    environment: Mapping[str, str],
    size: Sizing,
    config: IpmetaConfig,
) -> PythonFunction:
    """The function of one task of the loader's code (``loader.pipeline.handlers.<task>``)."""
    return PythonFunction(
        scope,
        f"{construct_name(task)}Function",
        code=code,
        handler=f"{LOADER_MODULE}.{task}",
        description=description,
        environment=dict(environment),
        memory_mb=size.memory_mb,
        timeout=size.timeout,
        ephemeral_storage_mb=size.ephemeral_storage_mb,
        log_retention=config.log_retention,
    )


class LoaderFunctions(Construct):
    """One function per loader task, with exactly the table and bucket actions it needs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
        bucket: s3.IBucket,
        change_events: events.IEventBus,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._bucket = bucket
        self._change_events = change_events
        self.functions = self._build_functions(table)
        change_events.grant_put_events_to(self.functions["activate"].role)
        self._grant_table(table)
        self._grant_bucket()

    def __getitem__(self, task: str) -> PythonFunction:
        return self.functions[task]

    def __contains__(self, task: object) -> bool:
        return task in self.functions

    def _build_functions(self, table: dynamodb.ITableV2) -> dict[str, PythonFunction]:
        code = loader_code()
        environment = loader_environment(table, self._bucket)
        names = list(LOADER_TASKS)
        if self._config.feed_sources:
            names[names.index("activate") + 1 : names.index("activate") + 1] = FEED_TASKS
        if self._config.export_mmdb:
            names.insert(names.index("activate"), EXPORT_TASK)
        functions = {}
        for task in names:
            functions[task] = task_function(
                self,
                task,
                code=code,
                description=f"ipmeta loader: {task}",
                environment={**environment, **self._task_environment(task)},
                size=sizing(task, self._config),
                config=self._config,
            )
        return functions

    def _task_environment(self, task: str) -> dict[str, str]:
        if task == "activate":
            return {ENV_EVENT_BUS_NAME: self._change_events.event_bus_name}
        if task == "cleanup" and self._config.export_mmdb:
            return {ENV_EXPORTS_ENABLED: "true"}
        if task != FETCH_TASK:
            return {}
        # Settings, load options and the *names* of secrets: the values are read at run time.
        feeds = [DeployedFeed(feed.config, feed.options) for feed in self._config.feed_sources]
        return {ENV_FEEDS: encode_feeds(feeds)}

    def _grant_table(self, table: dynamodb.ITableV2) -> None:
        for task, function in self.functions.items():
            actions = TABLE_ACTIONS[task]
            if actions:
                function.role.add_to_principal_policy(
                    iam.PolicyStatement(actions=list(actions), resources=[table.table_arn])
                )

    def _grant_bucket(self) -> None:
        staged = self._bucket.arn_for_objects(f"{CHUNK_PREFIX}/*")
        bucket_arn = arn_ref(self._bucket)
        for task, function in self.functions.items():
            actions = [action for action in STAGING_ACTIONS[task] if action != "s3:ListBucket"]
            if actions:
                function.role.add_to_principal_policy(
                    iam.PolicyStatement(actions=actions, resources=[staged])
                )
                acknowledge(
                    function.role,
                    f"IAM5[Resource::{bucket_arn}/{CHUNK_PREFIX}/*]",
                    "Staged files are named after a load id chosen at run time; the grant is "
                    "limited to the staging prefix of the loader's own bucket.",
                )
            if "s3:ListBucket" in STAGING_ACTIONS[task]:
                function.role.add_to_principal_policy(
                    iam.PolicyStatement(
                        actions=["s3:ListBucket"],
                        resources=[self._bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": [f"{CHUNK_PREFIX}/*"]}},
                    )
                )
        for task in SOURCE_READERS:
            role = self.functions[task].role
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[self._bucket.arn_for_objects("*")])
            )
            acknowledge(
                role,
                f"IAM5[Resource::{bucket_arn}/*]",
                "The source object is named by the execution input at run time; this task may "
                "read any object of the loader's own bucket and no other bucket.",
            )
        if FETCH_TASK in self.functions:
            self._grant_feeds(self.functions[FETCH_TASK].role)
        if EXPORT_TASK in self.functions:
            self._grant_export(self.functions[EXPORT_TASK].role, "s3:PutObject")
            # Cleanup deletes a deleted version's export (``ENV_EXPORTS_ENABLED``).
            self._grant_export(self.functions["cleanup"].role, "s3:DeleteObject")

    def _grant_feeds(self, role: iam.IRole) -> None:
        """The fetch function alone: its feeds' secrets, by name, and multipart uploads under ``feeds/``."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self._bucket.arn_for_objects(f"{FEEDS_PREFIX}/*")],
            )
        )
        acknowledge(
            role,
            f"IAM5[Resource::{arn_ref(self._bucket)}/{FEEDS_PREFIX}/*]",
            "Each feed's files are named by its dataset and its vendor's release, known at run time; the "
            "task may only write (and abort its own uploads) under the feeds prefix of the loader's bucket.",
        )
        if any(feed.config.vendor == "network" for feed in self._config.feed_sources):
            self._grant_network_lists(role)
        secrets = sorted({feed.config.secret for feed in self._config.feed_sources if feed.config.secret})
        for index, name in enumerate(secrets):
            # GetSecretValue and DescribeSecret on this name's ARN (with the six characters
            # Secrets Manager appends), and on no other secret.
            secret = secretsmanager.Secret.from_secret_name_v2(self, f"FeedSecret{index}", name)
            secret.grant_read(role)

    def _grant_network_lists(self, fetch_role: iam.IRole) -> None:
        """Network feeds (``loader.pipeline.network_feed``): Fetch reads each list's current file (the
        guard measures a renewed list against it) and lists the feeds prefix to tell whether it exists;
        RecordRelease copies a run's new files over the current ones once the load is done."""
        lists = self._bucket.arn_for_objects(f"{FEEDS_PREFIX}/*")
        fetch_role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[lists]))
        fetch_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self._bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{FEEDS_PREFIX}/*"]}},
            )
        )
        record_role = self.functions[RECORD_RELEASE_TASK].role
        record_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[lists])
        )
        acknowledge(
            record_role,
            f"IAM5[Resource::{arn_ref(self._bucket)}/{FEEDS_PREFIX}/*]",
            "A network feed's list files are named by its dataset and its lists, known at run time; the "
            "task copies a run's new files over the current ones, under the feeds prefix of the loader's "
            "bucket only.",
        )

    def _grant_export(self, role: iam.IRole, action: str) -> None:
        """``action`` (write or delete) under the export prefix, and nothing else there."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[action], resources=[self._bucket.arn_for_objects(f"{EXPORT_PREFIX}/*")]
            )
        )
        acknowledge(
            role,
            f"IAM5[Resource::{arn_ref(self._bucket)}/{EXPORT_PREFIX}/*]",
            "Each export is named after the version it holds, chosen at run time; the task may "
            f"only {action.removeprefix('s3:')} under the export prefix of the loader's own bucket.",
        )
