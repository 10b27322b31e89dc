"""The dashboard (issue 29): one per stack, a widget for each thing the person who runs ipmeta watches.

It is an option since issue 34 (``dashboard``, off in ``cdk.json``): every variant builds it but
``SHIPPED``, which has the alarms and no dashboard.

The dashboard's body is JSON with CloudFormation tokens inside strings; each token is read
as a placeholder, and every graph is read as its title and the metrics it draws.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from stacks.constants import (
    LOADER_SERVICE_NAME,
    METRIC_ANSWERS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_DATASET_ACTIVATED,
    METRIC_FEED_RUNS,
    METRIC_ITEMS_WRITTEN,
    METRIC_LOAD_SECONDS,
    METRIC_LOOKUPS,
    METRIC_QUERIES,
    METRIC_REGION_BEHIND,
    METRICS_NAMESPACE,
)
from tests.infra.cfn import only, resources_of_type
from tests.infra.conftest import (
    ALL_VARIANTS,
    DATASETS,
    DEFAULT,
    EXAMPLE_REPLICA_REGIONS,
    FEEDS,
    HTTP_API,
    REPLICAS,
    SHIPPED,
    Synthesized,
    stage_name,
)
from tests.infra.test_alarms_kept import DATA_AGE, FEED_FAILURES, expected_alarms

#: (namespace, metric name, dimensions, statistic)
Drawn = tuple[str, str, frozenset[tuple[str, str]], str]


@dataclass
class Graph:
    title: str
    metrics: set[Drawn] = field(default_factory=set)
    expressions: list[str] = field(default_factory=list)

    def names(self) -> set[str]:
        return {name for _, name, _, _ in self.metrics}

    def draws(self, namespace: str, name: str, statistic: str | None = None, **dimensions: str) -> bool:
        return any(
            (drawn_namespace, drawn_name) == (namespace, name)
            and set(dimensions.items()) <= drawn_dimensions
            and statistic in (None, drawn_statistic)
            for drawn_namespace, drawn_name, drawn_dimensions, drawn_statistic in self.metrics
        )


def _text(part: Any) -> str:
    return part if isinstance(part, str) else "TOKEN"


def dashboard(template: dict[str, Any]) -> dict[str, Any]:
    _, resource = only(template, "AWS::CloudWatch::Dashboard")
    body = resource["Properties"]["DashboardBody"]
    text = body if isinstance(body, str) else "".join(_text(part) for part in body["Fn::Join"][1])
    document: dict[str, Any] = json.loads(text)
    return document


def graphs(template: dict[str, Any]) -> dict[str, Graph]:
    found: dict[str, Graph] = {}
    for widget in dashboard(template)["widgets"]:
        properties = widget["properties"]
        if widget["type"] != "metric":
            continue
        graph = found.setdefault(properties["title"], Graph(properties["title"]))
        for entry in properties.get("metrics", []):
            if isinstance(entry[0], dict):
                graph.expressions.append(entry[0]["expression"])
                continue
            *names, options = entry if isinstance(entry[-1], dict) else (*entry, {})
            namespace, name, *pairs = names
            dimensions = frozenset(zip(pairs[::2], pairs[1::2], strict=True))
            graph.metrics.add((namespace, name, dimensions, options.get("stat", "Average")))
    return found


def graph(template: dict[str, Any], title_start: str) -> Graph:
    [found] = [drawn for title, drawn in graphs(template).items() if title.startswith(title_start)]
    return found


#: The variants built with ``dashboard=true``: all but ``cdk.json`` as it is.
DRAWN = [variant for variant in ALL_VARIANTS if variant != SHIPPED]


def alarm_ids(template: dict[str, Any], variant: str) -> set[str]:
    """Each alarm's logical id, less its hash and its stage's name (which its alarm name holds)."""
    return {
        logical_id[:-8].replace(stage_name(variant), "", 1)
        for logical_id in resources_of_type(template, "AWS::CloudWatch::Alarm")
    }


def test_the_shipped_stack_has_the_alarms_and_no_dashboard(synthesized: Synthesized) -> None:
    # Given cdk.json as it is, and the same front with the dashboard (HTTP_API)
    shipped, drawn = synthesized.templates[SHIPPED], synthesized.templates[HTTP_API]
    # Then no dashboard, and the same alarms under the same construct ids as beside a dashboard
    assert resources_of_type(shipped, "AWS::CloudWatch::Dashboard") == {}
    only(drawn, "AWS::CloudWatch::Dashboard")
    alarms = alarm_ids(shipped, SHIPPED)
    assert len(alarms) == 5
    assert alarms == alarm_ids(drawn, HTTP_API)


@pytest.mark.parametrize("variant", DRAWN)
def test_one_dashboard_opens_on_a_week_with_every_alarm(synthesized: Synthesized, variant: str) -> None:
    template = synthesized.templates[variant]
    document = dashboard(template)
    assert (document["start"], document["periodOverride"]) == ("-P7D", "auto")
    # And one widget of every alarm's state, the loader's functions' included
    [overview] = [widget for widget in document["widgets"] if widget["type"] == "alarm"]
    alarm_count = len(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    assert alarm_count == len(dict(expected_alarms(template, variant)))
    assert len(overview["properties"]["alarms"]) == alarm_count


@dataclass(frozen=True)
class FrontMetrics:
    """A front's name on the dashboard, its error metrics' names and its API-wide dimensions."""

    name: str
    client: str
    server: str
    api: dict[str, str]


@pytest.mark.parametrize(
    ("variant", "front"),
    [
        (DEFAULT, FrontMetrics("REST API", "4XXError", "5XXError", {"ApiName": "RestApi"})),
        (HTTP_API, FrontMetrics("HTTP API", "4xx", "5xx", {"ApiId": "TOKEN"})),
    ],
)
def test_lookups_latency_and_errors_are_drawn_per_front_and_for_the_function(
    synthesized: Synthesized, variant: str, front: FrontMetrics
) -> None:
    api = front.api
    template = synthesized.templates[variant]
    # Lookups per minute per front: the front's requests, and the addresses the function looked up
    lookups = graph(template, "Lookups per minute")
    assert lookups.draws("AWS/ApiGateway", "Count", "Sum", **api)
    assert lookups.draws(METRICS_NAMESPACE, METRIC_LOOKUPS, "Sum", service="lookup")
    assert all("PERIOD(" in expression and "/ 60" in expression for expression in lookups.expressions)
    # Latency: the front's p50, p90 and p99, and the function's
    latency = graph(template, "Latency (ms)")
    for statistic in ("p50", "p90", "p99"):
        assert latency.draws("AWS/ApiGateway", "Latency", statistic, **api), statistic
        assert latency.draws("AWS/Lambda", "Duration", statistic), statistic
    # 4xx and 5xx by family: the front's, and the function's own answers
    errors = graph(template, "4xx and 5xx")
    assert errors.draws("AWS/ApiGateway", front.client, "Sum", **api)
    assert errors.draws("AWS/ApiGateway", front.server, "Sum", **api)
    assert {METRIC_ANSWERS[4], METRIC_ANSWERS[5]} <= errors.names()
    assert front.name in json.dumps(dashboard(template))


def test_the_range_cache_hit_ratio_and_queries_per_lookup_come_from_the_metrics_line(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[DEFAULT]
    ratio = graph(template, "Range cache hit ratio")
    assert {METRIC_CACHE_HITS, METRIC_CACHE_MISSES} <= ratio.names()
    assert ratio.expressions == ["100 * hits / (hits + misses)"]
    assert {METRIC_QUERIES, METRIC_LOOKUPS} <= graph(template, "DynamoDB Queries per lookup").names()
    answers = graph(template, "The function's answers")
    assert answers.names() == set(METRIC_ANSWERS.values())


def test_the_table_shows_consumed_units_and_throttles(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    assert "ConsumedReadCapacityUnits" in graph(template, "Read Usage").names()
    assert "ConsumedWriteCapacityUnits" in graph(template, "Write Usage").names()
    assert {"ReadThrottleEvents", "WriteThrottleEvents"} <= graph(template, "Throttles").names()
    reads = graph(template, "Throttled reads")
    operations = {dict(dimensions)["Operation"] for _, _, dimensions, _ in reads.metrics}
    assert operations == {"GetItem", "Query", "BatchGetItem"}


@pytest.mark.parametrize("variant", [DEFAULT, DATASETS, FEEDS])
def test_each_dataset_has_its_age_activations_load_duration_and_items_written(
    synthesized: Synthesized, variant: str
) -> None:
    template = synthesized.templates[variant]
    names = set(DATA_AGE[variant]) | set(FEED_FAILURES.get(variant, {}))
    ages, activations = graph(template, "Dataset age"), graph(template, "Activations per hour")
    durations, items = graph(template, "Load duration"), graph(template, "Items written")
    for name in names:
        dataset = {"dataset": name, "service": LOADER_SERVICE_NAME}
        assert ages.draws(METRICS_NAMESPACE, METRIC_DATASET_ACTIVATED, "Sum", **dataset), name
        assert activations.draws(METRICS_NAMESPACE, METRIC_DATASET_ACTIVATED, "Sum", **dataset), name
        assert durations.draws(METRICS_NAMESPACE, METRIC_LOAD_SECONDS, "Maximum", **dataset), name
        assert items.draws(METRICS_NAMESPACE, METRIC_ITEMS_WRITTEN, "Sum", **dataset), name
    # The age is the time since the last hour with an activation, carried forward
    assert len(ages.expressions) == len(names)
    assert all("EPOCH(" in expression and "REPEAT" in expression for expression in ages.expressions)


def test_each_feed_shows_its_runs_by_outcome(synthesized: Synthesized) -> None:
    template = synthesized.templates[FEEDS]
    for feed in FEED_FAILURES[FEEDS]:
        runs = graph(template, f"Feed {feed}:")
        for name in METRIC_FEED_RUNS.values():
            assert runs.draws(METRICS_NAMESPACE, name, "Sum", feed=feed, service=LOADER_SERVICE_NAME), name
    # Without feeds, no feed section
    assert not [title for title in graphs(synthesized.templates[DEFAULT]) if title.startswith("Feed ")]


def test_home_draws_a_section_for_each_replica_region_read_across_regions(synthesized: Synthesized) -> None:
    # Given two replica regions
    document = dashboard(synthesized.templates[REPLICAS])
    for region in EXAMPLE_REPLICA_REGIONS:
        titled = [
            widget["properties"]
            for widget in document["widgets"]
            if widget["type"] == "metric" and widget["properties"]["title"].startswith(f"{region}: ")
        ]
        # Then each has how far behind home it serves, and what it answers, read in that region
        behind, traffic = sorted(titled, key=lambda properties: "behind" not in properties["title"])
        [entry] = behind["metrics"]
        assert entry[:2] == [METRICS_NAMESPACE, METRIC_REGION_BEHIND]
        assert entry[-1]["region"] == region
        drawn = [entry for entry in traffic["metrics"] if not isinstance(entry[0], dict)]
        assert {entry[1] for entry in drawn} >= {METRIC_LOOKUPS, METRIC_ANSWERS[5]}
        assert all(entry[-1]["region"] == region for entry in drawn)
    # And a home without replicas draws none
    assert not [w for w in dashboard(synthesized.templates[DEFAULT])["widgets"] if "behind home" in str(w)]
