"""The Export task: a written (not yet active) version to ``exports/<version>.mmdb``, readable by maxminddb.

A small CSV is prepared and written through the real handlers against dynalite
(DynamoDB) and moto (S3), as the state machine runs them; then ``export``
runs, and the file it uploads is read back with the ``maxminddb`` reader.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import maxminddb
import pytest
from moto import mock_aws

from ipmeta.schema import keys
from ipmeta.schema.ips import format_address
from ipmeta.schema.settings import Settings
from loader.errors import LoadIncomplete
from loader.export.version_ranges import ranges_of_version
from loader.pipeline import handlers, retention
from loader.pipeline.export_task import EXPORT_PREFIX, export_version
from loader.records import LoadStatus, load_id_of, version_of
from loader.settings import ENV_CHUNK_PREFIX, ENV_EXPORTS_ENABLED, ENV_SOURCE_BUCKET
from loader.store import s3 as loader_s3
from loader.store.partition_counts import COUNT_BATCH
from loader.store.table import LoaderTable
from tests.integration.conftest import attempts_until_counted, one_range_per_slash8
from tests.loader_context import loader_context

FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"
BUCKET = "ipmeta-sources"
EXECUTION = {"source": f"s3://{BUCKET}/in/small.csv", "options": {"chunk_size": 2}}


@pytest.fixture
def s3(table_environment: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(ENV_SOURCE_BUCKET, BUCKET)
    monkeypatch.setenv(ENV_CHUNK_PREFIX, "chunks")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_object(Bucket=BUCKET, Key="in/small.csv", Body=FIXTURE.read_bytes())
        handlers.reset()  # clients made under moto, which lets the dynalite endpoint through
        yield client
    handlers.reset()


def _staged(s3: Any, location: dict[str, str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        s3.get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
    )
    return items


def prepare(s3: Any, *, write: bool = True, execution: dict[str, Any] = EXECUTION) -> dict[str, Any]:
    """Start -> Scan -> PlanPartitions -> Resolve -> PlanWrites -> WriteChunks, through the handlers."""
    context: Any = loader_context()
    started = handlers.start(execution, context)
    for scan in started["scans"]:
        handlers.scan(scan, context)
    planned = handlers.plan_partitions({"load_id": started["load_id"]}, context)
    for item in _staged(s3, planned["items"]):
        handlers.resolve(item, context)
    writes = handlers.plan_writes({"load_id": started["load_id"]}, context)
    if write:
        handlers.write_chunks({"Items": _staged(s3, writes["items"])}, context)
    return started


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items() if inner is not None}
    return value


def test_export_uploads_a_mmdb_that_answers_like_the_written_version(
    s3: Any, table_environment: Settings, tmp_path: Path
) -> None:
    # Given a load whose chunks are all written, not yet activated
    started = prepare(s3)
    table = LoaderTable.from_settings(table_environment)

    # When the Export task runs
    exported = handlers.export({"load_id": started["load_id"]}, loader_context())

    # Then exports/<version>.mmdb is in the bucket, and nothing went live
    key = f"{EXPORT_PREFIX}/{load_id_of(started['version'], keys.DEFAULT_DATASET)}.mmdb"
    assert (exported["bucket"], exported["key"], exported["format"]) == (BUCKET, key, "mmdb")
    database = tmp_path / "export.mmdb"
    s3.download_file(BUCKET, key, str(database))
    assert database.stat().st_size == exported["bytes"] > 0
    assert table.lookup.read_active_version(consistent=True) is None
    load = table.loads.get(started["version"])
    assert load is not None
    assert load.status == LoadStatus.PREPARED

    # And maxminddb reads it: every range answers its data at its first, middle and last address
    meta = table.lookup.get_version_meta(started["version"])
    assert meta is not None
    ranges = list(ranges_of_version(table, meta))
    # (::-::ffff lies in ::/96, where a MaxMind DB keeps IPv4: left out, and counted)
    assert (exported["ranges"], exported["ipv6_left_out"]) == (len(ranges) - 1, 1)
    with maxminddb.open_database(str(database)) as reader:
        assert reader.metadata().database_type == "ipmeta"
        assert load_id_of(meta.version, keys.DEFAULT_DATASET) in reader.metadata().description["en"]
        assert meta.sha256 in reader.metadata().description["en"]
        for each in ranges:
            if each.family == 6 and each.end <= 0xFFFFFFFF:
                continue  # ::/96 is where a MaxMind DB keeps IPv4
            for address in (each.start, (each.start + each.end) // 2, each.end):
                text = format_address(each.family, address)
                assert reader.get(text) == _plain(dict(each.data)), text
        assert reader.get("1.0.0.1") == {"asn": 13335, "organization": "Cloudflare, Inc.", "country": "US"}
        assert reader.get("10.0.0.150") == {
            "asn": 64502,
            "organization": "Overlaps the crossing range (later wins)",
            "country": "ZZ",
        }
        wide: Any = reader.get("2001:200::1")
        assert wide["organization"] == "WIDE Project"
        assert reader.get("1.0.2.0") is None  # a gap stays a gap


def test_activate_after_export_names_the_file_in_the_change_event(
    s3: Any, table_environment: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    started = prepare(s3)
    exported = handlers.export({"load_id": started["load_id"]}, loader_context())

    with caplog.at_level(logging.INFO, logger="loader.store.events"):
        handlers.activate({"load_id": started["load_id"], "export": exported}, loader_context())

    [line] = [record.getMessage() for record in caplog.records if record.name == "loader.store.events"]
    event = json.loads(line.removeprefix("event "))
    assert event["detail-type"] == "DatasetActivated"
    assert event["detail"]["version"] == started["load_id"]
    assert event["detail"]["export"]["key"] == f"{EXPORT_PREFIX}/{started['load_id']}.mmdb"
    assert event["detail"]["export"]["bucket"] == BUCKET


def test_export_counts_a_big_version_over_attempts_and_activate_counts_nothing_again(
    s3: Any, table_environment: Settings, counted_partitions: list[str]
) -> None:
    # Given a written load of more partitions than two batches of counts (one range per /8)
    buckets = 2 * COUNT_BATCH + 5
    s3.put_object(Bucket=BUCKET, Key="in/spread.csv", Body=one_range_per_slash8(buckets))
    started = prepare(s3, execution={"source": f"s3://{BUCKET}/in/spread.csv", "options": {}})
    counted_partitions.clear()

    def nothing_exported() -> None:
        assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/").get("KeyCount") == 0

    # When Export is invoked with no time to spare, as the state machine retries it
    exported, attempts = attempts_until_counted(
        lambda: handlers.export({"load_id": started["load_id"]}, loader_context(0)),
        counted_partitions,
        nothing_exported,
    )
    # Then each attempt counted one batch no other counted, and the last one wrote the file
    assert [len(attempt) for attempt in attempts] == [COUNT_BATCH, COUNT_BATCH, 5]
    assert len({pk for attempt in attempts for pk in attempt}) == buckets
    assert exported["ranges"] == buckets
    # And Activate, given the same version (its uid), counts no partition the export found complete
    activated = handlers.activate({"load_id": started["load_id"], "export": exported}, loader_context())
    assert activated["status"] == "activated"
    assert counted_partitions == []


def test_a_version_with_chunks_missing_is_not_exported(s3: Any, table_environment: Settings) -> None:
    # Given a load whose writes never ran
    started = prepare(s3, write=False)
    table = LoaderTable.from_settings(table_environment)
    # When the export is asked for, it refuses, and writes nothing
    with pytest.raises(LoadIncomplete):
        export_version(started["load_id"], table, BUCKET)
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/").get("KeyCount") == 0


def test_the_export_renews_the_load_lock_so_the_load_is_never_taken_for_abandoned(
    s3: Any, table_environment: Settings
) -> None:
    started = prepare(s3)
    table = LoaderTable.from_settings(table_environment)
    export_version(started["load_id"], table, BUCKET, now=2_000_000_000.0, lease_seconds=900)
    lock = table.lock.read()
    assert lock is not None
    assert (lock.owner, lock.expires_at) == (started["load_id"], 2_000_000_900)


@pytest.mark.parametrize("exports_enabled", [True, False])
def test_cleanup_deletes_a_deleted_versions_export_when_exports_are_on(
    s3: Any, table_environment: Settings, monkeypatch: pytest.MonkeyPatch, exports_enabled: bool
) -> None:
    # Given an exported version whose load then failed
    started = prepare(s3)
    handlers.export({"load_id": started["load_id"]}, loader_context())
    handlers.abort({"load_id": started["load_id"], "error": "a later state failed"}, loader_context())
    if exports_enabled:
        monkeypatch.setenv(ENV_EXPORTS_ENABLED, "true")
    monkeypatch.setattr(
        "loader.pipeline.handlers.retention.cleanup", functools.partial(retention.cleanup, grace_seconds=0)
    )
    # When cleanup deletes the version
    outcome = handlers.cleanup({}, loader_context())
    # Then its export goes with it, when the stack exports
    [default] = outcome["datasets"]
    assert [deleted["version"] for deleted in default["deleted"]] == [started["load_id"]]
    left = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/").get("KeyCount")
    assert left == (0 if exports_enabled else 1)


def test_a_failed_export_delete_leaves_the_version_for_the_next_cleanup(
    s3: Any, table_environment: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = prepare(s3)
    handlers.export({"load_id": started["load_id"]}, loader_context())
    handlers.abort({"load_id": started["load_id"], "error": "a later state failed"}, loader_context())
    monkeypatch.setenv(ENV_EXPORTS_ENABLED, "true")
    monkeypatch.setattr(
        "loader.pipeline.handlers.retention.cleanup", functools.partial(retention.cleanup, grace_seconds=0)
    )
    real_delete = loader_s3.delete

    def failing(bucket: str, key: str) -> None:
        raise ConnectionError("S3 unreachable")

    # When the file cannot be deleted, the version is not marked deleted ...
    monkeypatch.setattr("loader.pipeline.handlers.s3.delete", failing)
    with pytest.raises(ConnectionError):
        handlers.cleanup({}, loader_context())
    meta = LoaderTable.from_settings(table_environment).lookup.get_version_meta(
        version_of(started["load_id"])
    )
    assert meta is not None
    assert meta.status != "deleted"
    # ... so the next cleanup deletes both
    monkeypatch.setattr("loader.pipeline.handlers.s3.delete", real_delete)
    outcome = handlers.cleanup({}, loader_context())
    [default] = outcome["datasets"]
    assert [deleted["version"] for deleted in default["deleted"]] == [started["load_id"]]
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/").get("KeyCount") == 0


def test_a_named_datasets_export_is_its_own_file_of_its_own_items(
    s3: Any, table_environment: Settings, tmp_path: Path
) -> None:
    # Given the default dataset exported, and the same file prepared as dataset "city" with fewer rows
    default = prepare(s3)
    handlers.export({"load_id": default["load_id"]}, loader_context())
    s3.put_object(Bucket=BUCKET, Key="in/city.csv", Body=b"network,city\n1.0.0.0/24,Brisbane\n")
    city = prepare(s3, execution={"dataset": "city", "source": f"s3://{BUCKET}/in/city.csv", "options": {}})
    # When the Export task runs on city's load
    exported = handlers.export({"load_id": city["load_id"]}, loader_context())
    # Then the file is named after city's load, and holds city's items only
    assert city["load_id"] == f"city.v{city['version']}"
    assert exported["key"] == f"{EXPORT_PREFIX}/city.v{city['version']}.mmdb"
    database = tmp_path / "city.mmdb"
    s3.download_file(BUCKET, exported["key"], str(database))
    with maxminddb.open_database(str(database)) as reader:
        assert reader.get("1.0.0.1") == {"city": "Brisbane"}
        assert reader.get("10.0.0.150") is None
        assert f"city.v{city['version']}" in reader.metadata().description["en"]
    # And the default dataset's export is still its own file
    keys_now = {
        item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/")["Contents"]
    }
    assert keys_now == {exported["key"], f"{EXPORT_PREFIX}/{default['load_id']}.mmdb"}


def test_the_export_task_refuses_a_version_past_its_measured_limit_before_any_work(
    s3: Any, table_environment: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.errors import ExportTooLarge
    from loader.pipeline import export_task

    # Given a written version of more items than the Export task's limit (lowered to fit the fixture)
    started = prepare(s3)
    table = LoaderTable.from_settings(table_environment)
    load = table.for_load(started["load_id"]).loads.get(version_of(started["load_id"]))
    assert load is not None
    assert load.items > 3
    # (the measured CPU per item made slow enough that 3 items fill the file's half of 15 minutes
    # at the function's 1,024 MB, 0.58 of a vCPU)
    share = 1024 / export_task.FULL_VCPU_MB
    monkeypatch.setattr(export_task, "EXPORT_CPU_SECONDS_PER_ITEM", 450 * share / 3.5)
    assert export_task.max_export_items(1024, 450) == 3
    # When the state machine's Export runs, it refuses with a stable code, naming both figures
    with pytest.raises(ExportTooLarge) as refused:
        handlers.export({"load_id": started["load_id"]}, loader_context())
    assert refused.value.code == "EXPORT_TOO_LARGE"
    assert f"{load.items:,} items are more than the 3 " in refused.value.message
    # And it wrote nothing: the refusal comes before the check and the file
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/").get("KeyCount") == 0
    # While an export run without the Lambda's limit (locally) writes the file
    exported = export_version(started["load_id"], table, BUCKET)
    assert exported.ranges > 3
