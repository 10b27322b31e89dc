"""The dashboard and the alarms, built with cdk-monitoring-constructs, every alarm sent to one SNS topic.

One ``MonitoringFacade`` makes one CloudWatch dashboard and creates every alarm through the
library's alarm factory (its names, the topic as the alarm and OK action). A section per concern:

- **traffic**: lookups per minute per front; latency (each front's p50/p90/p99 and the
  function's); 4xx and 5xx by family, the fronts' and the function's own answers;
  then the library's own section of each front;
- **the lookup function** (the library's Lambda monitor), **the range cache** (hit ratio,
  Queries per lookup, from the function's metrics line) and **the table** (the library's
  DynamoDB monitor: consumed read and write units, throttles; and throttled requests by
  operation, with today's alarms);
- **datasets** (each one's age and activations), **loads** (each dataset's load duration
  and items written; the state machine) and **feeds** (each feed's runs by outcome);
- every other function's errors and throttles, as alarms, and one widget of every alarm.

Where the library's monitors alarm on the metric an alarm always watched (Lambda's Errors
and Throttles), they make the alarm; the others keep their own metric (the API-wide 5xx,
throttled requests by operation, the sum of failed executions, the loader's metrics) as the
library's custom alarms. ``tests/infra/test_alarms_kept.py`` holds every one.

With ``alarmTopicEncryption`` (the default) the topic is encrypted with a customer-managed
KMS key whose policy lets CloudWatch use it: an alarm publishes as ``cloudwatch.amazonaws.com``,
and the AWS-managed ``alias/aws/sns`` key's policy, which no one can edit, does not admit it
(its notifications would fail, silently but for the alarm's history).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn
from cdk_monitoring_constructs import (
    AlarmFactoryDefaults,
    CustomMetricGroup,
    CustomMetricWithAlarm,
    CustomThreshold,
    DefaultDashboardFactory,
    ErrorCountThreshold,
    MonitoringFacade,
    SnsAlarmActionStrategy,
)
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.fronts.front_metrics import PERCENTILES, MonitoredFront
from stacks.monitoring import dashboard_metrics as metrics

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
#: The dashboard opens on a week: a dataset reloaded weekly still shows its last activation.
DASHBOARD_RANGE: Final = Duration.days(7)
#: Every alarm has one disambiguator: it pages.
CRITICAL: Final = "Critical"
GTE: Final = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD

_READ_OPERATIONS: Final = (dynamodb.Operation.GET_ITEM, dynamodb.Operation.QUERY)
_WRITE_OPERATIONS: Final = (
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
)


def _threshold(
    description: str,
    threshold: float,
    *,
    comparison: cloudwatch.ComparisonOperator = GTE,
    periods: int = 1,
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> dict[str, CustomThreshold]:
    """A custom alarm that fires when ``periods`` datapoints in a row breach ``threshold``."""
    return {
        CRITICAL: CustomThreshold(
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data_override=missing,
            alarm_description_override=description,
        )
    }


def _count_alarm(description: str, threshold: float) -> dict[str, ErrorCountThreshold]:
    """The library's error-count alarm, at or above ``threshold`` in one five-minute period."""
    return {
        CRITICAL: ErrorCountThreshold(
            max_error_count=threshold,
            comparison_operator_override=GTE,
            datapoints_to_alarm=1,
            evaluation_periods=1,
            treat_missing_data_override=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description_override=description,
        )
    }


