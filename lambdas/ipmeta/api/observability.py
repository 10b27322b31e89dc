"""The lookup function's logger and metrics: one of each per container, shared by routes and handler."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from ipmeta.schema.settings import METRICS_NAMESPACE

SERVICE = "lookup"
logger = Logger(service=SERVICE)
#: Flushed once per invocation by the handler's ``log_metrics``.
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
#: Addresses answered (a batch counts each distinct address): API Gateway counts requests, not
#: lookups. One datapoint per dataset read, with a ``dataset`` dimension.
METRIC_LOOKUPS = "Lookups"


def count_lookups(datasets: Iterable[str], count: int) -> None:
    """``Lookups`` of each dataset a request read (off unless the stack's ``lookupMetrics``).

    A line per dataset: a metric's dimensions hold one value per line, and the
    lines are printed now, so a request that fails still counts what it read.
    """
    if is_metrics_disabled():
        return
    for dataset in datasets:
        with single_metric(
            name=METRIC_LOOKUPS,
            unit=MetricUnit.Count,
            value=count,
            namespace=METRICS_NAMESPACE,
            default_dimensions={"service": SERVICE, "dataset": dataset},
        ):
            pass


# Errors, 304s, /health and /datasets add no metric by design (API Gateway counts
# requests); powertools would warn on each such invocation's empty flush.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
