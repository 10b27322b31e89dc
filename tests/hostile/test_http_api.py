"""Every route of the API, attacked with what an outsider sends: through the real handler, and
through the local server (which, like a deployment's front, requires a key).

Each case is a pytest id saying what it sends, and expects a clean refusal with the stable code
in the shape of the route's API (ipmeta's ``{code, message}``, MaxMind's ``{code, error}``,
ipinfo's ``{status, error: {title, message}}``), bounded in size, and the API still answering.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from ipmeta.api import dependencies
from ipmeta.schema.settings import Front, Settings
from ipmeta_cli.server import ConnectionLimits, LocalApiServer, proxy_event
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.in_process_api import handle, invoke
from tests.hostile.raw_http import Answer, connect, exchange, read_answers
from tests.integration.conftest import running_api_server

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"
KEY = "hostile-api-k3y"
LIMITS = ConnectionLimits(idle_timeout=2.0, request_timeout=5.0, write_timeout=5.0, max_connections=16)
#: Lambda's limit on a synchronous response, which the batch answers must stay under.
LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024
VIAS = ("handler", "server")


@pytest.fixture(scope="module")
def server(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiServer]:
    """small.csv as ``default``, indexed by ``asn`` and flagged by ``country``, behind a keyed server."""
    store = LoaderTable.from_settings(Settings("ipmeta-hostile-http-api", dynalite_endpoint, 0.0))
    create_table_if_missing(store.client, store.table_name)
    folder = tmp_path_factory.mktemp("load")
    options = LoadOptions(index_field="asn", flag_column="country")
    driver.run_load([FIXTURE], options, store, LocalStaging(folder / "staging"))
    with running_api_server(store, api_keys=[KEY], limits=LIMITS) as running:
        yield running


def family_key(path: str) -> list[str]:
    """The key in the form each family's clients send it."""
    if path.startswith("/v1"):
        return [f"x-api-key: {KEY}"]
    if path.startswith("/geoip"):
        return ["Authorization: Basic " + base64.b64encode(f"42:{KEY}".encode()).decode()]
    return [f"Authorization: Bearer {KEY}"]


