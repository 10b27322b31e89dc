"""Each template holds exactly the alarms of the alarm table (issue 34), by metric and threshold.

``stacks/monitoring/alarm_table.py`` keeps an alarm only where it catches what no other does:
no alarm per loader task (``LoadsFailed`` catches a failure its retries did not absorb), none
on the lookup's or an authorizer's errors (the front's 5xx), none on a region's arrival check
(``RegionBehind``). Home and every replica region are checked: whatever builds an alarm, its
metric (namespace, name, dimensions, statistic, period; a math expression's metrics and their
sum), its comparison, threshold, evaluation periods, datapoints and missing-data rule must be
the expected one, and no other alarm may be there. An alarm is named here by what it watches,
never by its logical id or name, which a library may choose differently.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from stacks.constants import (
    ENV_TABLE_NAME,
    LOADER_MODULE,
    LOADER_SERVICE_NAME,
    LOOKUP_HANDLER,
    METRICS_NAMESPACE,
)
from tests.infra.cfn import function_by_handler, resources_of_type
from tests.infra.conftest import (
    ALL_VARIANTS,
    DATASETS,
    DEFAULT,
    ENRICH,
    EXPORT_MMDB,
    FEEDS,
    HTTP_API,
    HTTP_EDGE,
    REGION_TEMPLATES,
    REPLICAS,
    REPLICAS_DOMAIN,
    REST_EDGE,
    SHIPPED,
    SOURCE_URL,
    UPLOAD_TRIGGER,
    URL,
    URL_EDGE,
    Synthesized,
)

MINUTE = 60
FIVE_MINUTES = 300
HOUR = 3600
GTE = "GreaterThanOrEqualToThreshold"
LT = "LessThanThreshold"
#: A metric: (namespace, name, dimensions, statistic, period).
Metric = tuple[str, str, frozenset[tuple[str, str]], str, int]
#: An alarm: (the metrics it sums, comparison, threshold, evaluation periods, datapoints, missing data).
AlarmSignature = tuple[frozenset[Metric], str, float, int, int, str]

#: Each variant's data-age alarms (dataset -> hours) and feed alarms (feed -> failures in a row).
DATA_AGE: Mapping[str, Mapping[str, int]] = {
    **{
        variant: {"default": 48}
        for variant in (
            DEFAULT,
            SHIPPED,
            SOURCE_URL,
            UPLOAD_TRIGGER,
            HTTP_API,
            EXPORT_MMDB,
            REPLICAS,
            REPLICAS_DOMAIN,
            URL,
            URL_EDGE,
            HTTP_EDGE,
            REST_EDGE,
            ENRICH,
        )
    },
    DATASETS: {"city": 96, "asn": 48, "blocklist": 48},
    FEEDS: {"city": 120},
}
FEED_FAILURES: Mapping[str, Mapping[str, int]] = {
    SOURCE_URL: {"default": 2},
    FEEDS: {"city": 3, "geolite2-asn": 3, "dbip-country-lite": 3, "ipinfo-lite": 3, "network": 3},
}
READ_OPERATIONS = ("GetItem", "Query", "BatchGetItem")
EXECUTION_FAILURES = ("ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted")


def _value(value: Any) -> str:
    """A dimension's value: a literal, the resource it refers to, or the expression that gives it."""
    if isinstance(value, str):
        return value
    return f"Ref:{value['Ref']}" if "Ref" in value else json.dumps(value, sort_keys=True)


def _dimensions(dimensions: list[dict[str, Any]]) -> frozenset[tuple[str, str]]:
    return frozenset((dimension["Name"], _value(dimension["Value"])) for dimension in dimensions)


def _stat(query: dict[str, Any]) -> Metric:
    stat = query["MetricStat"]
    metric = stat["Metric"]
    return (
        metric["Namespace"],
        metric["MetricName"],
        _dimensions(metric.get("Dimensions", [])),
        stat["Stat"],
        stat["Period"],
    )


def _summed_metrics(properties: dict[str, Any]) -> frozenset[Metric]:
    """The metrics an alarm watches: its one metric, or the ones its expression adds up."""
    if "MetricName" in properties:
        statistic = properties.get("Statistic") or properties["ExtendedStatistic"]
        return frozenset(
            {
                (
                    properties["Namespace"],
                    properties["MetricName"],
                    _dimensions(properties.get("Dimensions", [])),
                    statistic,
                    properties["Period"],
                )
            }
        )
    queries = {query["Id"]: query for query in properties["Metrics"]}
    [returned] = [query for query in queries.values() if query.get("ReturnData", True)]
    if "MetricStat" in returned:  # one metric, written as a query (a labelled metric is)
        return frozenset({_stat(returned)})
    expression = returned["Expression"]
    terms = re.split(r"\s*\+\s*", expression.strip())
    # Only a sum of metrics is read as one; any other expression would fail the comparison below.
    assert all(term in queries and "MetricStat" in queries[term] for term in terms), expression
    return frozenset(_stat(queries[term]) for term in terms)


