"""What starts a load: a daily EventBridge schedule and, optionally, an upload."""

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

from stacks.config import IpmetaConfig


def load_input(bucket: s3.IBucket, key: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The execution input that loads ``s3://<bucket>/<key>`` with ``sourceOptions``."""
    return {"source": f"s3://{bucket.bucket_name}/{key}", "options": dict(options or {})}


class ScheduledReloads(Construct):
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
        self._config = config
        self._state_machine = state_machine
        self._input = load_input(bucket, config.source_key, config.source_options)
        self.schedule = self._build_schedule() if config.schedule_enabled else None
        self.upload_rule = self._build_upload_trigger(bucket) if config.upload_trigger else None

    def _build_schedule(self) -> scheduler.Schedule:
        return scheduler.Schedule(
            self,
            "Schedule",
            description="Reload the IP metadata dataset from the source bucket",
            schedule=scheduler.ScheduleExpression.expression(self._config.schedule_cron),
            target=scheduler_targets.StepFunctionsStartExecution(
                self._state_machine,
                input=scheduler.ScheduleTargetInput.from_object(self._input),
                retry_attempts=3,
                max_event_age=Duration.hours(1),
            ),
        )

    def _build_upload_trigger(self, bucket: s3.Bucket) -> events.Rule:
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
            "SourceUploaded",
            description="Load the dataset when a new source object is uploaded",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [bucket.bucket_name]},
                    "object": {"key": [self._config.source_key]},
                },
            ),
            targets=[
                events_targets.SfnStateMachine(
                    self._state_machine,
                    input=events.RuleTargetInput.from_object(self._input),
                    retry_attempts=3,
                )
            ],
        )