def send(
    via: str,
    server: LocalApiServer,
    method: str,
    path: str,
    *headers: str,
    body: bytes = b"",
    keyed: bool = True,
) -> Answer:
    """One request, through the handler (an API Gateway event) or the local server (with the key)."""
    if via == "handler":
        pairs = dict(line.split(": ", 1) for line in headers)
        response = invoke(Front.REST, method, path, pairs, body, caller="192.0.2.7")
        found = {name.lower(): str(value) for name, value in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            found[name.lower()] = ", ".join(str(value) for value in values)
        text = response.get("body") or ""
        data = base64.b64decode(text) if response.get("isBase64Encoded") else text.encode()
        return Answer(int(response["statusCode"]), found, data)
    lines = [f"{method} {path} HTTP/1.1", "Host: ipmeta.test", "Connection: close", *headers]
    lines += family_key(path) if keyed else []
    lines += [f"Content-Length: {len(body)}"] if body else []
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    [answer], _ = exchange(server.server_address[:2], raw, wait_for_close=False, timeout=20)  # type: ignore[arg-type]
    return answer


def error_code(path: str, answer: Answer) -> str:
    """The stable code, in whichever API's error shape the path answers with."""
    body = answer.json()
    if path.startswith(("/v1", "/geoip")) or isinstance(body.get("error"), str):  # a front's refusal
        return str(body["code"])
    title = body["error"]["title"]
    return "IP_ADDRESS_INVALID" if title == "Wrong ip" else str(title)


def assert_refusal(path: str, answer: Answer, status: int, code: str, *, bound: int = 2048) -> None:
    assert (answer.status, error_code(path, answer)) == (status, code), answer
    assert answer.headers["content-type"].startswith("application/"), answer
    assert len(answer.body) <= bound, f"{len(answer.body)} bytes: the input was echoed"


def assert_answers(via: str, server: LocalApiServer) -> None:
    answer = send(via, server, "GET", "/v1/ip/1.0.0.1")
    assert answer.status == 200
    assert answer.json()["data"]["asn"] == 13335


# -- keys in each form on each route family, as AWS's fronts take them ------------------------------

BASIC = "Authorization: Basic " + base64.b64encode(f"42:{KEY}".encode()).decode()
KEY_FORMS = {
    "x-api-key": (f"x-api-key: {KEY}", ""),
    "basic": (BASIC, ""),
    "bearer": (f"Authorization: Bearer {KEY}", ""),
    "token": ("", f"token={KEY}"),
}
#: What REST's and the HTTP API's authorizers take on each family (``credentials.request_key``,
#: docs/deploy.md): each family its own clients' forms, and no other.
TAKES = {
    "v1": {"x-api-key"},
    "geoip2": {"basic"},
    "ipinfo": {"bearer", "token"},
}
FAMILY_PATHS = {"v1": "/v1/ip/1.0.0.1", "geoip2": "/geoip/v2.1/country/1.0.0.1", "ipinfo": "/ipinfo/1.0.0.1"}


@pytest.mark.parametrize("form", list(KEY_FORMS))
@pytest.mark.parametrize("family", list(FAMILY_PATHS))
def test_each_family_takes_the_key_in_the_forms_its_aws_front_takes(
    server: LocalApiServer, family: str, form: str
) -> None:
    header, query = KEY_FORMS[form]
    path = FAMILY_PATHS[family] + (f"?{query}" if query else "")
    answer = send("server", server, "GET", path, *([header] if header else []), keyed=False)
    if form in TAKES[family]:
        assert answer.status != 401, answer
    else:
        assert answer.status == 401, answer
        assert answer.json()["code"] == "AUTHORIZATION_INVALID"
        # And the refusal names the forms this family takes, and no other
        named = {word for word, form in REFUSAL_WORDS.items() if word in answer.json()["message"]}
        assert {REFUSAL_WORDS[word] for word in named} == TAKES[family]


#: How a 401's message spells each key form.
REFUSAL_WORDS = {"x-api-key": "x-api-key", "Basic": "basic", "Bearer": "bearer", "?token=": "token"}


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("", id="no-key"),
        pytest.param("x-api-key: wrong", id="a-wrong-key"),
        pytest.param("x-api-key: ", id="an-empty-key"),
        pytest.param(f"x-api-key: {KEY[:-1]}", id="a-key-one-character-short"),
        pytest.param(f"x-api-key: {KEY} ", id="a-key-with-a-trailing-space-is-trimmed"),
        pytest.param("Authorization: Basic !!!", id="basic-not-base64"),
    ],
)
def test_a_missing_or_wrong_key_is_refused_before_the_function(server: LocalApiServer, header: str) -> None:
    answer = send("server", server, "GET", "/v1/ip/1.0.0.1", *([header] if header else []), keyed=False)
    if header.endswith(" ") and KEY in header:
        assert answer.status == 200  # header values lose surrounding blanks, as in every HTTP parser
        return
    assert answer.status == 401
    assert answer.json() == {
        "code": "AUTHORIZATION_INVALID",
        "error": answer.json()["error"],
        "message": answer.json()["error"],
    }


# -- batch items: refused whole past an address's length, never echoed as a key ---------------------

