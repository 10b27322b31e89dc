"""The lookup function's logger and metrics: one of each per container, shared by routes and handler."""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics

from ipmeta.settings import METRICS_NAMESPACE

SERVICE = "lookup"
logger = Logger(service=SERVICE)
#: Flushed once per invocation by the handler's ``log_metrics``.
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
#: Addresses answered (a batch counts each distinct address): API Gateway counts requests, not lookups.
METRIC_LOOKUPS = "Lookups"

# Errors, 304s, /health and /datasets add no metric by design (API Gateway counts
# requests); powertools would warn on each such invocation's empty flush.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
