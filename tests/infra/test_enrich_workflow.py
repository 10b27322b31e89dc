"""The enrich state machine (``enrichInputs``/``enrichOutputs``): its Distributed Map, its tasks'
timeouts and retries, what each function may read and write, its layer and its alarm."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loader.pipeline.enrich_parts import S3Location
from loader.pipeline.enrich_task import ENRICH_TASKS, RESULTS_PREFIX, SNAPSHOT_PREFIX, STAGING_PREFIX
from stacks.constants import CHUNK_PREFIX, LOADER_MODULE, OUTPUT_ENRICH_STATE_MACHINE_ARN, REPO_ROOT
from stacks.load.enrich_workflow import (
    PANDAS_LAYER_NAME,
    PANDAS_LAYER_VERSIONS,
    S3_SLOW_DOWN_ERRORS,
    SIZING,
)
from stacks.load.loader_workflow import LAMBDA_SERVICE_ERRORS, TASK_TIMEOUT_MARGIN
from tests.infra.cfn import (
    alarms,
    as_list,
    function_by_handler,
    iter_states,
    policy_statements_of_role,
    resources_of_type,
    state_machine_definition,
)
from tests.infra.conftest import (
    DEFAULT,
    ENRICH,
    EXAMPLE_ENRICH_INPUTS,
    EXAMPLE_ENRICH_OUTPUT,
    Synthesized,
    cdk_json,
)

ASL_VALIDATOR = REPO_ROOT / "node_modules" / ".bin" / "asl-validator"
WORKFLOW = "EnrichWorkflow"


@pytest.fixture(scope="module")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.templates[ENRICH]


@pytest.fixture(scope="module")
def states(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(iter_states(state_machine_definition(template, WORKFLOW)["States"]))


def _role_statements(template: dict[str, Any], task: str) -> list[dict[str, Any]]:
    _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
    return policy_statements_of_role(template, function["Properties"]["Role"]["Fn::GetAtt"][0])


def _s3_grants(template: dict[str, Any], task: str) -> dict[str, set[str]]:
    """action -> every resource it is granted on, as text (tokens as JSON)."""
    grants: dict[str, set[str]] = {}
    for statement in _role_statements(template, task):
        for action in as_list(statement["Action"]):
            if action.startswith("s3:"):
                grants.setdefault(action, set()).update(json.dumps(r) for r in as_list(statement["Resource"]))
    return grants


def _objects(uri: str) -> str:
    """How the template spells the objects under an enrichInputs/enrichOutputs prefix."""
    location = S3Location.parse(uri).prefix()
    return json.dumps(
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{location.bucket}/{location.key}*"]]}
    )


def test_without_enrich_prefixes_the_stack_has_no_enrich_state_machine(synthesized: Synthesized) -> None:
    assert cdk_json()["context"]["enrichInputs"] == []
    machines = resources_of_type(synthesized.templates[DEFAULT], "AWS::StepFunctions::StateMachine")
    assert [name for name in machines if name.startswith(WORKFLOW)] == []


def test_enrich_parts_is_a_distributed_map_over_the_staged_parts_with_a_result_writer(
    template: dict[str, Any], states: dict[str, dict[str, Any]]
) -> None:
    parts = states["EnrichParts"]
    assert parts["Type"] == "Map"
    assert parts["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    reader = parts["ItemReader"]
    assert reader["Resource"] == "arn:aws:states:::s3:getObject"
    assert reader["ReaderConfig"]["InputType"] == "JSON"
    assert reader["Parameters"]["Key.$"] == "$.plan.parts.key"
    writer = parts["ResultWriter"]
    assert writer["Resource"] == "arn:aws:states:::s3:putObject"
    assert writer["Parameters"]["Prefix"] == f"{CHUNK_PREFIX}/{RESULTS_PREFIX}"
    assert parts["MaxConcurrency"] == cdk_json()["context"]["mapMaxConcurrency"]
    # Every child finishes before Summarize fails the job: no part is written after the abort.
    assert parts["ToleratedFailurePercentage"] == 100
    # The children's results stay in S3; the parent keeps only where they are.
    assert parts["ResultPath"] == "$.parts"
    assert states["Summarize"]["Parameters"]["results.$"] == "$.parts.ResultWriterDetails"
    assert list(parts["ItemProcessor"]["States"]) == ["EnrichPart"]


def test_every_task_times_out_after_its_function_and_retries_lambda_errors(
    states: dict[str, dict[str, Any]],
) -> None:
    tasks = {name: state for name, state in states.items() if state["Type"] == "Task"}
    assert set(tasks) == {"PlanEnrich", "Snapshot", "EnrichPart", "Summarize", "EnrichAbort"}
    functions = {
        "PlanEnrich": "enrich_plan",
        "Snapshot": "enrich_snapshot",
        "EnrichPart": "enrich_part",
        "Summarize": "enrich_summary",
        "EnrichAbort": "enrich_abort",
    }
    for name, state in tasks.items():
        size = SIZING[functions[name]]
        assert state["TimeoutSeconds"] == size.timeout.plus(TASK_TIMEOUT_MARGIN).to_seconds(), name
        assert state["Retry"][0]["ErrorEquals"] == list(LAMBDA_SERVICE_ERRORS), name
        assert state["Retry"][0]["JitterStrategy"] == "FULL"
    assert tasks["EnrichPart"]["Retry"][1]["ErrorEquals"] == list(S3_SLOW_DOWN_ERRORS)


def test_a_failure_anywhere_aborts_the_job_before_failing(states: dict[str, dict[str, Any]]) -> None:
    for name in ("PlanEnrich", "Snapshots", "EnrichParts", "Summarize"):
        (catch,) = states[name]["Catch"]
        assert catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "EnrichAbort"}, name
    assert states["EnrichAbort"]["Next"] == "EnrichFailed"
    assert states["EnrichFailed"]["Type"] == "Fail"
    assert states["Enriched"] == {"Type": "Succeed", "OutputPath": "$.summary"}


def test_each_function_sized_with_the_pandas_layer_and_the_state_machine_an_output(
    template: dict[str, Any],
) -> None:
    assert template["Mappings"]
    (mapping,) = [value for name, value in template["Mappings"].items() if "PandasLayerVersions" in name]
    assert mapping == {region: {"version": str(version)} for region, version in PANDAS_LAYER_VERSIONS.items()}
    for task in ENRICH_TASKS:
        _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
        properties = function["Properties"]
        assert properties["MemorySize"] == SIZING[task].memory_mb
        assert properties["Architectures"] == ["arm64"]
        assert PANDAS_LAYER_NAME in json.dumps(properties["Layers"]), task
    # The lookup function never carries pyarrow.
    for function in resources_of_type(template, "AWS::Lambda::Function").values():
        if not function["Properties"].get("Handler", "").startswith(f"{LOADER_MODULE}.enrich_"):
            assert PANDAS_LAYER_NAME not in json.dumps(function["Properties"].get("Layers", []))
    assert OUTPUT_ENRICH_STATE_MACHINE_ARN in template["Outputs"]


def test_parts_read_only_the_input_prefixes_and_snapshots_and_write_only_the_output_prefix(
    template: dict[str, Any],
) -> None:
    inputs = {_objects(uri) for uri in EXAMPLE_ENRICH_INPUTS}
    output = _objects(EXAMPLE_ENRICH_OUTPUT)
    part = _s3_grants(template, "enrich_part")
    assert set(part) == {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}
    readable = part["s3:GetObject"]
    assert inputs <= readable
    (snapshots,) = readable - inputs
    assert f"/{SNAPSHOT_PREFIX}/*" in snapshots
    assert part["s3:PutObject"] == part["s3:AbortMultipartUpload"] == {output}
    # The summary writes beside the parts, the abort deletes them: the output prefix only.
    assert _s3_grants(template, "enrich_summary")["s3:PutObject"] == {output}
    assert _s3_grants(template, "enrich_abort")["s3:DeleteObject"] == {output}
    # The plan reads inputs (and manifests under them) and stages its list in the loader's bucket.
    plan = _s3_grants(template, "enrich_plan")
    assert plan["s3:GetObject"] == inputs
    (staged,) = plan["s3:PutObject"]
    assert f"/{CHUNK_PREFIX}/{STAGING_PREFIX}/*" in staged
    # Nothing is granted on every bucket, or on a whole bucket's objects of the inputs or output.
    for task in ENRICH_TASKS:
        for action, resources in _s3_grants(template, task).items():
            assert '"*"' not in resources, (task, action)


def test_listing_is_limited_to_the_job_prefixes(template: dict[str, Any]) -> None:
    listing = [
        statement
        for statement in _role_statements(template, "enrich_plan")
        if "s3:ListBucket" in as_list(statement["Action"])
    ]
    prefixes = {
        prefix
        for statement in listing
        for prefix in as_list(statement["Condition"]["StringLike"]["s3:prefix"])
    }
    expected = {
        S3Location.parse(uri).prefix().key + "*" for uri in (*EXAMPLE_ENRICH_INPUTS, EXAMPLE_ENRICH_OUTPUT)
    }
    assert prefixes == expected


def test_failed_enrich_executions_raise_an_alarm(template: dict[str, Any]) -> None:
    found = [
        alarm
        for alarm in alarms(template).values()
        if "enrich execution failed" in alarm.get("AlarmDescription", "")
    ]
    assert len(found) == 1
    (alarm,) = found
    assert alarm["Threshold"] == 1
    assert alarm["AlarmActions"], "the alarm notifies the stack's alarm topic"


def test_the_enrich_definition_passes_asl_validator(template: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "enrich.asl.json"
    path.write_text(json.dumps(state_machine_definition(template, WORKFLOW)))
    result = subprocess.run(
        [str(ASL_VALIDATOR), "--json-path", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
