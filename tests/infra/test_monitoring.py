"""Alarms: API 5xx, Lambda errors and throttles, DynamoDB throttles, failed loads, data age."""

from __future__ import annotations

from typing import Any

from stacks.constants import LOADER_SERVICE_NAME, METRIC_DATASET_ACTIVATED, METRICS_NAMESPACE
from tests.infra.cfn import alarms as cfn_alarms
from tests.infra.cfn import only
from tests.infra.conftest import DEFAULT, Synthesized, cdk_json


def _alarms(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return cfn_alarms(synthesized.templates[DEFAULT])


def _metric_names(alarm: dict[str, Any]) -> set[str]:
    if "MetricName" in alarm:
        return {alarm["MetricName"]}
    return {q["MetricStat"]["Metric"]["MetricName"] for q in alarm["Metrics"] if "MetricStat" in q}


def test_every_alarm_notifies_the_topic(synthesized: Synthesized) -> None:
    topic_id, _ = only(synthesized.templates[DEFAULT], "AWS::SNS::Topic")
    alarms = _alarms(synthesized)
    assert alarms
    for logical_id, alarm in alarms.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], logical_id
        assert alarm["OKActions"] == [{"Ref": topic_id}], logical_id


def test_alarms_cover_api_functions_table_and_loads(synthesized: Synthesized) -> None:
    alarms = list(_alarms(synthesized).values())
    by_metric: dict[str, int] = {}
    for alarm in alarms:
        for name in _metric_names(alarm):
            by_metric[name] = by_metric.get(name, 0) + 1

    assert by_metric["5XXError"] == 1
    # The lookup's throttles alone: a task's failure fails the load, an invocation's is a 5xx
    assert "Errors" not in by_metric
    assert by_metric["Throttles"] == 1
    assert by_metric["ThrottledRequests"] == 1  # the lookup's reads; writes fail the load if anything
    assert {"ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"} <= set(by_metric)


def test_data_age_alarm_fires_when_no_activation_is_published_within_the_limit(
    synthesized: Synthesized,
) -> None:
    hours = cdk_json()["context"]["dataMaxAgeHours"]
    [alarm] = [a for a in _alarms(synthesized).values() if a.get("MetricName") == METRIC_DATASET_ACTIVATED]

    assert alarm["Namespace"] == METRICS_NAMESPACE
    # The default dataset's own alarm: the loader publishes the metric with the dataset's name
    assert sorted(alarm["Dimensions"], key=lambda dimension: dimension["Name"]) == [
        {"Name": "dataset", "Value": "default"},
        {"Name": "service", "Value": LOADER_SERVICE_NAME},
    ]
    assert alarm["Period"] == 3600
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == hours
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert alarm["Threshold"] == 1
    assert alarm["TreatMissingData"] == "breaching"


def test_topic_requires_tls(synthesized: Synthesized) -> None:
    _, policy = only(synthesized.templates[DEFAULT], "AWS::SNS::TopicPolicy")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
