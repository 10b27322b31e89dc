"""Integration fixtures: a real dynalite (in memory) for the whole session.

Each test gets its own table (``table_settings``), so tests never see each
other's data, while paying dynalite's start-up once.
"""

from __future__ import annotations

import itertools
import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Front, Settings
from ipmeta.store.dynamodb import make_client
from ipmeta_cli.dynalite import DYNALITE_CLI, Dynalite
from ipmeta_cli.server import ConnectionLimits, LocalApiServer
from loader.errors import VerificationPending
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.feed_states import FeedStates
from loader.store.partition_items import PartitionItems
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

_table_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def dynalite_endpoint() -> Iterator[str]:
    if shutil.which("node") is None or not DYNALITE_CLI.exists():
        pytest.fail("integration tests need node and `npm ci` (dynalite); run `make setup`")
    with Dynalite() as endpoint:
        yield endpoint


@pytest.fixture
def table_settings(dynalite_endpoint: str) -> Settings:
    settings = Settings(
        table_name=f"ipmeta-test-{next(_table_numbers)}",
        dynamodb_endpoint=dynalite_endpoint,
        pointer_cache_seconds=0.0,
    )
    create_table_if_missing(make_client(settings), settings.table_name)
    return settings


@pytest.fixture
def table_environment(table_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The environment a CLI command or a Lambda handler reads, pointed at the test's table."""
    monkeypatch.setenv(ENV_DYNAMODB_ENDPOINT, str(table_settings.dynamodb_endpoint))
    monkeypatch.setenv(ENV_TABLE_NAME, table_settings.table_name)
    return table_settings


@pytest.fixture
def store(table_settings: Settings) -> LoaderTable:
    return LoaderTable.from_settings(table_settings)


@pytest.fixture
def feed_states(store: LoaderTable) -> FeedStates:
    """The default dataset's feed state in the test's table, where ``ipmeta update`` and Fetch keep it."""
    return store.feed_states


@dataclass
class RequestCounter:
    """Counts the HTTP requests that leave botocore for DynamoDB (retries included)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Any, **_: Any) -> None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        with self._lock:
            self.calls.append((operation, json.loads(request.body)))

    def operations(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self.calls]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()


@pytest.fixture
def counted_store(table_settings: Settings) -> tuple[LoaderTable, RequestCounter]:
    """A store whose client reports every request it sends (after retries are decided)."""
    client = make_client(table_settings)
    counter = RequestCounter()
    client.meta.events.register("before-send.dynamodb", counter)
    return LoaderTable(client, table_settings.table_name), counter


@pytest.fixture
def counted_partitions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The partition key of every item count a version's check makes (``PartitionItems.count``), in order;
    a test clears it between the calls it compares."""
    counted: list[str] = []
    real = PartitionItems.count

    def count(partitions: PartitionItems, partition_key: str, *, consistent: bool = True) -> int:
        counted.append(partition_key)
        return real(partitions, partition_key, consistent=consistent)

    monkeypatch.setattr(PartitionItems, "count", count)
    return counted


def attempts_until_counted(
    invoke: Callable[[], dict[str, Any]], counted: list[str], while_pending: Callable[[], None]
) -> tuple[dict[str, Any], list[list[str]]]:
    """``invoke`` again on ``VerificationPending``, as the state machine retries it (``while_pending``
    checked after each such attempt): its answer, and the partitions each attempt counted."""
    attempts: list[list[str]] = []
    while True:
        try:
            answer = invoke()
        except VerificationPending:
            while_pending()
            continue
        finally:
            attempts.append(counted[:])
            counted.clear()
        return answer, attempts


def one_range_per_slash8(buckets: int) -> bytes:
    """A CSV of ``buckets`` ranges, each in its own /8 (its own partition): a version of many partitions."""
    rows = ["start,end,asn"] + [f"{first}.0.0.0,{first}.0.0.255,{first}" for first in range(1, 1 + buckets)]
    return "\n".join(rows).encode()


def load_csv(
    store: LoaderTable, paths: list[Path], tmp_path: Path, columns: list[str] | None = None
) -> driver.LoadResult:
    return driver.run_load(paths, LoadOptions(columns=columns), store, LocalStaging(tmp_path / "staging"))


def skip_drain(seconds: float) -> None:
    """Cleanup's drain (``retention.DRAIN_SECONDS``) where a test's clock is its ``now=``: no real wait."""


@contextmanager
def running_api_server(
    store: LoaderTable,
    pointer_cache_seconds: float = 0.0,
    ranges: RangeCache | None = None,
    lambda_handler: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None,
    *,
    api_keys: Collection[str] = (),
    limits: ConnectionLimits | None = None,
    front: Front = Front.REST,
) -> Iterator[LocalApiServer]:
    """The real HTTP server around the real Lambda handler (or ``lambda_handler``, which may wrap
    it), answering from ``store`` (range cache off), requiring ``api_keys`` if any, as ``front``
    does (REST by default: the server refuses a key before the function, as API Gateway does)."""
    from ipmeta.api.handler import handler

    dependencies.install(
        dependencies.Dependencies(
            store=store.lookup,
            pointer_cache_seconds=pointer_cache_seconds,
            ranges=RangeCache(0) if ranges is None else ranges,
        )
    )
    server = LocalApiServer(
        "127.0.0.1", 0, lambda_handler or handler, api_keys=api_keys, limits=limits, front=front
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        dependencies.install(None)


@pytest.fixture
def api_server(store: LoaderTable) -> Iterator[LocalApiServer]:
    """The real HTTP server on the test's table, re-reading the pointer on every request."""
    with running_api_server(store) as server:
        yield server


def get_json(server: LocalApiServer, path: str) -> tuple[int, dict[str, Any]]:
    """GET ``path``: the status and the JSON body, error statuses included."""
    try:
        with urllib.request.urlopen(server.url + path, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