def alarm_topic_key(scope: Construct, topic: str) -> kms.Key:
    """An alarm topic's key: rotated yearly, usable by CloudWatch's alarms to publish."""
    key = kms.Key(
        scope,
        "AlarmTopicKey",
        description=f"ipmeta: encrypts {topic}'s messages",
        enable_key_rotation=True,
        # It protects messages in flight only: nothing outlives the stack that needs it.
        removal_policy=RemovalPolicy.DESTROY,
        pending_window=Duration.days(7),
    )
    key.grant(iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL), *CLOUDWATCH_KEY_ACTIONS)
    return key


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        fronts: Sequence[MonitoredFront],
        lookup_function: lambda_.IFunction,
        functions: Mapping[str, lambda_.IFunction],
        table: dynamodb.ITableV2,
        state_machine: sfn.StateMachine,
        other_alarms: Sequence[cloudwatch.AlarmBase] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._other_alarms = list(other_alarms)
        self.topic_key = alarm_topic_key(self, "the alarm topic") if config.alarm_topic_encryption else None
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name="ipmeta alarms", enforce_ssl=True, master_key=self.topic_key
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.facade = self._build_facade()
        self._monitor_traffic(fronts, lookup_function)
        self._monitor_lookup(lookup_function)
        self._monitor_table(table)
        self._monitor_datasets()
        self._monitor_loads(state_machine)
        self._monitor_feeds()
        for name, function in functions.items():
            if function is not lookup_function:
                self._monitor_other_function(name, function)
        self._monitor_replica_regions()
        self._add_alarm_overview()

    @property
    def alarms(self) -> list[cloudwatch.AlarmBase]:
        """Every alarm of this region: the facade's, and those made beside it (the hostname's health)."""
        return [*(created.alarm for created in self.facade.created_alarms()), *self._other_alarms]

    def _build_facade(self) -> MonitoringFacade:
        """One dashboard (no summary or alarm dashboards); every alarm to the topic, OK included."""
        stack_name = Stack.of(self).stack_name
        return MonitoringFacade(
            self,
            "Dashboard",
            alarm_factory_defaults=AlarmFactoryDefaults(
                actions_enabled=True,
                alarm_name_prefix=stack_name,
                action=SnsAlarmActionStrategy(on_alarm_topic=self.topic, on_ok_topic=self.topic),
                datapoints_to_alarm=1,
                evaluation_periods=1,
            ),
            dashboard_factory=DefaultDashboardFactory(
                self,
                "Dashboards",
                # Dashboard names are global to an account: one per stack and region.
                dashboard_name_prefix=f"{stack_name}-{Aws.REGION}",
                detail_dashboard_range=DASHBOARD_RANGE,
                # Each graph's period follows the range (the per-minute rates are normalized).
                detail_dashboard_period_override=cloudwatch.PeriodOverride.AUTO,
            ),
        )

    def _monitor_traffic(self, fronts: Sequence[MonitoredFront], function: lambda_.IFunction) -> None:
        self.facade.add_large_header("ipmeta: lookups, latency and errors")
        per_minute = [metrics.per_minute(front.requests(metrics.MINUTE), front.name) for front in fronts]
        latency: list[Any] = [
            front.latency(statistic).with_(label=f"{front.name} {statistic}")
            for front in fronts
            for statistic in PERCENTILES
        ]
        latency += [
            function.metric_duration(statistic=statistic, period=PERIOD, label=f"function {statistic}")
            for statistic in PERCENTILES
        ]
        errors: list[Any] = []
        for front in fronts:
            errors.append(front.client_errors(PERIOD).with_(label=f"{front.name} 4xx"))
            errors.append(
                CustomMetricWithAlarm(
                    metric=front.server_errors(PERIOD).with_(label=f"{front.name} 5xx"),
                    alarm_friendly_name=f"{front.name.replace(' ', '')}5xx",
                    add_alarm=_threshold("The lookup API returned 5xx responses", API_5XX_THRESHOLD),
                )
            )
        errors += [metrics.answers(family) for family in (4, 5)]
        self.facade.monitor_custom(
            alarm_friendly_name="Traffic",
            human_readable_name="Lookups, latency and errors, by front",
            metric_groups=[
                CustomMetricGroup(
                    title="Lookups per minute, by front",
                    metrics=[*per_minute, metrics.lookups_per_minute()],
                ),
                CustomMetricGroup(title="Latency (ms): each front's and the function's", metrics=latency),
                CustomMetricGroup(title="4xx and 5xx, by front and family", metrics=errors),
            ],
        )
        for front in fronts:
            if front.library_section is not None:
                front.library_section(self.facade)

    def _monitor_lookup(self, function: lambda_.IFunction) -> None:
        self.facade.monitor_lambda_function(
            lambda_function=function,
            alarm_friendly_name="Lookup",
            human_readable_name="Lookup function",
            add_fault_count_alarm=_count_alarm("The lookup function raised errors", LAMBDA_ERRORS_THRESHOLD),
            add_throttles_count_alarm=_count_alarm(
                "The lookup function was throttled", LAMBDA_THROTTLES_THRESHOLD
            ),
        )
        self.facade.monitor_custom(
            alarm_friendly_name="RangeCache",
            human_readable_name="Range cache and answers (the lookup function's metrics line)",
            metric_groups=[
                CustomMetricGroup(
                    title="Range cache hit ratio (%)",
                    metrics=[metrics.cache_hit_ratio()],
                    graph_widget_axis=cloudwatch.YAxisProps(min=0, max=100),
                ),
                CustomMetricGroup(
                    title="DynamoDB Queries per lookup", metrics=[metrics.queries_per_lookup()]
                ),
                CustomMetricGroup(
                    title="The function's answers, by status family",
                    metrics=[metrics.answers(family) for family in (2, 3, 4, 5)],
                ),
            ],
        )

    def _monitor_table(self, table: dynamodb.ITableV2) -> None:
        assert isinstance(table, dynamodb.TableV2)
        self.facade.monitor_dynamo_table(
            table=table,
            billing_mode=(
                dynamodb.BillingMode.PROVISIONED
                if self._config.billing_mode == "provisioned"
                else dynamodb.BillingMode.PAY_PER_REQUEST
            ),
            alarm_friendly_name="Table",
            human_readable_name="DynamoDB table: consumed read and write units, throttles",
        )
        throttled = [
            CustomMetricWithAlarm(
                # A sum over the operations (MathExpression), as the alarms always read it.
                metric=cast(
                    cloudwatch.MathExpression,
                    table.metric_throttled_requests_for_operations(
                        operations=list(operations), period=PERIOD
                    ),
                ),
                alarm_friendly_name=name,
                add_alarm=_threshold(description, threshold),
            )
            for name, operations, description, threshold in (
                (
                    "TableReadThrottles",
                    _READ_OPERATIONS,
                    "DynamoDB throttled lookup reads",
                    READ_THROTTLES_THRESHOLD,
                ),
                (
                    "TableWriteThrottles",
                    _WRITE_OPERATIONS,
                    "DynamoDB throttled loader writes far beyond what retries absorb",
                    WRITE_THROTTLES_THRESHOLD,
                ),
            )
        ]
        self.facade.monitor_custom(
            alarm_friendly_name="Throttles",
            human_readable_name="Throttled requests: the lookup's reads, the loader's writes",
            metric_groups=[
                CustomMetricGroup(title="Throttled reads (GetItem, Query)", metrics=[throttled[0]]),
                CustomMetricGroup(
                    title="Throttled writes (BatchWriteItem, Put, Update, Delete)", metrics=[throttled[1]]
                ),
            ],
        )

    def _dataset_names(self) -> list[str]:
        """Every dataset the stack loads: the declared ones, then those only a feed loads."""
        names = [source.name for source in self._config.dataset_sources]
        return names + [feed.name for feed in self._config.feed_sources if feed.name not in names]

    def _monitor_datasets(self) -> None:
        names = self._dataset_names()
        self.facade.monitor_custom(
            alarm_friendly_name="Datasets",
            human_readable_name="Datasets: each one's age and last activation",
            metric_groups=[
                CustomMetricGroup(
                    title="Dataset age: hours since the last activation",
                    metrics=[metrics.hours_since_activation(name) for name in names],
                ),
                CustomMetricGroup(
                    title="Activations per hour (a bar is a new version going live)",
                    metrics=[self._activations(name) for name in names],
                ),
            ],
        )

    def _activations(self, name: str) -> Any:
        """The dataset's activations, with its data-age alarm where it has a maximum age."""
        activations = metrics.dataset_activated(name).with_(label=f"{name}: activations")
        source = next((source for source in self._config.dataset_sources if source.name == name), None)
        if source is None:
            return activations  # a fed dataset not declared: its health is its feed's alarm
        hours = source.max_age_hours
        # One hourly datapoint per hour of allowed age: the alarm fires when none of the last
        # `hours` hours saw an activation of the dataset. No data at all (nothing ever loaded,
        # or the loader stopped publishing) also alarms.
        return CustomMetricWithAlarm(
            metric=activations,
            alarm_friendly_name=f"DataTooOld{source.construct_suffix}",
            add_alarm=_threshold(
                f"No version of dataset {name} was activated in the last {hours} hours",
                1,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                periods=hours,
                missing=cloudwatch.TreatMissingData.BREACHING,
            ),
        )

    def _monitor_loads(self, state_machine: sfn.StateMachine) -> None:
        failed = cloudwatch.MathExpression(
            expression="failed + timedOut + aborted",
            using_metrics={
                "failed": state_machine.metric_failed(statistic=cloudwatch.Stats.SUM),
                "timedOut": state_machine.metric_timed_out(statistic=cloudwatch.Stats.SUM),
                "aborted": state_machine.metric_aborted(statistic=cloudwatch.Stats.SUM),
            },
            label="executions failed, timed out or aborted",
            period=PERIOD,
        )
        names = self._dataset_names()
        self.facade.monitor_custom(
            alarm_friendly_name="Loads",
            human_readable_name="Loads: each dataset's duration and items written",
            metric_groups=[
                CustomMetricGroup(
                    title="Load duration: seconds from Start to activation",
                    metrics=[metrics.load_seconds(name).with_(label=name) for name in names],
                ),
                CustomMetricGroup(
                    title="Items written per load",
                    metrics=[metrics.items_written(name).with_(label=name) for name in names],
                ),
                CustomMetricGroup(
                    title="Loads that failed",
                    metrics=[
                        CustomMetricWithAlarm(
                            metric=failed,
                            alarm_friendly_name="LoadsFailed",
                            add_alarm=_threshold("A load execution failed, timed out or was aborted", 1),
                        )
                    ],
                ),
            ],
        )
        self.facade.monitor_step_function(
            state_machine=state_machine,
            alarm_friendly_name="LoadStateMachine",
            human_readable_name="Load state machine",
        )

    def _monitor_feeds(self) -> None:
        threshold = self._config.feed_failures_to_alarm
        groups = [
            CustomMetricGroup(
                title=f"Feed {feed.name}: runs by outcome, and failed runs in a row",
                metrics=[
                    *metrics.feed_runs(feed.name),
                    # The count lives in the feed's item (loader.pipeline.fetch): it does not depend on
                    # how often the feed runs. Between runs no datapoint arrives, and IGNORE keeps the
                    # alarm where the last run left it, until a run succeeds (0) or fails again.
                    CustomMetricWithAlarm(
                        metric=metrics.feed_failures(feed.name).with_(label=f"{feed.name}: failed in a row"),
                        alarm_friendly_name=f"FeedFailing{feed.construct_suffix}",
                        add_alarm=_threshold(
                            f"The feed of dataset {feed.name} failed {threshold} or more runs in a row",
                            threshold,
                            missing=cloudwatch.TreatMissingData.IGNORE,
                        ),
                    ),
                ],
            )
            for feed in self._config.feed_sources
        ]
        if groups:
            self.facade.monitor_custom(
                alarm_friendly_name="Feeds",
                human_readable_name="Vendor feeds: each one's runs",
                metric_groups=groups,
            )

    def _monitor_other_function(self, name: str, function: lambda_.IFunction) -> None:
        """A loader task or an authorizer: its errors and throttles alarm; the overview shows them."""
        label = "".join(part.capitalize() for part in name.split("_"))
        self.facade.monitor_lambda_function(
            lambda_function=function,
            alarm_friendly_name=label,
            human_readable_name=f"{name} function",
            add_fault_count_alarm=_count_alarm(f"The {name} function raised errors", LAMBDA_ERRORS_THRESHOLD),
            add_throttles_count_alarm=_count_alarm(
                f"The {name} function was throttled", LAMBDA_THROTTLES_THRESHOLD
            ),
            add_to_detail_dashboard=False,
            add_to_summary_dashboard=False,
            add_to_alarm_dashboard=False,
        )

    def _monitor_replica_regions(self) -> None:
        """One section per replica region: how far behind home it serves, and what it answers.

        Each region's own alarms live in its stack (``stacks/monitoring/region_alarms.py``); here its
        metrics are read across regions, so one dashboard shows every region.
        """
        for region in self._config.replica_regions:
            self.facade.monitor_custom(
                alarm_friendly_name=f"Region{region.title().replace('-', '')}",
                human_readable_name=f"Region {region}",
                metric_groups=[
                    CustomMetricGroup(
                        title=f"{region}: seconds behind home (0 once a version has wholly arrived)",
                        metrics=[metrics.in_region(metrics.region_behind_metric(region), region)],
                    ),
                    CustomMetricGroup(
                        title=f"{region}: addresses looked up a minute, and answers by status family",
                        metrics=[
                            metrics.lookups(region),
                            *(metrics.in_region(metrics.answers(family), region) for family in (2, 4, 5)),
                        ],
                    ),
                ],
            )

    def _add_alarm_overview(self) -> None:
        self.facade.add_large_header("Every alarm")
        self.facade.add_widget(
            cloudwatch.AlarmStatusWidget(
                alarms=self.alarms, title="Every alarm, by state", width=24, height=8
            )
        )
