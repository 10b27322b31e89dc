"""Every alarm the stacks make, once: what it watches, when it fires, and what only it catches.

Home (``dashboard``) and each replica region (``region_alarms``) apply this one table through
cdk-monitoring-constructs, each with the metrics it has (home's loads and datasets, a region's
arrival). An alarm belongs here only if it catches something no other alarm does:

- **No alarm per loader task.** A task's failure that its retries do not absorb fails the
  execution, which ``LoadsFailed`` counts; so do its throttles, and the table's write throttles
  beyond what WriteChunk's retries absorb. RecordRelease is the one task whose failure a load
  survives (its catch goes on), hence its own alarm with feeds.
- **No alarm on the lookup's or an authorizer's errors.** Every lookup comes through the front,
  and a failed or timed-out invocation (the function's, or its authorizer's) is a 5xx there,
  which ``FrontServerErrors`` counts. The lookup's throttles stay: behind the function URL a
  throttled request is Lambda's 429, which no 5xx alarm sees.
- **No alarm on a replica region's arrival check.** A check that fails or is throttled
  publishes nothing, and ``RegionBehind`` treats missing data as breaching.

Besides these, with ``domainName`` each region's ``FrontUnhealthy`` alarm is what Route 53's
health check reads (``stacks/regions/regional_hostname.py``): it steers callers, and pages too.

docs/deploy.md ("The alarms") lists each with what it catches; ``tests/infra/test_alarms_kept.py``
asserts that each template holds exactly these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from cdk_monitoring_constructs import CustomMetricWithAlarm, CustomThreshold, ErrorCountThreshold

#: The period of every alarm counted over minutes (errors, throttles, failed executions).
PERIOD: Final = Duration.minutes(5)
#: Every alarm has one disambiguator: it pages.
CRITICAL: Final = "Critical"
GTE: Final = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
LT: Final = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD


class Where(Enum):
    """Which stacks apply an alarm: home's, a replica region's, or both."""

    HOME = "home"
    REGION = "region"
    BOTH = "both"

    def covers(self, stack: Where) -> bool:
        return self is Where.BOTH or self is stack


@dataclass(frozen=True)
class AlarmRule:
    """One alarm of the table. ``description`` may name ``{name}``, ``{hours}``, ``{threshold}``,
    ``{minutes}`` or ``{region}``, filled in where the alarm is made."""

    name: str
    description: str
    catches: str
    threshold: float
    where: Where
    comparison: cloudwatch.ComparisonOperator = GTE
    periods: int = 1
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING

    def alarm(
        self,
        metric: cloudwatch.Metric | cloudwatch.MathExpression,
        *,
        suffix: str = "",
        threshold: float | None = None,
        periods: int | None = None,
        **fields: object,
    ) -> CustomMetricWithAlarm:
        """The alarm on ``metric`` as a library custom metric, named ``name`` + ``suffix``."""
        chosen = self.threshold if threshold is None else threshold
        evaluated = self.periods if periods is None else periods
        description = self.description.format(threshold=f"{chosen:g}", **fields)
        return CustomMetricWithAlarm(
            metric=metric,
            alarm_friendly_name=f"{self.name}{suffix}",
            add_alarm={
                CRITICAL: CustomThreshold(
                    threshold=chosen,
                    comparison_operator=self.comparison,
                    evaluation_periods=evaluated,
                    datapoints_to_alarm=evaluated,
                    treat_missing_data_override=self.missing,
                    alarm_description_override=description,
                )
            },
        )

    def count_alarm(self) -> dict[str, ErrorCountThreshold]:
        """The alarm as the library's error-count threshold, for its Lambda monitor."""
        return {
            CRITICAL: ErrorCountThreshold(
                max_error_count=self.threshold,
                comparison_operator_override=self.comparison,
                datapoints_to_alarm=self.periods,
                evaluation_periods=self.periods,
                treat_missing_data_override=self.missing,
                alarm_description_override=self.description,
            )
        }


