"""Reverse lookups on dynalite: ranges by value (sharded GSI) and flagged ranges (sparse GSI).

The oracle is always the CSV itself, filtered by brute force; the sparse index
is checked by scanning the index, not only through the API.
"""

from __future__ import annotations

import csv
import http.client
import ipaddress
import json
import random
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.schema import keys
from ipmeta_cli.server import LocalApiServer
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.records import LoadStatus
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from testing.index_scan import scan_index

COLUMNS = ["start", "end", "asn", "organization", "rule"]


def get(server: LocalApiServer, path: str, **query: Any) -> tuple[int, dict[str, Any]]:
    host, port = str(server.server_address[0]), int(server.server_address[1])
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        connection.request("GET", url)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def all_pages(server: LocalApiServer, path: str, **query: Any) -> tuple[list[dict[str, Any]], int]:
    ranges: list[dict[str, Any]] = []
    pages = 0
    while True:
        status, body = get(server, path, **query)
        assert status == 200, body
        ranges.extend(body["ranges"])
        pages += 1
        if body["next"] is None:
            return ranges, pages
        query["next"] = body["next"]


def synthetic_rows(count: int, seed: int = 7) -> list[list[str]]:
    """Non-overlapping v4 and v6 ranges; asn values Zipf-like (a few very hot); ~1% with a rule."""
    rng = random.Random(seed)
    rows: list[list[str]] = []
    v4, v6 = 0x01000000, 0x20010DB8 << 96
    for index in range(count):
        asn = str(min(int(rng.paretovariate(0.9)), 500)) if rng.random() < 0.9 else "13335"
        rule = f"rule-{index}" if rng.random() < 0.01 else ""
        if index % 5 == 4:
            first, last = v6, v6 + rng.randrange(1, 1 << 64)
            v6 = last + 1 + rng.randrange(0, 1 << 60)
            rows.append(
                [str(ipaddress.IPv6Address(first)), str(ipaddress.IPv6Address(last)), asn, "org", rule]
            )
        else:
            first, last = v4, v4 + rng.randrange(0, 4096)
            v4 = last + 1 + rng.randrange(0, 256)
            rows.append(
                [str(ipaddress.IPv4Address(first)), str(ipaddress.IPv4Address(last)), asn, "org", rule]
            )
    return rows


def order_key(row: list[str]) -> tuple[int, int]:
    address = ipaddress.ip_address(row[0])
    return address.version, int(address)


def as_pairs(ranges: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(entry["start"], entry["end"]) for entry in ranges]