BATCH_ROUTES = ("/v1/batch", "/ipinfo/batch")
TOO_LONG_ITEMS = {
    "an-item-of-98-characters": ["1" * 98],
    "an-item-of-1-mb": ["1" * 1024 * 1024],
    "a-thousand-6-kb-items": [f"{n:06d}" * 1000 for n in range(1000)],
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("path", BATCH_ROUTES)
@pytest.mark.parametrize("items", list(TOO_LONG_ITEMS.values()), ids=list(TOO_LONG_ITEMS))
def test_an_item_longer_than_any_address_refuses_the_batch_unechoed(
    server: LocalApiServer, via: str, path: str, items: list[str]
) -> None:
    answer = send(
        via, server, "POST", path, "Content-Type: application/json", body=json.dumps(items).encode()
    )
    assert_refusal(path, answer, 400, "BATCH_ITEM_TOO_LONG", bound=512)
    assert_answers(via, server)


@pytest.mark.parametrize("via", VIAS)
def test_an_item_of_64_characters_is_answered_as_its_own_error(server: LocalApiServer, via: str) -> None:
    # The longest item answered item by item: a zone id's length (64); 65 refuses the batch
    item = "fe80::1%" + "e" * 56
    answer = send(via, server, "POST", "/v1/batch", body=json.dumps([item, "1.0.0.1"]).encode())
    assert answer.status == 200
    assert answer.json()[item]["error"]["code"] == "IP_ADDRESS_INVALID"
    refused = send(via, server, "POST", "/v1/batch", body=json.dumps([item + "e"]).encode())
    assert_refusal("/v1/batch", refused, 400, "BATCH_ITEM_TOO_LONG")


def _distinct(length: int, count: int) -> list[str]:
    return [f"{n:0{length}d}" for n in range(count)]


@pytest.mark.parametrize(
    ("path", "items"),
    [
        pytest.param("/v1/batch", _distinct(64, 1000), id="v1-1000-invalid-items-of-64"),
        pytest.param(
            "/v1/batch",
            [f"1.0.0.{n % 256}" if n < 256 else f"2001:200::{n:x}" for n in range(1000)],
            id="v1-1000-found",
        ),
        pytest.param("/ipinfo/batch", _distinct(97, 1000), id="ipinfo-1000-invalid-items-of-97"),
        pytest.param(
            "/ipinfo/batch",
            [f"1.0.0.{n % 256}/org" if n < 256 else f"2001:200::{n:x}" for n in range(1000)],
            id="ipinfo-1000-found",
        ),
    ],
)
def test_the_largest_batch_answers_under_lambdas_6_mb(
    server: LocalApiServer, path: str, items: list[str]
) -> None:
    answer = send("handler", server, "POST", path, body=json.dumps(items).encode())
    assert answer.status == 200
    assert len(answer.json()) == len(set(items))
    print(f"{path}: {len(items)} items -> {len(answer.body):,} bytes")
    assert len(answer.body) < LAMBDA_RESPONSE_LIMIT


# -- HEAD: the GET's status and headers, no body ---------------------------------------------------

HEAD_PATHS = {
    "lookup": ("/v1/ip/1.0.0.1", 200),
    "a-field": ("/v1/ip/1.0.0.1/asn", 200),
    "bad-ip": ("/v1/ip/999.1.1.1", 400),
    "datasets": ("/v1/datasets", 200),
    "health": ("/v1/health", 200),
    "ranges": ("/v1/ranges?field=asn&value=13335", 200),
    "ipinfo": ("/ipinfo/1.0.0.1", 200),
    "no-such-route": ("/v1/nothing", 404),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("path", "status"), list(HEAD_PATHS.values()), ids=list(HEAD_PATHS))
def test_head_answers_the_gets_status_and_headers_without_a_body(
    server: LocalApiServer, via: str, path: str, status: int
) -> None:
    got = send(via, server, "GET", path)
    head = send(via, server, "HEAD", path)
    assert (got.status, head.status) == (status, status)
    assert head.body == b""
    assert head.headers.get("content-type") == got.headers.get("content-type")
    assert head.headers.get("etag") == got.headers.get("etag")
    assert head.headers.get("cache-control") == got.headers.get("cache-control")
    assert "content-length" not in head.headers or head.headers["content-length"] == got.headers.get(
        "content-length"
    )


def test_head_keeps_the_connection_in_step(server: LocalApiServer) -> None:
    keyed = f"x-api-key: {KEY}"
    raw = b"".join(
        f"{method} /v1/ip/1.0.0.1 HTTP/1.1\r\nHost: t\r\n{keyed}\r\n\r\n".encode()
        for method in ("HEAD", "GET")
    )
    with connect(server.server_address[:2]) as connection:  # type: ignore[arg-type]
        connection.sendall(raw)
        [head] = read_answers(connection, 1, head=True)
        [got] = read_answers(connection, 1)
    assert (head.status, got.status, got.json()["data"]["asn"]) == (200, 200, 13335)


# -- /v1/datasets shows file names, not where the files were ---------------------------------------


@pytest.mark.parametrize("via", VIAS)
def test_datasets_show_each_source_by_file_name_unless_the_deployment_shows_them(
    server: LocalApiServer, via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    [version] = send(via, server, "GET", "/v1/datasets").json()["datasets"][0]["versions"]
    assert version["source"] == ["small.csv"]
    current = dependencies.current()
    monkeypatch.setattr(current, "api", dataclasses.replace(current.api, show_sources=True))
    [version] = send(via, server, "GET", "/v1/datasets").json()["datasets"][0]["versions"]
    assert version["source"] == [str(FIXTURE.resolve())]


# -- bad IPs of every kind, on each API's lookup route ---------------------------------------------

BAD_IPS = {
    "leading-zero-octet": "010.0.0.1",
    "zone-id": "fe80::1%eth0",
    "leading-space": " 1.1.1.1",
    "trailing-newline": "1.1.1.1\n",
    "crlf-then-header": "1.1.1.1\r\nX-Injected: yes",
    "arabic-indic-digits": "١.١.١.١",
    "fullwidth-digits": "１.１.１.１",
    "46-characters": "1" * 46,
    "10-kb": "9" * 10_000,
    "nul-byte": "1.1.1.1\0",
    "hex-octet": "0x01.1.1.1",
    "three-octets": "1.1.1",
    "five-octets": "1.1.1.1.1",
    "octet-256": "256.1.1.1",
    "negative-integer": "-1",
    "integer-address": "16843009",
    "two-double-colons": "1::2::3",
    "nine-groups": "1:2:3:4:5:6:7:8:9",
    "mapped-bad-ipv4": "::ffff:999.1.1.1",
    "double-quote": '"',
    "backslash": "\\",
    "emoji": "\U0001f642",
    "a-space": " ",
}
LOOKUP_ROUTES = {"v1": "/v1/ip/{}", "geoip2": "/geoip/v2.1/city/{}", "ipinfo": "/ipinfo/{}"}
EXPECTED_BAD_IP = {"v1": (400, "IP_ADDRESS_INVALID"), "geoip2": (400, "IP_ADDRESS_INVALID")}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("route", list(LOOKUP_ROUTES))
@pytest.mark.parametrize("ip", list(BAD_IPS.values()), ids=list(BAD_IPS))
def test_a_bad_ip_is_refused_by_each_api(server: LocalApiServer, via: str, route: str, ip: str) -> None:
    path = LOOKUP_ROUTES[route].format(quote(ip, safe=""))
    answer = send(via, server, "GET", path)
    status, code = EXPECTED_BAD_IP.get(route, (404, "IP_ADDRESS_INVALID"))  # ipinfo's "Wrong ip"
    assert_refusal(path, answer, status, code)
    assert "x-injected" not in answer.headers


# -- huge paths and query strings: refused, and never echoed whole --------------------------------

HUGE = {
    "ip-60kb": ("/v1/ip/" + "1" * 60_000, 400, "IP_ADDRESS_INVALID"),
    "unknown-route-60kb": ("/v1/" + "x" * 60_000, 404, "ROUTE_NOT_FOUND"),
    "dataset-name-60kb": ("/v1/datasets/" + "a" * 60_000, 400, "DATASET_INVALID"),
    "field-name-60kb": ("/v1/ip/1.0.0.1/" + "f" * 60_000, 404, "FIELD_NOT_FOUND"),
    "fields-60kb": ("/v1/ip/1.0.0.1?fields=" + "a," * 30_000, 400, "REQUEST_INVALID"),
    "datasets-60kb": ("/v1/ip/1.0.0.1?datasets=" + "a" * 60_000, 400, "DATASET_INVALID"),
    "version-60kb": ("/v1/ip/1.0.0.1?version=" + "v1" * 30_000, 400, "VERSION_INVALID"),
    "ranges-value-60kb": ("/v1/ranges?field=asn&value=" + "1" * 60_000, 400, "VALUE_INVALID"),
    "ipinfo-field-60kb": ("/ipinfo/1.0.0.1/" + "f" * 60_000, 404, "FIELD_NOT_FOUND"),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("path", "status", "code"), list(HUGE.values()), ids=list(HUGE))
def test_a_huge_path_or_query_is_refused_without_echoing_it(
    server: LocalApiServer, via: str, path: str, status: int, code: str
) -> None:
    assert_refusal(path, send(via, server, "GET", path), status, code, bound=1024)


@pytest.mark.parametrize("via", VIAS)
def test_fifteen_thousand_unknown_parameters_are_ignored(server: LocalApiServer, via: str) -> None:
    answer = send(via, server, "GET", "/v1/ip/1.0.0.1?" + "a=1&" * 15_000)
    assert answer.status == 200


@pytest.mark.parametrize("via", VIAS)
def test_a_repeated_parameter_takes_its_last_value_as_api_gateway_does(
    server: LocalApiServer, via: str
) -> None:
    answer = send(via, server, "GET", "/v1/ip/1.0.0.1?fields=asn&fields=country")
    assert (answer.status, answer.json()["data"]) == (200, {"country": "US"})


# -- bad ?datasets=, ?version=, ?fields=, page tokens and limits ------------------------------------

BAD_PARAMETERS = {
    "datasets-upper-case": ("/v1/ip/1.0.0.1?datasets=ASN", 400, "DATASET_INVALID"),
    "datasets-hash": ("/v1/ip/1.0.0.1?datasets=a%23b", 400, "DATASET_INVALID"),
    "datasets-33-characters": ("/v1/ip/1.0.0.1?datasets=" + "a" * 33, 400, "DATASET_INVALID"),
    "datasets-unknown": ("/v1/ip/1.0.0.1?datasets=nope", 404, "DATASET_NOT_FOUND"),
    "version-letters": ("/v1/ip/1.0.0.1?version=latest", 400, "VERSION_INVALID"),
    "version-negative": ("/v1/ip/1.0.0.1?version=v-1", 400, "VERSION_INVALID"),
    "version-three-parts": ("/v1/ip/1.0.0.1?version=default:v1:v2", 400, "DATASET_INVALID"),
    "version-not-retained": ("/v1/ip/1.0.0.1?version=v99", 404, "VERSION_NOT_FOUND"),
    "version-40-digits": ("/v1/ip/1.0.0.1?version=v" + "9" * 40, 400, "VERSION_INVALID"),
    "fields-1025-characters": ("/v1/ip/1.0.0.1?fields=" + "a" * 1025, 400, "REQUEST_INVALID"),
    "token-punctuation": ("/v1/flagged?next=!!!", 400, "INVALID_TOKEN"),
    "token-5000-characters": ("/v1/flagged?next=" + "a" * 5000, 400, "INVALID_TOKEN"),
    "token-forged-signature": ("/v1/flagged?next=eyJ2IjoxfQ.AAAA", 400, "INVALID_TOKEN"),
    "token-a-dot": ("/v1/ranges?field=asn&value=13335&next=.", 400, "INVALID_TOKEN"),
    "token-base64-garbage": ("/v1/ranges?field=asn&value=13335&next=____.____", 400, "INVALID_TOKEN"),
    "limit-zero": ("/v1/flagged?limit=0", 400, "LIMIT_INVALID"),
    "limit-1001": ("/v1/flagged?limit=1001", 400, "LIMIT_INVALID"),
    "limit-exponent": ("/v1/flagged?limit=1e3", 400, "LIMIT_INVALID"),
    "limit-huge": ("/v1/flagged?limit=" + "9" * 400, 400, "LIMIT_INVALID"),
    "ranges-field-not-indexed": ("/v1/ranges?field=country&value=US", 400, "FIELD_NOT_INDEXED"),
    "ranges-value-not-a-number": ("/v1/ranges?field=asn&value=cloudflare", 400, "VALUE_INVALID"),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("path", "status", "code"), list(BAD_PARAMETERS.values()), ids=list(BAD_PARAMETERS))
def test_a_bad_parameter_is_refused_with_its_own_code(
    server: LocalApiServer, via: str, path: str, status: int, code: str
) -> None:
    assert_refusal(path, send(via, server, "GET", path), status, code)


# -- batch bodies: bad JSON, deep nesting, non-UTF-8 ----------------------------------------------

BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "BATCH_BODY_NOT_JSON"),
    "open-brace": (b"{", "BATCH_BODY_NOT_JSON"),
    "trailing-garbage": (b"[] x", "BATCH_BODY_NOT_JSON"),
    "nested-100000": (b"[" * 100_000, "BATCH_BODY_NOT_JSON"),
    "not-utf8": (b'["\xff\xfe"]', "BATCH_BODY_NOT_JSON"),
    "utf8-bom": (b'\xef\xbb\xbf["1.0.0.1"]', "BATCH_BODY_NOT_JSON"),
    "form-encoded": (b"ips=1.0.0.1", "BATCH_BODY_NOT_JSON"),
    "an-object": (b'{"ips": ["1.0.0.1"]}', "BATCH_BODY_NOT_ARRAY"),
    "a-string": (b'"1.0.0.1"', "BATCH_BODY_NOT_ARRAY"),
    "a-number-item": (b"[16843009]", "BATCH_ITEM_NOT_STRING"),
    "a-null-item": (b"[null]", "BATCH_ITEM_NOT_STRING"),
    "a-nan-item": (b"[NaN]", "BATCH_ITEM_NOT_STRING"),
    "a-nested-item": (b'[["1.0.0.1"]]', "BATCH_ITEM_NOT_STRING"),
    "1001-items": (json.dumps(["1.0.0.1"] * 1001).encode(), "BATCH_TOO_LARGE"),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("path", BATCH_ROUTES)
@pytest.mark.parametrize(("body", "code"), list(BAD_BODIES.values()), ids=list(BAD_BODIES))
def test_a_bad_batch_body_is_refused_whole(
    server: LocalApiServer, via: str, path: str, body: bytes, code: str
) -> None:
    answer = send(via, server, "POST", path, "Content-Type: application/json", body=body)
    assert_refusal(path, answer, 400, code, bound=512)
    assert_answers(via, server)


# -- base64 bodies (API Gateway sends a binary body as base64): the handler alone -----------------

BASE64_BODIES = {
    "not-base64": ("!!!", "BATCH_BODY_NOT_JSON"),
    "missing-padding": (base64.b64encode(b'["1.0.0.1"]').decode().rstrip("="), "BATCH_BODY_NOT_JSON"),
    "with-a-newline": (
        base64.b64encode(b'["1.0.0.1"]').decode()[:4] + "\n" + base64.b64encode(b'["1.0.0.1"]').decode()[4:],
        "BATCH_BODY_NOT_JSON",
    ),
    "of-bytes-not-utf8": (base64.b64encode(b'["\xff"]').decode(), "BATCH_BODY_NOT_JSON"),
    "of-an-object": (base64.b64encode(b"{}").decode(), "BATCH_BODY_NOT_ARRAY"),
}


@pytest.mark.parametrize(("body", "code"), list(BASE64_BODIES.values()), ids=list(BASE64_BODIES))
def test_a_base64_body_that_is_not_a_json_array_is_refused(
    server: LocalApiServer, body: str, code: str
) -> None:
    event = proxy_event("POST", "/v1/batch", {}, b"", "192.0.2.7") | {"body": body, "isBase64Encoded": True}
    response = handle(event)
    assert (response["statusCode"], json.loads(response["body"])["code"]) == (400, code)


def test_a_base64_body_of_a_json_array_is_answered(server: LocalApiServer) -> None:
    body = base64.b64encode(b'["1.0.0.1"]').decode()
    event = proxy_event("POST", "/v1/batch", {}, b"", "192.0.2.7") | {"body": body, "isBase64Encoded": True}
    response = handle(event)
    assert json.loads(response["body"])["1.0.0.1"]["data"]["asn"] == 13335


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "x/\x7f",
    ],
)
def test_a_json_batch_is_read_whatever_its_content_type(
    server: LocalApiServer, via: str, content_type: str
) -> None:
    answer = send(via, server, "POST", "/v1/batch", f"Content-Type: {content_type}", body=b'["1.0.0.1"]')
    assert answer.json()["1.0.0.1"]["data"]["asn"] == 13335


