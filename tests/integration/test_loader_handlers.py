"""The Lambda handlers, chained as the state machine chains them: moto for S3, dynalite for DynamoDB."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema.settings import Settings
from loader.errors import LoadRejected, VerificationPending
from loader.options import LoadOptions
from loader.pipeline import handlers
from loader.records import LoadStatus
from loader.store.partition_counts import COUNT_BATCH
from loader.store.partition_items import PartitionItems
from loader.store.table import LoaderTable
from tests.integration.state_machines import BUCKET, loader_s3
from tests.loader_context import loader_context

FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"


@pytest.fixture
def aws(table_environment: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with loader_s3(monkeypatch) as s3:
        yield s3


def run_through_handlers(execution: dict[str, Any], aws: Any) -> dict[str, Any]:
    """The state machine's path, state by state, with the Maps' items read as their ItemReaders would."""
    started = handlers.start(execution, loader_context())
    if started["status"] != "started":
        return started
    for item in started["scans"]:  # the ScanSources Map
        handlers.scan(item, loader_context())
    planned = handlers.plan_partitions({"load_id": started["load_id"]}, loader_context())
    for item in staged_list(aws, planned["items"]):  # the ResolvePartitions Distributed Map
        handlers.resolve(item, loader_context())
    writes = handlers.plan_writes({"load_id": started["load_id"]}, loader_context())
    chunks = staged_list(aws, writes["items"])
    # The WriteChunks Distributed Map batches its items: a child gets {"Items": [...]}.
    for offset in range(0, len(chunks), 2):
        written = handlers.write_chunks({"Items": chunks[offset : offset + 2]}, loader_context())
        assert written["items"] > 0
    return {**started, "writes": writes, "chunks": chunks}


def staged_list(aws: Any, location: dict[str, str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        aws.get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
    )
    return items


def test_the_state_machine_path_loads_and_activates(aws: Any, store: LoaderTable, tmp_path: Path) -> None:
    aws.put_object(Bucket=BUCKET, Key="in/small.csv.gz", Body=gzip.compress(FIXTURE.read_bytes()))
    execution = {"source": f"s3://{BUCKET}/in/small.csv.gz", "options": {"chunk_size": 4}}

    prepared = run_through_handlers(execution, aws)
    assert prepared["status"] == "started"
    assert prepared["scans"] == [{"load_id": prepared["load_id"], "source": 0}]
    assert prepared["chunks"] == [{"load_id": prepared["load_id"], "chunk": i} for i in range(3)]
    staged = aws.list_objects_v2(Bucket=BUCKET, Prefix=f"chunks/{prepared['load_id']}/")["KeyCount"]
    assert staged > 3  # the staged rows, items, plans and report
    activated = handlers.activate({"load_id": prepared["load_id"]}, loader_context())
    assert activated["status"] == "activated"
    assert activated["report"]["items_written"] == 12
    assert store.lookup.read_active_version(consistent=True) == prepared["version"]

    again = handlers.start(execution, loader_context())
    assert again["status"] == "unchanged"
    assert again["scans"] == []


def test_abort_marks_the_load_failed_and_frees_the_lock(aws: Any, store: LoaderTable) -> None:
    aws.put_object(Bucket=BUCKET, Key="in/small.csv", Body=FIXTURE.read_bytes())
    prepared = handlers.start({"source": f"s3://{BUCKET}/in/small.csv"}, loader_context())
    error = {"Error": "States.TaskFailed", "Cause": "boom"}
    outcome = handlers.abort({"load_id": prepared["load_id"], "error": error}, loader_context())
    assert outcome["aborted"] == prepared["load_id"]
    load = store.loads.get(prepared["version"])
    assert load is not None
    assert load.status == LoadStatus.FAILED
    assert store.lock.read() is None
    assert handlers.abort({"error": error}, loader_context())["aborted"] is None
    # Still in its grace period: the scheduled cleanup visits the default dataset and deletes nothing
    [cleaned] = handlers.cleanup({}, loader_context())["datasets"]
    assert (cleaned["dataset"], cleaned["deleted"]) == ("default", [])


def test_refused_sources_are_discarded_not_failed(aws: Any, store: LoaderTable) -> None:
    aws.put_object(Bucket=BUCKET, Key="in/bad.csv", Body=b"start,end,x\n1.0.0.9,1.0.0.1,a\n")
    started = handlers.start({"source": f"s3://{BUCKET}/in/bad.csv"}, loader_context())
    with pytest.raises(LoadRejected, match=r"line 2: start 1\.0\.0\.9 is after end"):
        handlers.scan(started["scans"][0], loader_context())
    error = {"Error": "LoadRejected", "Cause": "bad.csv: line 2: start 1.0.0.9 is after end 1.0.0.1"}
    outcome = handlers.abort({"load_id": started["load_id"], "error": error}, loader_context())
    assert outcome["discarded"] is True
    assert store.loads.list_all() == []
    assert store.lock.read() is None


def test_unknown_options_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown load options"):
        LoadOptions.from_event({"overlap": "reject"})
    assert LoadOptions.from_event({"columns": "start,end,asn"}).columns == ["start", "end", "asn"]


def test_activate_counts_a_big_version_over_attempts_each_resuming_the_last(
    aws: Any, store: LoaderTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a prepared load of more partitions than two batches of counts (one range per /8)
    buckets = 2 * COUNT_BATCH + 5
    rows = ["start,end,asn"] + [f"{first}.0.0.0,{first}.0.0.255,{first}" for first in range(1, 1 + buckets)]
    aws.put_object(Bucket=BUCKET, Key="in/spread.csv", Body="\n".join(rows).encode())
    prepared = run_through_handlers({"source": f"s3://{BUCKET}/in/spread.csv"}, aws)
    counted: list[str] = []
    real = PartitionItems.count

    def count(partitions: PartitionItems, partition_key: str, *, consistent: bool = True) -> int:
        counted.append(partition_key)
        return real(partitions, partition_key, consistent=consistent)

    monkeypatch.setattr(PartitionItems, "count", count)
    # When Activate is invoked with no time to spare beyond its margin, as the state machine retries it
    no_time = loader_context(int(handlers.ACTIVATE_TIMEOUT_MARGIN_SECONDS * 1000))
    attempts: list[list[str]] = []
    while True:
        try:
            activated = handlers.activate({"load_id": prepared["load_id"]}, no_time)
        except VerificationPending:
            assert store.lookup.read_active_version(consistent=True) is None
            continue
        finally:
            attempts.append(counted[:])
            counted.clear()
        break
    # Then each attempt counted one batch that no other counted, and the last one activated
    assert [len(attempt) for attempt in attempts] == [COUNT_BATCH, COUNT_BATCH, 5]
    assert len({pk for attempt in attempts for pk in attempt}) == buckets
    assert activated["status"] == "activated"
    assert store.lookup.read_active_version(consistent=True) == prepared["version"]
