"""Every endpoint and HTTP behaviour of the API, through the real HTTP server on dynalite."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.schema.records import VersionMeta, VersionStatus
from ipmeta_cli.server import LocalApiServer
from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter, load_csv, running_api_server

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    server: LocalApiServer,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    request = urllib.request.Request(server.url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Answer(
                response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
            )
    except urllib.error.HTTPError as error:
        return Answer(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())


def post_batch(server: LocalApiServer, payload: Any, query: str = "") -> Answer:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return call(
        server, f"/v1/batch{query}", method="POST", body=raw, headers={"Content-Type": "application/json"}
    )


def configure(**changes: Any) -> None:
    deps = dependencies.current()
    deps.api = dataclasses.replace(deps.api, **changes)


@pytest.fixture
def loaded(store: LoaderTable, api_server: LocalApiServer, tmp_path: Path) -> LocalApiServer:
    load_csv(store, [FIXTURE], tmp_path)
    return api_server


# -- single lookups: fields, versions, text fields, bogons -------------------------------


def test_fields_keep_only_the_named_data_attributes(loaded: LocalApiServer) -> None:
    body = call(loaded, "/v1/ip/1.0.0.1?fields=asn,country,nope").json()
    assert body["data"] == {"asn": 13335, "country": "US"}
    assert body["ip"] == "1.0.0.1"


def test_a_field_as_plain_text(loaded: LocalApiServer) -> None:
    answer = call(loaded, "/v1/ip/1.0.0.1/organization")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.body == b"Cloudflare, Inc.\n"
    assert call(loaded, "/v1/ip/1.0.0.1/asn").body == b"13335\n"
    assert call(loaded, "/v1/ip/0.0.0.1/bogon").body == b"true\n"
    assert call(loaded, "/v1/ip/::ffff:1.0.0.1/ip").body == b"1.0.0.1\n"


def test_an_unknown_field_is_404_field_not_found(loaded: LocalApiServer) -> None:
    answer = call(loaded, "/v1/ip/1.0.0.1/city")
    assert (answer.status, answer.json()["code"]) == (404, "FIELD_NOT_FOUND")
    assert call(loaded, "/v1/ip/1.0.0.1/c#ity").json()["code"] == "FIELD_NOT_FOUND"


def test_bogons_with_data_answer_with_bogon_true(loaded: LocalApiServer) -> None:
    """The fixture has ranges for 0.0.0.0/24 and :: (bogons), as internal datasets do."""
    for ip, asn in [("0.0.0.9", 64504), ("::1", 64506)]:
        body = call(loaded, f"/v1/ip/{ip}").json()
        assert (body["bogon"], body["data"]["asn"]) == (True, asn)
    assert call(loaded, "/v1/ip/1.0.0.1").json()["bogon"] is False


def test_bogons_without_data_are_404_reserved(loaded: LocalApiServer) -> None:
    for ip in ["192.168.1.1", "fe80::1", "2001:db8::1", "127.0.0.1"]:
        answer = call(loaded, f"/v1/ip/{ip}")
        assert (answer.status, answer.json()["code"]) == (404, "IP_ADDRESS_RESERVED"), ip


@pytest.mark.parametrize(
    "path",
    [
        "/v1/ip/010.0.0.1",
        "/v1/ip/fe80::1%25eth0",
        "/v1/ip/%201.1.1.1",
        "/v1/ip/%D9%A1.%D9%A1.%D9%A1.%D9%A1",
        "/v1/ip/" + "1" * 5000,
        '/v1/ip/1.1"1',  # a character powertools' path pattern refuses: still 400, not 404
        "/v1/ip/1.1.1.1%5C",
        "/v1/ip/999.1.1.1/asn",
    ],
)
def test_malformed_ips_are_always_400_invalid(loaded: LocalApiServer, path: str) -> None:
    answer = call(loaded, path)
    assert (answer.status, answer.json()["code"]) == (400, "IP_ADDRESS_INVALID")


def test_retained_versions_answer_and_others_are_404(
    store: LoaderTable, api_server: LocalApiServer, tmp_path: Path
) -> None:
    # Given v1 from the fixture, then v2 with 1.0.0.0/24 relabelled, activated after it
    load_csv(store, [FIXTURE], tmp_path)
    second = tmp_path / "second.csv"
    second.write_text(FIXTURE.read_text().replace("13335,", "99999,"))
    load_csv(store, [second], tmp_path / "2")
    store.versions.put_meta(VersionMeta(7, VersionStatus.LOADING))
    # Then the active version answers by default and v1 on request
    assert call(api_server, "/v1/ip/1.0.0.1").json()["data"]["asn"] == 99999
    old = call(api_server, "/v1/ip/1.0.0.1?version=v1").json()
    assert (old["data"]["asn"], old["datasets"]["default"]["version"]) == (13335, "v1")
    assert call(api_server, "/v1/ip/1.0.0.1/asn?version=1").body == b"13335\n"
    for version, status, code in [("v7", 404, "VERSION_NOT_FOUND"), ("v99", 404, "VERSION_NOT_FOUND")]:
        answer = call(api_server, f"/v1/ip/1.0.0.1?version={version}")
        assert (answer.status, answer.json()["code"]) == (status, code)
    assert call(api_server, "/v1/ip/1.0.0.1?version=latest").json()["code"] == "VERSION_INVALID"
    # And the datasets endpoints list exactly the retained versions
    [listing] = call(api_server, "/v1/datasets").json()["datasets"]
    assert (listing["name"], listing["active"]) == ("default", "v2")
    assert [(d["id"], d["status"]) for d in listing["versions"]] == [("v2", "active"), ("v1", "retired")]
    current = call(api_server, "/v1/datasets/current").json()
    assert current["id"] == "v2"
    assert [Path(name).name for name in current["source"]] == ["second.csv"]
    assert current["checksum"].startswith("sha256:")
    assert current["rows"] == 10
    assert current["items"] >= current["rows"]


# -- caching and CORS ----------------------------------------------------------------------


def test_etag_and_if_none_match_give_304(loaded: LocalApiServer) -> None:
    first = call(loaded, "/v1/ip/1.0.0.1")
    assert first.headers["cache-control"] == "public, max-age=3600"
    etag = first.headers["etag"]
    # Same range, same version: same validator; another representation: another one
    assert call(loaded, "/v1/ip/1.0.0.200").headers["etag"] == etag
    assert call(loaded, "/v1/ip/1.0.0.1?fields=asn").headers["etag"] != etag
    assert call(loaded, "/v1/ip/1.0.4.1").headers["etag"] != etag
    revalidated = call(loaded, "/v1/ip/1.0.0.1", headers={"If-None-Match": etag})
    assert (revalidated.status, revalidated.body) == (304, b"")
    assert revalidated.headers["etag"] == etag
    assert call(loaded, "/v1/ip/1.0.0.1", headers={"If-None-Match": '"stale"'}).status == 200


def test_cache_max_age_is_configurable(loaded: LocalApiServer) -> None:
    configure(cache_max_age_seconds=60)
    assert call(loaded, "/v1/ip/1.0.0.1/asn").headers["cache-control"] == "public, max-age=60"


def test_cacheable_answers_vary_by_origin(loaded: LocalApiServer) -> None:
    """With several CORS origins the answer names the caller's; caches must key on it."""
    assert call(loaded, "/v1/ip/1.0.0.1", headers={"Origin": "https://a.example"}).headers["vary"] == "Origin"


