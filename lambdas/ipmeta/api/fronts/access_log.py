"""The function's own access log, where no API Gateway writes one (the url front).

One JSON line per request answered, the fields of the API Gateway fronts' access logs (who,
what, the outcome, how long), sampled: a share of the answers (``accessLogSampleRate``,
``IPMETA_ACCESS_LOG_SAMPLE_RATE``) and every 4xx and 5xx, and every invocation that raised.
Unset (the REST and HTTP fronts, whose gateways log every request), nothing is written.

The line is written to stdout whole, not through the logger: powertools' logger adds the
Lambda context's fields to every line (about three times the bytes), and CloudWatch bills
each byte (``loader.planning.costs`` prices the line that ``bench/access_log.py`` measures).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ipmeta.api.fronts.front_events import method_of
from ipmeta.schema.settings import ENV_ACCESS_LOG_SAMPLE_RATE

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
#: How much of the path a line repeats.
MAX_LOGGED_PATH: Final = 200
#: Statuses logged whatever the sample: every refusal and every failure.
ALWAYS_LOGGED_FROM: Final = 400


def sample_rate() -> float:
    """The share of answered requests logged below ``ALWAYS_LOGGED_FROM``; 0 when unset."""
    return float(os.environ.get(ENV_ACCESS_LOG_SAMPLE_RATE) or 0.0)


def access_line(event: Mapping[str, Any], context: Any, status: int, seconds: float) -> dict[str, Any]:
    """The fields of one line: the API Gateway fronts' access logs', as the function sees them."""
    request = event.get("requestContext") or {}
    http = request.get("http") or {}
    path = str(event.get("rawPath") or event.get("path") or "")
    return {
        "requestId": getattr(context, "aws_request_id", None) or request.get("requestId"),
        "ip": http.get("sourceIp") or (request.get("identity") or {}).get("sourceIp"),
        "method": method_of(event),
        "path": path[:MAX_LOGGED_PATH],
        "status": status,
        "ms": round(seconds * 1000, 1),
    }


def _sample() -> float:
    # Imported on the first logged request: the REST and HTTP fronts never log here.
    import random

    return random.random()


def write_line(line: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")


def access_logged(handler: Handler) -> Handler:
    """Log the request the handler answers: sampled below 400, always from 400 and on failure."""

    @functools.wraps(handler)
    def logged(event: dict[str, Any], context: Any) -> dict[str, Any]:
        rate = sample_rate()
        if not rate:
            return handler(event, context)
        started = time.perf_counter()
        try:
            response = handler(event, context)
        except Exception:
            write_line(access_line(event, context, 500, time.perf_counter() - started))
            raise
        status = int(response.get("statusCode") or 500)
        if status >= ALWAYS_LOGGED_FROM or _sample() < rate:
            write_line(access_line(event, context, status, time.perf_counter() - started))
        return response

    return logged