def alarm_signatures(template: dict[str, Any]) -> set[AlarmSignature]:
    return {
        (
            _summed_metrics(properties),
            properties["ComparisonOperator"],
            float(properties["Threshold"]),
            int(properties["EvaluationPeriods"]),
            int(properties.get("DatapointsToAlarm", properties["EvaluationPeriods"])),
            properties.get("TreatMissingData", "missing"),
        )
        for properties in (
            alarm["Properties"] for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        )
    }


def _count(metric: Metric, threshold: float, comparison: str = GTE) -> AlarmSignature:
    """A count over one five-minute period, no data meaning nothing went wrong."""
    return (frozenset({metric}), comparison, float(threshold), 1, 1, "notBreaching")


def _only(template: dict[str, Any], resource_type: str) -> str:
    [logical_id] = resources_of_type(template, resource_type)
    return f"Ref:{logical_id}"


def _front_5xx(template: dict[str, Any], variant: str, period: int) -> Metric:
    """The front's API-wide 5xx: the HTTP API's, the function URL's, or the REST API's."""
    if variant.split("@", maxsplit=1)[0] in (SHIPPED, HTTP_API, REPLICAS_DOMAIN, HTTP_EDGE):
        api = ("AWS/ApiGateway", "5xx", frozenset({("ApiId", _only(template, "AWS::ApiGatewayV2::Api"))}))
    elif variant in (URL, URL_EDGE):  # the function's URL: Lambda counts what it answered
        lookup, _ = function_by_handler(template, LOOKUP_HANDLER)
        api = ("AWS/Lambda", "Url5xxCount", frozenset({("FunctionName", f"Ref:{lookup}")}))
    else:
        api = ("AWS/ApiGateway", "5XXError", frozenset({("ApiName", "RestApi")}))
    return (*api, "Sum", period)


def serving_alarms(template: dict[str, Any], variant: str) -> Iterator[tuple[str, AlarmSignature]]:
    """What home and every replica region alarm on: the front's 5xx, the lookup's throttles, the
    table's throttled lookup reads, and with ``domainName`` the hostname's health."""
    yield "front 5xx", _count(_front_5xx(template, variant, FIVE_MINUTES), 5)
    lookup, _ = function_by_handler(template, LOOKUP_HANDLER)
    function = frozenset({("FunctionName", f"Ref:{lookup}")})
    yield "lookup throttles", _count(("AWS/Lambda", "Throttles", function, "Sum", FIVE_MINUTES), 1)
    table = _table_name(template)
    throttled = frozenset(
        (
            "AWS/DynamoDB",
            "ThrottledRequests",
            frozenset({("Operation", operation), ("TableName", table)}),
            "Sum",
            FIVE_MINUTES,
        )
        for operation in READ_OPERATIONS
    )
    yield "table reads throttled", (throttled, GTE, 1.0, 1, 1, "notBreaching")
    if variant.split("@", maxsplit=1)[0] == REPLICAS_DOMAIN:
        unhealthy = frozenset({_front_5xx(template, variant, MINUTE)})
        yield "front unhealthy", (unhealthy, GTE, 25.0, 2, 2, "notBreaching")


