"""What starts a load: each dataset's schedule, maybe an upload of its source, and each feed's schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ipmeta.schema.keys import DEFAULT_DATASET
from loader.feeds.catalogue import parse_network_lists
from loader.feeds.config import FeedConfig
from loader.feeds.http_client import display_url
from stacks.config import DatasetSource, FeedSource, IpmetaConfig


def load_input(
    bucket: s3.IBucket, key: str, options: Mapping[str, Any] | None = None, dataset: str = DEFAULT_DATASET
) -> dict[str, Any]:
    """The execution input that loads ``s3://<bucket>/<key>`` into ``dataset`` with its options."""
    return {"dataset": dataset, "source": f"s3://{bucket.bucket_name}/{key}", "options": dict(options or {})}


def feed_input(feed: FeedSource) -> dict[str, Any]:
    """The execution input of a feed's run: its name, nothing more (no credential, no URL)."""
    return {"feed": feed.name}


def _shown_edition(settings: FeedConfig) -> str:
    """A feed's edition as its schedule describes it: no URL's query, no mirror of a network list."""
    if settings.vendor == "url":
        return display_url(settings.edition)
    if settings.vendor == "network":
        return ",".join(chosen.entry.name for chosen in parse_network_lists(settings.edition))
    return settings.edition


class ScheduledReloads(Construct):
    """One schedule per dataset (``Schedule`` for ``default``, ``ScheduleCity`` for ``city``), a
    rule per dataset whose source upload starts its load, and one schedule per feed (``FeedCity``).

    A dataset a feed loads has no schedule of its source key: the feed's schedule loads it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        state_machine: sfn.IStateMachine,
        bucket: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self._state_machine = state_machine
        self.schedules: dict[str, scheduler.Schedule] = {}
        self.upload_rules: dict[str, events.Rule] = {}
        self.feed_schedules: dict[str, scheduler.Schedule] = {}
        fed = config.fed_datasets
        for source in config.dataset_sources:
            start = load_input(bucket, source.source_key, source.source_options, source.name)
            if source.schedule_enabled and source.name not in fed:
                self.schedules[source.name] = self._build_schedule(
                    f"Schedule{source.construct_suffix}",
                    f"Reload dataset {source.name} from the source bucket",
                    source.schedule_cron,
                    start,
                )
            if source.upload_trigger:
                self.upload_rules[source.name] = self._build_upload_trigger(bucket, source, start)
        for feed in config.feed_sources:
            if feed.schedule_enabled:
                settings = feed.config
                edition = _shown_edition(settings)
                self.feed_schedules[feed.name] = self._build_schedule(
                    f"Feed{feed.construct_suffix}",
                    f"Fetch {settings.vendor}:{edition} into dataset {feed.name} when it changed",
                    feed.cron,
                    feed_input(feed),
                )

    @property
    def schedule(self) -> scheduler.Schedule | None:
        """The default dataset's schedule, if it has one."""
        return self.schedules.get(DEFAULT_DATASET)

    def _build_schedule(
        self, construct_id: str, description: str, cron: str, start: dict[str, Any]
    ) -> scheduler.Schedule:
        return scheduler.Schedule(
            self,
            construct_id,
            description=description,
            schedule=scheduler.ScheduleExpression.expression(cron),
            target=scheduler_targets.StepFunctionsStartExecution(
                self._state_machine,
                input=scheduler.ScheduleTargetInput.from_object(start),
                retry_attempts=3,
                max_event_age=Duration.hours(1),
            ),
        )

    def _build_upload_trigger(
        self, bucket: s3.Bucket, source: DatasetSource, start: dict[str, Any]
    ) -> events.Rule:
        # Setting the property on the bucket itself avoids the custom-resource
        # Lambda that Bucket(event_bridge_enabled=True) deploys to do the same.
        cfn_bucket = bucket.node.default_child
        assert isinstance(cfn_bucket, s3.CfnBucket)
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(
                event_bridge_enabled=True
            )
        )
        return events.Rule(
            self,
            f"SourceUploaded{source.construct_suffix}",
            description=f"Load dataset {source.name} when a new source object is uploaded",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [bucket.bucket_name]},
                    "object": {"key": [source.source_key]},
                },
            ),
            targets=[
                events_targets.SfnStateMachine(
                    self._state_machine,
                    input=events.RuleTargetInput.from_object(start),
                    retry_attempts=3,
                )
            ],
        )
