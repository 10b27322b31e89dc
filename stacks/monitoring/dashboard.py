"""The dashboard and the alarms, built with cdk-monitoring-constructs, every alarm sent to one SNS topic.

One ``MonitoringFacade`` creates every alarm through the library's alarm factory (its names,
the topic as the alarm and OK action) and, with ``dashboard`` (off by default: $3 a month),
draws one CloudWatch dashboard. A section per concern:

- **traffic**: lookups per minute per front; latency (each front's p50/p90/p99 and the
  function's); 4xx and 5xx by family, the fronts' and the function's own answers;
  then the library's own section of each front;
- **the lookup function** (the library's Lambda monitor), **the range cache** (hit ratio,
  Queries per lookup, from the function's metrics line) and **the table** (the library's
  DynamoDB monitor: consumed read and write units, throttles; and throttled requests by
  operation, with today's alarms);
- **datasets** (each one's age and activations), **loads** (each dataset's load duration
  and items written; the state machine) and **feeds** (each feed's runs by outcome);
- every other function's errors and throttles, and one widget of every alarm.

The alarms are the rules of ``alarm_table``, which a replica region applies too
(``region_alarms``): the library's Lambda monitor makes the lookup's throttle alarm, and the
others are the library's custom alarms on their own metric (the API-wide 5xx, throttled reads,
the sum of failed executions, the loader's metrics). ``tests/infra/test_alarms_kept.py`` holds
every one.

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
    DefaultDashboardFactory,
    MonitoringFacade,
    SnsAlarmActionStrategy,
)
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import RECORD_RELEASE_TASK
from stacks.fronts.front_metrics import PERCENTILES, MonitoredFront
from stacks.monitoring import dashboard_metrics as metrics
from stacks.monitoring.alarm_table import (
    DATA_TOO_OLD,
    FEED_FAILING,
    FRONT_SERVER_ERRORS,
    LOADS_FAILED,
    LOOKUP_THROTTLES,
    PERIOD,
    RECORD_RELEASE_ERRORS,
    RELEASE_HELD,
    TABLE_READ_THROTTLES,
)

#: Who publishes an alarm's notification, and what it needs of an encrypted topic's key.
CLOUDWATCH_PRINCIPAL: Final = "cloudwatch.amazonaws.com"
CLOUDWATCH_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey*")
#: The dashboard opens on a week: a dataset reloaded weekly still shows its last activation.
DASHBOARD_RANGE: Final = Duration.days(7)
#: The lookup's reads (``LOOKUP_TABLE_ACTIONS``): the item, the datasets' list and pointers.
READ_OPERATIONS: Final = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.BATCH_GET_ITEM,
)
_WRITE_OPERATIONS: Final = (
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
)


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


def throttled_requests(
    table: dynamodb.ITableV2, operations: Sequence[dynamodb.Operation]
) -> cloudwatch.MathExpression:
    """The table's throttled requests of ``operations``, summed (a MathExpression), as the alarms
    always read them."""
    return cast(
        cloudwatch.MathExpression,
        table.metric_throttled_requests_for_operations(operations=list(operations), period=PERIOD),
    )


def alarm_topic(scope: Construct, config: IpmetaConfig, display_name: str, key_topic: str) -> sns.Topic:
    """The topic every alarm of a region sends to (alarm and OK), with ``alarmEmail`` subscribed."""
    key = alarm_topic_key(scope, key_topic) if config.alarm_topic_encryption else None
    topic = sns.Topic(scope, "AlarmTopic", display_name=display_name, enforce_ssl=True, master_key=key)
    if config.alarm_email:
        topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
    return topic


def alarm_defaults(scope: Construct, topic: sns.ITopic) -> AlarmFactoryDefaults:
    """Every alarm named after its stack, sent to ``topic`` on alarm and on OK."""
    return AlarmFactoryDefaults(
        actions_enabled=True,
        alarm_name_prefix=Stack.of(scope).stack_name,
        action=SnsAlarmActionStrategy(on_alarm_topic=topic, on_ok_topic=topic),
        datapoints_to_alarm=1,
        evaluation_periods=1,
    )


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
        self.topic = alarm_topic(self, config, "ipmeta alarms", "the alarm topic")
        self.facade = self._build_facade()
        self._monitor_traffic(fronts, lookup_function)
        self._monitor_lookup(lookup_function)
        self._monitor_table(table)
        self._monitor_datasets()
        self._monitor_loads(state_machine)
        self._monitor_feeds()
        self._monitor_other_functions(
            {name: function for name, function in functions.items() if function is not lookup_function}
        )
        self._monitor_replica_regions()
        self._add_alarm_overview()

    @property
    def alarms(self) -> list[cloudwatch.AlarmBase]:
        """Every alarm of this region: the facade's, and those made beside it (the hostname's health)."""
        return [*(created.alarm for created in self.facade.created_alarms()), *self._other_alarms]

    def _build_facade(self) -> MonitoringFacade:
        """One dashboard (no summary or alarm dashboards) with ``dashboard``; every alarm to the topic,
        OK included. Without it the facade still makes every alarm, under the same construct ids."""
        stack_name = Stack.of(self).stack_name
        return MonitoringFacade(
            self,
            "Dashboard",
            alarm_factory_defaults=alarm_defaults(self, self.topic),
            dashboard_factory=DefaultDashboardFactory(
                self,
                "Dashboards",
                # Dashboard names are global to an account: one per stack and region.
                dashboard_name_prefix=f"{stack_name}-{Aws.REGION}",
                detail_dashboard_range=DASHBOARD_RANGE,
                # Each graph's period follows the range (the per-minute rates are normalized).
                detail_dashboard_period_override=cloudwatch.PeriodOverride.AUTO,
                create_dashboard=self._config.dashboard,
                create_summary_dashboard=False,
                create_alarm_dashboard=False,
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
                FRONT_SERVER_ERRORS.alarm(front.server_errors(PERIOD).with_(label=f"{front.name} 5xx"))
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
            # A failed lookup is the front's 5xx (FrontServerErrors); a throttled one may not be.
            add_throttles_count_alarm=LOOKUP_THROTTLES.count_alarm(),
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
        reads = TABLE_READ_THROTTLES.alarm(throttled_requests(table, READ_OPERATIONS))
        # Writes beyond what WriteChunk's retries absorb fail the load (LoadsFailed): drawn, no alarm.
        writes = throttled_requests(table, _WRITE_OPERATIONS)
        self.facade.monitor_custom(
            alarm_friendly_name="Throttles",
            human_readable_name="Throttled requests: the lookup's reads, the loader's writes",
            metric_groups=[
                CustomMetricGroup(title="Throttled reads (GetItem, Query, BatchGetItem)", metrics=[reads]),
                CustomMetricGroup(
                    title="Throttled writes (BatchWriteItem, Put, Update, Delete)", metrics=[writes]
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
        return DATA_TOO_OLD.alarm(
            activations, suffix=source.construct_suffix, periods=hours, name=name, hours=hours
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
                    metrics=[LOADS_FAILED.alarm(failed)],
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
                    FEED_FAILING.alarm(
                        metrics.feed_failures(feed.name).with_(label=f"{feed.name}: failed in a row"),
                        suffix=feed.construct_suffix,
                        threshold=threshold,
                        name=feed.name,
                    ),
                    # A release the guard held waits for a person: `ipmeta activate`, or the next one.
                    RELEASE_HELD.alarm(
                        metrics.release_held(feed.name).with_(label=f"{feed.name}: releases held"),
                        suffix=feed.construct_suffix,
                        name=feed.name,
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

    def _monitor_other_functions(self, functions: Mapping[str, lambda_.IFunction]) -> None:
        """The loader's tasks and the authorizer: their errors and throttles, drawn. A task's failure
        its retries do not absorb fails the load (LoadsFailed), an authorizer's is the front's 5xx;
        RecordRelease's alone a load survives, so it alarms."""
        self.facade.monitor_custom(
            alarm_friendly_name="Functions",
            human_readable_name="The other functions: the loader's tasks, the authorizer",
            metric_groups=[
                CustomMetricGroup(
                    title="Errors",
                    metrics=[
                        function.metric_errors(period=PERIOD).with_(label=name)
                        for name, function in functions.items()
                    ],
                ),
                CustomMetricGroup(
                    title="Throttles",
                    metrics=[
                        function.metric_throttles(period=PERIOD).with_(label=name)
                        for name, function in functions.items()
                    ],
                ),
            ],
        )
        if RECORD_RELEASE_TASK in functions:
            self.facade.monitor_lambda_function(
                lambda_function=functions[RECORD_RELEASE_TASK],
                alarm_friendly_name="RecordRelease",
                human_readable_name="record_release function",
                add_fault_count_alarm=RECORD_RELEASE_ERRORS.count_alarm(),
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
