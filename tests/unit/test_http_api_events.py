"""The HTTP API front: its payload 2.0 events through the real lookup handler, and its key authorizer.

The HTTP API's integration sends payload format 2.0 (issue 27: a function URL's shape too),
and the one resolver reads it beside REST's proxy event (``ipmeta.api.fronts.front_events``). The
differences that could matter are spelled out in ``http_api_v2_event``: lower-case header names
joined with commas, the query in ``rawQueryString``, the caller under ``requestContext.http``, and
the ``$default`` stage, which puts no stage in the URL. The answers must be the REST front's,
byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlencode

import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.api import dependencies
from ipmeta.api.fronts import authorizer, usage_plan_authorizer
from ipmeta.api.fronts.credentials import REFUSAL_CONTEXT, KeyForm
from ipmeta.schema.settings import DEFAULT_API_KEY_CACHE_SECONDS
from ipmeta.store.dynamodb import Store
from ipmeta_cli.events import http_api_event, proxy_event
from ipmeta_cli.server import LocalLambdaContext
from testing.in_process_api import handle
from testing.stub_store import SlashTwentyFourStore
from tests.authorizer_events import (
    FAMILY_FORMS,
    GEOIP2_ROUTE,
    HTTP_KEYS,
    IDENTITY_HEADERS,
    IPINFO_ROUTE,
    NO_KEY,
    ROOT_ROUTE,
    V1_ROUTE,
    basic,
    carrying,
    http_authorizer_event,
    http_verdict,
    named_forms,
    rest_authorizer_event,
    rest_verdict,
)

CALLER = "198.51.100.23"
VERSION = 3


@pytest.fixture(autouse=True)
def store() -> Iterator[SlashTwentyFourStore]:
    stub = SlashTwentyFourStore({"asn": 64500, "org": "Example"}, VERSION)
    dependencies.install(dependencies.Dependencies(store=cast(Store, stub), pointer_cache_seconds=3600.0))
    yield stub
    dependencies.install(None)


def http_api_v2_event(
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    source_ip: str = CALLER,
) -> dict[str, Any]:
    """What an HTTP API's ``$default`` stage sends for route ``ANY /v1/{proxy+}`` with payload 2.0.

    Shaped on the example of "Create AWS Lambda proxy integrations for HTTP APIs" (API Gateway
    developer guide; ``tests/fixtures/events/http_api.json``): header names lower-cased, the route
    in ``routeKey``, the path without a stage, the caller in ``requestContext.http.sourceIp``.
    """
    target = path + ("?" + urlencode(dict(query)) if query else "")
    return http_api_event(method, target, dict(headers or {}), b"", source_ip)


def rest_event(method: str, path: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The REST front's event for the same request, as the local server builds it."""
    return proxy_event(method, path, dict(headers or {}), b"", CALLER)


def answer(response: Mapping[str, Any]) -> tuple[int, Any, dict[str, str]]:
    """Status, body and headers, from either front's response shape (REST's multi-value headers,
    payload 2.0's comma-joined ones)."""
    headers = {name: str(value) for name, value in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name] = ",".join(str(value) for value in values)
    body = response["body"]
    is_json = "application/json" in headers.get("Content-Type", "")
    return response["statusCode"], json.loads(body) if is_json else body, headers


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/ip/1.1.1.1", 200),
        ("GET", "/v1/ip/1.1.1.1/asn", 200),
        ("GET", "/v1/ip/999.1.1.1", 400),
        ("GET", "/v1/ip/1.1.1.1/nothing", 404),
        ("GET", "/v1/nowhere", 404),
        ("DELETE", "/v1/ip/1.1.1.1", 404),
    ],
)
def test_an_http_api_event_gets_the_rest_fronts_answer(method: str, path: str, status: int) -> None:
    # Given the same request through each front
    via_rest = handle(rest_event(method, path))
    via_http = handle(http_api_v2_event(method, path))
    # Then status, body and headers are the same, errors included
    assert answer(via_http) == answer(via_rest)
    assert via_http["statusCode"] == status


def test_error_bodies_keep_their_codes() -> None:
    response = handle(http_api_v2_event("GET", "/v1/ip/999.1.1.1"))
    assert json.loads(response["body"])["code"] == "IP_ADDRESS_INVALID"
    response = handle(http_api_v2_event("GET", "/v1/nowhere"))
    assert json.loads(response["body"])["code"] == "ROUTE_NOT_FOUND"


def test_query_parameters_reach_the_route() -> None:
    response = handle(http_api_v2_event("GET", "/v1/ip/1.1.1.1", query={"fields": "asn"}))
    assert json.loads(response["body"])["data"] == {"asn": 64500}


def test_the_caller_is_the_source_ip_of_the_request_context() -> None:
    response = handle(http_api_v2_event("GET", "/v1/ip", source_ip=CALLER))
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["ip"] == CALLER


