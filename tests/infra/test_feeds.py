"""Vendor feeds in the stack: a schedule and input per feed, a Fetch state, grants scoped to named secrets.

The ``feeds`` variant declares four feeds (two MaxMind editions sharing one
secret, DB-IP without one, IPinfo), and declares the ``city`` dataset for its
maximum age; ``source_url`` turns ``sourceUrl`` into a ``url`` feed of ``default``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App

from loader.feeds.catalogue import CATALOGUE, parse_network_lists
from loader.pipeline.fetch import decode_feeds
from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import (
    ENV_FEEDS,
    FETCH_TASK,
    LOADER_MODULE,
    LOADER_SERVICE_NAME,
    METRIC_FEED_FAILURES,
    METRIC_RELEASE_HELD,
    METRICS_NAMESPACE,
    RECORD_RELEASE_TASK,
)
from stacks.load.loader_workflow import FEED_RETRY_ERRORS
from tests.infra.cfn import (
    alarms as cfn_alarms,
)
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    policy_statements_of_role,
    resources_of_type,
    state_machine_definition,
)
from tests.infra.conftest import (
    DEFAULT,
    EXAMPLE_FEED_SECRETS,
    EXAMPLE_RELAY_MIRROR,
    EXAMPLE_SOURCE_URL,
    FEEDS,
    SOURCE_URL,
    Synthesized,
    cdk_json,
)

FEED_NAMES = {"city", "geolite2-asn", "dbip-country-lite", "ipinfo-lite", "network"}


def _config(**context: Any) -> IpmetaConfig:
    """The stack's settings as ``cdk deploy -c`` gives them."""
    return IpmetaConfig.from_node(App(context=context).node)


def _role_of(template: dict[str, Any], task: str) -> str:
    _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
    role: str = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role


