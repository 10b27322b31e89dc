"""Fault tests R1–R4: reload under load, throttling, a killed loader, and bad input."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipmeta.lookup.catalog import DatasetCatalog
from ipmeta.schema import keys
from ipmeta.schema.errors import IpAddressNotFound, NoDataset
from ipmeta.schema.ips import Address
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta.store.dynamodb import make_client
from loader.errors import LoadRejected
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.records import LoadItem, LoadStatus
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.bad_inputs import EXPECTED_REASONS
from tests.killing import kill_when
from tests.one_version import lookup_version

BAD = Path(__file__).parent.parent / "fixtures" / "bad"
NOT_FOUND = "404"


@dataclass(frozen=True)
class Dataset:
    """Generated ranges (never overlapping, each inside one /8) and their brute-force answers."""

    path: Path
    ranges: list[tuple[int, int, str]]

    def answer(self, value: int) -> str:
        for start, end, label in self.ranges:
            if start <= value <= end:
                return label
        return NOT_FOUND

    def per_bucket(self) -> Counter[int]:
        return Counter(start >> 24 for start, _, _ in self.ranges)


def dataset(tmp_path: Path, name: str, count: int, seed: int, step: int = 256) -> Dataset:
    rng = random.Random(seed)
    ranges = []
    for index in range(count):
        bucket = 20 + index % 40  # public space, 40 buckets
        start = (bucket << 24) + (index // 40) * step * 2 + rng.randrange(step)
        ranges.append((start, start + rng.randrange(1, step // 2), f"{name}-{index}"))
    rng.shuffle(ranges)  # unsorted input
    lines = ["start,end,label"] + [f"{start},{end},{label}" for start, end, label in ranges]
    path = tmp_path / f"{name}.csv"
    path.write_text("\n".join(lines) + "\n")
    return Dataset(path, ranges)


def answer_of(store: LoaderTable, catalog: DatasetCatalog, value: int) -> str:
    version = catalog.get().versions[keys.DEFAULT_DATASET]
    if version is None:
        raise NoDataset("no version of the default dataset is active")
    try:
        return str(lookup_version(store.lookup, version, Address(4, value)).data["label"])
    except IpAddressNotFound:
        return NOT_FOUND


# -- R1: reload under load ------------------------------------------------------------------


def test_r1_lookups_during_a_reload_see_one_whole_version(store: LoaderTable, tmp_path: Path) -> None:
    one = dataset(tmp_path, "one", 400, seed=1)
    two = dataset(tmp_path, "two", 400, seed=2)
    staging = LocalStaging(tmp_path / "staging")
    driver.run_load([one.path], LoadOptions(chunk_size=50), store, staging)
    probes = [start for start, _, _ in one.ranges[:100]] + [start for start, _, _ in two.ranges[:100]]
    probes += [end + 1 for _, end, _ in one.ranges[:50]]  # gaps in one version, maybe not the other
    activated = threading.Event()
    stop = threading.Event()
    errors: list[BaseException] = []
    wrong: list[tuple[int, str]] = []
    lookups = [0]

    def look_up_continuously(seed: int) -> None:
        rng = random.Random(seed)
        cache = DatasetCatalog(store.lookup, 0.0)  # read the pointer on every lookup: the strictest case
        while not stop.is_set():
            value = rng.choice(probes)
            after_activation = activated.is_set()
            try:
                answer = answer_of(store, cache, value)
            except BaseException as error:
                errors.append(error)
                continue
            lookups[0] += 1
            allowed = {two.answer(value)} if after_activation else {one.answer(value), two.answer(value)}
            if answer not in allowed:
                wrong.append((value, answer))

    threads = [threading.Thread(target=look_up_continuously, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    try:
        driver.run_load([two.path], LoadOptions(chunk_size=50), store, staging)
        activated.set()
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert wrong == []
    assert lookups[0] > 100


# -- R2: throttling --------------------------------------------------------------------------


@dataclass
class BatchWriteFaults:
    """botocore ``before-call`` hook: a share of BatchWriteItem calls throttle, another share
    writes only half its items (for real, through a clean client) and hands back the rest."""

    clean: Any
    table: str
    throttle_rate: float = 0.1
    partial_rate: float = 0.1
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    throttled: int = 0
    partial: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        with self.lock:
            draw = self.rng.random()
        if draw < self.throttle_rate:
            with self.lock:
                self.throttled += 1
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
            return _Status(400), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}
        if draw < self.throttle_rate + self.partial_rate:
            requests = json.loads(params["body"])["RequestItems"][self.table]
            if len(requests) < 2:
                return None
            half = len(requests) // 2
            self.clean.batch_write_item(RequestItems={self.table: requests[:half]})
            with self.lock:
                self.partial += 1
            return _Status(200), {"UnprocessedItems": {self.table: requests[half:]}}
        return None


@dataclass(frozen=True)
class _Status:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)


def test_r2_throttling_and_unprocessed_items_leave_exact_counts(
    table_settings: Settings, tmp_path: Path
) -> None:
    data = dataset(tmp_path, "throttled", 1200, seed=3)
    client = make_client(table_settings)
    faults = BatchWriteFaults(make_client(table_settings), table_settings.table_name)
    hook: Any = faults  # botocore types hooks as returning None; a before-call hook may answer instead
    client.meta.events.register("before-call.dynamodb.BatchWriteItem", hook)
    store = LoaderTable(client, table_settings.table_name, sleep=lambda _: None)

    result = driver.run_load([data.path], LoadOptions(chunk_size=100), store, LocalStaging(tmp_path))

    assert faults.throttled > 0
    assert faults.partial > 0
    assert result.report.throttles == faults.throttled
    assert (result.report.retries or 0) >= faults.throttled + faults.partial
    assert result.report.items_written == 1200
    for bucket, expected in data.per_bucket().items():
        assert store.partitions.count(keys.key_space().partition_key(result.version, 4, bucket)) == expected


# -- R3: a killed loader ---------------------------------------------------------------------


def table_versions(store: LoaderTable) -> set[str]:
    """The version prefix of every range item in the table (a full Scan)."""
    found: set[str] = set()
    kwargs: dict[str, Any] = {"TableName": store.table_name, "ProjectionExpression": "pk"}
    while True:
        page = store.client.scan(**kwargs)
        found |= {item["pk"]["S"].split("#")[0] for item in page["Items"] if item["pk"]["S"].startswith("v")}
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_r3_a_loader_killed_mid_write_resumes_and_leaves_no_partial_version(
    table_settings: Settings, store: LoaderTable, tmp_path: Path
) -> None:
    one = dataset(tmp_path, "one", 200, seed=4)
    two = dataset(tmp_path, "two", 8000, seed=5)
    staging = LocalStaging(tmp_path / "staging")
    first = driver.run_load([one.path], LoadOptions(), store, staging)
    probe = one.ranges[0][0]
    cache = DatasetCatalog(store.lookup, 0.0)

    # Given a loader process writing version 2 chunk by chunk
    env = {**os.environ, ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint)}
    env[ENV_TABLE_NAME] = table_settings.table_name
    command = [sys.executable, "-m", "ipmeta_cli.main", "load", "--data-dir", str(tmp_path)]
    command += ["--chunk-size", "100", "--parallel-chunks", "1", str(two.path)]

    # When it is SIGKILLed during write_chunk (some chunks done, others not)
    def mid_write() -> LoadItem | None:
        return next(
            (
                load
                for load in store.loads.list_all()
                if load.status == LoadStatus.PREPARED and 0 < len(load.done) < load.chunks
            ),
            None,
        )

    killed_load, status = kill_when(command, env, mid_write, timeout=60)
    assert status == -signal.SIGKILL

    # Then the old version keeps serving
    assert store.lookup.read_active_version(consistent=True) == first.version
    assert answer_of(store, cache, probe) == one.answer(probe)

    # And a resume finishes and activates
    resumed = driver.run_load([], LoadOptions(chunk_size=100), store, staging, resume=killed_load.load_id)
    assert resumed.status == LoadStatus.ACTIVATED
    assert resumed.report.items_written == 8000
    assert store.lookup.read_active_version(consistent=True) == resumed.version
    assert answer_of(store, cache, two.ranges[0][0]) == two.ranges[0][2]

    # And after cleanup no partial version remains: only the active and the retained one
    retention.cleanup(store, staging, now=time.time() + 10**6)
    assert table_versions(store) == {f"v{resumed.version}", f"v{first.version}"}
    assert all(load.status == LoadStatus.ACTIVATED for load in store.loads.list_all())


def phase_reached(staging_root: Path, phase: str) -> str | None:
    """The load id once its staged files show it is inside ``phase`` (and not past it)."""
    for folder in staging_root.glob("v*"):
        scanned = (folder / "scan").is_dir() and any((folder / "scan").iterdir())
        resolved = list((folder / "resolved").glob("*.json")) if (folder / "resolved").is_dir() else []
        if phase == "scan" and (folder / "load.json").exists() and not scanned:
            return folder.name
        if phase == "resolve" and resolved and not (folder / "plan" / "writes.json").exists():
            return folder.name
    return None


@pytest.mark.parametrize("phase", ["scan", "resolve"])
def test_r3_a_loader_killed_while_preparing_resumes_where_it_stopped(
    table_settings: Settings, store: LoaderTable, tmp_path: Path, phase: str
) -> None:
    data = dataset(tmp_path, "big", 20_000, seed=6)
    # Given a loader process preparing a load in many small partitions
    env = {**os.environ, ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint)}
    env[ENV_TABLE_NAME] = table_settings.table_name
    command = [sys.executable, "-m", "ipmeta_cli.main", "load", "--data-dir", str(tmp_path), "--workers", "1"]
    command += ["--partition-rows", "500", str(data.path)]
    # When it is SIGKILLed inside the phase
    killed, status = kill_when(command, env, lambda: phase_reached(tmp_path / "staging", phase), timeout=60)
    assert status == -signal.SIGKILL
    load = store.loads.get(int(killed[1:]))
    assert load is not None
    assert load.status == LoadStatus.PREPARING

    # Then a resume finishes, every range written once, and it answers
    resumed = driver.run_load(
        [], LoadOptions(partition_rows=500), store, LocalStaging(tmp_path / "staging"), resume=killed
    )
    assert resumed.status == LoadStatus.ACTIVATED
    assert resumed.version == int(killed[1:])
    assert resumed.report.items_written == len(data.ranges)
    cache = DatasetCatalog(store.lookup, 0.0)
    for start, _, label in data.ranges[:50]:
        assert answer_of(store, cache, start) == label


# -- R4: bad input -------------------------------------------------------------------------


def test_r4_the_corpus_has_one_expectation_per_file() -> None:
    assert sorted(path.name for path in BAD.iterdir()) == sorted(EXPECTED_REASONS)
    assert len(EXPECTED_REASONS) >= 20


def test_r4_every_bad_file_is_rejected_with_its_reason_and_nothing_changes(
    store: LoaderTable, tmp_path: Path
) -> None:
    good = dataset(tmp_path, "good", 50, seed=6)
    staging = LocalStaging(tmp_path / "staging")
    active = driver.run_load([good.path], LoadOptions(), store, staging)
    versions_before = store.lookup.list_version_metas()
    for name, reason in EXPECTED_REASONS.items():
        with pytest.raises(LoadRejected) as caught:
            driver.run_load([BAD / name], LoadOptions(), store, staging)
        assert reason in caught.value.message, name
        assert caught.value.message.startswith(name) or name in caught.value.message
    assert store.lookup.read_active_version(consistent=True) == active.version
    assert store.lookup.list_version_metas() == versions_before
    assert store.lock.read() is None
