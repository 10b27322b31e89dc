"""What the feed tests share: an HTTP client that never sleeps, and the checks every refusal must pass."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loader.errors import LoadError
from loader.feeds.feed import Feed, FeedStateStore
from loader.feeds.fetch import (
    FeedCheck,
    FetchedRelease,
    FetchLimits,
    Progress,
    check_feed,
    fetch_release,
    record_loaded,
)
from loader.feeds.http_client import HttpClient, HttpSettings
from loader.feeds.verify import DirectorySinks
from loader.store.feed_states import FeedStates
from tests.fakes.vendors import FakeServer


@dataclass
class Sleeps:
    """The backoff clock: records each wait instead of waiting."""

    waits: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def quick_http(sleeps: Sleeps, *, timeout: float = 2.0, attempts: int = 3) -> HttpClient:
    """Short timeouts and no real sleep; the jitter fixed at its middle, so waits are exact."""
    settings = HttpSettings(timeout_seconds=timeout, max_attempts=attempts, backoff_seconds=1.0)
    return HttpClient(settings, sleep=sleeps, jitter=lambda: 0.5)


def files_in(folder: Path) -> list[str]:
    """Every file left in ``folder``, partial ones included."""
    return sorted(path.name for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


def assert_refused_cleanly(
    error: pytest.ExceptionInfo[LoadError], code: str, secrets: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A stable code, and no secret in the message, the error's fields, or any log record."""
    assert error.value.code == code
    text = " ".join([str(error.value), repr(error.value), repr(error.value.__dict__)])
    logged = " ".join(
        f"{record.getMessage()} {record.__dict__}"
        for record in caplog.records
        if record.levelno >= logging.DEBUG
    )
    for secret in secrets:
        assert secret not in text
        assert secret not in logged


def check_then_fetch(
    feed: Feed,
    states: FeedStateStore,
    sinks: DirectorySinks,
    *,
    dataset: str,
    workdir: Path | None = None,
    limits: FetchLimits | None = None,
    progress: Progress | None = None,
) -> FeedCheck | FetchedRelease:
    """What ``ipmeta update`` and the Fetch state do first: the check, then the fetch if it changed."""
    check = check_feed(feed, states)
    if check.unchanged:
        return check
    return fetch_release(
        feed, check.release, sinks, dataset=dataset, workdir=workdir, limits=limits, progress=progress
    )


def run(feed: Feed, states: FeedStates, out: Path) -> FeedCheck | FetchedRelease:
    """One scheduled run: the check, and the fetch into ``out`` if the release changed."""
    return check_then_fetch(feed, states, DirectorySinks(out), dataset="test", workdir=out.parent)


def fetched_then_recorded(feed: Feed, states: FeedStates, out: Path) -> FetchedRelease:
    """A run that fetched a release, which the load then activated."""
    fetched = run(feed, states, out)
    assert isinstance(fetched, FetchedRelease)
    record_loaded(states, fetched)
    return fetched


def rerun_unchanged(feed: Feed, states: FeedStates, out: Path, *servers: FakeServer) -> FeedCheck:
    """The next run, expected to find the same release: nothing fetched; the servers saw only its requests."""
    for server in servers:
        server.forget()
    again = run(feed, states, out)
    assert isinstance(again, FeedCheck)
    assert again.unchanged
    assert files_in(out) == []
    return again