@pytest.fixture
def synthetic(tmp_path: Path, store: LoaderTable) -> Iterator[tuple[list[list[str]], LocalApiServer]]:
    rows = synthetic_rows(3000)
    path = tmp_path / "ranges.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([COLUMNS, *rows])
    # Row by row, so every CSV row is one range the listings must return (adjacent rows with
    # equal data would otherwise be one coalesced range).
    options = LoadOptions(
        index_field="asn", flag_column="rule", shard_budget=40, max_shards=16, coalesce=False
    )
    result = driver.run_load([path], options, store, LocalStaging(tmp_path / "staging"))
    assert result.status == LoadStatus.ACTIVATED
    from ipmeta.api.handler import handler

    dependencies.install(dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0.0))
    server = LocalApiServer("127.0.0.1", 0, handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield rows, server
    server.shutdown()
    server.server_close()
    dependencies.install(None)


def test_every_value_pages_to_exactly_its_rows_in_order(
    synthetic: tuple[list[list[str]], LocalApiServer],
) -> None:
    rows, server = synthetic
    counts = Counter(row[2] for row in rows)
    # Given the hottest values (sharded) and some rare ones (one shard)
    values = [value for value, _ in counts.most_common(4)] + [v for v, c in counts.items() if c <= 2][:4]
    for value, limit in zip(values, [7, 50, 1000, 3, 1, 13, 100, 2], strict=True):
        # When every page is read
        ranges, pages = all_pages(server, "/v1/ranges", field="asn", value=value, limit=limit)
        # Then they are the CSV's rows of that value, sorted, each once
        expected = sorted((row for row in rows if row[2] == value), key=order_key)
        assert as_pairs(ranges) == [(row[0], row[1]) for row in expected], value
        assert all(entry["data"]["asn"] == int(value) for entry in ranges)
        assert pages >= len(expected) // limit


def test_hot_value_is_sharded_and_unknown_value_is_empty(
    synthetic: tuple[list[list[str]], LocalApiServer], store: LoaderTable
) -> None:
    _, server = synthetic
    meta = store.lookup.get_version_meta(store.lookup.read_active_version() or 0)
    assert meta is not None
    assert meta.value_index is not None
    assert meta.value_index.own_shards is not None
    shards = keys.decode_own_shards(meta.value_index.own_shards)
    assert shards[keys.value_hash_text("13335")] > 1
    status, body = get(server, "/v1/ranges", field="asn", value="999999")
    assert (status, body["ranges"], body["next"]) == (200, [], None)
    # A Number column finds 13335 however it is spelled
    first = get(server, "/v1/ranges", field="asn", value="13335", limit=3)[1]["ranges"]
    for spelling in ("013335", "AS13335", " as13335 "):
        status, body = get(server, "/v1/ranges", field="ASN", value=spelling, limit=3)
        assert status == 200
        assert body["value"] == "13335"
        assert body["ranges"] == first


def test_flagged_lists_exactly_the_flagged_rows_and_the_index_holds_nothing_else(
    synthetic: tuple[list[list[str]], LocalApiServer], store: LoaderTable
) -> None:
    rows, server = synthetic
    flagged = sorted((row for row in rows if row[4]), key=order_key)
    assert 0.005 * len(rows) < len(flagged) < 0.02 * len(rows)
    ranges, _ = all_pages(server, "/v1/flagged", limit=9)
    assert as_pairs(ranges) == [(row[0], row[1]) for row in flagged]
    # The index itself: only flagged ranges have keys in it, each once
    entries = list(scan_index(store.lookup, keys.FLAGGED))
    assert sorted((entry["start"], entry["end"]) for entry in entries) == sorted(
        (row[0], row[1]) for row in flagged
    )
    assert all(entry["data"]["rule"] for entry in entries)
    assert set(entries[0]) <= {
        keys.PARTITION_KEY,
        keys.SORT_KEY,
        keys.GSI2_PARTITION_KEY,
        keys.GSI2_SORT_KEY,
        *keys.INDEX_PROJECTED_ATTRIBUTES,
    }


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"value": "13335"}, "FIELD_NOT_INDEXED"),
        ({"field": "organization", "value": "org"}, "FIELD_NOT_INDEXED"),
        ({"field": "asn"}, "VALUE_MISSING"),
        ({"field": "asn", "value": " "}, "VALUE_MISSING"),
        ({"field": "asn", "value": "cloudflare"}, "VALUE_INVALID"),
        ({"field": "asn", "value": "13335.0"}, "VALUE_INVALID"),
        ({"field": "asn", "value": "AS"}, "VALUE_INVALID"),
        ({"field": "asn", "value": "1", "limit": "0"}, "LIMIT_INVALID"),
        ({"field": "asn", "value": "1", "limit": "1001"}, "LIMIT_INVALID"),
        ({"field": "asn", "value": "1", "limit": "ten"}, "LIMIT_INVALID"),
        ({"field": "asn", "value": "1", "next": "garbage"}, "INVALID_TOKEN"),
        ({"field": "asn", "value": "1", "next": "a.b"}, "INVALID_TOKEN"),
    ],
)
def test_bad_input_is_400_with_its_own_code(
    synthetic: tuple[list[list[str]], LocalApiServer], query: dict[str, str], code: str
) -> None:
    _, server = synthetic
    status, body = get(server, "/v1/ranges", **query)
    assert (status, body["code"]) == (400, code)


def test_tampered_or_foreign_tokens_are_refused(synthetic: tuple[list[list[str]], LocalApiServer]) -> None:
    _, server = synthetic
    _, first = get(server, "/v1/ranges", field="asn", value="13335", limit=5)
    token = first["next"]
    payload, signature = token.split(".")
    flipped = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
    for bad in (f"{flipped}.{signature}", f"{payload}.{signature[::-1]}"):
        status, body = get(server, "/v1/ranges", field="asn", value="13335", next=bad)
        assert (status, body["code"]) == (400, "INVALID_TOKEN")
    # A valid token of another question is no token for this one
    status, body = get(server, "/v1/ranges", field="asn", value="1", next=token)
    assert (status, body["code"]) == (400, "INVALID_TOKEN")
    status, body = get(server, "/v1/flagged", next=token)
    assert (status, body["code"]) == (400, "INVALID_TOKEN")
    status, body = get(server, "/v1/ranges", field="asn", value="13335", next=token, version="v99")
    assert (status, body["code"]) == (400, "INVALID_TOKEN")


