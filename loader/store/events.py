"""The change event a consumer (a cache, a downstream copy) reacts to after an activation.

In AWS it goes to the EventBridge bus named by ``IPMETA_EVENT_BUS_NAME``;
without one (locally) it is a structured log line.

``DatasetActivated``'s detail: ``version`` (``v7``), ``previous``, ``items``,
``rows``, ``sha256``, and with ``exportMmdb`` on, ``export``: ``{"bucket",
"key", "format", "bytes", "ranges", "ipv6_left_out", "seconds"}``, the
MaxMind DB of exactly this version (``exports/v7.mmdb``), written before the
version went live.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Final

from loader.settings import ENV_EVENT_BUS_NAME

log = logging.getLogger(__name__)

EVENT_SOURCE: Final = "ipmeta.loader"
DETAIL_TYPE_ACTIVATED: Final = "DatasetActivated"


class EventNotDelivered(RuntimeError):
    pass


def emit_activated(detail: Mapping[str, Any], *, events_client: Any = None) -> dict[str, Any]:
    """Announce a new active version; returns the entry as sent (for logs and tests)."""
    entry = {"Source": EVENT_SOURCE, "DetailType": DETAIL_TYPE_ACTIVATED, "Detail": json.dumps(dict(detail))}
    bus = os.environ.get(ENV_EVENT_BUS_NAME)
    if not bus:
        log.info("event %s", json.dumps({"detail-type": DETAIL_TYPE_ACTIVATED, "detail": dict(detail)}))
        return entry
    entry["EventBusName"] = bus
    if events_client is None:
        import boto3

        events_client = boto3.client("events")
    response = events_client.put_events(Entries=[entry])
    # PutEvents answers 200 even when an entry fails; the failure is per entry.
    if response.get("FailedEntryCount", 0):
        failure = response["Entries"][0]
        raise EventNotDelivered(f"{failure.get('ErrorCode')}: {failure.get('ErrorMessage')}")
    return entry
