"""A replica region's alarms, on a topic of its own: the rules of ``alarm_table`` a region applies.

An alarm publishes only to a topic of its own region, so each region has one
(encrypted like home's with ``alarmTopicEncryption``). The rules are home's, applied
through cdk-monitoring-constructs as home applies them (``dashboard``), with no dashboard
of the region's own: home's draws every region. What only a replica has is
``RegionBehind``: the arrival check publishes ``RegionBehindSeconds`` every minute, and the
alarm fires when the region has trailed home longer than ``replicaLagAlarmMinutes``, or
when the check stopped publishing at all. The region keeps serving its previous version all
the while: late, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from cdk_monitoring_constructs import (
    CustomMetricGroup,
    CustomMetricWithAlarm,
    DefaultDashboardFactory,
    MonitoringFacade,
)
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.fronts.front_metrics import MonitoredFront
from stacks.monitoring.alarm_table import (
    FRONT_SERVER_ERRORS,
    LOOKUP_THROTTLES,
    PERIOD,
    REGION_BEHIND,
    TABLE_READ_THROTTLES,
    Where,
    rules_of,
)
from stacks.monitoring.dashboard import READ_OPERATIONS, alarm_defaults, alarm_topic, throttled_requests
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
        lookup_function: lambda_.IFunction,
        table: dynamodb.ITableV2,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = alarm_topic(self, config, f"ipmeta alarms ({region})", "the region's alarm topic")
        minutes = config.replica_lag_alarm_minutes
        reads = throttled_requests(table, READ_OPERATIONS)
        #: Each rule a region applies, with this region's metric.
        applied: Mapping[str, Callable[[], CustomMetricWithAlarm]] = {
            FRONT_SERVER_ERRORS.name: lambda: FRONT_SERVER_ERRORS.alarm(front.server_errors(PERIOD)),
            LOOKUP_THROTTLES.name: lambda: LOOKUP_THROTTLES.alarm(
                lookup_function.metric_throttles(period=PERIOD, statistic=cloudwatch.Stats.SUM)
            ),
            TABLE_READ_THROTTLES.name: lambda: TABLE_READ_THROTTLES.alarm(reads),
            REGION_BEHIND.name: lambda: REGION_BEHIND.alarm(
                region_behind_metric(region), threshold=minutes * 60, region=region, minutes=minutes
            ),
        }
        self.facade = MonitoringFacade(
            self,
            "Alarms",
            alarm_factory_defaults=alarm_defaults(self, self.topic),
            # Home's dashboard draws this region (``Monitoring._monitor_replica_regions``).
            dashboard_factory=DefaultDashboardFactory(
                self,
                "NoDashboards",
                dashboard_name_prefix=f"{Stack.of(self).stack_name}-{region}",
                create_dashboard=False,
                create_summary_dashboard=False,
                create_alarm_dashboard=False,
            ),
        )
        self.facade.monitor_custom(
            alarm_friendly_name="Region",
            human_readable_name=f"Region {region}",
            metric_groups=[
                CustomMetricGroup(title=name, metrics=[applied[name]()]) for name in rules_of(Where.REGION)
            ],
        )

    @property
    def alarms(self) -> list[cloudwatch.AlarmBase]:
        return [created.alarm for created in self.facade.created_alarms()]
