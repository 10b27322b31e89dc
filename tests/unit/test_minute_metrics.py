"""The lookup function's metrics: counted in memory, one EMF line a minute at most, counts that add up.

Driven through the real Lambda handler over the stand-in store (``testing.stub_store``),
with the metrics line's clock and output replaced: 10,000 requests in one container
spread over simulated minutes leave at most one line per minute, and the lines'
counts add up to what was asked and what reached the store.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ipmeta.api import dependencies, observability
from ipmeta.api.observability import MinuteMetrics
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import (
    LOOKUP_METRICS,
    METRIC_ANSWERS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_LOOKUPS,
    METRIC_QUERIES,
    METRICS_NAMESPACE,
    Front,
)
from testing.in_process_api import invoke
from testing.stub_store import SlashTwentyFourStore

REQUESTS = 10_000
MINUTE = 60.0


@dataclass
class SimulatedClock:
    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Lines:
    """Each line written, with the simulated time it was written at."""

    clock: SimulatedClock
    written: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        self.written.append((self.clock(), json.loads(line)))

    def total(self, name: str) -> int:
        # Powertools writes each metric's values as a list (EMF takes several per line)
        return sum(int(value) for _, line in self.written for value in line[name])


@pytest.fixture
def container(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[SimulatedClock, Lines, SlashTwentyFourStore]]:
    """A fresh container: the stand-in store, a range cache, metrics on, its clock and output ours."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    store = SlashTwentyFourStore({"asn": 13335, "organization": "Cloudflare, Inc."})
    dependencies.install(dependencies.Dependencies(store=store, ranges=RangeCache(4 * 1024 * 1024)))  # type: ignore[arg-type]
    dependencies.counts.take()
    clock = SimulatedClock()
    lines = Lines(clock)
    monkeypatch.setattr(
        observability, "minute_metrics", MinuteMetrics(dependencies.counts, clock=clock, write=lines)
    )
    try:
        yield clock, lines, store
    finally:
        dependencies.install(None)


def get(path: str) -> int:
    return int(invoke(Front.REST, "GET", path, caller="198.51.100.7")["statusCode"])


def test_ten_thousand_lookups_leave_one_line_a_minute_at_most_and_their_counts_add_up(
    container: tuple[SimulatedClock, Lines, SlashTwentyFourStore],
) -> None:
    clock, lines, store = container
    rng = random.Random(29)
    # Given 10,000 requests over about eight simulated minutes: addresses in a few thousand /24s,
    # skewed towards some (so the range cache answers many), and one in twenty malformed
    networks = [rng.randrange(1 << 24) for _ in range(3_000)]
    statuses: dict[int, int] = {}
    for _ in range(REQUESTS):
        clock.now += rng.uniform(0.0, 0.1)
        if rng.random() < 0.05:
            status = get(f"/v1/ip/999.{rng.randrange(256)}.1.1")
        else:
            network = networks[min(int(rng.paretovariate(1.1)) - 1, len(networks) - 1)]
            address = (network << 8) | rng.randrange(256)
            status = get(f"/v1/ip/{'.'.join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))}")
        statuses[status] = statuses.get(status, 0) + 1
    elapsed = clock.now - 1_000.0
    during = len(lines.written)
    # And the container shuts down (Lambda's SIGTERM, the local server's stop)
    observability.minute_metrics.publish()

    # Then while it served, no two lines came within a minute, and there was at most one a minute
    times = [at for at, _ in lines.written[:during]]
    assert all(later - earlier >= MINUTE for earlier, later in itertools.pairwise(times))
    assert 1 <= during <= elapsed // MINUTE
    assert len(lines.written) == during + 1
    # And every line is one EMF document of the lookup's metrics, all of them, in our namespace
    for _, line in lines.written:
        [directive] = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == METRICS_NAMESPACE
        assert directive["Dimensions"] == [["service"]]
        assert line["service"] == "lookup"
        assert [metric["Name"] for metric in directive["Metrics"]] == list(LOOKUP_METRICS)
    # And the counts add up: every answer once, by family; every valid address a lookup
    valid = statuses[200]
    assert statuses == {200: valid, 400: REQUESTS - valid}
    assert lines.total(METRIC_ANSWERS[2]) == valid
    assert lines.total(METRIC_ANSWERS[4]) == REQUESTS - valid
    assert lines.total(METRIC_ANSWERS[3]) == lines.total(METRIC_ANSWERS[5]) == 0
    assert lines.total(METRIC_LOOKUPS) == valid
    # And one dataset: each lookup is a cache hit or a miss, and each miss the one Query the store saw
    hits, misses = lines.total(METRIC_CACHE_HITS), lines.total(METRIC_CACHE_MISSES)
    assert hits + misses == valid
    assert lines.total(METRIC_QUERIES) == misses == store.queries
    assert hits > valid // 2  # the skew is there: the cache answers most of them


def test_nothing_is_written_for_a_minute_with_nothing_counted(
    container: tuple[SimulatedClock, Lines, SlashTwentyFourStore],
) -> None:
    clock, lines, _ = container
    clock.now += 10 * MINUTE
    observability.minute_metrics.publish_if_due()
    assert lines.written == []
    # A request after ten idle minutes publishes its own count at once
    get("/v1/ip/1.1.1.1")
    assert len(lines.written) == 1
    assert (lines.total(METRIC_LOOKUPS), lines.total(METRIC_ANSWERS[2])) == (1, 1)


def test_sigterm_publishes_what_is_left_then_does_what_it_did_before(
    container: tuple[SimulatedClock, Lines, SlashTwentyFourStore],
) -> None:
    _, lines, _ = container
    received: list[int] = []
    original = signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    try:
        observability.publish_at_shutdown()
        get("/v1/ip/1.1.1.1")
        assert lines.written == []  # not a minute yet
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, original)
    assert lines.total(METRIC_LOOKUPS) == 1
    assert received == [signal.SIGTERM]


def test_with_metrics_off_nothing_is_written_and_the_counts_do_not_pile_up(
    container: tuple[SimulatedClock, Lines, SlashTwentyFourStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, lines, _ = container
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    for _ in range(3):
        get("/v1/ip/1.1.1.1")
        clock.now += MINUTE
    assert lines.written == []
    assert dependencies.counts.take() == {}
