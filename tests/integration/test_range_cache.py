"""The range cache through the real HTTP server and handler, counted at dynalite.

Every request botocore sends is counted (``counted_store``): an uncached
lookup must cost exactly one Query, and a cached one none.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import DEFAULT_RANGE_CACHE_BYTES, ENV_RANGE_CACHE_BYTES
from ipmeta_cli.server import LocalApiServer
from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter, load_csv, running_api_server
from tests.integration.conftest import get_json as get

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"
Counted = tuple[LoaderTable, RequestCounter]


def post(server: LocalApiServer, path: str, payload: Any) -> dict[str, Any]:
    request = urllib.request.Request(
        server.url + path, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


@pytest.fixture
def cached_server(counted_store: Counted, tmp_path: Path) -> Iterator[tuple[LocalApiServer, RequestCounter]]:
    store, counter = counted_store
    load_csv(store, [FIXTURE], tmp_path)
    with running_api_server(store, 60.0, RangeCache(DEFAULT_RANGE_CACHE_BYTES)) as server:
        get(server, "/v1/ip/1.0.0.1")  # reads the pointer, caches 1.0.0.0/24
        counter.reset()
        yield server, counter


def queries_for(
    server: LocalApiServer, counter: RequestCounter, path: str
) -> tuple[int, dict[str, Any], int]:
    before = counter.operations().count("Query")
    status, body = get(server, path)
    return status, body, counter.operations().count("Query") - before


def test_one_query_per_uncached_lookup_and_none_for_a_cached_one(
    cached_server: tuple[LocalApiServer, RequestCounter],
) -> None:
    server, counter = cached_server
    # (path, asn or error code, Queries it may cost)
    steps: list[tuple[str, int | str, int]] = [
        ("/v1/ip/1.0.0.1", 13335, 0),  # cached by the fixture
        ("/v1/ip/1.0.0.255", 13335, 0),  # another address of the same range
        ("/v1/ip/1.0.4.1", 38803, 1),
        ("/v1/ip/1.0.7.255", 38803, 0),
        ("/v1/ip/10.0.0.100", 64500, 1),  # 9.255.255.0-10.0.0.127, across a /8
        ("/v1/ip/9.255.255.7", 64500, 0),  # its other bucket: the range answers
        ("/v1/ip/10.0.0.130", 64502, 1),  # the overlapping range that won
        ("/v1/ip/2001:200::1", 2500, 1),
        ("/v1/ip/2001:200:1b9::5", 2500, 0),
        ("/v1/ip/::ffff:1.0.4.9", 38803, 0),  # mapped IPv4 answers as IPv4, from the cache
    ]
    for path, expected, queries in steps:
        status, body, spent = queries_for(server, counter, path)
        assert status == 200, (path, body)
        assert (body["data"]["asn"], spent) == (expected, queries), path
    # Nothing else reached DynamoDB: the pointer was cached, and each Query was the lookup's
    assert counter.operations() == ["Query"] * 4
    for _, params in counter.calls:
        assert (params["Limit"], params["ScanIndexForward"]) == (1, False)


def test_a_cached_answer_never_crosses_a_gap(cached_server: tuple[LocalApiServer, RequestCounter]) -> None:
    server, counter = cached_server
    steps: list[tuple[str, int | str, int]] = [
        ("/v1/ip/1.0.1.0", "IP_ADDRESS_NOT_FOUND", 1),  # right after the cached 1.0.0.0/24
        ("/v1/ip/1.0.1.0", "IP_ADDRESS_NOT_FOUND", 0),  # the gap is cached ...
        ("/v1/ip/1.0.2.0", "IP_ADDRESS_NOT_FOUND", 1),  # ... only up to the address asked
        ("/v1/ip/1.0.1.200", "IP_ADDRESS_NOT_FOUND", 0),
        ("/v1/ip/1.0.3.255", "IP_ADDRESS_NOT_FOUND", 1),
        ("/v1/ip/1.0.4.0", 38803, 1),  # the range after the gap is queried, not assumed
        ("/v1/ip/10.0.0.200", 64500, 1),  # the crossing range's tail, after the overlap
        ("/v1/ip/10.0.0.250", 64500, 0),
        ("/v1/ip/10.0.1.0", 64501, 1),
        ("/v1/ip/10.0.2.0", "IP_ADDRESS_RESERVED", 1),  # a gap in 10/8: a bogon
        ("/v1/ip/10.0.1.255", 64501, 0),
        ("/v1/ip/10.0.2.1", "IP_ADDRESS_RESERVED", 1),
        ("/v1/ip/10.0.2.0", "IP_ADDRESS_RESERVED", 0),
    ]
    for path, expected, queries in steps:
        status, body, spent = queries_for(server, counter, path)
        answer = body["data"]["asn"] if status == 200 else body["code"]
        assert (answer, spent) == (expected, queries), path


def test_a_cached_answer_is_never_served_for_another_version(counted_store: Counted, tmp_path: Path) -> None:
    # Given v1 answers "one" everywhere, and its answer for 1.1.0.0/24 is cached
    store, counter = counted_store
    first = tmp_path / "one.csv"
    first.write_text("start,end,name\n1.1.0.0,1.1.0.255,one\n2.1.0.0,2.1.0.255,one\n")
    load_csv(store, [first], tmp_path / "a")
    with running_api_server(store, 0.0, RangeCache(DEFAULT_RANGE_CACHE_BYTES)) as server:
        assert get(server, "/v1/ip/1.1.0.1")[1]["data"] == {"name": "one"}
        assert get(server, "/v1/ip/2.1.1.0")[1]["code"] == "IP_ADDRESS_NOT_FOUND"  # a cached gap
        # When v2 is activated, with other data for that range and a range in that gap
        second = tmp_path / "two.csv"
        second.write_text("start,end,name\n1.1.0.0,1.1.0.255,two\n2.1.1.0,2.1.1.255,two\n")
        load_csv(store, [second], tmp_path / "b")
        counter.reset()
        # Then the same addresses are queried again and answer v2's data
        status, body, spent = queries_for(server, counter, "/v1/ip/1.1.0.1")
        assert (body["data"], body["datasets"]["default"]["version"], spent) == ({"name": "two"}, "v2", 1)
        status, body, spent = queries_for(server, counter, "/v1/ip/2.1.1.0")
        assert (status, body["data"], spent) == (200, {"name": "two"}, 1)
        # And v1, still retained, answers its own data from its own entries
        status, body, spent = queries_for(server, counter, "/v1/ip/1.1.0.9?version=v1")
        assert (body["data"], body["datasets"]["default"]["version"], spent) == ({"name": "one"}, "v1", 0)
        status, body, spent = queries_for(server, counter, "/v1/ip/2.1.1.0?version=v1")
        assert (body["code"], spent) == ("IP_ADDRESS_NOT_FOUND", 0)


def test_a_batch_uses_the_cache(cached_server: tuple[LocalApiServer, RequestCounter]) -> None:
    server, counter = cached_server
    ips = ["1.0.0.1", "1.0.0.2", "1.0.4.1", "1.0.5.1", "1.0.1.9", "10.0.1.3", "nope"]
    first = post(server, "/v1/batch", ips)
    # 1.0.0.x was cached; 1.0.4.1 and 1.0.5.1 are in one range but asked at once; a gap; 10.0.1.0/24
    assert counter.operations().count("Query") == 4
    assert first["1.0.5.1"]["data"]["asn"] == 38803
    assert first["1.0.1.9"]["error"]["code"] == "IP_ADDRESS_NOT_FOUND"
    counter.reset()
    second = post(server, "/v1/batch", ips)
    assert counter.operations().count("Query") == 0
    assert second == first
    # And single lookups answer from what the batch cached
    assert queries_for(server, counter, "/v1/ip/10.0.1.200")[2] == 0


def test_the_container_sizes_the_cache_from_the_environment(
    table_environment: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    dependencies.install(None)
    try:
        monkeypatch.delenv(ENV_RANGE_CACHE_BYTES, raising=False)
        assert dependencies.current().ranges.max_bytes == DEFAULT_RANGE_CACHE_BYTES == 32 * 1024 * 1024
        dependencies.install(None)
        monkeypatch.setenv(ENV_RANGE_CACHE_BYTES, "0")
        assert dependencies.current().ranges.max_bytes == 0
    finally:
        dependencies.install(None)
