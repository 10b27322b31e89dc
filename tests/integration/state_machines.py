"""The loader's state machines, executed offline: the real ASL from the synthesized template, run
by aws-local-stepfunctions (``sfn/run.mjs``), each Lambda task answered by the real handler in this
process through a small endpoint that speaks the Lambda Invoke API, under moto's S3.

The interpreter runs no Distributed Map's ItemReader, so the endpoint adds each reader's items
inline to the result that names them. ``machine_of(template)`` makes a ``machine`` fixture; the
load, export, enrich and feed workflows' tests share it. It stays in ``tests/``: no benchmark
runs a state machine, and ``testing/`` holds only what both use (``tests/unit/test_layout.py``).
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

from ipmeta.schema.settings import Settings
from loader.pipeline import handlers
from loader.settings import ENV_CHUNK_PREFIX, ENV_SOURCE_BUCKET
from stacks.constants import LOADER_MODULE
from stacks.load.loader_workflow import CHUNKS_PER_CHILD
from tests.infra.cfn import iter_states, state_machine_definition
from tests.infra.conftest import Synthesized
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
    with loader_s3(monkeypatch) as s3:
        seed(s3)
        server = endpoint(loader_tasks(template), s3)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield Machine(state_machine_definition(template), server, tmp_path)
        finally:
            server.shutdown()
            server.server_close()


@contextmanager
def loader_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's S3 with the sources bucket, and the loader's handlers set to use it and dynalite."""
    monkeypatch.setenv(ENV_SOURCE_BUCKET, BUCKET)
    monkeypatch.setenv(ENV_CHUNK_PREFIX, "chunks")
    handlers.reset()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        handlers.reset()  # clients made under moto, which lets the dynalite endpoint through
        try:
            yield s3
        finally:
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


#: A load of small.csv (``seed_small_csv``), two items a chunk.
EXECUTION = {"source": f"s3://{BUCKET}/in/small.csv", "options": {"chunk_size": 2}}
