"""The loader: source bucket, task functions and the state machine's definition."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from stacks.config import IpmetaConfig
from stacks.constants import (
    CHUNK_PREFIX,
    DEFAULT_EVENT_BUS,
    ENV_CHUNK_PREFIX,
    ENV_EVENT_BUS_NAME,
    ENV_SOURCE_BUCKET,
    ENV_TABLE_NAME,
    LOADER_MODULE,
    LOADER_TASKS,
    REPO_ROOT,
)
from stacks.load.loader_functions import sizing
from stacks.load.loader_workflow import (
    CHUNKS_PER_CHILD,
    LAMBDA_SERVICE_ERRORS,
    THROTTLE_RETRY_BACKOFF_RATE,
    THROTTLE_RETRY_MAX_ATTEMPTS,
    THROTTLING_ERRORS,
    VERIFICATION_PENDING_ERROR,
)
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    iter_states,
    only,
    policy_statements_of_role,
    state_machine_definition,
)
from tests.infra.conftest import DEFAULT, FEEDS, SOURCE_URL, Synthesized, cdk_json

ASL_VALIDATOR = REPO_ROOT / "node_modules" / ".bin" / "asl-validator"


@pytest.fixture(scope="module")
def definition(synthesized: Synthesized) -> dict[str, Any]:
    return state_machine_definition(synthesized.templates[DEFAULT])


def test_source_bucket_is_private_tls_only_versioned_and_encrypted(synthesized: Synthesized) -> None:
    template = synthesized.template()
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_each_loader_task_runs_its_handler_with_table_bucket_and_chunk_prefix(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[DEFAULT]
    table_id, _ = only(template, "AWS::DynamoDB::GlobalTable")
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    for task in LOADER_TASKS:
        _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables[ENV_TABLE_NAME] == {"Ref": table_id}
        assert variables[ENV_SOURCE_BUCKET] == {"Ref": bucket_id}
        assert variables[ENV_CHUNK_PREFIX] == CHUNK_PREFIX
        size = sizing(task, IpmetaConfig.model_validate(cdk_json()["context"]))
        assert function["Properties"]["MemorySize"] == size.memory_mb
        assert function["Properties"]["Timeout"] == size.timeout.to_seconds()
    # The CPU-bound tasks get the context's memory: it buys their vCPU.
    for task in ("scan", "resolve"):
        _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
        assert function["Properties"]["MemorySize"] == cdk_json()["context"]["loaderMemoryMb"]


def test_activate_may_announce_the_new_version_on_the_default_bus_and_nothing_else_may(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[DEFAULT]
    for task in LOADER_TASKS:
        _, function = function_by_handler(template, f"{LOADER_MODULE}.{task}")
        variables = function["Properties"]["Environment"]["Variables"]
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        may_put_events = [
            statement
            for statement in policy_statements_of_role(template, role_id)
            if "events:PutEvents" in as_list(statement["Action"])
        ]
        if task == "activate":
            assert variables[ENV_EVENT_BUS_NAME] == DEFAULT_EVENT_BUS
            assert len(may_put_events) == 1
            assert f"event-bus/{DEFAULT_EVENT_BUS}" in json.dumps(may_put_events[0]["Resource"])
        else:
            assert ENV_EVENT_BUS_NAME not in variables
            assert may_put_events == []


def test_loader_asset_holds_the_loader_and_the_core_package_at_its_root(synthesized: Synthesized) -> None:
    _, function = function_by_handler(synthesized.templates[DEFAULT], f"{LOADER_MODULE}.start")
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    asset = Path(synthesized.asset_dirs[DEFAULT]) / f"asset.{asset_hash}"

    assert (asset / "loader" / "__init__.py").is_file()
    assert (asset / "ipmeta" / "schema" / "keys.py").is_file()
    assert not list(asset.rglob("__pycache__"))


def test_start_then_done_when_unchanged_else_prepare_or_write(definition: dict[str, Any]) -> None:
    states = definition["States"]
    assert definition["StartAt"] == "Start"
    assert states["Start"]["Next"] == "Started?"
    choice = states["Started?"]
    # "unchanged" ends successfully; a resumed load that was prepared goes straight to its writes.
    assert choice["Choices"] == [
        {"Variable": "$.status", "StringEquals": "unchanged", "Next": "NothingToWrite"},
        {"Variable": "$.prepared", "BooleanEquals": True, "Next": "WriteChunks"},
    ]
    assert states["NothingToWrite"]["Type"] == "Succeed"
    assert choice["Default"] == "ScanSources"
    path = ["ScanSources", "PlanPartitions", "ResolvePartitions", "PlanWrites", "Written?"]
    assert [states[name]["Next"] for name in path[:-1]] == path[1:]
    # A dry run stops after planning its writes.
    assert states["Written?"]["Choices"][0]["Next"] == "DryRunDone"
    assert states["Written?"]["Default"] == "WriteChunks"


def test_partitions_and_chunks_run_on_distributed_maps_reading_the_staged_lists(
    definition: dict[str, Any],
) -> None:
    states = definition["States"]
    for name, key, first in (
        ("ResolvePartitions", "$.partitions.items.key", "Resolve"),
        ("WriteChunks", "$.writes.items.key", "WriteChunk"),
    ):
        state = states[name]
        assert state["Type"] == "Map"
        assert state["ItemProcessor"]["ProcessorConfig"] == {
            "Mode": "DISTRIBUTED",
            "ExecutionType": "STANDARD",
        }
        assert state["ItemProcessor"]["StartAt"] == first
        assert state["ItemReader"]["Parameters"]["Key.$"] == key
        assert state["ItemReader"]["ReaderConfig"] == {"InputType": "JSON"}
        assert state["MaxConcurrency"] == cdk_json()["context"]["mapMaxConcurrency"]
        # No failure is tolerated (the default), results go to S3 and never into the state.
        assert "ToleratedFailurePercentage" not in state
        assert "ToleratedFailureCount" not in state
        assert "ResultWriter" in state
        assert state["ResultPath"] is None
    assert states["WriteChunks"]["ItemBatcher"] == {"MaxItemsPerBatch": CHUNKS_PER_CHILD}
    assert states["WriteChunks"]["Next"] == "Activate"
    assert states["ScanSources"]["ItemsPath"] == "$.scans"


def test_every_task_state_has_a_timeout_beyond_its_function_s(
    definition: dict[str, Any], synthesized: Synthesized
) -> None:
    resources = synthesized.templates[DEFAULT]["Resources"]
    tasks = {name: state for name, state in iter_states(definition["States"]) if state["Type"] == "Task"}
    assert len(tasks) >= 9
    for name, state in tasks.items():
        # The rendered ARN ends with the function's logical id.
        function = resources[state["Resource"].rsplit(":", 1)[-1]]
        assert function["Type"] == "AWS::Lambda::Function", name
        # The Lambda's own timeout (a clean error the Retry handles) comes first.
        assert state["TimeoutSeconds"] > function["Properties"]["Timeout"], name


def test_write_chunk_retries_lambda_and_throttling_errors_with_full_jitter(
    definition: dict[str, Any],
) -> None:
    write_chunk = definition["States"]["WriteChunks"]["ItemProcessor"]["States"]["WriteChunk"]
    retries = {tuple(retry["ErrorEquals"]): retry for retry in write_chunk["Retry"]}

    assert set(retries) == {LAMBDA_SERVICE_ERRORS, THROTTLING_ERRORS}
    throttling = retries[THROTTLING_ERRORS]
    assert throttling["JitterStrategy"] == "FULL"
    assert throttling["BackoffRate"] == THROTTLE_RETRY_BACKOFF_RATE
    assert throttling["MaxAttempts"] == THROTTLE_RETRY_MAX_ATTEMPTS
    assert "Lambda.TooManyRequestsException" in LAMBDA_SERVICE_ERRORS
    assert retries[LAMBDA_SERVICE_ERRORS]["JitterStrategy"] == "FULL"


def test_activate_retries_a_verification_that_ran_out_of_time(definition: dict[str, Any]) -> None:
    # A version too big to count in one invocation: each retry counts on from the saved progress
    # (``loader.store.partition_counts``), so the retry is what lets the count finish
    retries = definition["States"]["Activate"]["Retry"]
    (pending,) = [retry for retry in retries if VERIFICATION_PENDING_ERROR in retry["ErrorEquals"]]
    assert pending["ErrorEquals"] == ["VerificationPending"]
    assert pending["MaxAttempts"] >= 10
    # And the error the handler raises is that very name (Lambda's errorType is the class name)
    from loader.errors import VerificationPending

    assert VerificationPending.__name__ == VERIFICATION_PENDING_ERROR


def test_activate_waits_the_grace_period_then_cleans_up_by_load_id(definition: dict[str, Any]) -> None:
    states = definition["States"]
    assert states["Activate"]["Parameters"] == {"load_id.$": "$.load_id"}
    assert states["Activate"]["Next"] == "Grace"
    assert states["Grace"] == {
        "Type": "Wait",
        "Seconds": cdk_json()["context"]["activationGraceSeconds"],
        "Next": "Cleanup",
        "Comment": states["Grace"]["Comment"],
    }
    assert states["Cleanup"]["Parameters"] == {"load_id.$": "$.load_id"}
    assert states[states["Cleanup"]["Next"]]["Type"] == "Succeed"


def test_every_step_before_activation_catches_into_abort_which_ends_in_fail(
    definition: dict[str, Any],
) -> None:
    top_level = definition["States"]
    for name in (
        "Start",
        "ScanSources",
        "PlanPartitions",
        "ResolvePartitions",
        "PlanWrites",
        "WriteChunks",
        "Activate",
    ):
        assert top_level[name]["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Abort"}
        ], name
    abort = top_level["Abort"]
    # No Parameters: Abort receives the whole state, load_id included once known.
    assert "Parameters" not in abort
    assert abort["ResultPath"] is None
    assert abort["Next"] == "LoadFailed"
    assert [catch["Next"] for catch in abort["Catch"]] == ["LoadFailed"]
    assert top_level["LoadFailed"]["Type"] == "Fail"


def test_a_failed_cleanup_fails_the_execution_without_aborting_the_live_version(
    definition: dict[str, Any],
) -> None:
    states = definition["States"]
    [catch] = states["Cleanup"]["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    assert states[catch["Next"]]["Type"] == "Fail"
    tasks_and_maps = [name for name, s in states.items() if s["Type"] in ("Task", "Map")]
    assert all("Catch" in states[name] for name in tasks_and_maps)


def test_state_machine_logs_everything_and_traces(synthesized: Synthesized) -> None:
    synthesized.template().has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "LoggingConfiguration": {
                "Level": "ALL",
                "IncludeExecutionData": True,
                "Destinations": [Match.any_value()],
            },
            "TracingConfiguration": {"Enabled": True},
        },
    )


@pytest.mark.parametrize("variant", [DEFAULT, SOURCE_URL, FEEDS])
def test_definition_passes_asl_validator(synthesized: Synthesized, variant: str, tmp_path: Path) -> None:
    definition = state_machine_definition(synthesized.templates[variant])
    every_state = dict(iter_states(definition["States"]))
    assert "WriteChunk" in every_state
    # asl-validator accepts a string here; Step Functions does not.
    for name, state in every_state.items():
        assert isinstance(state.get("Parameters", {}), dict), name
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(definition), encoding="utf-8")

    result = subprocess.run(
        [str(ASL_VALIDATOR), "--json-path", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert result.returncode == 0, result.stdout + result.stderr