def test_cors_headers_for_the_configured_origins(loaded: LocalApiServer) -> None:
    """The default configuration allows any origin (a public lookup API)."""
    answer = call(loaded, "/v1/ip/1.0.0.1", headers={"Origin": "https://example.org"})
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "ETag" in answer.headers["access-control-expose-headers"]
    preflight = call(
        loaded,
        "/v1/batch",
        method="OPTIONS",
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status == 204
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "If-None-Match" in preflight.headers["access-control-allow-headers"]


# -- the caller's address ------------------------------------------------------------------


def test_the_caller_is_the_source_ip_unless_a_proxy_is_trusted(loaded: LocalApiServer) -> None:
    # The test client is 127.0.0.1: a bogon the fixture has no range for
    answer = call(loaded, "/v1/ip", headers={"X-Forwarded-For": "1.0.0.1"})
    assert (answer.status, answer.json()["code"]) == (404, "IP_ADDRESS_RESERVED")
    configure(trusted_proxy_hops=1)
    answer = call(loaded, "/v1/ip?fields=asn", headers={"X-Forwarded-For": "6.6.6.6, 1.0.0.1"})
    assert answer.status == 200
    assert (answer.json()["ip"], answer.json()["data"]) == ("1.0.0.1", {"asn": 13335})
    assert answer.headers["cache-control"].startswith("private")


# -- batches -----------------------------------------------------------------------------------


def test_a_batch_answers_each_input_string(loaded: LocalApiServer) -> None:
    answer = post_batch(loaded, ["1.0.0.1", "::ffff:1.0.0.1", "1.0.1.0", "10.9.9.9", "nope", "1.0.0.1"])
    assert answer.status == 200
    body = answer.json()
    assert list(body) == ["1.0.0.1", "::ffff:1.0.0.1", "1.0.1.0", "10.9.9.9", "nope"]
    assert body["1.0.0.1"]["data"]["asn"] == 13335
    assert body["::ffff:1.0.0.1"] == body["1.0.0.1"]
    assert body["1.0.1.0"]["error"]["code"] == "IP_ADDRESS_NOT_FOUND"
    assert body["10.9.9.9"]["error"]["code"] == "IP_ADDRESS_RESERVED"
    assert body["nope"]["error"]["code"] == "IP_ADDRESS_INVALID"


def test_a_batch_queries_each_distinct_address_once(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path
) -> None:
    store, counter = counted_store
    load_csv(store, [FIXTURE], tmp_path)
    with running_api_server(store, pointer_cache_seconds=60.0) as server:
        counter.reset()
        ips = ["1.0.0.1", "1.0.4.1", "2001:200::1", "::ffff:1.0.0.1", "1.0.4.1"] * 20
        answer = post_batch(server, ips, "?fields=asn")
        assert answer.status == 200
        assert answer.json()["2001:200::1"]["data"] == {"asn": 2500}
        assert counter.operations().count("Query") == 3


def test_batch_limits_and_bad_bodies(loaded: LocalApiServer) -> None:
    configure(batch_max_ips=3)
    cases = [
        (post_batch(loaded, ["1.0.0.1"] * 4), "BATCH_TOO_LARGE"),
        (post_batch(loaded, b"not json"), "BATCH_BODY_NOT_JSON"),
        (post_batch(loaded, {"ips": []}), "BATCH_BODY_NOT_ARRAY"),
        (post_batch(loaded, ["1.0.0.1", 1]), "BATCH_ITEM_NOT_STRING"),
    ]
    for answer, code in cases:
        assert (answer.status, answer.json()["code"]) == (400, code)
    assert post_batch(loaded, ["1.0.0.1"] * 3).status == 200  # duplicates count as sent
    empty = post_batch(loaded, [])
    assert (empty.status, empty.json()) == (200, {})


def test_a_batch_without_a_dataset_is_503(api_server: LocalApiServer) -> None:
    answer = post_batch(api_server, ["1.0.0.1"])
    assert (answer.status, answer.json()["code"]) == (503, "NO_DATASET")


# -- health ------------------------------------------------------------------------------------


def test_health(store: LoaderTable, api_server: LocalApiServer, tmp_path: Path) -> None:
    answer = call(api_server, "/v1/health")
    assert (answer.status, answer.json()["code"]) == (503, "NO_DATASET")
    load_csv(store, [FIXTURE], tmp_path)
    healthy = call(api_server, "/v1/health")
    assert healthy.status == 200
    assert healthy.json()["datasets"]["default"]["version"] == "v1"
    assert healthy.json()["datasets"]["default"]["age_seconds"] < 60
    meta = store.lookup.get_version_meta(1)
    assert meta is not None
    store.versions.put_meta(dataclasses.replace(meta, created_at=int(time.time()) - 9 * 24 * 3600))
    stale = call(api_server, "/v1/health")
    assert (stale.status, stale.json()["code"]) == (503, "DATASET_STALE")


# -- the contract --------------------------------------------------------------------------------


def test_openapi_document_and_swagger_ui_are_served(api_server: LocalApiServer) -> None:
    spec = call(api_server, "/v1/openapi.json").json()
    assert spec["servers"] == [{"url": "/"}]
    assert {"/v1/ip/{ip}", "/v1/ip/{ip}/{field}", "/v1/ip", "/v1/batch", "/v1/health"} <= set(spec["paths"])
    docs = call(api_server, "/v1/docs")
    assert docs.headers["content-type"].startswith("text/html")
    assert b"SwaggerUIBundle" in docs.body
    assert b"<script src=" not in docs.body  # the bundle is inline: no CDN needed
    assert call(api_server, "/v1/docs?format=json").json() == spec


def test_unknown_routes_are_404_route_not_found(api_server: LocalApiServer) -> None:
    answer = call(api_server, "/v1/nope")
    assert (answer.status, answer.json()["code"]) == (404, "ROUTE_NOT_FOUND")
