"""HTTP conventions shared by the routes: error codes, caching headers, documented responses."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from ipmeta.api.models import ERROR_CODES, ErrorResponse, LookupResponse
from ipmeta.shapes import batch_json, exact_json

__all__ = ["ERROR_CODES", "NotModified", "cache_control", "cache_headers", "etag_matches"]


class NotModified(Exception):
    """The client's cached copy is current: answered as 304 where errors are mapped."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("not modified")
        self.headers = headers


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison: ``W/`` prefixes are ignored, ``*`` matches anything."""
    if not if_none_match:
        return False
    candidates = [candidate.strip() for candidate in if_none_match.split(",")]
    return any(candidate in ("*", etag, "W/" + etag) for candidate in candidates)


def cache_control(max_age: int, *, private: bool = False) -> dict[str, str]:
    """Cache-Control of an answer: ``public`` for an address's, ``private`` for the caller's (a
    shared cache, CloudFront behind ``edge`` among them, must not hand it to another caller).

    ``Vary: Origin``: with several CORS origins the answer names the caller's
    origin, so a shared cache must not hand one origin's copy to another.
    """
    scope = "private" if private else "public"
    return {"Cache-Control": f"{scope}, max-age={max_age}", "Vary": "Origin"}


def cache_headers(etag: str, max_age: int, *, private: bool = False) -> dict[str, str]:
    """ETag and Cache-Control of an answer (``cache_control``)."""
    return {"ETag": etag, **cache_control(max_age, private=private)}


def _error(description: str) -> Any:
    return {"description": description, "content": {"application/json": {"model": ErrorResponse}}}


#: The documented answers by status; an empty content map keeps powertools from
#: documenting the route's return type as the body of a 304.
STANDARD_RESPONSES: dict[int, Any] = {
    304: {"description": "Not modified: the If-None-Match ETag is current", "content": {}},
    400: _error("Invalid input; the code says which rule was broken"),
    413: _error("BATCH_ANSWER_TOO_LARGE: the answer would not fit a Lambda response; send fewer IPs"),
    404: _error("IP_ADDRESS_NOT_FOUND, IP_ADDRESS_RESERVED, FIELD_NOT_FOUND or VERSION_NOT_FOUND"),
    500: _error("INTERNAL_ERROR"),
    503: _error("NO_DATASET: nothing is loaded yet"),
}


def documented(
    ok: str, *statuses: int, ok_content: Any = None, unavailable: str | None = None
) -> dict[int, Any]:
    """The ``responses`` of a route: 200 described by ``ok`` plus the standard ``statuses``.

    Typed ``Any`` because powertools' TypedDicts reject the pydantic ``model`` key it accepts.
    """
    responses: dict[int, Any] = {200: {"description": ok}}
    if ok_content is not None:
        responses[200]["content"] = ok_content
    responses.update({status: STANDARD_RESPONSES[status] for status in statuses})
    if unavailable is not None:
        responses[503] = _error(unavailable)
    return responses


def json_model(model: Any) -> dict[str, Any]:
    """The 200 content of a route that writes its own JSON body (``exact_json``): the model it follows."""
    return {content_types.APPLICATION_JSON: {"model": model}}


def json_answer(body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    """A 200 JSON answer written by ``exact_json``: numbers exact, bytes in base64.

    Its text is final: powertools validates a ``str`` (nothing to convert) and sends it as it is.
    """
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=exact_json.dumps(body),
        headers=headers,
    )


def batch_answer(answers: dict[str, Any]) -> Response[str]:
    """A batch's 200, joined by ``batch_json`` (which refuses an answer no Lambda response can carry)."""
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=batch_json.join(answers)
    )


LOOKUP_RESPONSES = documented(
    "The range holding the address, its data and the answering version",
    304,
    400,
    404,
    500,
    503,
    ok_content=json_model(LookupResponse),
)