def _feed_schedules(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each schedule that starts a feed's run, by the feed its input names."""
    schedules = {}
    for resource in resources_of_type(template, "AWS::Scheduler::Schedule").values():
        start = json.loads(resource["Properties"]["Target"]["Input"])
        if "feed" in start:
            schedules[start["feed"]] = {"start": start, "properties": resource["Properties"]}
    return schedules


def test_each_feed_has_its_own_schedule_whose_input_only_names_it(synthesized: Synthesized) -> None:
    template = synthesized.templates[FEEDS]
    schedules = _feed_schedules(template)
    assert set(schedules) == FEED_NAMES
    for name, schedule in schedules.items():
        assert schedule["start"] == {"feed": name}
    crons = {name: schedule["properties"]["ScheduleExpression"] for name, schedule in schedules.items()}
    assert crons == {
        "city": "cron(0 6 ? * WED,SAT *)",
        "geolite2-asn": cdk_json()["context"]["scheduleCron"],
        "dbip-country-lite": "cron(0 7 2 * ? *)",
        "ipinfo-lite": cdk_json()["context"]["scheduleCron"],
        # aws, tor and apple-relay as one feed: as often as its most frequent list, Tor's exits
        "network": "rate(1 hour)",
    }
    # The declared city dataset is loaded by its feed: no schedule of its source key
    assert len(resources_of_type(template, "AWS::Scheduler::Schedule")) == len(FEED_NAMES)


def test_a_run_names_a_feed_fetches_first_and_remembers_the_release_once_active(
    synthesized: Synthesized,
) -> None:
    states = state_machine_definition(synthesized.templates[FEEDS])["States"]
    # Feed? sends a feed's run to Fetch, any other input to Start
    assert states["Feed?"]["Choices"] == [{"Variable": "$.feed", "IsPresent": True, "Next": "Fetch"}]
    assert states["Feed?"]["Default"] == "Start"
    fetch = states["Fetch"]
    assert "Parameters" not in fetch
    assert fetch["Next"] == "Fetched?"
    assert fetch["Catch"][0]["Next"] == "Abort"
    [vendor_retry] = [retry for retry in fetch["Retry"] if "FeedUnavailable" in retry["ErrorEquals"]]
    assert vendor_retry["ErrorEquals"] == list(FEED_RETRY_ERRORS)
    assert states["Fetched?"]["Choices"][0]["Next"] == "FeedUnchanged"
    assert states["FeedUnchanged"]["Type"] == "Succeed"
    assert states["Fetched?"]["Default"] == "Start"
    # After Activate, a feed's release is recorded before the grace period; a failure to record goes on
    assert states["Activate"]["Next"] == "FromAFeed?"
    assert states["FromAFeed?"]["Choices"][0]["Next"] == "RecordRelease"
    assert states["FromAFeed?"]["Default"] == "Grace"
    record = states["RecordRelease"]
    assert record["Parameters"] == {"feed.$": "$.feed", "load_id.$": "$.load_id"}
    assert (record["Next"], record["Catch"][0]["Next"]) == ("Grace", "Grace")
    # Start finding the release's bytes already active records it too
    unchanged = states["Started?"]["Choices"][0]
    assert unchanged["Next"] == "UnchangedFromAFeed?"
    assert states["UnchangedFromAFeed?"]["Choices"][0]["Next"] == "RecordUnchangedRelease"
    assert states["RecordUnchangedRelease"]["Next"] == "NothingToWrite"


def test_without_feeds_the_state_machine_has_no_feed_state(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    states = state_machine_definition(template)["States"]
    assert state_machine_definition(template)["StartAt"] == "Start"
    assert not {"Feed?", "Fetch", "RecordRelease", "RecordUnchangedRelease"} & set(states)
    for task in (FETCH_TASK, RECORD_RELEASE_TASK):
        with pytest.raises(AssertionError):
            function_by_handler(template, f"{LOADER_MODULE}.{task}")


def test_the_fetch_function_knows_each_feeds_settings_and_only_the_names_of_its_secrets(
    synthesized: Synthesized,
) -> None:
    _, function = function_by_handler(synthesized.templates[FEEDS], f"{LOADER_MODULE}.{FETCH_TASK}")
    feeds = decode_feeds(function["Properties"]["Environment"]["Variables"][ENV_FEEDS])
    assert set(feeds) == FEED_NAMES
    assert feeds["city"].config.edition == "GeoLite2-City"
    assert {name: feed.config.secret for name, feed in feeds.items()} == {
        "city": "ipmeta/maxmind",
        "geolite2-asn": "ipmeta/maxmind",
        "dbip-country-lite": "",
        "ipinfo-lite": "ipmeta/ipinfo",
        "network": "",
    }
    # A declared dataset's load options go with its feed
    assert feeds["city"].options == {"max_errors": 10}


def _secret_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        statement
        for statement in policy_statements_of_role(template, role)
        if any(action.startswith("secretsmanager:") for action in as_list(statement["Action"]))
    ]


def _secret_name_in(resource: Any) -> str:
    """``ipmeta/maxmind`` from ``arn:…:secret:ipmeta/maxmind-??????`` (a Fn::Join)."""
    text = json.dumps(resource)
    start = text.index(":secret:") + len(":secret:")
    return text[start : text.index("-??????", start)]


def test_only_the_fetch_function_may_read_the_feeds_secrets_and_only_those(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[FEEDS]
    fetch_role = _role_of(template, FETCH_TASK)
    statements = _secret_statements(template, fetch_role)
    granted = {_secret_name_in(resource) for s in statements for resource in as_list(s["Resource"])}
    assert granted == set(EXAMPLE_FEED_SECRETS)
    actions = {action for s in statements for action in as_list(s["Action"])}
    assert actions == {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
    # No other role's policy names a feed's secret
    roles = resources_of_type(template, "AWS::IAM::Role")
    for role in set(roles) - {fetch_role}:
        text = json.dumps(policy_statements_of_role(template, role))
        assert not any(f":secret:{name}" in text for name in EXAMPLE_FEED_SECRETS), role


def test_the_fetch_function_writes_only_under_feeds_and_reads_and_counts_its_state(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[FEEDS]
    statements = policy_statements_of_role(template, _role_of(template, FETCH_TASK))
    s3 = [s for s in statements if any(a.startswith("s3:") for a in as_list(s["Action"]))]
    # With a network feed it also reads each list's current file (the guard measures a renewed list
    # against it), and lists the feeds prefix alone, so a missing file is a 404
    assert {a for s in s3 for a in as_list(s["Action"])} == {
        "s3:PutObject",
        "s3:AbortMultipartUpload",
        "s3:GetObject",
        "s3:ListBucket",
    }
    for statement in s3:
        if as_list(statement["Action"]) == ["s3:ListBucket"]:
            assert statement["Condition"] == {"StringLike": {"s3:prefix": ["feeds/*"]}}
        else:
            assert "/feeds/*" in json.dumps(statement["Resource"]), statement
    dynamodb = {a for s in statements for a in as_list(s["Action"]) if a.startswith("dynamodb:")}
    assert dynamodb == {"dynamodb:GetItem", "dynamodb:UpdateItem"}
    record = policy_statements_of_role(template, _role_of(template, RECORD_RELEASE_TASK))
    assert {a for s in record for a in as_list(s["Action"]) if a.split(":")[0] in ("dynamodb", "s3")} == {
        "dynamodb:UpdateItem",
        "s3:GetObject",
        "s3:PutObject",
    }
    # RecordRelease copies a network run's new list files over the current ones, under feeds/ only
    record_s3 = [s for s in record if any(a.startswith("s3:") for a in as_list(s["Action"]))]
    assert all("/feeds/*" in json.dumps(s["Resource"]) for s in record_s3)


def test_without_network_feeds_the_feed_functions_cannot_read_the_feeds_prefix(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[SOURCE_URL]
    for task in (FETCH_TASK, RECORD_RELEASE_TASK):
        statements = policy_statements_of_role(template, _role_of(template, task))
        actions = {a for s in statements for a in as_list(s["Action"])}
        assert not {"s3:GetObject", "s3:ListBucket"} & actions, task


def test_no_secret_value_is_in_the_template_and_no_key_can_be_put_in_the_context(
    synthesized: Synthesized,
) -> None:
    text = json.dumps(synthesized.templates[FEEDS])
    # The feeds' secrets are referenced by name; the stack creates none and holds no value
    assert '"SecretString"' not in text
    for name in ("license_key", "licenseKey", "LicenseKey", "token"):
        assert f'"{name}"' not in text
    created = resources_of_type(synthesized.templates[FEEDS], "AWS::SecretsManager::Secret")
    assert len(created) == len(
        resources_of_type(synthesized.templates[DEFAULT], "AWS::SecretsManager::Secret")
    )
    # A key in a feed's settings fails the synth, and the error does not repeat it
    leaked = {"vendor": "maxmind", "edition": "GeoLite2-City", "license_key": "SHOULD-NEVER-BE-PRINTED"}
    with pytest.raises(ConfigError) as refused:
        _config(feeds=[leaked])
    assert "unknown license_key" in str(refused.value)
    assert "SHOULD-NEVER-BE-PRINTED" not in str(refused.value)


def test_each_feed_alarms_when_it_failed_n_runs_in_a_row(synthesized: Synthesized) -> None:
    alarms = {
        next(d["Value"] for d in alarm["Dimensions"] if d["Name"] == "feed"): alarm
        for alarm in cfn_alarms(synthesized.templates[FEEDS]).values()
        if alarm.get("MetricName") == METRIC_FEED_FAILURES
    }
    assert set(alarms) == FEED_NAMES
    for name, alarm in alarms.items():
        assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
            {"Name": "feed", "Value": name},
            {"Name": "service", "Value": LOADER_SERVICE_NAME},
        ]
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (3, "GreaterThanOrEqualToThreshold")
        assert (alarm["Statistic"], alarm["EvaluationPeriods"]) == ("Maximum", 1)
        # Between runs no datapoint comes: the alarm stays where the last run left it
        assert alarm["TreatMissingData"] == "ignore"
    # A fed dataset declared in datasets keeps its data-age alarm; the others have none
    ages = [
        alarm["AlarmDescription"]
        for alarm in cfn_alarms(synthesized.templates[FEEDS]).values()
        if alarm.get("MetricName") == "DatasetActivated"
    ]
    assert ages == ["No version of dataset city was activated in the last 120 hours"]


def test_each_feed_alarms_on_any_release_the_guard_held(synthesized: Synthesized) -> None:
    alarms = {
        next(d["Value"] for d in alarm["Dimensions"] if d["Name"] == "dataset"): alarm
        for alarm in cfn_alarms(synthesized.templates[FEEDS]).values()
        if alarm.get("MetricName") == METRIC_RELEASE_HELD
    }
    assert set(alarms) == FEED_NAMES
    for alarm in alarms.values():
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
        assert (alarm["Statistic"], alarm["TreatMissingData"]) == ("Sum", "notBreaching")


def test_source_url_is_a_url_feed_of_the_default_dataset(synthesized: Synthesized) -> None:
    template = synthesized.templates[SOURCE_URL]
    _, function = function_by_handler(template, f"{LOADER_MODULE}.{FETCH_TASK}")
    feeds = decode_feeds(function["Properties"]["Environment"]["Variables"][ENV_FEEDS])
    assert list(feeds) == ["default"]
    assert (feeds["default"].config.vendor, feeds["default"].config.edition) == ("url", EXAMPLE_SOURCE_URL)
    # The default dataset's schedule now starts its feed
    assert (
        _feed_schedules(template)["default"]["properties"]["ScheduleExpression"]
        == (cdk_json()["context"]["scheduleCron"])
    )
    assert len(resources_of_type(template, "AWS::Scheduler::Schedule")) == 1
    assert "FetchSource" not in state_machine_definition(template)["States"]


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        (
            {"feeds": [{"vendor": "maxmind", "edition": "GeoLite2-City", "licenseKey": "x"}]},
            "unknown licenseKey",
        ),
        ({"feeds": [{"vendor": "maxmind"}]}, "names its vendor and its edition"),
        ({"feeds": [{"vendor": "geoip", "edition": "x"}]}, "unknown vendor"),
        ({"feeds": [{"vendor": "dbip", "edition": "city-lite", "cron": 6}]}, "cron"),
        ({"feeds": [{"vendor": "url", "edition": "http://example.com/x.csv"}]}, "not an https URL"),
        ({"feeds": ["maxmind:GeoLite2-City"]}, "expected an object"),
        (
            {"feeds": [{"vendor": "network", "edition": "aws=http://mirror.example.com/ip-ranges.json"}]},
            "network list aws: http://mirror.example.com/ip-ranges.json is not an https URL",
        ),
        ({"feeds": [{"vendor": "network", "edition": "tor,tor"}]}, "network list tor is named twice"),
        ({"feeds": [{"vendor": "network", "edition": "aws", "cron": "hourly"}]}, "cron of feed network"),
        ({"feeds": [{"vendor": "network", "edition": "aws,nosuch"}]}, "'nosuch' is not in the catalogue"),
        (
            {
                "feeds": [
                    {"vendor": "dbip", "edition": "city-lite"},
                    {"vendor": "dbip", "edition": "city-lite"},
                ]
            },
            "two feeds load dataset dbip-city-lite",
        ),
        (
            {
                "feeds": [{"name": "city", "vendor": "dbip", "edition": "city-lite"}],
                "datasets": {"city": {"uploadTrigger": True}},
            },
            "uploadTrigger and a feed",
        ),
        (
            {"feeds": [{"vendor": "dbip", "edition": "city-lite"}], "feedFailuresToAlarm": 0},
            "feedFailuresToAlarm",
        ),
    ],
)
def test_feeds_the_fetch_function_would_refuse_fail_at_synth(context: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        _config(**context)


def test_feeds_read_from_the_command_line_as_json() -> None:
    feeds = '[{"name": "asn", "vendor": "maxmind", "edition": "GeoLite2-ASN", "secret": "ipmeta/maxmind"}]'
    config = _config(feeds=feeds)
    [feed] = config.feed_sources
    assert (feed.name, feed.config.secret, feed.cron) == ("asn", "ipmeta/maxmind", config.schedule_cron)
    # With feeds alone, the deployment has no default dataset to schedule from a source key
    assert config.dataset_sources == []


def test_the_network_lists_are_one_feed_scheduled_as_often_as_their_most_frequent_list(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[FEEDS]
    # Given feeds naming catalogue entries, {"vendor": "network", "edition": "aws,tor,apple-relay=<mirror>"}
    schedule = _feed_schedules(template)["network"]
    properties = schedule["properties"]
    # Then one schedule starts the set's run on the load state machine, naming the feed alone
    assert schedule["start"] == {"feed": "network"}
    assert properties["ScheduleExpression"] == "rate(1 hour)"
    [machine] = resources_of_type(template, "AWS::StepFunctions::StateMachine")
    assert properties["Target"]["Arn"] == {"Ref": machine}
    assert properties["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 3
    # described by its lists, never by a mirror's URL
    described = "Fetch network:aws,tor,apple-relay into dataset network when it changed"
    assert properties["Description"] == described
    assert EXAMPLE_RELAY_MIRROR not in json.dumps(properties)
    # And the fetch function knows the lists and the mirror one of them is read from
    _, function = function_by_handler(template, f"{LOADER_MODULE}.{FETCH_TASK}")
    network = decode_feeds(function["Properties"]["Environment"]["Variables"][ENV_FEEDS])["network"]
    assert (network.config.vendor, network.dataset) == ("network", "network")
    chosen = {c.entry.name: c.urls for c in parse_network_lists(network.config.edition)}
    assert chosen == {
        "aws": CATALOGUE["aws"].urls,
        "tor": CATALOGUE["tor"].urls,
        "apple-relay": (EXAMPLE_RELAY_MIRROR,),
    }


def test_the_network_feed_has_its_failing_and_held_alarms(synthesized: Synthesized) -> None:
    alarms = cfn_alarms(synthesized.templates[FEEDS]).values()
    network = {
        alarm["MetricName"]: alarm
        for alarm in alarms
        if {"Name": "feed", "Value": "network"} in alarm.get("Dimensions", [])
        or {"Name": "dataset", "Value": "network"} in alarm.get("Dimensions", [])
    }
    assert set(network) == {METRIC_FEED_FAILURES, METRIC_RELEASE_HELD}
    held = network[METRIC_RELEASE_HELD]
    assert (held["Threshold"], held["Statistic"], held["Namespace"]) == (1, "Sum", METRICS_NAMESPACE)
    assert {"Name": "service", "Value": LOADER_SERVICE_NAME} in held["Dimensions"]
    assert held["AlarmActions"], "the held alarm notifies"


@pytest.mark.parametrize(
    ("feed", "schedule"),
    [
        ({"vendor": "network", "edition": "azure,spamhaus-drop"}, "rate(12 hours)"),
        ({"vendor": "network", "edition": "azure"}, "rate(7 days)"),
        ({"vendor": "network", "edition": "aws,tor", "cron": "cron(0 * * * ? *)"}, "cron(0 * * * ? *)"),
    ],
)
def test_a_network_feed_runs_at_its_most_frequent_lists_pace_unless_it_names_a_cron(
    feed: dict[str, str], schedule: str
) -> None:
    [source] = _config(feeds=[feed]).feed_sources
    assert (source.name, source.cron) == ("network", schedule)
