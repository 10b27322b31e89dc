"""The lookup API's resolver: CORS, the one place errors become responses, and the docs.

Every front's event reaches one route table (``LookupResolver``); the routes (``routes/``) raise
domain errors and ``NotModified``, and the exception handlers below turn those into each API
family's own error shape. Where no front checked the key (the url and edge fronts), the key check
(``fronts.key_check``) refuses the request before its route runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from http import HTTPStatus
from importlib import resources
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, ResponseBuilder, Route
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from ipmeta.api.fronts import key_check
from ipmeta.api.fronts.credentials import is_page_path
from ipmeta.api.fronts.front_events import FrontEvent, as_get, front_event, method_of
from ipmeta.api.models import ERROR_CODES, ErrorResponse
from ipmeta.api.observability import logger
from ipmeta.api.responses import NotModified
from ipmeta.api.routes import (
    dataset_routes,
    geoip2_routes,
    ip_routes,
    ipinfo_routes,
    page_routes,
    range_routes,
)
from ipmeta.schema.errors import FieldNotFound, InvalidIpAddress, IpmetaError
from ipmeta.schema.ips import parse_ip
from ipmeta.schema.settings import ApiSettings
from ipmeta.shapes import geoip2_document, ipinfo_document

TITLE = "ipmeta"
API_VERSION = "1.0.0"


def cors_config(settings: ApiSettings) -> CORSConfig | None:
    if not settings.cors_origins:
        return None
    return CORSConfig(
        allow_origin=settings.cors_origins[0],
        extra_origins=list(settings.cors_origins[1:]),
        allow_headers=["If-None-Match", "X-Api-Key", "Authorization"],
        expose_headers=["ETag"],
        max_age=600,
    )


__all__ = ["app", "logger"]


class LookupResolver(APIGatewayRestResolver):
    """One resolver and one route table for every front's event (``ipmeta.api.fronts.front_events``).

    - **Every front's event**: REST's proxy event (payload 1.0) and payload 2.0 (HTTP API,
      function URL) are each read by their own event class, chosen per event, and answered in
      their own response shape (powertools serializes by the event's class). One resolver keeps
      one route table, one set of exception handlers and one OpenAPI document for all fronts.
    - **HEAD as GET without the body**: the fronts pass HEAD through to the function, and
      powertools routes it nowhere (every GET route answered 404). A HEAD gets the GET's status
      and headers (ETag, Cache-Control, 304s included) and no body; no Content-Length is
      claimed for the body left out.
    - **The key, where no front checked it** (``ipmeta.api.fronts.key_check``): refused before the
      route, its validation and any read, in the answer's family shape.
    """

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = r"^{}/*\Z") -> re.Pattern[str]:
        # As powertools' REST resolver compiles routes, but ending in \Z: ``$`` also matches
        # before a final newline, which routed /v1/ip/1.1.1.1%0A as 1.1.1.1.
        pattern: re.Pattern[str] = ApiGatewayResolver._compile_regex(rule, r"^{}/*\Z")
        return pattern

    def _to_proxy_event(self, event: dict[str, Any]) -> BaseProxyEvent:
        return front_event(event, self._json_body_deserializer)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        if method_of(event) != "HEAD":
            return super().resolve(event, context)
        response = super().resolve(as_get(event), context)
        return {**response, "body": "", "isBase64Encoded": False}

    def _resolve(self) -> ResponseBuilder[Any]:
        event = cast(FrontEvent, self.current_event)
        refusal = key_check.current().refusal(event, getattr(self.lambda_context, "invoked_function_arn", ""))
        if refusal is None:
            return super()._resolve()
        return self._refuse(refusal)

    def _refuse(self, error: IpmetaError) -> ResponseBuilder[Any]:
        """Answer ``error`` through a route of its own, as powertools answers an unknown path: the
        exception handlers shape it and CORS applies."""

        def refused() -> Response[Any]:
            raise error

        path = self.current_event.path
        route = Route(
            method=self.current_event.http_method.upper(),
            path=path,
            rule=self._compile_regex(r".*"),
            func=refused,
            cors=self._cors_enabled,
            compress=False,
        )
        self.append_context(_route=route, _path=path)  # type: ignore[no-untyped-call]
        return self._call_route(route, {})


app = LookupResolver(enable_validation=True, cors=cors_config(ApiSettings.from_environment()))
app.include_router(ip_routes.router)
app.include_router(dataset_routes.router)
app.include_router(range_routes.router)
app.include_router(geoip2_routes.router)
# Before ipinfo's: `/` and `/static/...` are the page's, whether or not ipinfo answers at the root.
app.include_router(page_routes.router)
# Last: its root routes (``/<ip>/<field>``) would match the other APIs' paths.
app.include_router(ipinfo_routes.router)


# -- errors: the one place they become responses ----------------------------------------


def is_ipinfo_path(path: str) -> bool:
    """The ipinfo routes' paths: ``/ipinfo...``, and with ipinfo at the root every path the
    other APIs and the lookup page do not own."""
    if path == ipinfo_document.PATH_PREFIX or path.startswith(ipinfo_document.PATH_PREFIX + "/"):
        return True
    owned = path.startswith(("/v1/", "/geoip/")) or path == "/v1" or is_page_path(path)
    return not owned and ipinfo_routes.served_at_root()


def error_response(status: int, code: str, message: str) -> Response[Any]:
    """The error in the shape of the API the path belongs to: MaxMind's ``{code, error}`` under
    ``/geoip/``, ipinfo's ``{status, error: {title, message}}`` on its routes, else ours."""
    path = app.current_event.path
    if path.startswith("/geoip/"):
        return Response(
            status_code=geoip2_document.ERROR_STATUSES.get(code, status),
            content_type=geoip2_document.ERROR_CONTENT_TYPE,
            body=json.dumps(geoip2_document.error_body(code, message)),
        )
    if is_ipinfo_path(path):
        status, title, text = (
            ipinfo_document.WRONG_IP if code == "IP_ADDRESS_INVALID" else (status, code, message)
        )
        return Response(
            status_code=status,
            content_type=content_types.APPLICATION_JSON,
            body=json.dumps(ipinfo_document.error_body(status, title, text)),
        )
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=ErrorResponse(code=code, message=message).model_dump(),
    )