def test_lower_case_header_names_still_revalidate() -> None:
    # Given the ETag of a first answer
    first = handle(http_api_v2_event("GET", "/v1/ip/1.1.1.1"))
    etag = first["headers"]["ETag"]
    # When it comes back lower-cased, as an HTTP API passes every header name
    second = handle(http_api_v2_event("GET", "/v1/ip/1.1.1.1", headers={"If-None-Match": etag}))
    # Then it is still recognised
    assert second["statusCode"] == 304


@pytest.mark.parametrize("path", ["/v1/openapi.json", "/v1/docs"])
def test_the_default_stage_puts_no_stage_in_the_documented_server_url(path: str) -> None:
    response = handle(http_api_v2_event("GET", path, query={"format": "json"}))
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["servers"] == [{"url": "/"}]


def test_a_rest_stage_url_keeps_its_stage_in_the_documented_server_url() -> None:
    # The REST front's stage is part of its URL: requestContext.path carries it
    event = rest_event("GET", "/v1/openapi.json")
    event["requestContext"].update(stage="api", path="/api/v1/openapi.json")
    assert json.loads(handle(event)["body"])["servers"] == [{"url": "/api"}]


# -- the authorizers: each route family reads its own form of key ------------------------------

K = "k" * 40  # the HTTP API secret's "default" client
B = "b" * 40  # its "client-b"
JUNK = "Basic not-base64!"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(authorizer, "api_keys", lambda: HTTP_KEYS)


@pytest.mark.parametrize(
    ("route", "headers", "query", "client"),
    [
        (V1_ROUTE, [("X-Api-Key", K)], [], "default"),
        (V1_ROUTE, [("x-api-key", B)], [], "client-b"),
        (V1_ROUTE, [("x-api-key", "k" * 39)], [], None),
        (V1_ROUTE, [("x-api-key", "7")], [], None),
        (V1_ROUTE, [("x-api-key", "")], [], None),
        (GEOIP2_ROUTE, [("Authorization", basic("123456", K))], [], "default"),
        (GEOIP2_ROUTE, [("Authorization", basic("123456", "wrong"))], [], None),
        (GEOIP2_ROUTE, [("authorization", K)], [], None),
        (IPINFO_ROUTE, [("authorization", "Bearer " + B)], [], "client-b"),
        (IPINFO_ROUTE, [], [("token", K)], "default"),
        (IPINFO_ROUTE, [], [("token", "nope")], None),
        (ROOT_ROUTE, [("authorization", "Bearer " + K)], [], "default"),
    ],
)
def test_the_http_authorizer_admits_exactly_the_keys_of_the_secret(
    route: str, headers: list[tuple[str, str]], query: list[tuple[str, str]], client: str | None
) -> None:
    assert http_verdict(http_authorizer_event(route, headers, query)) == client


def test_the_authorizer_reads_the_secret_its_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[str, Any] = {}

    def get_secret(name: str, **options: Any) -> dict[str, str]:
        asked.update(name=name, **options)
        return {"default": "k" * 40}

    monkeypatch.undo()
    monkeypatch.setenv(authorizer.ENV_API_KEYS_SECRET_ARN, "arn:aws:secretsmanager:us-east-1:1:secret:keys")
    monkeypatch.setattr("aws_lambda_powertools.utilities.parameters.get_secret", get_secret)
    assert authorizer.api_keys() == {"default": "k" * 40}
    assert asked == {
        "name": "arn:aws:secretsmanager:us-east-1:1:secret:keys",
        "transform": "json",
        "max_age": DEFAULT_API_KEY_CACHE_SECONDS,
    }


