"""Acceptance on the real ASN dataset: 10,000 random ranges, four probes each.

For every sampled range the test looks up its start, its end, the address just
before the start and the one just after the end, over HTTP, and compares each
answer with a scan of the CSV that knows nothing of the loader
(``testing.row_scan``): the last row (in file order) containing the address
wins, and no row means 404.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli.demo import ASN_COLUMNS, ASN_FILES
from ipmeta_cli.server import LocalApiServer
from loader.batching import batched
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.settings import default_workers
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.row_scan import CsvScan, read_csv
from tests.integration.conftest import running_api_server

SAMPLED_RANGES = 10_000


@pytest.fixture(scope="module")
def asn_server(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiServer]:
    settings = Settings("ipmeta-asn-acceptance", dynalite_endpoint, 0.0)
    store = LoaderTable.from_settings(settings)
    create_table_if_missing(store.client, store.table_name)
    # As `ipmeta load` runs it: the scans and resolves on every core
    folder = tmp_path_factory.mktemp("asn")
    options = LoadOptions(columns=list(ASN_COLUMNS))
    staging = LocalStaging(folder / "staging")
    result = driver.run_load(list(ASN_FILES), options, store, staging, workers=default_workers())
    assert result.status == "activated"
    with running_api_server(store, pointer_cache_seconds=60.0) as server:
        yield server


def post_batch(server: LocalApiServer, addresses: list[str]) -> dict[str, Any]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=120)
    try:
        connection.request(
            "POST", "/v1/batch", body=json.dumps(addresses), headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        assert response.status == 200
        return dict(json.loads(response.read()))
    finally:
        connection.close()


def test_ten_thousand_random_ranges_answer_like_a_scan_of_the_csv(asn_server: LocalApiServer) -> None:
    v4_path, v6_path = ASN_FILES
    v4_rows = read_csv(v4_path, 0)
    v6_rows = read_csv(v6_path, len(v4_rows))
    scans = {4: CsvScan(v4_rows), 6: CsvScan(v6_rows)}
    tops = {4: 2**32 - 1, 6: 2**128 - 1}
    sampled = random.Random(20261122).sample(
        [(4, row) for row in v4_rows] + [(6, row) for row in v6_rows], SAMPLED_RANGES
    )

    probes: list[tuple[int, int]] = []
    for family, row in sampled:
        for value in (row.start, row.end, row.start - 1, row.end + 1):
            if 0 <= value <= tops[family]:
                probes.append((family, value))

    texts = {
        str(ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value)): (family, value)
        for family, value in probes
        # A mapped address answers as IPv4 by design; it is not the v6 row's to answer.
        if family == 4 or ipaddress.IPv6Address(value).ipv4_mapped is None
    }
    names = list(texts)
    batches = [list(batch) for batch in batched(names, 1000)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers: dict[str, Any] = {}
        for answered in pool.map(lambda batch: post_batch(asn_server, batch), batches):
            answers.update(answered)

    mismatches = []
    for text, (family, value) in texts.items():
        expected = scans[family].owner(value)
        answer = answers[text]
        if expected is None:
            # A gap: not found, or reserved when it is a bogon the data does not cover.
            if answer.get("error", {}).get("code") not in {"IP_ADDRESS_NOT_FOUND", "IP_ADDRESS_RESERVED"}:
                mismatches.append(f"{text}: {answer}, want not found")
        elif answer.get("data") != expected.values:
            mismatches.append(f"{text}: {answer}, want {expected.values}")
    assert len(probes) >= 4 * SAMPLED_RANGES - 2
    assert mismatches == [], f"{len(mismatches)} of {len(probes)} answers differ, e.g. {mismatches[:5]}"