@app.exception_handler(IpmetaError)
def handle_domain_error(error: IpmetaError) -> Response[Any]:
    return error_response(error.status, error.code, error.message)


@app.exception_handler(NotModified)
def handle_not_modified(error: NotModified) -> Response[str]:
    return Response(status_code=HTTPStatus.NOT_MODIFIED, body="", headers=error.headers)


#: Query parameters whose failures answer with a code of their own; any other is REQUEST_INVALID.
PARAMETER_ERRORS: dict[str, type[IpmetaError]] = range_routes.PARAMETER_ERRORS


@app.exception_handler(RequestValidationError)
def handle_validation_error(error: RequestValidationError) -> Response[Any]:
    """Powertools' validation of declared parameters: 400 with the parameter's own code, never 422."""
    problems = error.errors()
    described = "; ".join(
        f"{'.'.join(str(part) for part in problem.get('loc', ()))}: {problem.get('msg', '')}"
        + (f" (got {str(problem['input'])[:40]!r})" if problem.get("input") is not None else "")
        for problem in problems
    )[:500]
    names = [str(problem.get("loc", ("", ""))[-1]) for problem in problems]
    specific = next((PARAMETER_ERRORS[name] for name in names if name in PARAMETER_ERRORS), None)
    if specific is not None:
        failure = specific(described)
        return error_response(failure.status, failure.code, failure.message)
    return error_response(HTTPStatus.BAD_REQUEST, "REQUEST_INVALID", described)


@app.exception_handler(Exception)
def handle_unexpected_error(error: Exception) -> Response[Any]:
    logger.exception("unhandled error", extra={"path": app.current_event.path})
    return error_response(
        HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL_ERROR", "unexpected error; the logs have the details"
    )


#: How much of an unknown path its 404 repeats.
MAX_ECHOED_PATH = 200
#: Paths the IP routes would match if powertools' path pattern accepted every
#: character; what it refuses (``"``, ``#``, ``\\``, some non-ASCII) is no IP either.
_IP_PATH = re.compile(r"^/v1/ip/(?P<ip>[^/]+)(?:/(?P<field>[^/]+))?/?$")
_OTHER_IP_PATHS = (
    re.compile(r"^/geoip/v2\.1/(?:country|city|insights)/(?P<ip>[^/]+)/?$"),
    re.compile(r"^/ipinfo/(?P<ip>[^/]+)(?:/[^/]+)?/?$"),
)


