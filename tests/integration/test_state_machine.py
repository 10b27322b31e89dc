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

import copy
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import pytest
from moto import mock_aws

from ipmeta.schema.records import ActiveVersion
from ipmeta.schema.settings import Settings
from loader.pipeline import handlers
from loader.records import LoadStatus
from loader.settings import ENV_CHUNK_PREFIX, ENV_SOURCE_BUCKET
from loader.store.table import LoaderTable
from stacks.constants import LOADER_MODULE
from stacks.load.loader_workflow import CHUNKS_PER_CHILD
from tests.infra.cfn import iter_states, state_machine_definition
from tests.infra.conftest import DEFAULT, Synthesized
from tests.loader_context import loader_context

HERE = Path(__file__).parent / "sfn"
RUNNER = HERE / "run.mjs"
POLYFILL = HERE / "polyfill.cjs"
FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"
BUCKET = "ipmeta-sources"


@dataclass
class Faults:
    """Errors the endpoint answers instead of running a task: task -> [(error type, times)]."""

    planned: dict[str, list[list[Any]]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def take(self, task: str) -> str | None:
        self.calls[task] = self.calls.get(task, 0) + 1
        for fault in self.planned.get(task, []):
            if fault[1] != 0:
                fault[1] -= 1  # a negative count never runs out
                return str(fault[0])
        return None


class LambdaEndpoint(ThreadingHTTPServer):
    """``POST /2015-03-31/functions/{arn}/invocations`` -> ``loader.pipeline.handlers.<task>``."""

    daemon_threads = True

    def __init__(self, tasks_by_function: dict[str, str], s3: Any) -> None:
        super().__init__(("127.0.0.1", 0), _InvokeHandler)
        self.tasks_by_function = tasks_by_function
        self.s3 = s3
        self.faults = Faults()

    def invoke(self, function: str, event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        task = self.tasks_by_function[function.rsplit(":", 1)[-1]]
        fault = self.faults.take(task)
        if fault is not None:
            return {"errorType": fault, "errorMessage": f"injected {fault}"}, True
        try:
            result = getattr(handlers, task)(event, loader_context())
        except Exception as error:
            return {"errorType": type(error).__name__, "errorMessage": str(error)}, True
        return self._with_inline_items(result), False

    def _with_inline_items(self, result: Any) -> Any:
        """Where a result names a staged item list, add it inline: the interpreter has no ItemReader."""
        if not isinstance(result, dict):
            return result
        for value in [result, *result.values()]:
            location = value.get("items") if isinstance(value, dict) else None
            if isinstance(location, dict) and "key" in location:
                items = self._staged(location)
                location["inline"] = items
                location["inline_batches"] = [
                    {"Items": items[at : at + CHUNKS_PER_CHILD]}
                    for at in range(0, len(items), CHUNKS_PER_CHILD)
                ]
        return result

    def _staged(self, location: dict[str, str]) -> list[Any]:
        try:
            body = self.s3.get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return []
        items: list[Any] = json.loads(body)
        return items


class _InvokeHandler(BaseHTTPRequestHandler):
    server: LambdaEndpoint

    def do_POST(self) -> None:
        function = unquote(self.path.split("/functions/", 1)[1].split("/", 1)[0])
        event = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        body, failed = self.server.invoke(function, event)
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if failed:
            self.send_header("X-Amz-Function-Error", "Unhandled")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def localize(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition with each Distributed Map inline over the items its reader would read."""
    local = copy.deepcopy(definition)
    for state in local["States"].values():
        processor = state.get("ItemProcessor", {})
        if processor.get("ProcessorConfig", {}).get("Mode") != "DISTRIBUTED":
            continue
        key_path = state.pop("ItemReader")["Parameters"]["Key.$"]
        listing = key_path.removesuffix(".key")
        state["ItemsPath"] = (
            f"{listing}.inline_batches" if state.pop("ItemBatcher", None) else f"{listing}.inline"
        )
        for name in ("ResultWriter", "ToleratedFailurePercentage", "ToleratedFailureCount"):
            state.pop(name, None)
        processor["ProcessorConfig"] = {"Mode": "INLINE"}
    return local


def no_waiting(definition: dict[str, Any]) -> dict[str, Any]:
    """Overrides that skip every Wait and every Retry interval."""
    states = dict(iter_states(definition["States"]))
    return {
        "waitTimeOverrides": {name: 0 for name, state in states.items() if state["Type"] == "Wait"},
        "retryIntervalOverrides": {name: 0 for name, state in states.items() if "Retry" in state},
    }


@dataclass
class Machine:
    definition: dict[str, Any]
    endpoint: LambdaEndpoint
    folder: Path

    def run(self, definition: dict[str, Any], execution_input: dict[str, Any]) -> dict[str, Any]:
        path = self.folder / "definition.json"
        path.write_text(json.dumps(definition))
        host, port = self.endpoint.server_address[:2]
        environment = {**os.environ, "AWS_ENDPOINT_URL_LAMBDA": f"http://{host!s}:{port}"}
        completed = subprocess.run(
            [
                "node",
                "--require",
                str(POLYFILL),
                str(RUNNER),
                str(path),
                json.dumps(execution_input),
                json.dumps(no_waiting(definition)),
            ],
            capture_output=True,
            text=True,
            env=environment,
            timeout=240,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
        return result


def loader_tasks(template: dict[str, Any]) -> dict[str, str]:
    """Each loader function of the template (logical id) and the handler task it runs."""
    return {
        logical_id: resource["Properties"]["Handler"].removeprefix(f"{LOADER_MODULE}.")
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
        and resource["Properties"].get("Handler", "").startswith(LOADER_MODULE)
    }


def seed_small_csv(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="in/small.csv", Body=FIXTURE.read_bytes())


@contextmanager
def running_machine(
    template: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    endpoint: type[LambdaEndpoint] = LambdaEndpoint,
    seed: Callable[[Any], None] = seed_small_csv,
) -> Iterator[Machine]:
    """The template's state machine in aws-local-stepfunctions, each Lambda task run by the real
    handler in this process, under moto's S3 with the sources bucket (``seed`` fills it)."""
    if shutil.which("node") is None:
        pytest.fail("the state machine tests need node")
    monkeypatch.setenv(ENV_SOURCE_BUCKET, BUCKET)
    monkeypatch.setenv(ENV_CHUNK_PREFIX, "chunks")
    handlers.reset()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        seed(s3)
        handlers.reset()  # clients made under moto, which lets the dynalite endpoint through
        server = endpoint(loader_tasks(template), s3)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield Machine(state_machine_definition(template), server, tmp_path)
        finally:
            server.shutdown()
            server.server_close()
    handlers.reset()


def machine_of(template_name: str) -> Any:
    """A ``machine`` fixture: the state machine of the synthesized template ``template_name``,
    on a table of its own (``table_environment``)."""

    @pytest.fixture
    def machine(
        synthesized: Synthesized,
        table_environment: Settings,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> Iterator[Machine]:
        with running_machine(synthesized.templates[template_name], tmp_path, monkeypatch) as running:
            yield running

    return machine


machine = machine_of(DEFAULT)


EXECUTION = {"source": f"s3://{BUCKET}/in/small.csv", "options": {"chunk_size": 2}}


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
