"""Every alarm the stack had before the dashboard (issue 29) is still there, by metric and threshold.

Written against the hand-built alarms of ``stacks/monitoring/dashboard.py`` before they moved onto
cdk-monitoring-constructs, and kept as they were: whatever builds an alarm, its metric
(namespace, name, dimensions, statistic, period; a math expression's metrics and their
sum), its comparison, threshold, evaluation periods, datapoints and missing-data rule must
stay. An alarm is named here by what it watches, never by its logical id or name, which a
library may choose differently.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from stacks.constants import LOADER_SERVICE_NAME, LOOKUP_HANDLER, METRICS_NAMESPACE
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
    REPLICAS,
    REPLICAS_DOMAIN,
    REST_EDGE,
    SOURCE_URL,
    UPLOAD_TRIGGER,
    URL,
    URL_EDGE,
    Synthesized,
)

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
    FEEDS: {"city": 3, "geolite2-asn": 3, "dbip-country-lite": 3, "ipinfo-lite": 3},
}
READ_OPERATIONS = ("GetItem", "Query")
WRITE_OPERATIONS = ("BatchWriteItem", "PutItem", "UpdateItem", "DeleteItem")
EXECUTION_FAILURES = ("ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted")


def _value(value: Any) -> str:
    """A dimension's value: a literal, or the resource it refers to."""
    return value if isinstance(value, str) else f"Ref:{value['Ref']}"


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


def expected_alarms(template: dict[str, Any], variant: str) -> Iterator[tuple[str, AlarmSignature]]:
    """Today's alarms of ``variant``, each with what it is for."""
    for logical_id in resources_of_type(template, "AWS::Lambda::Function"):
        function = frozenset({("FunctionName", f"Ref:{logical_id}")})
        yield f"{logical_id} errors", _count(("AWS/Lambda", "Errors", function, "Sum", FIVE_MINUTES), 5)
        yield f"{logical_id} throttles", _count(("AWS/Lambda", "Throttles", function, "Sum", FIVE_MINUTES), 1)
    if variant in (HTTP_API, REPLICAS_DOMAIN, HTTP_EDGE):  # each fronts with the HTTP API
        api = ("AWS/ApiGateway", "5xx", frozenset({("ApiId", _only(template, "AWS::ApiGatewayV2::Api"))}))
    elif variant in (URL, URL_EDGE):  # the function's URL: Lambda counts what it answered
        lookup, _ = function_by_handler(template, LOOKUP_HANDLER)
        api = ("AWS/Lambda", "Url5xxCount", frozenset({("FunctionName", f"Ref:{lookup}")}))
    else:
        api = ("AWS/ApiGateway", "5XXError", frozenset({("ApiName", "RestApi")}))
    yield "API 5xx", _count((*api, "Sum", FIVE_MINUTES), 5)
    table = _only(template, "AWS::DynamoDB::GlobalTable")
    for name, operations, threshold in (("reads", READ_OPERATIONS, 1), ("writes", WRITE_OPERATIONS, 1000)):
        throttled = frozenset(
            (
                "AWS/DynamoDB",
                "ThrottledRequests",
                frozenset({("Operation", operation), ("TableName", table)}),
                "Sum",
                FIVE_MINUTES,
            )
            for operation in operations
        )
        yield f"table {name} throttled", (throttled, GTE, float(threshold), 1, 1, "notBreaching")
    for logical_id in resources_of_type(template, "AWS::StepFunctions::StateMachine"):
        # The loader's, and with enrichInputs the enrich state machine's (``stacks/load/enrich_workflow.py``).
        machine = frozenset({("StateMachineArn", f"Ref:{logical_id}")})
        failures = frozenset(
            ("AWS/States", name, machine, "Sum", FIVE_MINUTES) for name in EXECUTION_FAILURES
        )
        yield f"{logical_id} executions failed", (failures, GTE, 1.0, 1, 1, "notBreaching")
    yield from _loader_metric_alarms(variant)


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


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_every_alarm_from_before_the_dashboard_is_still_there(synthesized: Synthesized, variant: str) -> None:
    template = synthesized.templates[variant]
    present = alarm_signatures(template)
    expected = expected_alarms(template, variant)
    missing = [purpose for purpose, signature in expected if signature not in present]
    assert missing == []


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
