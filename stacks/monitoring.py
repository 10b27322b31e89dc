"""Alarms on everything that can go wrong, all sent to one SNS topic.

With ``alarmTopicEncryption`` (the default) the topic is encrypted with a customer-managed
KMS key whose policy lets CloudWatch use it: an alarm publishes as ``cloudwatch.amazonaws.com``,
and the AWS-managed ``alias/aws/sns`` key's policy, which no one can edit, does not admit it
(its notifications would fail, silently but for the alarm's history).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import (
    LOADER_SERVICE_NAME,
    METRIC_DATASET_ACTIVATED,
    METRIC_DATASET_DIMENSION,
    METRIC_FEED_DIMENSION,
    METRIC_FEED_FAILURES,
    METRICS_NAMESPACE,
)

PERIOD: Final = Duration.minutes(5)
#: Who publishes an alarm's notification, and what it needs of an encrypted topic's key.
CLOUDWATCH_PRINCIPAL: Final = "cloudwatch.amazonaws.com"
CLOUDWATCH_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey*")
API_5XX_THRESHOLD: Final = 5
LAMBDA_ERRORS_THRESHOLD: Final = 5
LAMBDA_THROTTLES_THRESHOLD: Final = 1
#: Any throttled read is a lookup that slowed down or failed.
READ_THROTTLES_THRESHOLD: Final = 1
#: Writes are throttled by design while a big load ramps up; WriteChunk retries.
WRITE_THROTTLES_THRESHOLD: Final = 1000

_READ_OPERATIONS: Final = (dynamodb.Operation.GET_ITEM, dynamodb.Operation.QUERY)
_WRITE_OPERATIONS: Final = (
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
)


def loader_metric(name: str, dimension: str, value: str, statistic: str) -> cloudwatch.Metric:
    """A metric the loader publishes, hourly: powertools adds the service name as a dimension."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": LOADER_SERVICE_NAME, dimension: value},
        statistic=statistic,
        period=Duration.hours(1),
    )


def dataset_activated_metric(dataset: str) -> cloudwatch.Metric:
    """What the loader publishes (value 1) each time it activates a version of ``dataset``."""
    return loader_metric(METRIC_DATASET_ACTIVATED, METRIC_DATASET_DIMENSION, dataset, cloudwatch.Stats.SUM)


def feed_failures_metric(feed: str) -> cloudwatch.Metric:
    """What every run of ``feed`` that ends publishes: its failed runs in a row (0 after a success)."""
    return loader_metric(METRIC_FEED_FAILURES, METRIC_FEED_DIMENSION, feed, cloudwatch.Stats.MAXIMUM)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        api: apigateway.RestApi,
        functions: Mapping[str, lambda_.IFunction],
        table: dynamodb.ITableV2,
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.topic_key = self._build_topic_key() if config.alarm_topic_encryption else None
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name="ipmeta alarms", enforce_ssl=True, master_key=self.topic_key
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.alarms: list[cloudwatch.Alarm] = []
        self._alarm_on_api(api)
        for name, function in functions.items():
            self._alarm_on_function(name, function)
        self._alarm_on_table(table)
        self._alarm_on_state_machine(state_machine)
        self._alarm_on_data_age()
        self._alarm_on_feeds()
        for alarm in self.alarms:
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
            alarm.add_ok_action(cloudwatch_actions.SnsAction(self.topic))

    def _build_topic_key(self) -> kms.Key:
        """The alarm topic's key: rotated yearly, usable by CloudWatch's alarms to publish."""
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="ipmeta: encrypts the alarm topic's messages",
            enable_key_rotation=True,
            # It protects messages in flight only: nothing outlives the stack that needs it.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        key.grant(iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL), *CLOUDWATCH_KEY_ACTIONS)
        return key

    def _add(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        *,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        evaluation_periods: int = 1,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                construct_id,
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=comparison,
                evaluation_periods=evaluation_periods,
                datapoints_to_alarm=evaluation_periods,
                treat_missing_data=missing,
            )
        )

    def _alarm_on_api(self, api: apigateway.RestApi) -> None:
        self._add(
            "Api5xx",
            "The lookup API returned 5xx responses",
            api.metric_server_error(period=PERIOD, statistic=cloudwatch.Stats.SUM),
            API_5XX_THRESHOLD,
        )

    def _alarm_on_function(self, name: str, function: lambda_.IFunction) -> None:
        label = "".join(part.capitalize() for part in name.split("_"))
        self._add(
            f"{label}Errors",
            f"The {name} function raised errors",
            function.metric_errors(period=PERIOD, statistic=cloudwatch.Stats.SUM),
            LAMBDA_ERRORS_THRESHOLD,
        )
        self._add(
            f"{label}Throttles",
            f"The {name} function was throttled",
            function.metric_throttles(period=PERIOD, statistic=cloudwatch.Stats.SUM),
            LAMBDA_THROTTLES_THRESHOLD,
        )

    def _alarm_on_table(self, table: dynamodb.ITableV2) -> None:
        assert isinstance(table, dynamodb.TableV2)
        self._add(
            "TableReadThrottles",
            "DynamoDB throttled lookup reads",
            table.metric_throttled_requests_for_operations(operations=list(_READ_OPERATIONS), period=PERIOD),
            READ_THROTTLES_THRESHOLD,
        )
        self._add(
            "TableWriteThrottles",
            "DynamoDB throttled loader writes far beyond what retries absorb",
            table.metric_throttled_requests_for_operations(operations=list(_WRITE_OPERATIONS), period=PERIOD),
            WRITE_THROTTLES_THRESHOLD,
        )

    def _alarm_on_state_machine(self, state_machine: sfn.StateMachine) -> None:
        self._add(
            "LoadsFailed",
            "A load execution failed, timed out or was aborted",
            cloudwatch.MathExpression(
                expression="failed + timedOut + aborted",
                using_metrics={
                    "failed": state_machine.metric_failed(statistic=cloudwatch.Stats.SUM),
                    "timedOut": state_machine.metric_timed_out(statistic=cloudwatch.Stats.SUM),
                    "aborted": state_machine.metric_aborted(statistic=cloudwatch.Stats.SUM),
                },
                period=PERIOD,
            ),
            1,
        )

    def _alarm_on_data_age(self) -> None:
        for source in self._config.dataset_sources:
            hours = source.max_age_hours
            # One hourly datapoint per hour of allowed age: the alarm fires when
            # none of the last `hours` hours saw an activation of the dataset. No data
            # at all (nothing ever loaded, or the loader stopped publishing) also alarms.
            self._add(
                f"DataTooOld{source.construct_suffix}",
                f"No version of dataset {source.name} was activated in the last {hours} hours",
                dataset_activated_metric(source.name),
                1,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=hours,
                missing=cloudwatch.TreatMissingData.BREACHING,
            )

    def _alarm_on_feeds(self) -> None:
        threshold = self._config.feed_failures_to_alarm
        for feed in self._config.feed_sources:
            # The count lives in the feed's item (loader.pipeline.fetch): it does not depend on
            # how often the feed runs. Between runs no datapoint arrives, and IGNORE keeps the
            # alarm where the last run left it, until a run succeeds (0) or fails again.
            self._add(
                f"FeedFailing{feed.construct_suffix}",
                f"The feed of dataset {feed.name} failed {threshold} or more runs in a row",
                feed_failures_metric(feed.name),
                threshold,
                missing=cloudwatch.TreatMissingData.IGNORE,
            )
