"""A front of the lookup function as the dashboard and the alarms see it, whatever the front is.

The REST API and the HTTP API each describe themselves with one ``MonitoredFront``
(``stacks/api.py``, ``stacks/http_api.py``); ``stacks/monitoring.py`` draws and alarms
on any list of them. A front added later (a function URL, CloudFront) brings its own
metrics here, and nothing in the dashboard changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from cdk_monitoring_constructs import MonitoringFacade

#: The period of the fronts' latencies, and of their errors as the 5xx alarm counts them.
FIVE_MINUTES: Final = Duration.minutes(5)
#: The latencies the dashboard draws for every front and for the function.
PERCENTILES: Final = ("p50", "p90", "p99")


@dataclass(frozen=True)
class MonitoredFront:
    """One front: what it counts, how fast it answers, how it fails.

    ``server_errors`` is the metric of the front's 5xx alarm (Sum over five minutes).
    ``library_section`` adds cdk-monitoring-constructs' own section for the front
    (requests per second, latency, error rates), where the library has a monitor for it.
    """

    name: str
    requests: Callable[[Duration], cloudwatch.Metric]
    latency: Callable[[str], cloudwatch.Metric]
    client_errors: Callable[[Duration], cloudwatch.Metric]
    server_errors: Callable[[Duration], cloudwatch.Metric]
    library_section: Callable[[MonitoringFacade], object] | None = None
