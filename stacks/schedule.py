"""What starts a load: each dataset's EventBridge schedule and, optionally, an upload of its source."""

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

from ipmeta.keys import DEFAULT_DATASET
from stacks.config import DatasetSource, IpmetaConfig


def load_input(
    bucket: s3.IBucket, key: str, options: Mapping[str, Any] | None = None, dataset: str = DEFAULT_DATASET
) -> dict[str, Any]:
    """The execution input that loads ``s3://<bucket>/<key>`` into ``dataset`` with its options."""
    return {"dataset": dataset, "source": f"s3://{bucket.bucket_name}/{key}", "options": dict(options or {})}


class ScheduledReloads(Construct):
    """One schedule per dataset (``Schedule`` for ``default``, ``ScheduleCity`` for ``city``), and a
    rule per dataset whose source upload starts its load."""

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
        for source in config.dataset_sources:
            start = load_input(bucket, source.source_key, source.source_options, source.name)
            if source.schedule_enabled:
                self.schedules[source.name] = self._build_schedule(source, start)
            if source.upload_trigger:
                self.upload_rules[source.name] = self._build_upload_trigger(bucket, source, start)

    @property
    def schedule(self) -> scheduler.Schedule | None:
        """The default dataset's schedule, if it has one."""
        return self.schedules.get(DEFAULT_DATASET)

    def _build_schedule(self, source: DatasetSource, start: dict[str, Any]) -> scheduler.Schedule:
        return scheduler.Schedule(
            self,
            f"Schedule{source.construct_suffix}",
            description=f"Reload dataset {source.name} from the source bucket",
            schedule=scheduler.ScheduleExpression.expression(source.schedule_cron),
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