# -- methods, preflights ------------------------------------------------------------------------

WRONG_METHODS = {
    "put-a-lookup": ("PUT", "/v1/ip/1.0.0.1"),
    "delete-a-lookup": ("DELETE", "/v1/ip/1.0.0.1"),
    "patch-a-lookup": ("PATCH", "/v1/ip/1.0.0.1"),
    "post-a-lookup": ("POST", "/v1/ip/1.0.0.1"),
    "get-the-batch": ("GET", "/v1/batch"),
    "delete-the-datasets": ("DELETE", "/v1/datasets"),
    "put-geoip2": ("PUT", "/geoip/v2.1/city/1.0.0.1"),
    "delete-ipinfo": ("DELETE", "/ipinfo/1.0.0.1"),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("method", "path"), list(WRONG_METHODS.values()), ids=list(WRONG_METHODS))
def test_a_method_a_route_does_not_take_is_route_not_found(
    server: LocalApiServer, via: str, method: str, path: str
) -> None:
    answer = send(via, server, method, path, body=b"[]" if method in ("POST", "PUT", "PATCH") else b"")
    assert answer.status == 404
    assert error_code(path, answer) == "ROUTE_NOT_FOUND"


PREFLIGHTS = {
    "v1": "/v1/ip/1.0.0.1",
    "geoip2": "/geoip/v2.1/city/1.0.0.1",
    "ipinfo": "/ipinfo/1.0.0.1",
    "batch": "/v1/batch",
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("path", list(PREFLIGHTS.values()), ids=list(PREFLIGHTS))
def test_a_cors_preflight_is_answered_without_a_key(server: LocalApiServer, via: str, path: str) -> None:
    answer = send(
        via,
        server,
        "OPTIONS",
        path,
        "Origin: https://app.example",
        "Access-Control-Request-Method: POST",
        "Access-Control-Request-Headers: x-api-key, content-type",
        keyed=False,
    )
    assert answer.status in (200, 204)
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "x-api-key" in answer.headers["access-control-allow-headers"].lower()


# -- headers carrying CR and LF -----------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    ["If-None-Match", "Origin", "X-Forwarded-For", "Authorization", "Accept"],
)
def test_a_header_with_crlf_injects_nothing(server: LocalApiServer, header: str) -> None:
    # API Gateway hands the function what the client sent; a value must never reach a response header
    answer = send("handler", server, "GET", "/v1/ip/1.0.0.1", f"{header}: x\r\nX-Injected: yes")
    assert answer.status == 200
    assert "x-injected" not in answer.headers
    assert not any("\r" in value or "\n" in value for value in answer.headers.values())


def test_a_folded_header_is_joined_and_answered(server: LocalApiServer) -> None:
    answer = send("server", server, "GET", "/v1/ip/1.0.0.1", "X-Folded: a", " b")
    assert answer.status == 200


def test_the_suite_left_the_api_serving(server: LocalApiServer) -> None:
    started = time.monotonic()
    for via in VIAS:
        assert_answers(via, server)
    assert time.monotonic() - started < 2