@app.not_found
def handle_unknown_route(_: Exception) -> Response[Any]:
    event = app.current_event
    match = _IP_PATH.match(event.path) if event.http_method == "GET" else None
    other = next((found for pattern in _OTHER_IP_PATHS if (found := pattern.match(event.path))), None)
    try:
        if match:
            parse_ip(match["ip"])
            if match["field"]:
                raise FieldNotFound(f"no field {match['field'][:64]!r}")
        elif other and event.http_method == "GET":
            parse_ip(other["ip"])
    except (InvalidIpAddress, FieldNotFound) as error:
        return error_response(error.status, error.code, error.message)
    # The path is the client's: echo a prefix, not 60 KB of it.
    path = event.path if len(event.path) <= MAX_ECHOED_PATH else event.path[:MAX_ECHOED_PATH] + "..."
    return error_response(HTTPStatus.NOT_FOUND, "ROUTE_NOT_FOUND", f"no route for {event.http_method} {path}")


# -- the contract: OpenAPI document and Swagger UI ---------------------------------------

DESCRIPTION = (
    "IP metadata lookups from versioned datasets. Every error body is `{code, message}`; the codes:\n\n"
    + "\n".join(f"- `{code}`: {meaning}" for code, meaning in ERROR_CODES.items())
)
#: Query parameters the lookup routes read from the event themselves, by operationId.
_QUERY_PARAMETERS = ip_routes.QUERY_PARAMETERS


@cache
def openapi_document() -> dict[str, Any]:
    """Generated by powertools from the routes and models, once per container.

    Our routes never answer 422 (validation errors are 400 with a code), so the
    422 entries powertools adds to validated routes are dropped; the query
    parameters the lookup routes read themselves (``ip_routes.QUERY_PARAMETERS``
    says why) are added.
    """
    schema = app.get_openapi_schema(title=TITLE, version=API_VERSION, description=DESCRIPTION)
    document: dict[str, Any] = json.loads(schema.model_dump_json(by_alias=True, exclude_none=True))
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            extra = _QUERY_PARAMETERS.get(operation.get("operationId", ""), [])
            operation["parameters"] = [*operation.get("parameters", []), *extra]
            if not operation["parameters"]:
                del operation["parameters"]
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for response in responses.values():
                if response.get("content") == {}:
                    del response["content"]
    for unused in ("HTTPValidationError", "ValidationError"):
        document.get("components", {}).get("schemas", {}).pop(unused, None)
    return document


def _base_path() -> str:
    """``/prod`` when called through a REST stage URL; nothing through a custom domain, the HTTP
    API's ``$default`` stage or a function URL."""
    return page_routes.stage_prefix(app.current_event)


@cache
def openapi_json(base_path: str) -> str:
    return json.dumps({**openapi_document(), "servers": [{"url": base_path or "/"}]})


#: The package that ships Swagger UI's JS and CSS with powertools.
SWAGGER_UI_PACKAGE = "aws_lambda_powertools.event_handler.openapi.swagger_ui"


@cache
def docs_html(base_path: str) -> str:
    """Swagger UI with its JS and CSS inlined (powertools ships them): no CDN needed.

    Not ``app.enable_swagger``: it imports the Swagger UI module and the OpenAPI
    models when the route is registered, which measured 50-70 ms on every cold
    start of the lookup (a 2-core dev machine, after the handler's own imports),
    and it rebuilds the spec on every request. The docs page is rare; it pays
    for its imports on its first request instead.
    """
    from aws_lambda_powertools.event_handler.openapi.swagger_ui import generate_swagger_html

    assets = resources.files(SWAGGER_UI_PACKAGE)
    js = (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8")
    css = (assets / "swagger-ui.min.css").read_text(encoding="utf-8")
    spec = openapi_json(base_path).replace("</", "<\\/")
    return generate_swagger_html(spec, js, css, "", None)


@app.get("/v1/openapi.json", include_in_schema=False)
def get_openapi() -> Response[str]:
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(_base_path())
    )


@app.get("/v1/docs", include_in_schema=False)
def get_docs() -> Response[str]:
    # The page links its own document as ?format=json, as powertools' Swagger route does.
    if (app.current_event.query_string_parameters or {}).get("format") == "json":
        return get_openapi()
    return Response(status_code=200, content_type="text/html; charset=utf-8", body=docs_html(_base_path()))
