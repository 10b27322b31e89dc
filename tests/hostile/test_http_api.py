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
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipmeta.api import dependencies
from ipmeta.api.handler import handler
from ipmeta.schema.settings import Settings
from ipmeta_cli.server import ConnectionLimits, LocalApiServer, LocalLambdaContext, proxy_event
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
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
    store.create_table_if_missing()
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
        response = handler(proxy_event(method, path, pairs, body, "192.0.2.7"), LocalLambdaContext())
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
