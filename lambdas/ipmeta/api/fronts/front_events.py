"""The events each front hands the function, read the same way: one route table serves them all.

- **REST** (``apiType=rest``): API Gateway's proxy event, payload 1.0 (``headers`` and
  ``multiValueHeaders``, the query in both maps, ``requestContext.identity.sourceIp``).
- **HTTP API** (``apiType=http``): payload 2.0. Header names lower-cased and a repeated
  header's values joined with commas; the query in ``rawQueryString``, and joined the same way
  in ``queryStringParameters``; the caller in ``requestContext.http.sourceIp``; ``routeKey``
  names the route matched (``GET /v1/{proxy+}``). API Gateway has decoded the path.
- **Function URL** (``apiType=url``): payload 2.0 too, ``routeKey`` ``$default``, and the path
  as the client sent it, still percent-encoded (``rawPath``).

Each event class answers what the routes read (the path, the caller, the query's values) in
one form, so no route asks which front it is behind. A repeated query parameter takes its last
value on every front, as REST's ``queryStringParameters`` does: payload 2.0's comma-joined
value is read from ``rawQueryString`` instead, where ``?a=1,2`` and ``?a=1&a=2`` differ.
Samples of each shape: ``tests/fixtures/events/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, Final
from urllib.parse import parse_qsl, unquote

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent, APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

#: ``version`` of a payload 2.0 event (HTTP API and function URL); REST's has none, or ``1.0``.
PAYLOAD_V2: Final = "2.0"
#: The one ``routeKey`` of a function URL's events; an HTTP API names the route it matched.
FUNCTION_URL_ROUTE: Final = "$default"


def query_values(raw_query: str) -> dict[str, tuple[str, ...]]:
    """Each query parameter's values in order (``?a=1&a=2``), decoded, from a raw query string."""
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True) if raw_query else ():
        values.setdefault(name, []).append(value)
    return {name: tuple(found) for name, found in values.items()}


class RestEvent(APIGatewayProxyEvent):
    """API Gateway's REST proxy event (and an HTTP API's payload 1.0, the same shape)."""

    @property
    def source_ip(self) -> str:
        return self.request_context.identity.source_ip

    @property
    def key_inputs(self) -> tuple[Any, Any, Any, Any]:
        """What ``credentials.request_key`` reads: headers and query, single- and multi-value."""
        return (
            self.get("headers"),
            self.get("queryStringParameters"),
            self.get("multiValueHeaders"),
            self.get("multiValueQueryStringParameters"),
        )


class HttpApiEvent(APIGatewayProxyEventV2):
    """Payload 2.0 as an HTTP API sends it: the path already decoded by API Gateway."""

    @property
    def source_ip(self) -> str:
        return self.request_context.http.source_ip

    @cached_property
    def _query(self) -> dict[str, tuple[str, ...]]:
        return query_values(self.get("rawQueryString") or "")

    @property
    def query_string_parameters(self) -> dict[str, str]:
        return {name: values[-1] for name, values in self._query.items()}

    @property
    def multi_value_query_string_parameters(self) -> dict[str, list[str]]:
        return {name: list(values) for name, values in self._query.items()}

    @property
    def resolved_query_string_parameters(self) -> dict[str, list[str]]:
        # As REST's: each parameter's own values, never a value split at its commas.
        return self.multi_value_query_string_parameters

    @property
    def key_inputs(self) -> tuple[Any, Any, Any, Any]:
        # No multi-value headers: a repeated header arrives joined with commas, which no key holds.
        return (
            self.get("headers"),
            self.query_string_parameters,
            None,
            self.multi_value_query_string_parameters,
        )


class FunctionUrlEvent(HttpApiEvent):
    """Payload 2.0 as a function URL sends it: the path percent-encoded, as the client wrote it."""

    @property
    def path(self) -> str:
        return unquote(self.raw_path)


FrontEvent = RestEvent | HttpApiEvent


def front_event(event: Mapping[str, Any], json_deserializer: Any) -> BaseProxyEvent:
    """The class of ``event``, told by its shape: payload 2.0 from a function URL or an HTTP API, or REST."""
    data = dict(event) if not isinstance(event, dict) else event
    if data.get("version") != PAYLOAD_V2:
        return RestEvent(data, json_deserializer)
    if data.get("routeKey") == FUNCTION_URL_ROUTE:
        return FunctionUrlEvent(data, json_deserializer)
    return HttpApiEvent(data, json_deserializer)


def method_of(event: Mapping[str, Any]) -> str | None:
    """The request's method in a raw event of either payload."""
    if event.get("version") == PAYLOAD_V2:
        return str(((event.get("requestContext") or {}).get("http") or {}).get("method") or "") or None
    method = event.get("httpMethod")
    return str(method) if method else None


def as_get(event: Mapping[str, Any]) -> dict[str, Any]:
    """The same request as a GET (a HEAD is answered as its GET without the body)."""
    context = dict(event.get("requestContext") or {})
    if event.get("version") == PAYLOAD_V2:
        context["http"] = {**(context.get("http") or {}), "method": "GET"}
        return {**event, "requestContext": context}
    context["httpMethod"] = "GET"
    return {**event, "httpMethod": "GET", "requestContext": context}