def _table_name(template: dict[str, Any]) -> str:
    """Home's table, or the name a replica region's stack reads from home's outputs."""
    tables = resources_of_type(template, "AWS::DynamoDB::GlobalTable")
    if tables:
        return _only(template, "AWS::DynamoDB::GlobalTable")
    [lookup] = [
        resource
        for resource in resources_of_type(template, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == LOOKUP_HANDLER
    ]
    return _value(lookup["Properties"]["Environment"]["Variables"][ENV_TABLE_NAME])


def expected_alarms(template: dict[str, Any], variant: str) -> Iterator[tuple[str, AlarmSignature]]:
    """Home's alarms in ``variant``, each with what it is for."""
    yield from serving_alarms(template, variant)
    for logical_id in resources_of_type(template, "AWS::StepFunctions::StateMachine"):
        # The loader's, and with enrichInputs the enrich state machine's (``stacks/load/enrich_workflow.py``).
        machine = frozenset({("StateMachineArn", f"Ref:{logical_id}")})
        failures = frozenset(
            ("AWS/States", name, machine, "Sum", FIVE_MINUTES) for name in EXECUTION_FAILURES
        )
        yield f"{logical_id} executions failed", (failures, GTE, 1.0, 1, 1, "notBreaching")
    yield from _loader_metric_alarms(variant)
    if variant in FEED_FAILURES:
        record, _ = function_by_handler(template, f"{LOADER_MODULE}.record_release")
        function = frozenset({("FunctionName", f"Ref:{record}")})
        yield "record release errors", _count(("AWS/Lambda", "Errors", function, "Sum", FIVE_MINUTES), 5)


def region_alarms(template: dict[str, Any], name: str) -> Iterator[tuple[str, AlarmSignature]]:
    """A replica region's alarms: the serving ones, and how far it trails home."""
    yield from serving_alarms(template, name)
    behind = (
        METRICS_NAMESPACE,
        "RegionBehindSeconds",
        frozenset({("region", REGION_TEMPLATES[name]), ("service", LOADER_SERVICE_NAME)}),
        "Maximum",
        FIVE_MINUTES,
    )
    yield "region behind", (frozenset({behind}), GTE, 30.0 * 60, 1, 1, "breaching")


def _loader_metric_alarms(variant: str) -> Iterator[tuple[str, AlarmSignature]]:
    for dataset, hours in DATA_AGE[variant].items():
        activated = (
            METRICS_NAMESPACE,
            "DatasetActivated",
            frozenset({("dataset", dataset), ("service", LOADER_SERVICE_NAME)}),
            "Sum",
            HOUR,
        )
        # No activation in any of the last `hours` hours, or no data at all, alarms
        yield f"data age of {dataset}", (frozenset({activated}), LT, 1.0, hours, hours, "breaching")
    for feed, failures in FEED_FAILURES.get(variant, {}).items():
        failing = (
            METRICS_NAMESPACE,
            "FeedFailuresInARow",
            frozenset({("feed", feed), ("service", LOADER_SERVICE_NAME)}),
            "Maximum",
            HOUR,
        )
        # Between runs no datapoint comes: the alarm holds where the last run left it
        yield f"feed {feed} failing", (frozenset({failing}), GTE, float(failures), 1, 1, "ignore")
        held = (
            METRICS_NAMESPACE,
            "ReleaseHeld",
            frozenset({("dataset", feed), ("service", LOADER_SERVICE_NAME)}),
            "Sum",
            HOUR,
        )
        # A release the guard loaded but did not activate waits for a person
        yield f"release of {feed} held", (frozenset({held}), GTE, 1.0, 1, 1, "notBreaching")


def _alarm_count(template: dict[str, Any]) -> int:
    return len(resources_of_type(template, "AWS::CloudWatch::Alarm"))


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_home_has_exactly_the_alarms_of_the_table(synthesized: Synthesized, variant: str) -> None:
    template = synthesized.templates[variant]
    expected = dict(expected_alarms(template, variant))
    assert alarm_signatures(template) == set(expected.values())
    # And no alarm twice
    assert _alarm_count(template) == len(expected)


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_a_replica_region_has_exactly_the_alarms_of_the_table(synthesized: Synthesized, name: str) -> None:
    template = synthesized.templates[name]
    expected = dict(region_alarms(template, name))
    assert alarm_signatures(template) == set(expected.values())
    assert _alarm_count(template) == len(expected)


def test_the_default_stack_alarms_on_nine_metrics(synthesized: Synthesized) -> None:
    # Given cdk.json as it is: 5xx, the lookup's throttles, three read operations, three
    # execution outcomes and the default dataset's age (31 before issue 34)
    template = synthesized.templates[SHIPPED]
    metrics = sum(len(signature[0]) for signature in alarm_signatures(template))
    assert (_alarm_count(template), metrics) == (5, 9)


def test_the_signature_tells_apart_a_changed_threshold_and_a_changed_metric() -> None:
    # Given today's read-throttle alarm, as the template spells it
    alarm: dict[str, Any] = {
        "ComparisonOperator": GTE,
        "Threshold": 1,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "TreatMissingData": "notBreaching",
        "Metrics": [
            {"Id": "expr_1", "Expression": "getitem + query", "ReturnData": True},
            *(
                {
                    "Id": operation.lower(),
                    "ReturnData": False,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/DynamoDB",
                            "MetricName": "ThrottledRequests",
                            "Dimensions": [
                                {"Name": "Operation", "Value": operation},
                                {"Name": "TableName", "Value": {"Ref": "Table"}},
                            ],
                        },
                        "Period": FIVE_MINUTES,
                        "Stat": "Sum",
                    },
                }
                for operation in READ_OPERATIONS
            ),
        ],
    }

    def signatures(properties: dict[str, Any]) -> set[AlarmSignature]:
        resource = {"Type": "AWS::CloudWatch::Alarm", "Properties": properties}
        return alarm_signatures({"Resources": {"A": resource}})

    original = signatures(alarm)
    # Then the same alarm with its ids renamed and its terms reordered is the same alarm
    renamed = copy.deepcopy(alarm)
    renamed["Metrics"][0]["Expression"] = "q + g"
    renamed["Metrics"][1]["Id"], renamed["Metrics"][2]["Id"] = "g", "q"
    assert signatures(renamed) == original
    # And another threshold, or another metric (ReadThrottleEvents), is not
    assert signatures({**alarm, "Threshold": 2}) != original
    other = copy.deepcopy(alarm)
    other["Metrics"][1]["MetricStat"]["Metric"]["MetricName"] = "ReadThrottleEvents"
    assert signatures(other) != original
