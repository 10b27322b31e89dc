"""No batch answer outgrows a Lambda response: under 6 MB, or the documented 413, on every front.

Given MaxMind's GeoIP2-Enterprise test database (``tests.geoip2_databases``), with its
Precision-Enterprise and City siblings, loaded with ``--mmdb-fields all`` (the fullest records
there are: every locale's names, every trait and confidence), and the real local server in front
of the real handler as each front serves it:

- a batch of 1,000 distinct addresses, the richest records first, on ``/v1/batch`` and
  ``/ipinfo/batch``;
- a batch of 1,000 spellings of the one address with the fullest records (zero-padded groups of
  the same IPv6 address), which must not multiply the answer past the limit;

each gets a 200 whose Lambda response (the handler's return value as the runtime serializes it)
is under 6 MB, or ``413 BATCH_ANSWER_TOO_LARGE``; never a 200 over 6 MB (AWS's 502).
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import maxminddb
import pytest

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Front, Settings
from ipmeta.store.dynamodb import make_client
from ipmeta_cli import main as cli
from ipmeta_cli.server import LocalApiServer
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.geoip2_databases import maxmind_test_database
from tests.integration.conftest import running_api_server

#: Lambda's response limit: 6 MB.
LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024
BATCH = 1_000
DATABASES = {
    "enterprise": "GeoIP2-Enterprise-Test",
    "precision": "GeoIP2-Precision-Enterprise-Test",
    "city": "GeoIP2-City-Test",
}
ROUTES = ("/v1/batch", "/ipinfo/batch")


@dataclass
class Loaded:
    table: LoaderTable
    enterprise: Path


@dataclass
class Sizes:
    """The size of each Lambda response the handler returned, as the runtime sends it."""

    carried: list[int] = field(default_factory=list)

    def wrap(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def measured(event: dict[str, Any], context: Any) -> dict[str, Any]:
            response = handler(event, context)
            self.carried.append(len(json.dumps(response).encode()))
            return response

        return measured


@pytest.fixture(scope="module")
def loaded(
    dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Loaded:
    # pytest's cache keeps the download between runs; without it (-p no:cacheprovider), a temp folder
    cache = getattr(request.config, "cache", None)
    folder = tmp_path_factory.mktemp("enterprise")
    downloads = Path(cache.mkdir("maxmind-test-databases")) if cache is not None else folder
    settings = Settings(
        table_name="ipmeta-batch-cap", dynamodb_endpoint=dynalite_endpoint, pointer_cache_seconds=0
    )
    create_table_if_missing(make_client(settings), settings.table_name)
    paths = {dataset: maxmind_test_database(name, downloads) for dataset, name in DATABASES.items()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_DYNAMODB_ENDPOINT, dynalite_endpoint)
        patch.setenv(ENV_TABLE_NAME, settings.table_name)
        for dataset, path in paths.items():
            argv = [
                "load",
                "--data-dir",
                str(folder),
                "--dataset",
                dataset,
                "--mmdb-fields",
                "all",
                str(path),
            ]
            assert cli.main([*argv, "--no-coalesce"]) == 0
    return Loaded(LoaderTable.from_settings(settings), paths["enterprise"])


def richest_addresses(database: Path, count: int) -> list[str]:
    """``count`` distinct addresses, round-robin over the networks, the largest records first."""
    with maxminddb.open_database(str(database)) as reader:
        networks = sorted(reader, key=lambda entry: -len(json.dumps(entry[1], default=str)))
    pools = [
        itertools.islice(network.hosts() if network.num_addresses > 2 else iter(network), count)
        for network, _ in networks
    ]
    found: dict[str, None] = {}
    while len(found) < count and pools:
        for pool in list(pools):
            address = next(pool, None)
            if address is None:
                pools.remove(pool)
            elif len(found) < count:
                found[str(address)] = None
    assert len(found) == count
    return list(found)


def spellings(address: str, count: int) -> list[str]:
    """``count`` texts of one IPv6 address: its eight groups, each zero-padded to 1-4 digits."""
    groups = ipaddress.IPv6Address(address).exploded.split(":")
    choices = [
        sorted({group.lstrip("0").rjust(width, "0") or "0" for width in range(1, 5)}) for group in groups
    ]
    texts = [":".join(spelled) for spelled in itertools.islice(itertools.product(*choices), count)]
    assert len(set(texts)) == count
    assert {ipaddress.ip_address(text) for text in texts} == {ipaddress.ip_address(address)}
    return texts


def fullest_ipv6(database: Path) -> str:
    with maxminddb.open_database(str(database)) as reader:
        networks = [
            entry
            for entry in reader
            if entry[0].version == 6 and not entry[0].subnet_of(ipaddress.ip_network("::/96"))
        ]
    network, _ = max(networks, key=lambda entry: len(json.dumps(entry[1], default=str)))
    return str(network[1] if network.num_addresses > 1 else network[0])


@pytest.fixture(params=[Front.REST, Front.HTTP, Front.URL], ids=str)
def served(loaded: Loaded, request: pytest.FixtureRequest) -> Iterator[tuple[LocalApiServer, Sizes]]:
    from ipmeta.api.handler import handler

    sizes = Sizes()
    with running_api_server(loaded.table, lambda_handler=sizes.wrap(handler), front=request.param) as server:
        yield server, sizes


def post(server: LocalApiServer, path: str, payload: list[str]) -> tuple[int, bytes]:
    data = json.dumps(payload).encode()
    call = urllib.request.Request(server.url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(call, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def check_answer(status: int, body: bytes, carried: int, label: str) -> None:
    print(f"{label}: {status}, body {len(body):,} bytes, Lambda response {carried:,} bytes")
    assert carried < LAMBDA_RESPONSE_LIMIT, label
    if status == 200:
        return
    assert status == 413, (label, body[:300])
    assert json.loads(body)["code"] == "BATCH_ANSWER_TOO_LARGE", label


@pytest.mark.parametrize("route", ROUTES)
def test_a_thousand_of_the_fullest_records_fit_a_lambda_response_or_are_refused_plainly(
    loaded: Loaded, served: tuple[LocalApiServer, Sizes], route: str
) -> None:
    server, sizes = served
    status, body = post(server, route, richest_addresses(loaded.enterprise, BATCH))
    check_answer(status, body, sizes.carried[-1], f"{route} distinct")
    if status == 200:
        assert len(json.loads(body)) == BATCH


@pytest.mark.parametrize("route", ROUTES)
def test_spelling_one_address_a_thousand_ways_never_passes_the_limit(
    loaded: Loaded, served: tuple[LocalApiServer, Sizes], route: str
) -> None:
    server, sizes = served
    texts = spellings(fullest_ipv6(loaded.enterprise), BATCH)
    status, body = post(server, route, texts)
    check_answer(status, body, sizes.carried[-1], f"{route} spelled")
    if status == 200:
        answers = json.loads(body)
        assert len(answers) == BATCH
        assert len({json.dumps(value) for value in answers.values()}) == 1
