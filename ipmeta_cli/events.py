"""The event each front hands the lookup function, built from an HTTP request (``ipmeta serve --front``).

- ``rest`` (``proxy_event``): API Gateway's REST proxy event for the route family's ``{proxy+}``
  resource, payload 1.0: the path decoded, headers and query in single- and multi-value maps.
- ``http`` (``http_api_event``): an HTTP API's payload 2.0 for the route ``METHOD /family/{proxy+}``:
  header names lower-cased, a repeated header's values joined with commas, the query raw in
  ``rawQueryString`` and joined the same way in ``queryStringParameters``; API Gateway decodes
  the path, cookies travel apart.
- ``url`` (``function_url_event``): a function URL's payload 2.0: ``routeKey`` ``$default``, the
  path as the client wrote it (percent-encoded), no path parameters, no stage variables.

Each builder keeps the keys of a real sample of its front (``tests/fixtures/events/``, from
powertools' test events), which ``tests/unit/test_front_events.py`` compares.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from ipmeta.api.fronts.credentials import route_of_path
from ipmeta.schema.settings import Front

#: The REST front's stage, as behind a custom domain: not part of the URL.
STAGE: Final = "local"
#: The payload 2.0 fronts' stage (the HTTP API's ``$default``; a function URL has no other).
DEFAULT_STAGE: Final = "$default"
LOCAL_DOMAIN: Final = "localhost"

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def header_pairs(headers: Headers) -> list[tuple[str, str]]:
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


def query_parameters(query: str) -> dict[str, list[str]]:
    """Each query parameter's values in order (``?a=1&a=2``), as API Gateway's multi-value map."""
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True) if query else []:
        values.setdefault(name, []).append(value)
    return values


def _body(body: bytes) -> tuple[str | None, bool]:
    if not body:
        return None, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode(), True


def proxy_event(method: str, raw_path: str, headers: Headers, body: bytes, source_ip: str) -> dict[str, Any]:
    """An API Gateway REST proxy event for ``/v1/{proxy+}``, or ``/{proxy+}`` for the other APIs."""
    split = urlsplit(raw_path)
    path = unquote(split.path)
    multi_query = query_parameters(split.query)
    single = dict(header_pairs(headers))
    multi_headers: dict[str, list[str]] = {}
    for name, value in header_pairs(headers):
        multi_headers.setdefault(name, []).append(value)
    text_body, is_base64 = _body(body)
    versioned = path == "/v1" or path.startswith("/v1/")
    resource = "/v1/{proxy+}" if versioned else "/{proxy+}"
    proxy = (
        (path.removeprefix("/v1/") if path.startswith("/v1/") else None) if versioned else path.lstrip("/")
    )
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": single,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": proxy} if proxy else None,
        "stageVariables": None,
        "requestContext": _rest_context(method, path, resource, source_ip, single.get("User-Agent")),
        "body": text_body,
        "isBase64Encoded": is_base64,
    }


#: The caller's identity in a REST event: all but the address and the agent are IAM's or Cognito's.
_NO_IDENTITY: Final = dict.fromkeys(
    (
        "accessKey",
        "accountId",
        "caller",
        "cognitoAuthenticationProvider",
        "cognitoAuthenticationType",
        "cognitoIdentityId",
        "cognitoIdentityPoolId",
        "principalOrgId",
        "user",
        "userArn",
    )
)


def _rest_context(method: str, path: str, resource: str, source_ip: str, agent: str | None) -> dict[str, Any]:
    now = time.time()
    request_id = str(uuid.uuid4())
    return {
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": LOCAL_DOMAIN,
        "domainPrefix": "local",
        "extendedRequestId": request_id,
        "httpMethod": method,
        "identity": {**_NO_IDENTITY, "sourceIp": source_ip, "userAgent": agent},
        # As behind a custom domain: the stage is not part of the URL, so the
        # OpenAPI servers entry (and Swagger UI's "Try it out") stays /v1/...
        "path": path,
        "protocol": "HTTP/1.1",
        "requestId": request_id,
        "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "requestTimeEpoch": int(now * 1000),
        "resourceId": "local",
        "resourcePath": resource,
        "stage": STAGE,
    }


def _payload_v2(
    method: str, raw_path: str, headers: Headers, body: bytes, source_ip: str, *, path: str, route_key: str
) -> dict[str, Any]:
    """Payload 2.0: what an HTTP API and a function URL share."""
    split = urlsplit(raw_path)
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in header_pairs(headers):
        lowered = name.lower()
        if lowered == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        joined[lowered] = f"{joined[lowered]},{value}" if lowered in joined else value
    query = query_parameters(split.query)
    text_body, is_base64 = _body(body)
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": split.query,
        "headers": joined,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "local",
            "domainName": joined.get("host", LOCAL_DOMAIN),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": joined.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route_key,
            "stage": DEFAULT_STAGE,
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": is_base64,
    }
    # Payload 2.0 leaves out what the request has not: no query, no cookies, no body.
    if query:
        event["queryStringParameters"] = {name: ",".join(values) for name, values in query.items()}
    if cookies:
        event["cookies"] = cookies
    if text_body is not None:
        event["body"] = text_body
    return event


def http_api_event(
    method: str, raw_path: str, headers: Headers, body: bytes, source_ip: str
) -> dict[str, Any]:
    """An HTTP API's payload 2.0 for route ``METHOD <family>/{proxy+}``; API Gateway decoded the path."""
    path = unquote(urlsplit(raw_path).path)
    route = route_of_path(path)
    event = _payload_v2(method, raw_path, headers, body, source_ip, path=path, route_key=f"{method} {route}")
    proxy = (
        path.removeprefix(route.removesuffix("{proxy+}"))
        if path.startswith(route.removesuffix("{proxy+}"))
        else ""
    )
    if proxy:
        event["pathParameters"] = {"proxy": proxy}
    return event


def function_url_event(
    method: str, raw_path: str, headers: Headers, body: bytes, source_ip: str
) -> dict[str, Any]:
    """A function URL's payload 2.0: ``$default``, and the path as the client sent it."""
    return _payload_v2(
        method,
        raw_path,
        headers,
        body,
        source_ip,
        path=urlsplit(raw_path).path or "/",
        route_key=DEFAULT_STAGE,
    )


#: The event each front hands the function for a request: ``EVENT_BUILDERS[front](method, path, ...)``.
EVENT_BUILDERS: Final = {Front.REST: proxy_event, Front.HTTP: http_api_event, Front.URL: function_url_event}
