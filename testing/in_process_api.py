"""The API asked in this process: a GET through the real Lambda handler, as API Gateway would send it.

The handler answers from whatever ``ipmeta.api.dependencies`` holds, so the
caller installs its store first. ``list_all`` follows ``/v1/ranges`` page by
page, as a client would.
"""

from __future__ import annotations

import json
from typing import Any

from ipmeta_cli.server import LocalLambdaContext, proxy_event


def get(path: str) -> tuple[int, dict[str, Any]]:
    # The app reads its settings from the environment when first imported: after the caller set them.
    from ipmeta.api.handler import handler

    response = handler(proxy_event("GET", path, {}, b"", "127.0.0.1"), LocalLambdaContext())
    return int(response["statusCode"]), json.loads(response["body"])


def list_all(value: str, limit: int, field: str = "asn") -> tuple[list[tuple[str, str]], int]:
    """Every range of ``field`` = ``value``, ``limit`` to a page, and how many pages that took."""
    found: list[tuple[str, str]] = []
    token: str | None = None
    pages = 0
    while True:
        path = f"/v1/ranges?field={field}&value={value}&limit={limit}" + (f"&next={token}" if token else "")
        status, body = get(path)
        assert status == 200, body
        found.extend((entry["start"], entry["end"]) for entry in body["ranges"])
        pages += 1
        token = body["next"]
        if token is None:
            return found, pages
