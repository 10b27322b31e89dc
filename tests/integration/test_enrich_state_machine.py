"""The enrich state machine, executed by aws-local-stepfunctions, children and all.

The synthesized definition (``enrichInputs`` variant) runs offline as the loader's does
(``test_state_machine.py``): its Lambda tasks call an endpoint in this process that runs
``loader.pipeline.handlers.enrich_*`` against dynalite and moto. The interpreter has no
ItemReader or ResultWriter, so the endpoint stands in for both: it adds the staged parts list
inline to PlanEnrich's result, and before Summarize it writes the children's outputs to S3 in
the ResultWriter's layout (``manifest.json`` and ``SUCCEEDED_0.json``), where Summarize reads
them. The engine reaches S3 through pyarrow, here over the same moto bucket (``tests/s3_filesystem.py``).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from ipmeta.schema.settings import Settings
from loader.options import LoadOptions
from loader.pipeline import driver, handlers
from loader.pipeline.enrich_task import SNAPSHOT_PREFIX, SUMMARY_NAME
from loader.settings import ENV_CHUNK_PREFIX, ENV_SOURCE_BUCKET
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from stacks.constants import LOADER_MODULE
from tests.infra.cfn import state_machine_definition
from tests.infra.conftest import ENRICH, Synthesized
from tests.integration.state_machines import BUCKET, LambdaEndpoint, Machine
from tests.s3_filesystem import boto3_filesystem

INPUT_BUCKET = "example-logs"
OUTPUT_BUCKET = "example-results"
RESULTS_KEY = "chunks/enrich-results/map-run/manifest.json"
RANGES = [
    ("1.0.0.0", "1.0.0.255", "13335", "cloudflare"),
    ("8.8.8.0", "8.8.8.255", "15169", "google"),
    ("2001:4860::", "2001:4860::ffff", "15169", "google"),
]


class EnrichEndpoint(LambdaEndpoint):
    """The loader's endpoint, standing in for the Distributed Map's ItemReader and ResultWriter."""

    def __init__(self, tasks_by_function: dict[str, str], s3: Any) -> None:
        super().__init__(tasks_by_function, s3)
        self.children: list[dict[str, Any]] = []
        self.failed: list[dict[str, Any]] = []

    def invoke(self, function: str, event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        task = self.tasks_by_function[function.rsplit(":", 1)[-1]]
        if task == "enrich_summary":
            self._write_results()
        result, failed = super().invoke(function, event)
        if failed:
            if task == "enrich_part":  # a tolerated failure, listed in the FAILED results
                self.failed.append(
                    {
                        "Input": json.dumps(event),
                        "Status": "FAILED",
                        "Error": result["errorType"],
                        "Cause": result["errorMessage"],
                    }
                )
            return result, failed
        if task == "enrich_plan":
            parts = result["parts"]
            body = self.s3.get_object(Bucket=parts["bucket"], Key=parts["key"])["Body"].read()
            parts["inline"] = json.loads(body)
        elif task == "enrich_part":
            self.children.append(
                {"Input": json.dumps(event), "Output": json.dumps(result), "Status": "SUCCEEDED"}
            )
        return result, False

    def _write_results(self) -> None:
        files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
        for status, children in (("SUCCEEDED", self.children), ("FAILED", self.failed)):
            if children:
                key = RESULTS_KEY.replace("manifest.json", f"{status}_0.json")
                self.s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(children).encode())
                files[status].append({"Key": key, "Size": 1})
        manifest = {
            "DestinationBucket": BUCKET,
            "MapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:enrich/map-run",
            "ResultFiles": files,
        }
        self.s3.put_object(Bucket=BUCKET, Key=RESULTS_KEY, Body=json.dumps(manifest).encode())
        self.children, self.failed = [], []  # the next execution's map run starts empty


def localize(definition: dict[str, Any]) -> dict[str, Any]:
    """EnrichParts inline over the parts PlanEnrich staged; its result where ResultWriter puts it."""
    local = copy.deepcopy(definition)
    parts = local["States"]["EnrichParts"]
    parts.pop("ItemReader")
    parts.pop("ResultWriter")
    parts["ItemsPath"] = "$.plan.parts.inline"
    parts["ItemProcessor"]["ProcessorConfig"] = {"Mode": "INLINE"}
    # ToleratedFailurePercentage 100: a failed child ends its iteration, not the map.
    assert parts.pop("ToleratedFailurePercentage") == 100
    child = parts["ItemProcessor"]["States"]["EnrichPart"]
    child["Catch"] = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "PartFailed"}]
    parts["ItemProcessor"]["States"]["PartFailed"] = {"Type": "Pass", "End": True}
    parts["ResultSelector"] = {"ResultWriterDetails": {"Bucket": BUCKET, "Key": RESULTS_KEY}}
    return local


@pytest.fixture(scope="module")
def enrich_asl(synthesized: Synthesized) -> tuple[dict[str, Any], dict[str, str]]:
    template = synthesized.templates[ENRICH]
    tasks = {
        logical_id: resource["Properties"]["Handler"].removeprefix(f"{LOADER_MODULE}.")
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
        and resource["Properties"].get("Handler", "").startswith(f"{LOADER_MODULE}.enrich_")
    }
    return state_machine_definition(template, "EnrichWorkflow"), tasks


@pytest.fixture
def machine(
    enrich_asl: tuple[dict[str, Any], dict[str, str]],
    table_environment: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[tuple[Machine, Any]]:
    if shutil.which("node") is None:
        pytest.fail("the state machine tests need node")
    ranges = tmp_path / "asn.csv"
    with ranges.open("w", newline="") as handle:
        csv.writer(handle).writerows([("start", "end", "asn", "organization"), *RANGES])
    store = LoaderTable.from_settings(table_environment)
    driver.run_load([ranges], LoadOptions(dataset="asn"), store, LocalStaging(tmp_path / "staging"))
    monkeypatch.setenv(ENV_SOURCE_BUCKET, BUCKET)
    monkeypatch.setenv(ENV_CHUNK_PREFIX, "chunks")
    handlers.reset()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in (BUCKET, INPUT_BUCKET, OUTPUT_BUCKET):
            s3.create_bucket(Bucket=bucket)
        handlers.reset()
        monkeypatch.setattr(handlers, "_enrich_filesystem", lambda: boto3_filesystem(s3))
        endpoint = EnrichEndpoint(enrich_asl[1], s3)
        threading.Thread(target=endpoint.serve_forever, daemon=True).start()
        try:
            yield Machine(enrich_asl[0], endpoint, tmp_path), s3
        finally:
            endpoint.shutdown()
            endpoint.server_close()
    handlers.reset()


def _put_log(s3: Any, key: str, addresses: list[str]) -> None:
    text = "ip,path\n" + "".join(f"{address},/page{index}\n" for index, address in enumerate(addresses))
    s3.put_object(Bucket=INPUT_BUCKET, Key=key, Body=text.encode())


def _rows(s3: Any, key: str) -> list[dict[str, str]]:
    body = s3.get_object(Bucket=OUTPUT_BUCKET, Key=key)["Body"].read().decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_a_prefix_is_enriched_part_by_part_with_its_summary_and_snapshot_written_once(
    machine: tuple[Machine, Any],
) -> None:
    runner, s3 = machine
    # Given two log objects, one cut into byte ranges (parts of at least 1 MiB: ~70,000 rows)
    big = [("1.0.0.7", "8.8.8.8", "2001:4860::1", "9.9.9.9", "not-an-ip")[i % 5] for i in range(80_000)]
    _put_log(s3, "access/2026/a.csv", big)
    _put_log(s3, "access/2026/b.csv", ["8.8.8.8", "1.0.0.1"])
    job = {
        "input": f"s3://{INPUT_BUCKET}/access/2026/",
        "output": f"s3://{OUTPUT_BUCKET}/enriched/run1/",
        "datasets": ["asn"],
        "part_bytes": 1 << 20,
    }

    # When the state machine runs
    result = runner.run(localize(runner.definition), job)

    # Then every row of every part is annotated, in order, and the summary adds them up
    assert result["status"] == "SUCCEEDED", result
    summary = result["output"]
    assert summary["parts"] == 3  # a.csv in two byte ranges, b.csv whole
    assert summary["rows"] == 80_002
    assert summary["invalid_rows"] == 16_000
    assert summary["unmatched_rows"] == 16_000  # 9.9.9.9
    outputs = [uri.removeprefix(f"s3://{OUTPUT_BUCKET}/") for uri in summary["outputs"]]
    rows = [row for key in outputs for row in _rows(s3, key)]
    assert [row["ip"] for row in rows] == [*big, "8.8.8.8", "1.0.0.1"]
    by_ip = {row["ip"]: row for row in rows}
    assert by_ip["8.8.8.8"]["organization"] == "google"
    assert by_ip["2001:4860::1"]["asn"] == "15169"
    assert by_ip["1.0.0.7"]["organization"] == "cloudflare"
    written = json.loads(
        s3.get_object(Bucket=OUTPUT_BUCKET, Key=f"enriched/run1/{SUMMARY_NAME}")["Body"].read()
    )
    assert written["rows"] == summary["rows"]
    assert [pinned["dataset"] for pinned in written["versions"]] == ["asn"]
    snapshots = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{SNAPSHOT_PREFIX}/")["Contents"]
    assert len(snapshots) == 1

    # And a second job on the same version reuses the snapshot: the table is not read again
    before = snapshots[0]["LastModified"]
    again = runner.run(localize(runner.definition), {**job, "output": f"s3://{OUTPUT_BUCKET}/enriched/run2/"})
    assert again["status"] == "SUCCEEDED", again
    (kept,) = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{SNAPSHOT_PREFIX}/")["Contents"]
    assert kept["LastModified"] == before


def test_an_output_that_holds_objects_is_refused_and_a_failing_part_leaves_no_output(
    machine: tuple[Machine, Any],
) -> None:
    runner, s3 = machine
    _put_log(s3, "access/x.csv", ["8.8.8.8"])
    _put_log(s3, "access/y.csv", ["1.0.0.1"])
    s3.put_object(Bucket=OUTPUT_BUCKET, Key="taken/keep.txt", Body=b"mine")

    # An output prefix that already holds an object fails the job before anything is written
    taken = runner.run(
        localize(runner.definition),
        {"input": f"s3://{INPUT_BUCKET}/access/", "output": f"s3://{OUTPUT_BUCKET}/taken/"},
    )
    assert taken["status"] == "FAILED"
    assert "already holds objects" in taken["cause"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=OUTPUT_BUCKET, Prefix="taken/")["Contents"]] == [
        "taken/keep.txt"
    ]

    # A part that fails (every retry) fails the job once every other part has finished, and the
    # parts they wrote are deleted
    runner.endpoint.faults.planned = {"enrich_part": [["RuntimeError", 1]]}
    failed = runner.run(
        localize(runner.definition),
        {"input": f"s3://{INPUT_BUCKET}/access/", "output": f"s3://{OUTPUT_BUCKET}/failed/"},
    )
    assert failed["status"] == "FAILED"
    assert "1 parts failed" in failed["cause"]
    assert "injected RuntimeError" in failed["cause"]
    assert runner.endpoint.faults.calls["enrich_part"] == 2
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=OUTPUT_BUCKET, Prefix="failed/").get("Contents", [])]
    assert left == []
