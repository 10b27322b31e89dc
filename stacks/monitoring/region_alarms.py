"""A replica region's alarms, on a topic of its own: its front, its functions, its replica's reads,
and how far its pointer trails home's.

An alarm publishes only to a topic of its own region, so each region has one
(encrypted like home's with ``alarmTopicEncryption``). The thresholds are home's
(``stacks/monitoring/dashboard.py``); what only a replica has is ``RegionBehind``: the
arrival check publishes ``RegionBehindSeconds`` every minute, and the alarm fires
when the region has trailed home longer than ``replicaLagAlarmMinutes``, or when
the check stopped publishing at all. The region keeps serving its previous
version all the while: late, never wrong.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.fronts.front_metrics import MonitoredFront
from stacks.monitoring.dashboard import (
    API_5XX_THRESHOLD,
    LAMBDA_ERRORS_THRESHOLD,
    LAMBDA_THROTTLES_THRESHOLD,
    PERIOD,
    READ_THROTTLES_THRESHOLD,
    alarm_topic_key,
)
from stacks.monitoring.dashboard_metrics import region_behind_metric


class RegionAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        region: str,
        front: MonitoredFront,
        functions: Mapping[str, lambda_.IFunction],
        table: dynamodb.ITableV2,
    ) -> None:
        super().__init__(scope, construct_id)
        key = alarm_topic_key(self, "the region's alarm topic") if config.alarm_topic_encryption else None
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name=f"ipmeta alarms ({region})", enforce_ssl=True, master_key=key
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.alarms: list[cloudwatch.Alarm] = []
        count = cloudwatch.Stats.SUM
        self._add(
            "Api5xx",
            "The lookup API returned 5xx responses",
            front.server_errors(PERIOD),
            API_5XX_THRESHOLD,
        )
        for name, function in functions.items():
            label = "".join(part.capitalize() for part in name.split("_"))
            self._add(
                f"{label}Errors",
                f"The {name} function raised errors",
                function.metric_errors(period=PERIOD, statistic=count),
                LAMBDA_ERRORS_THRESHOLD,
            )
            self._add(
                f"{label}Throttles",
                f"The {name} function was throttled",
                function.metric_throttles(period=PERIOD, statistic=count),
                LAMBDA_THROTTLES_THRESHOLD,
            )
        reads = [dynamodb.Operation.GET_ITEM, dynamodb.Operation.QUERY, dynamodb.Operation.BATCH_GET_ITEM]
        self._add(
            "TableReadThrottles",
            "DynamoDB throttled lookup reads",
            table.metric_throttled_requests_for_operations(operations=reads, period=PERIOD),
            READ_THROTTLES_THRESHOLD,
        )
        minutes = config.replica_lag_alarm_minutes
        self._add(
            "RegionBehind",
            f"{region} has served an older version than home for over {minutes} minutes "
            "(a version not wholly arrived), or its arrival check stopped",
            region_behind_metric(region),
            minutes * 60,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        for alarm in self.alarms:
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
            alarm.add_ok_action(cloudwatch_actions.SnsAction(self.topic))

    def _add(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        *,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                construct_id,
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=missing,
            )
        )
