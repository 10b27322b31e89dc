"""The synthesized state machine, executed: the real ASL, run offline by aws-local-stepfunctions.

Its Lambda tasks call a small endpoint in this process that speaks the Lambda
Invoke API and runs ``loader.pipeline.handlers`` against dynalite (DynamoDB) and moto
(S3). The interpreter runs no Distributed Map's ItemReader, so the parent runs
with each reader's items given inline (the endpoint reads the staged list and
adds it to the result that names it), and a child workflow also runs alone,
as its own state machine. Covered: a load, an unchanged source, throttled
chunks retried, and a failing chunk leading to Abort and LoadFailed.
"""

from __future__ import annotations

from typing import Any

from ipmeta.schema.records import ActiveVersion
from ipmeta.schema.settings import Settings
from loader.pipeline import handlers
from loader.records import LoadStatus
from loader.store.table import LoaderTable
from stacks.load.loader_workflow import CHUNKS_PER_CHILD
from tests.infra.conftest import DEFAULT
from tests.integration.state_machines import (
    BUCKET,
    EXECUTION,
    Machine,
    localize,
    machine_of,
)
from tests.loader_context import loader_context

machine = machine_of(DEFAULT)


def test_a_load_runs_through_every_state_and_a_second_run_is_unchanged(
    machine: Machine, table_environment: Settings
) -> None:
    table = LoaderTable.from_settings(table_environment)
    first = machine.run(localize(machine.definition), EXECUTION)
    assert first["status"] == "SUCCEEDED", first
    version = table.lookup.read_active_version(consistent=True)
    assert version is not None
    assert version == first["output"]["version"]
    load = table.loads.get(version)
    assert load is not None
    assert (load.status, load.items_written, len(load.done)) == (LoadStatus.ACTIVATED, 12, load.chunks)
    assert load.chunks > 1
    assert first["output"]["activation"]["status"] == "activated"

    again = machine.run(localize(machine.definition), EXECUTION)
    assert again["status"] == "SUCCEEDED", again
    assert again["output"]["status"] == "unchanged"
    assert table.lookup.read_active_version(consistent=True) == version


def test_throttled_chunks_are_retried_and_every_item_is_written_once(
    machine: Machine, table_environment: Settings
) -> None:
    machine.endpoint.faults.planned = {"write_chunks": [["WritesThrottled", 2], ["ThrottlingException", 1]]}
    result = machine.run(localize(machine.definition), EXECUTION)
    assert result["status"] == "SUCCEEDED", result
    retried = [event for event in result["events"] if event["type"] == "StateRetried"]
    assert [event["state"] for event in retried] == ["WriteChunk"] * 3
    load = LoaderTable.from_settings(table_environment).loads.get(result["output"]["version"])
    assert load is not None
    assert (load.status, load.items_written) == (LoadStatus.ACTIVATED, 12)


def test_a_failing_chunk_aborts_the_load_and_frees_the_lock(
    machine: Machine, table_environment: Settings
) -> None:
    machine.endpoint.faults.planned = {"write_chunks": [["ValueError", -1]]}
    result = machine.run(localize(machine.definition), EXECUTION)
    assert result["status"] == "FAILED", result
    # The chunk's error is caught by WriteChunks, Abort runs, and the execution ends in LoadFailed
    # with that error (the interpreter names a Fail state's error "ExecutionError", with ours as cause).
    assert result["cause"].startswith("ValueError")
    kinds = [(event["type"], event["state"]) for event in result["events"]]
    assert ("StateCaught", "WriteChunks") in kinds
    assert ("StateFailed", "LoadFailed") in kinds
    assert machine.endpoint.faults.calls.get("abort") == 1
    table = LoaderTable.from_settings(table_environment)
    [load] = table.loads.list_all()
    assert load.status == LoadStatus.FAILED
    assert table.lock.read() is None
    assert table.lookup.read_active_version(consistent=True) is None


