"""The lookup API through the real HTTP server, on a fixture CSV loaded into dynalite."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ipmeta_cli.server import LocalApiServer
from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter, load_csv, running_api_server
from tests.integration.conftest import get_json as get

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"


@pytest.fixture
def loaded(store: LoaderTable, api_server: LocalApiServer, tmp_path: Path) -> LocalApiServer:
    load_csv(store, [FIXTURE], tmp_path)
    return api_server


def test_answers_a_range_with_its_metadata_and_cidrs(loaded: LocalApiServer) -> None:
    status, body = get(loaded, "/v1/ip/1.0.5.9")
    assert status == 200
    found = {"start": "1.0.4.0", "end": "1.0.7.255", "cidrs": ["1.0.4.0/22"]}
    data = {"asn": 38803, "organization": "Gtelecom Pty Ltd", "country": "AU"}
    assert body == {
        "ip": "1.0.5.9",
        "bogon": False,
        "range": found,
        "data": data,
        "datasets": {"default": {"version": "v1", "range": found, "data": data}},
        "inactive": [],
    }


@pytest.mark.parametrize(
    ("ip", "asn"),
    [
        ("0.0.0.0", 64504),
        ("255.255.255.255", 64503),
        ("::", 64506),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 64505),
        ("ffff:ffff:ffff:ffff::", 64505),
        ("2001:200::1", 2500),
        ("::ffff:1.0.0.1", 13335),  # IPv4-mapped IPv6 answers as IPv4
    ],
)
def test_both_ends_of_both_address_spaces(loaded: LocalApiServer, ip: str, asn: int) -> None:
    status, body = get(loaded, f"/v1/ip/{ip}")
    assert status == 200, body
    assert body["data"]["asn"] == asn


def test_a_range_split_at_a_bucket_boundary_answers_on_both_sides(loaded: LocalApiServer) -> None:
    # 9.255.255.0-10.0.0.255 crosses into 10/8; 10.0.0.128-191 overrides part of it (later row wins).
    below = get(loaded, "/v1/ip/9.255.255.7")[1]
    above = get(loaded, "/v1/ip/10.0.0.5")[1]
    assert below["data"]["asn"] == above["data"]["asn"] == 64500
    assert below["range"] == {
        "start": "9.255.255.0",
        "end": "10.0.0.127",
        "cidrs": ["9.255.255.0/24", "10.0.0.0/25"],
    }
    assert get(loaded, "/v1/ip/10.0.0.150")[1]["data"]["asn"] == 64502
    assert get(loaded, "/v1/ip/10.0.0.200")[1]["data"]["asn"] == 64500


@pytest.mark.parametrize(
    ("ip", "code"),
    [
        ("1.0.1.0", "IP_ADDRESS_NOT_FOUND"),  # the gap between two ranges of bucket 1: not the previous range
        ("1.0.8.0", "IP_ADDRESS_NOT_FOUND"),  # just after a range
        ("10.0.2.0", "IP_ADDRESS_RESERVED"),  # after the last range of its bucket (and private)
        ("0.0.1.0", "IP_ADDRESS_RESERVED"),  # after the first range of bucket 0 ("this network")
        ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IP_ADDRESS_RESERVED"),  # before a v6 range, in 2001::/23
        ("2001:200:1ba::", "IP_ADDRESS_NOT_FOUND"),  # just after a v6 range, global unicast
        ("9.0.0.1", "IP_ADDRESS_NOT_FOUND"),  # before the first range of its bucket
        ("200.1.1.1", "IP_ADDRESS_NOT_FOUND"),  # a bucket with no ranges at all
    ],
)
def test_gaps_answer_404(loaded: LocalApiServer, ip: str, code: str) -> None:
    status, body = get(loaded, f"/v1/ip/{ip}")
    assert status == 404
    assert body["code"] == code


@pytest.mark.parametrize("ip", ["999.1.1.1", "1.2.3", "01.2.3.4", "abc", "1.2.3.4%eth0", "fe80::1%25eth0"])
def test_invalid_addresses_answer_400(loaded: LocalApiServer, ip: str) -> None:
    status, body = get(loaded, f"/v1/ip/{ip}")
    assert status == 400
    assert body["code"] == "IP_ADDRESS_INVALID"


def test_no_dataset_answers_503(api_server: LocalApiServer) -> None:
    status, body = get(api_server, "/v1/ip/1.1.1.1")
    assert status == 503
    assert body["code"] == "NO_DATASET"


def test_one_query_per_lookup_and_a_cached_pointer(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path
) -> None:
    """Given a loaded dataset and a pointer cache, when 20 IPs are looked up over HTTP,
    then DynamoDB sees one read of the datasets and their pointers, and exactly one
    Limit=1 Query per lookup."""
    store, counter = counted_store
    load_csv(store, [FIXTURE], tmp_path)
    with running_api_server(store, pointer_cache_seconds=60.0) as server:
        counter.reset()
        ips = ["1.0.0.1", "1.0.1.0", "2001:200::1", "255.255.255.255", "10.0.0.150"] * 4
        for ip in ips:
            get(server, f"/v1/ip/{ip}")
        operations = counter.operations()
        # The list of datasets, then their pointers (one BatchGetItem whatever their number)
        assert operations[:2] == ["GetItem", "BatchGetItem"]
        assert operations.count("Query") == len(ips)
        assert len(operations) == len(ips) + 2
        for name, params in counter.calls:
            if name == "Query":
                assert params["Limit"] == 1
                assert params["ScanIndexForward"] is False
                assert "FilterExpression" not in params


def test_concurrent_requests_enter_the_handler_one_at_a_time_and_all_answer(
    store: LoaderTable, tmp_path: Path
) -> None:
    """A worker is one Lambda container: the handler's module-level resolver, logger and
    metrics hold the current request, so two requests inside it at once would mix."""
    from ipmeta.api.handler import handler

    load_csv(store, [FIXTURE], tmp_path)
    inside, most_inside, guard = 0, 0, threading.Lock()

    def counting_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        nonlocal inside, most_inside
        with guard:
            inside += 1
            most_inside = max(most_inside, inside)
        time.sleep(0.01)  # long enough for the other clients' requests to arrive meanwhile
        try:
            response: dict[str, Any] = handler(event, context)
            return response
        finally:
            with guard:
                inside -= 1

    ips = ["1.0.0.1", "2001:200::1", "1.0.5.5", "10.0.0.130"] * 8
    with (
        running_api_server(store, lambda_handler=counting_handler) as server,
        ThreadPoolExecutor(max_workers=16) as clients,
    ):
        answers = list(clients.map(lambda ip: get(server, f"/v1/ip/{ip}"), ips))
    assert most_inside == 1
    assert [status for status, _ in answers] == [200] * len(ips)
    expected = {"1.0.0.1": 13335, "2001:200::1": 2500, "1.0.5.5": 38803, "10.0.0.130": 64502}
    assert [body["data"]["asn"] for _, body in answers] == [expected[ip] for ip in ips]
