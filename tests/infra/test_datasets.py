"""A deployment of several datasets: a schedule and an input per dataset, each with its own alarm and age.

The ``datasets`` variant declares ``city`` and ``asn`` (scheduled) and
``blocklist`` (loaded when its source is uploaded), and a lookup precedence.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import (
    ENV_DATASET_MAX_AGE_SECONDS,
    ENV_DATASETS,
    LOADER_SERVICE_NAME,
    LOOKUP_HANDLER,
    METRIC_DATASET_ACTIVATED,
)
from tests.infra.cfn import alarms as cfn_alarms
from tests.infra.cfn import resources_of_type
from tests.infra.conftest import DATASETS, DEFAULT, EXAMPLE_DATASETS, Synthesized
from tests.infra.test_reloads import _input_text


def _starts(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The execution input of each schedule (or rule) by the dataset it names."""
    inputs = {}
    for _, resource in resources_of_type(template, resource_type).items():
        target = resource["Properties"]["Target" if resource_type.endswith("Schedule") else "Targets"]
        target = target if isinstance(target, dict) else target[0]
        start = json.loads(_input_text(target["Input"], "bucket"))
        inputs[start["dataset"]] = {"start": start, "properties": resource["Properties"]}
    return inputs


def test_each_scheduled_dataset_has_its_own_schedule_and_input(synthesized: Synthesized) -> None:
    schedules = _starts(synthesized.templates[DATASETS], "AWS::Scheduler::Schedule")
    assert set(schedules) == {"city", "asn"}
    for name in ("city", "asn"):
        declared = EXAMPLE_DATASETS[name]
        assert schedules[name]["properties"]["ScheduleExpression"] == declared["scheduleCron"]
        assert schedules[name]["start"] == {
            "dataset": name,
            "source": f"s3://bucket/{declared['sourceKey']}",
            "options": {},
        }


def test_an_uploaded_dataset_starts_its_own_load(synthesized: Synthesized) -> None:
    rules = _starts(synthesized.templates[DATASETS], "AWS::Events::Rule")
    assert set(rules) == {"blocklist"}
    rule = rules["blocklist"]
    assert rule["start"] == {
        "dataset": "blocklist",
        "source": "s3://bucket/datasets/blocklist.csv",
        "options": {"flag_column": "rule"},
    }
    assert rule["properties"]["EventPattern"]["detail"]["object"] == {"key": ["datasets/blocklist.csv"]}


def test_without_datasets_the_default_dataset_keeps_its_schedule(synthesized: Synthesized) -> None:
    schedules = resources_of_type(synthesized.templates[DEFAULT], "AWS::Scheduler::Schedule")
    # The same construct id as before datasets: an existing deployment updates in place
    assert [logical for logical in schedules if logical.startswith("ReloadsSchedule")] == list(schedules)
    assert set(_starts(synthesized.templates[DEFAULT], "AWS::Scheduler::Schedule")) == {"default"}


def _lookup_environment(template: dict[str, Any]) -> dict[str, Any]:
    functions = resources_of_type(template, "AWS::Lambda::Function")
    [lookup] = [fn for fn in functions.values() if fn["Properties"]["Handler"] == LOOKUP_HANDLER]
    environment: dict[str, Any] = lookup["Properties"]["Environment"]["Variables"]
    return environment


def test_the_lookup_knows_the_precedence_and_each_datasets_maximum_age(synthesized: Synthesized) -> None:
    environment = _lookup_environment(synthesized.templates[DATASETS])
    assert environment[ENV_DATASETS] == "blocklist,city,asn"
    # city declares 96 hours; the others take dataMaxAgeHours (48)
    assert json.loads(environment[ENV_DATASET_MAX_AGE_SECONDS]) == {
        "city": 96 * 3600,
        "asn": 48 * 3600,
        "blocklist": 48 * 3600,
    }
    default = _lookup_environment(synthesized.templates[DEFAULT])
    assert default[ENV_DATASETS] == ""
    assert json.loads(default[ENV_DATASET_MAX_AGE_SECONDS]) == {"default": 48 * 3600}


def test_each_dataset_has_a_data_age_alarm_on_its_own_dimension(synthesized: Synthesized) -> None:
    alarms = [
        alarm
        for alarm in cfn_alarms(synthesized.templates[DATASETS]).values()
        if alarm.get("MetricName") == METRIC_DATASET_ACTIVATED
    ]
    by_dataset = {
        next(d["Value"] for d in alarm["Dimensions"] if d["Name"] == "dataset"): alarm for alarm in alarms
    }
    assert set(by_dataset) == {"city", "asn", "blocklist"}
    assert by_dataset["city"]["EvaluationPeriods"] == 96
    assert by_dataset["asn"]["EvaluationPeriods"] == 48
    for alarm in alarms:
        assert {"Name": "service", "Value": LOADER_SERVICE_NAME} in alarm["Dimensions"]


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        ({"datasets": {"City": {}}}, "not a dataset name"),
        ({"datasets": {"current": {}}}, "reserved"),
        ({"datasets": {"city": {"sourcekey": "x"}}}, "Extra inputs"),
        ({"datasets": {"city": {"sourceOptions": {"overlaps": "sometimes"}}}}, "overlaps"),
        ({"datasets": {"city": {"maxAgeHours": 500}}}, "maxAgeHours of city"),
        ({"datasets": {"city": {}}, "sourceUrl": "https://example.com/x.csv"}, "declare 'default'"),
        ({"lookupDatasets": "city,Bad"}, "not a dataset name"),
    ],
)
def test_a_dataset_declaration_the_loader_would_refuse_fails_at_synth(
    context: dict[str, Any], problem: str
) -> None:
    with pytest.raises((ConfigError, ValueError), match=problem):
        IpmetaConfig.model_validate(context)


def test_datasets_and_lookup_datasets_read_from_the_command_line() -> None:
    config = IpmetaConfig.model_validate(
        {"datasets": json.dumps({"city": {"scheduleEnabled": "false"}}), "lookupDatasets": "city, asn"}
    )
    [city] = config.dataset_sources
    assert (city.name, city.source_key, city.schedule_enabled) == ("city", "datasets/city/current.csv", False)
    assert config.lookup_datasets == ["city", "asn"]