FRONT_SERVER_ERRORS: Final = AlarmRule(
    name="FrontServerErrors",
    description="The lookup API returned {threshold} or more 5xx responses in five minutes",
    catches="Lookups that failed: the function's errors and timeouts, and its authorizer's, are "
    "the front's 5xx",
    threshold=5,
    where=Where.BOTH,
)
LOOKUP_THROTTLES: Final = AlarmRule(
    name="LookupThrottles",
    description="The lookup function was throttled",
    catches="Lookups refused for concurrency: behind the function URL a throttle is Lambda's 429, "
    "which no 5xx alarm counts",
    threshold=1,
    where=Where.BOTH,
)
TABLE_READ_THROTTLES: Final = AlarmRule(
    name="TableReadThrottles",
    description="DynamoDB throttled lookup reads",
    catches="Lookup reads DynamoDB throttled, even those the SDK's retries saved (slow answers, "
    "not failed ones)",
    threshold=1,
    where=Where.BOTH,
)
LOADS_FAILED: Final = AlarmRule(
    name="LoadsFailed",
    description="A load execution failed, timed out or was aborted",
    catches="A load that did not finish: any task's failure or throttling its retries did not absorb "
    "(writes throttled beyond WriteChunk's retries included), a timeout, an abort",
    threshold=1,
    where=Where.HOME,
)
DATA_TOO_OLD: Final = AlarmRule(
    name="DataTooOld",
    description="No version of dataset {name} was activated in the last {hours} hours",
    catches="A dataset that stopped being renewed while nothing failed: a schedule turned off, a "
    "source never uploaded, a loader that stopped publishing (one per dataset with a maximum age)",
    threshold=1,
    where=Where.HOME,
    comparison=LT,
    missing=cloudwatch.TreatMissingData.BREACHING,
)
FEED_FAILING: Final = AlarmRule(
    name="FeedFailing",
    description="The feed of dataset {name} failed {threshold} or more runs in a row",
    catches="A vendor feed failing run after run (one per feed), before its data is too old",
    threshold=2,
    where=Where.HOME,
    # Between runs no datapoint arrives: the alarm stays where the last run left it.
    missing=cloudwatch.TreatMissingData.IGNORE,
)
RELEASE_HELD: Final = AlarmRule(
    name="ReleaseHeld",
    description="A release of dataset {name} changed too much or shrank; it is held",
    catches="A release the guard loaded but did not activate (maxChangeRatio, the size floor): it "
    "waits for `ipmeta activate`, or the next release",
    threshold=1,
    where=Where.HOME,
)
RECORD_RELEASE_ERRORS: Final = AlarmRule(
    name="RecordReleaseErrors",
    description="The record_release function raised errors",
    catches="With feeds: a release the feed could not remember, which the load survives; the next "
    "run would fetch it again",
    threshold=5,
    where=Where.HOME,
)
REGION_BEHIND: Final = AlarmRule(
    name="RegionBehind",
    description="{region} has served an older version than home for over {minutes} minutes "
    "(a version not wholly arrived), or its arrival check stopped",
    catches="A replica region serving an older version than home for longer than "
    "replicaLagAlarmMinutes, or whose arrival check failed or stopped",
    threshold=30 * 60,
    where=Where.REGION,
    missing=cloudwatch.TreatMissingData.BREACHING,
)

#: The table, in the order docs/deploy.md lists it.
ALARM_TABLE: Final[tuple[AlarmRule, ...]] = (
    FRONT_SERVER_ERRORS,
    LOOKUP_THROTTLES,
    TABLE_READ_THROTTLES,
    LOADS_FAILED,
    DATA_TOO_OLD,
    FEED_FAILING,
    RELEASE_HELD,
    RECORD_RELEASE_ERRORS,
    REGION_BEHIND,
)


def rules_of(stack: Where) -> Mapping[str, AlarmRule]:
    """The rules ``stack`` (home or a region) applies, by name."""
    return {rule.name: rule for rule in ALARM_TABLE if rule.where.covers(stack)}