def test_the_write_child_workflow_runs_alone_with_a_batch_and_retries(
    machine: Machine, table_environment: Settings
) -> None:
    # Given a prepared load (the states up to PlanWrites, through the handlers)
    started = handlers.start(EXECUTION, loader_context())
    for scan in started["scans"]:
        handlers.scan(scan, loader_context())
    planned = handlers.plan_partitions({"load_id": started["load_id"]}, loader_context())
    for item in machine.endpoint._staged(planned["items"]):
        handlers.resolve(item, loader_context())
    writes = handlers.plan_writes({"load_id": started["load_id"]}, loader_context())
    chunks = machine.endpoint._staged(writes["items"])
    # When the WriteChunks child workflow runs on its own, on one batch, throttled once
    child = machine.definition["States"]["WriteChunks"]["ItemProcessor"]
    child_machine = {"StartAt": child["StartAt"], "States": child["States"]}
    machine.endpoint.faults.planned = {"write_chunks": [["WritesThrottled", 1]]}
    result = machine.run(child_machine, {"Items": chunks[:CHUNKS_PER_CHILD]})
    # Then it succeeds after one retry, and those chunks are done
    assert result["status"] == "SUCCEEDED", result
    assert [event["state"] for event in result["events"] if event["type"] == "StateRetried"] == ["WriteChunk"]
    load = LoaderTable.from_settings(table_environment).loads.get(started["version"])
    assert load is not None
    assert sorted(load.done) == list(range(min(CHUNKS_PER_CHILD, len(chunks))))


def test_the_input_names_the_dataset_and_each_dataset_loads_and_activates_apart(
    machine: Machine, table_environment: Settings
) -> None:
    # Given the default dataset loaded, and an execution that names the dataset "city"
    table = LoaderTable.from_settings(table_environment)
    default = machine.run(localize(machine.definition), EXECUTION)
    assert default["status"] == "SUCCEEDED", default
    city = machine.run(localize(machine.definition), {**EXECUTION, "dataset": "city"})
    # Then it runs every state in city's keys: its own load id, version and pointer
    assert city["status"] == "SUCCEEDED", city
    assert city["output"]["load_id"] == f"city.v{city['output']['version']}"
    assert city["output"]["activation"]["status"] == "activated"
    city_table = table.for_dataset("city")
    assert city_table.lookup.read_active_version(consistent=True) == city["output"]["version"]
    load = city_table.loads.get(city["output"]["version"])
    assert load is not None
    assert (load.status, load.items_written) == (LoadStatus.ACTIVATED, 12)
    # And the default dataset's version is untouched; the same sources are not "unchanged" across datasets
    assert table.lookup.read_active_version(consistent=True) == default["output"]["version"]
    assert sorted(table.lookup.read_dataset_names(consistent=True)) == ["city", "default"]
    # Cleanup after city's activation visits city only
    assert city["output"]["cleanup"]["datasets"][0]["dataset"] == "city"
    assert len(city["output"]["cleanup"]["datasets"]) == 1


def _release(s3: Any, key: str, changed: int, count: int = 300) -> dict[str, Any]:
    """``count`` /24s in buckets 20-29, the first ``changed`` relabelled: an execution's input for it."""
    lines = ["start,end,name"] + [
        f"{20 + n % 10}.{n // 10}.0.0,{20 + n % 10}.{n // 10}.0.255,{'new' if n < changed else 'old'}-{n}"
        for n in range(count)
    ]
    s3.put_object(Bucket=BUCKET, Key=key, Body="\n".join(lines).encode())
    return {"source": f"s3://{BUCKET}/{key}", "options": {}}


def test_a_reload_runs_as_a_delta_end_to_end_and_a_large_change_is_written_full(
    machine: Machine, table_environment: Settings
) -> None:
    table = LoaderTable.from_settings(table_environment)
    first = machine.run(localize(machine.definition), _release(machine.endpoint.s3, "in/r1.csv", 0))
    assert first["status"] == "SUCCEEDED", first
    # A small change: the diff runs in ResolvePartitions, the delta's items go through WriteChunks
    small = machine.run(localize(machine.definition), _release(machine.endpoint.s3, "in/r2.csv", 6))
    assert small["status"] == "SUCCEEDED", small
    meta = table.lookup.get_version_meta(small["output"]["version"])
    assert meta is not None
    assert meta.base == first["output"]["version"]
    load = table.loads.get(meta.version)
    assert load is not None
    assert load.items_written == meta.items < 300 * 0.25
    assert table.lookup.read_active_versions([table.dataset])[table.dataset] == ActiveVersion(
        meta.version, meta.base
    )
    # A large change crosses the threshold: compacted into a full version
    large = machine.run(localize(machine.definition), _release(machine.endpoint.s3, "in/r3.csv", 200))
    assert large["status"] == "SUCCEEDED", large
    full = table.lookup.get_version_meta(large["output"]["version"])
    assert full is not None
    assert (full.base, full.items) == (0, 300)
    assert large["output"]["activation"]["report"]["delta"]["written_as"] == "full"
