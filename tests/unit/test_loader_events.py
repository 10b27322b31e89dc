"""The change event: EventBridge when a bus is named, a log line otherwise."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from loader.settings import ENV_EVENT_BUS_NAME
from loader.store import events


class FakeEvents:
    def __init__(self, failed: int = 0) -> None:
        self.failed = failed
        self.sent: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        self.sent.extend(Entries)
        if self.failed:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "AccessDenied", "ErrorMessage": "no"}]}
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}


def test_a_named_bus_receives_the_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_EVENT_BUS_NAME, "ipmeta")
    client = FakeEvents()
    events.emit_activated({"version": "v3", "items": 10}, events_client=client)
    assert client.sent == [
        {
            "Source": "ipmeta.loader",
            "DetailType": "DatasetActivated",
            "Detail": json.dumps({"version": "v3", "items": 10}),
            "EventBusName": "ipmeta",
        }
    ]


def test_a_failed_entry_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_EVENT_BUS_NAME, "ipmeta")
    with pytest.raises(events.EventNotDelivered, match="AccessDenied"):
        events.emit_activated({"version": "v3"}, events_client=FakeEvents(failed=1))


def test_without_a_bus_it_is_a_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(ENV_EVENT_BUS_NAME, raising=False)
    client = FakeEvents()
    with caplog.at_level(logging.INFO, logger="loader.store.events"):
        events.emit_activated({"version": "v3"}, events_client=client)
    assert client.sent == []
    assert '"version": "v3"' in caplog.text