@pytest.mark.parametrize(
    ("route", "headers", "query"),
    [
        (V1_ROUTE, [("x-api-key", "K" * 20)], []),
        (GEOIP2_ROUTE, [("Authorization", basic("42", "K" * 20))], []),
        (IPINFO_ROUTE, [("Authorization", "Bearer " + "K" * 20)], []),
        (IPINFO_ROUTE, [], [("token", "K" * 20)]),
        (ROOT_ROUTE, [], [("token", "K" * 20)]),
    ],
)
def test_the_rest_authorizer_hands_each_familys_key_to_the_usage_plan(
    route: str, headers: list[tuple[str, str]], query: list[tuple[str, str]]
) -> None:
    event = rest_authorizer_event(route, headers, query)
    response = usage_plan_authorizer.handler(event, cast(LambdaContext, LocalLambdaContext()))
    assert response["usageIdentifierKey"] == "K" * 20
    assert response["principalId"] == usage_plan_authorizer.principal_of("K" * 20) != "K" * 20
    [statement] = response["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    # One cached answer serves every method of the stage
    assert statement["Resource"] == ["arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/api/*/*"]


def test_the_rest_authorizer_refuses_a_request_with_no_key_as_unauthorized() -> None:
    assert rest_verdict(rest_authorizer_event(V1_ROUTE)) is None


#: Each family's proxy route, and a form it takes.
FAMILY_ROUTES = {"v1": (V1_ROUTE, KeyForm.API_KEY), "geoip": (GEOIP2_ROUTE, KeyForm.BASIC)}
FAMILY_ROUTES |= {"ipinfo": (IPINFO_ROUTE, KeyForm.TOKEN)}


@pytest.mark.parametrize("keyed", [True, False], ids=["a-key-for-the-usage-plan", "no-key-in-its-form"])
@pytest.mark.parametrize("family", list(FAMILY_ROUTES))
def test_the_rest_authorizer_gives_the_401_the_key_forms_of_its_family(family: str, keyed: bool) -> None:
    # Given a request of the family with a key in its form, or none (junk in the identity
    # header, so API Gateway invokes the authorizer)
    route, form = FAMILY_ROUTES[family]
    junk = [(IDENTITY_HEADERS[family], NO_KEY)] if family in IDENTITY_HEADERS else []
    headers, query = carrying(form, K) if keyed else (junk, [])
    # When the REST authorizer answers
    response = usage_plan_authorizer.handler(
        rest_authorizer_event(route, headers, query), cast(LambdaContext, LocalLambdaContext())
    )
    # Then it admits the key for the usage plan to judge, or denies (API Gateway's ACCESS_DENIED)
    [statement] = response["policyDocument"]["Statement"]
    assert statement["Effect"] == ("Allow" if keyed else "Deny")
    # And either way the 401 it may lead to names the family's key forms, and no other
    assert named_forms(response["context"][REFUSAL_CONTEXT]) == FAMILY_FORMS[family]


def test_the_rest_authorizer_refuses_a_route_of_no_family() -> None:
    event = rest_authorizer_event("/static/{proxy+}", [("x-api-key", K)])
    with pytest.raises(PermissionError, match=usage_plan_authorizer.UNAUTHORIZED):
        usage_plan_authorizer.handler(event, cast(LambdaContext, LocalLambdaContext()))


# -- issue 26: the key checked is the value API Gateway caches the answer by -----------------------


@pytest.mark.parametrize("front", ["rest", "http"])
def test_a_geoip2_request_is_judged_by_its_authorization_header_alone(front: str) -> None:
    # Given a /geoip request whose Authorization (the identity it is cached by) holds no key,
    # and a valid key in x-api-key, which that family does not read
    headers = [("Authorization", JUNK), ("x-api-key", K)]
    # When its authorizer answers
    verdict = (
        rest_verdict(rest_authorizer_event(GEOIP2_ROUTE, headers))
        if front == "rest"
        else http_verdict(http_authorizer_event(GEOIP2_ROUTE, headers))
    )
    # Then it refuses: an admission cached under the junk would let it alone pass for 300 s
    assert verdict is None


def test_a_geoip2_request_is_metered_to_the_key_in_its_authorization() -> None:
    # Given Basic with one key and x-api-key with another
    event = rest_authorizer_event(GEOIP2_ROUTE, [("Authorization", basic("1", "A" * 20)), ("x-api-key", K)])
    # Then the usage plan meters the key the answer is cached by
    assert rest_verdict(event) == "A" * 20
    both = [("authorization", basic("1", B)), ("x-api-key", K)]
    assert http_verdict(http_authorizer_event(GEOIP2_ROUTE, both)) == "client-b"


@pytest.mark.parametrize("route", [V1_ROUTE, GEOIP2_ROUTE])
def test_a_family_takes_no_key_in_another_familys_form(route: str) -> None:
    # Given the family's identity header holding junk, and a valid key in every other form
    identity = "x-api-key" if route == V1_ROUTE else "authorization"
    others = [("authorization", "Bearer " + K)] if route == V1_ROUTE else [("x-api-key", K)]
    headers = [(identity, "junk junk"), *others]
    # Then neither front admits it
    assert rest_verdict(rest_authorizer_event(route, headers, [("token", K)])) is None
    assert http_verdict(http_authorizer_event(route, headers, [("token", K)])) is None


def test_a_repeated_identity_header_is_refused() -> None:
    # Given x-api-key twice: junk first, a valid key last (REST's headers map keeps the last)
    event = rest_authorizer_event(V1_ROUTE, [("x-api-key", "J" * 20), ("x-api-key", K)])
    assert event["headers"] == {"x-api-key": K}
    # Then the REST authorizer refuses rather than guess which value API Gateway cached by
    assert rest_verdict(event) is None
    # And the HTTP API's joined value is no key
    assert http_verdict(http_authorizer_event(V1_ROUTE, [("x-api-key", "J" * 20), ("x-api-key", K)])) is None