def test_a_version_loaded_without_indexes_says_so(
    store: LoaderTable, tmp_path: Path, api_server: LocalApiServer
) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("start,end,asn\n1.0.0.0,1.0.0.255,13335\n")
    driver.run_load([path], LoadOptions(), store, LocalStaging(tmp_path / "staging"))
    status, body = get(api_server, "/v1/ranges", field="asn", value="13335")
    assert (status, body["code"]) == (400, "FIELD_NOT_INDEXED")
    status, body = get(api_server, "/v1/flagged")
    assert (status, body["code"]) == (404, "FLAGS_NOT_INDEXED")
    assert not list(scan_index(store.lookup, keys.RANGES_BY_VALUE))
    assert not list(scan_index(store.lookup, keys.FLAGGED))


def test_text_is_matched_verbatim_and_blank_or_oversized_cells_index_nothing(
    store: LoaderTable, tmp_path: Path, api_server: LocalApiServer
) -> None:
    long_value = "x" * (keys.MAX_INDEXED_VALUE_BYTES + 1)
    rows = [
        ["1.0.0.0", "1.0.0.255", "PhotoShelter, Inc. ", " ", "-5"],
        ["1.0.1.0", "1.0.1.255", "PhotoShelter, Inc.", "block", "7"],
        ["1.0.2.0", "1.0.2.255", "   ", "", "-5"],
        ["1.0.3.0", "1.0.3.255", long_value, "\t", "7"],
    ]
    path = tmp_path / "cells.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([["start", "end", "org", "rule", "num"], *rows])
    options = LoadOptions(index_field="org", flag_column="rule")
    result = driver.run_load([path], options, store, LocalStaging(tmp_path / "by-org"))
    assert result.status == LoadStatus.ACTIVATED
    assert result.report.value_index is not None
    assert result.report.value_index["ranges_not_indexed_value_too_long"] == 1

    # Trailing spaces are part of the value, as the forward lookup shows it
    for value, start in (("PhotoShelter, Inc. ", "1.0.0.0"), ("PhotoShelter, Inc.", "1.0.1.0")):
        status, body = get(api_server, "/v1/ranges", field="org", value=value)
        assert status == 200, body
        assert [entry["start"] for entry in body["ranges"]] == [start]
    assert get(api_server, "/v1/ranges", field="org", value="   ")[1]["code"] == "VALUE_MISSING"
    assert get(api_server, "/v1/ranges", field="org", value=long_value)[1]["code"] == "VALUE_INVALID"
    # The indexes themselves: no entry for a blank or oversized value, no flag for a blank rule
    by_value = sorted(entry["start"] for entry in scan_index(store.lookup, keys.RANGES_BY_VALUE))
    assert by_value == ["1.0.0.0", "1.0.1.0"]
    assert [entry["start"] for entry in scan_index(store.lookup, keys.FLAGGED)] == ["1.0.1.0"]
    assert [entry["start"] for entry in get(api_server, "/v1/flagged")[1]["ranges"]] == ["1.0.1.0"]

    # Negative integers in a Number column, and a token used with ?version= spelled another way
    result = driver.run_load([path], LoadOptions(index_field="num"), store, LocalStaging(tmp_path / "by-num"))
    assert result.status == LoadStatus.ACTIVATED
    status, first = get(api_server, "/v1/ranges", field="num", value="-5", limit=1)
    assert (status, first["value"], as_pairs(first["ranges"])) == (200, "-5", [("1.0.0.0", "1.0.0.255")])
    version = first["dataset"]["version"].removeprefix("v")
    status, second = get(
        api_server, "/v1/ranges", field="num", value="-5", next=first["next"], version=f"v0{version}"
    )
    assert (status, as_pairs(second["ranges"]), second["next"]) == (200, [("1.0.2.0", "1.0.2.255")], None)
