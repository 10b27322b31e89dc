"""The API asked in this process: the one door the tests and the benchmarks use to reach the real
Lambda handler without a server.

``invoke(front, method, path, headers, body)`` builds the event ``front`` would send (the same
builders the local server uses, ``ipmeta_cli.events.EVENT_BUILDERS``) and returns the handler's
response as Lambda would. ``handle`` is its last step, for a test that must shape the event itself
(a real sample, a stage, a mutated field). The handler answers from whatever
``ipmeta.api.dependencies`` holds, so the caller installs its store first. ``get`` is a REST GET
read as JSON; ``list_all`` follows ``/v1/ranges`` page by page, as a client would.
"""

from __future__ import annotations

import json
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.schema.settings import Front
from ipmeta_cli.events import EVENT_BUILDERS, Headers
from ipmeta_cli.server import LocalLambdaContext

#: The caller's address unless a test names another (TEST-NET-1).
CALLER = "192.0.2.1"


def handle(event: dict[str, Any], context: LocalLambdaContext | None = None) -> dict[str, Any]:
    """The real handler's response to ``event``, invoked in this process as Lambda invokes it."""
    # The app reads its settings from the environment when first imported: after the caller set them.
    from ipmeta.api.handler import handler

    response: dict[str, Any] = handler(event, cast(LambdaContext, context or LocalLambdaContext()))
    return response


def invoke(
    front: Front,
    method: str,
    path: str,
    headers: Headers = (),
    body: bytes = b"",
    *,
    caller: str = CALLER,
    context: LocalLambdaContext | None = None,
) -> dict[str, Any]:
    """One request through the real handler, in ``front``'s event; the response in its shape."""
    return handle(EVENT_BUILDERS[front](method, path, headers, body, caller), context)


def get(path: str) -> tuple[int, dict[str, Any]]:
    response = invoke(Front.REST, "GET", path, caller="127.0.0.1")
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
