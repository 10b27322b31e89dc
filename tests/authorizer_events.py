"""Authorizer events as each API Gateway front sends them, and the real authorizer handlers' verdicts.

- **REST** (``usage_plan_authorizer``): a REQUEST authorizer event keeps the client's
  spelling of header names; ``headers`` holds each name's last value and
  ``multiValueHeaders`` every value (the same for the query string).
- **HTTP API** (``authorizer``): payload 2.0 lower-cases header names, joins a repeated
  header's values with commas, leaves out an absent query string, and names the values of
  the route's identity source in ``identitySource``.

Headers and query parameters are given as ``(name, value)`` pairs so a test can repeat one.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.api.fronts import authorizer, usage_plan_authorizer
from ipmeta.api.fronts.credentials import FORM_HEADERS, TOKEN_PARAMETER, KeyForm
from ipmeta_cli.server import LocalLambdaContext

Pairs = Sequence[tuple[str, str]]

#: Each route family's proxy route, as REST names its resource and an HTTP API its route key.
V1_ROUTE = "/v1/{proxy+}"
GEOIP2_ROUTE = "/geoip/{proxy+}"
IPINFO_ROUTE = "/ipinfo/{proxy+}"
ROOT_ROUTE = "/{proxy+}"
#: What API Gateway caches a route's authorizer answer by, by the route's first path segment
#: (the template's identity sources; ipinfo's and the root's routes have none).
IDENTITY_HEADERS: Mapping[str, str] = {"v1": "x-api-key", "geoip": "authorization"}
CALLER = "198.51.100.23"
#: The HTTP API's secret: client name -> key (one value is not a key at all).
HTTP_KEYS: Mapping[str, Any] = {"default": "k" * 40, "client-b": "b" * 40, "broken": 7}


def basic(account: str, key: str) -> str:
    """What MaxMind's clients send: the account id and the licence key (here: the ipmeta key)."""
    return "Basic " + base64.b64encode(f"{account}:{key}".encode()).decode()


def _path(route: str) -> str:
    return route.replace("{proxy+}", "8.8.8.8")


def _grouped(pairs: Pairs, *, fold_case: bool) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name.lower() if fold_case else name, []).append(value)
    return grouped


def rest_authorizer_event(route: str, headers: Pairs = (), query: Pairs = ()) -> dict[str, Any]:
    """A REST API's REQUEST authorizer event for ``route`` (its resource), on stage ``api``."""
    multi_headers = _grouped(headers, fold_case=False)
    multi_query = _grouped(query, fold_case=False)
    return {
        "type": "REQUEST",
        "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/api/GET{_path(route)}",
        "resource": route,
        "path": _path(route),
        "httpMethod": "GET",
        "headers": {name: values[-1] for name, values in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "requestContext": {"stage": "api", "identity": {"sourceIp": CALLER}},
    }


def http_authorizer_event(route: str, headers: Pairs = (), query: Pairs = ()) -> dict[str, Any]:
    """An HTTP API's REQUEST authorizer event (payload 2.0) for route ``GET <route>``."""
    joined = {name: ",".join(values) for name, values in _grouped(headers, fold_case=True).items()}
    joined_query = {name: ",".join(values) for name, values in _grouped(query, fold_case=False).items()}
    identity = IDENTITY_HEADERS.get(route.strip("/").partition("/")[0])
    return {
        **({"queryStringParameters": joined_query} if joined_query else {}),
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/$default/GET{_path(route)}",
        "identitySource": [joined[identity]] if identity in joined else [],
        "routeKey": f"GET {route}",
        "rawPath": _path(route),
        "rawQueryString": "&".join(f"{name}={value}" for name, value in query),
        "headers": joined,
        "requestContext": {"http": {"method": "GET", "path": _path(route), "sourceIp": CALLER}},
    }


def rest_verdict(event: dict[str, Any]) -> str | None:
    """The key the REST authorizer hands the usage plan, or None when it refuses the request."""
    try:
        response = usage_plan_authorizer.handler(event, cast(LambdaContext, LocalLambdaContext()))
    except PermissionError as error:
        if str(error) != usage_plan_authorizer.UNAUTHORIZED:
            raise
        return None
    [statement] = response["policyDocument"]["Statement"]
    if statement["Effect"] == "Deny":
        assert "usageIdentifierKey" not in response
        return None
    assert statement["Effect"] == "Allow"
    key: str = response["usageIdentifierKey"]
    return key


def http_verdict(event: dict[str, Any]) -> str | None:
    """The client the HTTP API's authorizer admits (its keys: ``HTTP_KEYS``), or None."""
    response = authorizer.handler(event, cast(LambdaContext, LocalLambdaContext()))
    if not response["isAuthorized"]:
        assert response == {"isAuthorized": False}
        return None
    client: str = response["context"]["client"]
    return client


#: The key forms each route family takes (docs/api.md), by the words a 401's message names them with.
FAMILY_FORMS: Mapping[str, set[str]] = {
    "v1": {"x-api-key"},
    "geoip": {"Basic"},
    "ipinfo": {"Bearer", "?token="},
}
FORM_WORDS = ("x-api-key", "Basic", "Bearer", "?token=")


def named_forms(message: str) -> set[str]:
    """The key forms a refusal's message names."""
    return {word for word in FORM_WORDS if word in message}


#: A value in the identity header that holds no key in any form, so the authorizer is invoked
#: (API Gateway refuses a request without its identity source) but cannot admit on it.
NO_KEY = "junk junk"


def carrying(form: KeyForm, key: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Headers and query parameters that carry ``key`` in ``form`` and nowhere else."""
    if form is KeyForm.TOKEN:
        return [], [(TOKEN_PARAMETER, key)]
    value = {KeyForm.BASIC: basic("123456", key), KeyForm.BEARER: "Bearer " + key}.get(form, key)
    return [(FORM_HEADERS[form], value)], []


def admitted_key(front: str, route: str, headers: Pairs, query: Pairs = ()) -> str | None:
    """The key a front's real authorizer admits the request with (``HTTP_KEYS`` behind the HTTP API)."""
    if front == "rest":
        return rest_verdict(rest_authorizer_event(route, headers, query))
    client = http_verdict(http_authorizer_event(route, headers, query))
    return None if client is None else str(HTTP_KEYS[client])


def admitted_forms(front: str, route: str, identity_header: str | None) -> set[KeyForm]:
    """The forms of key the front's authorizer admits on ``route``, each sent alone (beside an
    identity header holding no key, when the form is not read from that header)."""
    key = str(HTTP_KEYS["default"])
    admitted = set()
    for form in KeyForm:
        headers, query = carrying(form, key)
        if identity_header and FORM_HEADERS.get(form) != identity_header:
            headers.append((identity_header, NO_KEY))
        if admitted_key(front, route, headers, query) == key:
            admitted.add(form)
    return admitted
