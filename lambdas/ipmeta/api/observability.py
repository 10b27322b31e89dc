"""The lookup function's logger and metrics: one of each per container, shared by routes and handler.

**Metrics cost nothing per request.** A lookup adds to counts in memory
(``ipmeta.api.dependencies.counts``: lookups, Queries; the range cache keeps
its own hits and misses); the handler adds each answer's status family. The
counts leave as ONE EMF line (powertools ``Metrics``, service ``lookup``, no
other dimension), at most once a minute per container:

- **when due**: at the end of the first invocation at least
  ``METRICS_INTERVAL_SECONDS`` after the last line (Lambda freezes a container
  as soon as it answers, and a Python function has no hook at that freeze, so
  "at freeze" means the end of an invocation whose minute is up);
- **at shutdown**: on SIGTERM, which Lambda sends the runtime before it shuts a
  container down only when an extension is registered (none is, by default),
  and the local server's workers get when it stops. Without it, what a
  container counted after its last line is lost when Lambda reaps it: at most
  a minute of its lookups (docs/decisions.md).

So the bill grows with containers × minutes, not with lookups (``ipmeta plan``
prices it). API Gateway's own metrics count requests exactly; these count what
only the function knows.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from ipmeta.api import dependencies
from ipmeta.api.dependencies import LookupCounts
from ipmeta.schema.settings import (
    LOOKUP_METRICS,
    LOOKUP_SERVICE,
    METRIC_ANSWERS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_LOOKUPS,
    METRICS_INTERVAL_SECONDS,
    METRICS_NAMESPACE,
)

SERVICE = LOOKUP_SERVICE
logger = Logger(service=SERVICE)
#: The metrics line's own set: powertools' ``Metrics`` instances share one set per process, and
#: this line must carry its counts and nothing another module added (the local server and the
#: tests run other handlers in the same process).
metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service=SERVICE)

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _stdout_line(line: str) -> None:
    # Lambda reads EMF from the function's output; print is what powertools' own flush uses.
    print(line, flush=True)


class MinuteMetrics:
    """The container's counts, published as one EMF line when a minute is up (``clock``: seconds)."""

    def __init__(
        self,
        counts: LookupCounts,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_seconds: float = METRICS_INTERVAL_SECONDS,
        write: Callable[[str], None] = _stdout_line,
    ) -> None:
        self.counts = counts
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.write = write
        self._since = clock()
        #: The range cache the last line read, and its hits and misses then (it counts on its own).
        self._cache_seen: tuple[int, int, int] = (0, 0, 0)
        self._publishing = threading.Lock()

    def answered(self, status: int) -> None:
        family = status // 100
        self.counts.add(METRIC_ANSWERS.get(family, METRIC_ANSWERS[5]))

    def publish_if_due(self) -> None:
        if self.clock() - self._since >= self.interval_seconds:
            self.publish()

    def publish(self) -> None:
        """Every count since the last line, in one line; nothing when nothing was counted."""
        # A SIGTERM arriving while a line is being written must not write a second one.
        if not self._publishing.acquire(blocking=False):
            return
        try:
            taken = {**self.counts.take(), **self._cache_counts()}
            if not any(taken.values()) or is_metrics_disabled():
                return  # an idle minute starts no new one: the next count may go out at once
            self._since = self.clock()
            for name in LOOKUP_METRICS:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=taken.get(name, 0))
            line = metrics.serialize_metric_set()
            metrics.clear_metrics()
            self.write(json.dumps(line, separators=(",", ":")))
        finally:
            self._publishing.release()

    def _cache_counts(self) -> dict[str, int]:
        built = dependencies.built()
        if built is None:
            return {}
        cache = built.ranges
        seen_id, seen_hits, seen_misses = self._cache_seen
        if seen_id != id(cache):  # another cache (a test installed one): count it from zero
            seen_hits = seen_misses = 0
        hits, misses = cache.hits, cache.misses
        self._cache_seen = (id(cache), hits, misses)
        return {METRIC_CACHE_HITS: hits - seen_hits, METRIC_CACHE_MISSES: misses - seen_misses}


minute_metrics = MinuteMetrics(dependencies.counts)


def count_lookups(count: int) -> None:
    """``count`` addresses looked up (a batch counts each distinct address once)."""
    dependencies.counts.add(METRIC_LOOKUPS, count)


def counting_answers(handler: LambdaHandler) -> LambdaHandler:
    """Counts each answer's status family, and publishes the counts when their minute is up."""

    @functools.wraps(handler)
    def counted(event: dict[str, Any], context: Any) -> dict[str, Any]:
        status = 500
        try:
            response = handler(event, context)
            status = int(response.get("statusCode", 500))
            return response
        finally:
            minute_metrics.answered(status)
            minute_metrics.publish_if_due()

    return counted


def publish_at_shutdown() -> None:
    """On SIGTERM, the counts since the last line, then what SIGTERM did before (exit, by default).

    Only the main thread may set a signal handler; an import from another thread keeps none.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(Exception):  # a failed line must not keep the process alive
            minute_metrics.publish()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def write_to_stderr(line: str) -> None:
    """``ipmeta serve``'s metrics: log lines on stderr, where the server's other logs go."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


# Powertools warns when a flush finds nothing; the line above never flushes an empty set.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
