"""The metrics ipmeta publishes itself, and the math the dashboard draws from them.

- **The lookup function's line** (``ipmeta.api.observability``): lookups, range-cache hits
  and misses, Queries, answers by status family; service ``lookup``, no other dimension.
- **The loader's lines** (``loader.pipeline.handlers``): ``DatasetActivated``,
  ``ItemsWritten`` and ``LoadSeconds`` per dataset at each activation; per feed, at the end
  of each run, ``FeedFailuresInARow`` and how the run ended (``FeedRuns<Outcome>``).

Each is hourly where the loader publishes a few times a day, and the data-age and feed
alarms read exactly these (``tests/infra/test_alarms_kept.py`` holds them).
"""

from __future__ import annotations

import re
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from stacks.constants import (
    LOADER_SERVICE_NAME,
    LOOKUP_SERVICE_NAME,
    METRIC_ANSWERS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_DATASET_ACTIVATED,
    METRIC_DATASET_DIMENSION,
    METRIC_FEED_DIMENSION,
    METRIC_FEED_FAILURES,
    METRIC_FEED_RUNS,
    METRIC_ITEMS_WRITTEN,
    METRIC_LOAD_SECONDS,
    METRIC_LOOKUPS,
    METRIC_QUERIES,
    METRIC_REGION_BEHIND,
    METRIC_REGION_DIMENSION,
    METRICS_NAMESPACE,
)

HOUR: Final = Duration.hours(1)
MINUTE: Final = Duration.minutes(1)
FIVE_MINUTES: Final = Duration.minutes(5)


def loader_metric(name: str, dimension: str, value: str, statistic: str) -> cloudwatch.Metric:
    """A metric the loader publishes, hourly: powertools adds the service name as a dimension."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": LOADER_SERVICE_NAME, dimension: value},
        statistic=statistic,
        period=HOUR,
    )


def dataset_activated(dataset: str) -> cloudwatch.Metric:
    """What the loader publishes (value 1) each time it activates a version of ``dataset``."""
    return loader_metric(METRIC_DATASET_ACTIVATED, METRIC_DATASET_DIMENSION, dataset, cloudwatch.Stats.SUM)


def hours_since_activation(dataset: str) -> cloudwatch.MathExpression:
    """The dataset's age: hours from its last activation in the graph's range to each point.

    Each hour with an activation is stamped with its time (``EPOCH``), the stamp is carried
    forward (``FILL … REPEAT``) and taken from the time of every point.
    """
    ident = "activations_" + re.sub(r"[^a-z0-9]+", "_", dataset)  # one per dataset in a graph
    filled = f"FILL({ident}, 0)"
    return cloudwatch.MathExpression(
        expression=f"(EPOCH({filled}) - FILL(IF({filled} > 0, EPOCH({filled})), REPEAT)) / 3600",
        using_metrics={ident: dataset_activated(dataset)},
        label=f"{dataset}: hours since the last activation",
        period=HOUR,
    )


def items_written(dataset: str) -> cloudwatch.Metric:
    return loader_metric(METRIC_ITEMS_WRITTEN, METRIC_DATASET_DIMENSION, dataset, cloudwatch.Stats.SUM)


def load_seconds(dataset: str) -> cloudwatch.Metric:
    return loader_metric(METRIC_LOAD_SECONDS, METRIC_DATASET_DIMENSION, dataset, cloudwatch.Stats.MAXIMUM)


def feed_failures(feed: str) -> cloudwatch.Metric:
    """What every run of ``feed`` that ends publishes: its failed runs in a row (0 after a success)."""
    return loader_metric(METRIC_FEED_FAILURES, METRIC_FEED_DIMENSION, feed, cloudwatch.Stats.MAXIMUM)


def feed_runs(feed: str) -> list[cloudwatch.Metric]:
    """The feed's runs an hour, by how they ended: loaded, unchanged, failed."""
    return [
        loader_metric(name, METRIC_FEED_DIMENSION, feed, cloudwatch.Stats.SUM).with_(label=f"{feed}: {run}")
        for run, name in METRIC_FEED_RUNS.items()
    ]


def lookup_metric(name: str, period: Duration = MINUTE) -> cloudwatch.Metric:
    """A count of the lookup function's metrics line, summed over ``period``."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": LOOKUP_SERVICE_NAME},
        statistic=cloudwatch.Stats.SUM,
        period=period,
    )


def per_minute(count: cloudwatch.IMetric, label: str) -> cloudwatch.MathExpression:
    """A count as a rate per minute, whatever period the dashboard draws it at."""
    # Ids are shared by every metric of a graph: one per label.
    ident = "per_minute_" + re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    return cloudwatch.MathExpression(
        expression=f"{ident} / (PERIOD({ident}) / 60)",
        using_metrics={ident: count},
        label=label,
        period=MINUTE,
    )


def lookups_per_minute() -> cloudwatch.MathExpression:
    """Addresses looked up a minute, every front together (a batch counts each address)."""
    return per_minute(lookup_metric(METRIC_LOOKUPS), "addresses looked up (every front)")


def cache_hit_ratio() -> cloudwatch.MathExpression:
    """The share of (address, dataset) reads the range cache answered, in percent."""
    return cloudwatch.MathExpression(
        expression="100 * hits / (hits + misses)",
        using_metrics={
            "hits": lookup_metric(METRIC_CACHE_HITS, FIVE_MINUTES),
            "misses": lookup_metric(METRIC_CACHE_MISSES, FIVE_MINUTES),
        },
        label="range cache hit ratio (%)",
        period=FIVE_MINUTES,
    )


def queries_per_lookup() -> cloudwatch.MathExpression:
    """DynamoDB Queries sent per address looked up (one per dataset without the cache)."""
    return cloudwatch.MathExpression(
        expression="queries / lookups",
        using_metrics={
            "queries": lookup_metric(METRIC_QUERIES, FIVE_MINUTES),
            "lookups": lookup_metric(METRIC_LOOKUPS, FIVE_MINUTES),
        },
        label="Queries per lookup",
        period=FIVE_MINUTES,
    )


def answers(family: int) -> cloudwatch.Metric:
    """The function's answers of one status family (2, 3, 4, 5) in five minutes."""
    return lookup_metric(METRIC_ANSWERS[family], FIVE_MINUTES).with_(label=f"function {family}xx")


#: The check publishes a datapoint a minute; five minutes with none is a check that stopped.
BEHIND_PERIOD: Final = FIVE_MINUTES


def region_behind_metric(region: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=METRIC_REGION_BEHIND,
        dimensions_map={"service": LOADER_SERVICE_NAME, METRIC_REGION_DIMENSION: region},
        statistic=cloudwatch.Stats.MAXIMUM,
        period=BEHIND_PERIOD,
    )


def in_region(metric: cloudwatch.Metric, region: str) -> cloudwatch.Metric:
    """A metric a replica region publishes, drawn on home's dashboard (CloudWatch reads across regions)."""
    return metric.with_(region=region, label=f"{region}: {metric.metric_name}")


def lookups(region: str) -> cloudwatch.MathExpression:
    """Addresses a replica region's lookup function looked up a minute."""
    return per_minute(in_region(lookup_metric(METRIC_LOOKUPS), region), f"{region} addresses looked up")
