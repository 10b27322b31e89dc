"""A front of the lookup function as the dashboard and the alarms see it, whatever the front is.

The REST API and the HTTP API each describe themselves with one ``MonitoredFront``
(``api_gateway_front``, called by ``rest_front`` and ``http_front``), the function URL with its
own (``url_front``); ``stacks/monitoring/dashboard.py`` draws and alarms on any list of them.
A front added later brings its own metrics here, and nothing in the dashboard changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigatewayv2
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


def api_gateway_front(
    name: str,
    api: apigateway.RestApi | apigatewayv2.HttpApi,
    library_section: Callable[[MonitoringFacade], object],
) -> MonitoredFront:
    """An API Gateway front: its API-wide metrics, as the 5xx alarm always read them, and the
    library's own section for it."""
    total = cloudwatch.Stats.SUM
    return MonitoredFront(
        name=name,
        requests=lambda period: api.metric_count(period=period, statistic=total),
        latency=lambda statistic: api.metric_latency(period=FIVE_MINUTES, statistic=statistic),
        client_errors=lambda period: api.metric_client_error(period=period, statistic=total),
        server_errors=lambda period: api.metric_server_error(period=period, statistic=total),
        library_section=library_section,
    )
