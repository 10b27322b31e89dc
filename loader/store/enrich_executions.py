"""The enrich state machine from outside: found by its stack, started, and watched (Step Functions).

``ipmeta enrich s3://… --stack NAME`` is its one user (``ipmeta_cli.enrich_jobs``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import boto3

from loader.errors import SourceError
from loader.settings import OUTPUT_ENRICH_STATE_MACHINE_ARN


@dataclass(frozen=True, slots=True)
class ExecutionState:
    status: str
    #: Children of the EnrichParts map: done (succeeded or failed) and in all; 0 before it starts.
    parts_done: int = 0
    parts: int = 0
    output: Any = None
    error: str | None = None
    cause: str | None = None


class EnrichExecutions:
    def __init__(self, region: str | None = None) -> None:
        self._sfn = boto3.client("stepfunctions", region_name=region)
        self._cloudformation = boto3.client("cloudformation", region_name=region)

    def state_machine_arn(self, stack: str) -> str:
        try:
            (found,) = self._cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except self._cloudformation.exceptions.ClientError as error:
            raise SourceError(f"stack {stack}: {error}") from None
        outputs = {output["OutputKey"]: output["OutputValue"] for output in found.get("Outputs", [])}
        if OUTPUT_ENRICH_STATE_MACHINE_ARN not in outputs:
            raise SourceError(
                f"stack {stack} has no enrich state machine: deploy it with enrichInputs and enrichOutputs"
            )
        return str(outputs[OUTPUT_ENRICH_STATE_MACHINE_ARN])

    def start(self, state_machine_arn: str, execution_input: dict[str, Any]) -> str:
        started = self._sfn.start_execution(
            stateMachineArn=state_machine_arn,
            name=f"enrich-{uuid.uuid4().hex[:16]}",
            input=json.dumps(execution_input),
        )
        return started["executionArn"]

    def state(self, execution_arn: str) -> ExecutionState:
        described = self._sfn.describe_execution(executionArn=execution_arn)
        done, total = self._parts(execution_arn)
        output = described.get("output")
        return ExecutionState(
            status=described["status"],
            parts_done=done,
            parts=total,
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
        )

    def _parts(self, execution_arn: str) -> tuple[int, int]:
        runs = self._sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", [])
        if not runs:
            return 0, 0
        counts = self._sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["itemCounts"]
        return int(counts["succeeded"]) + int(counts["failed"]), int(counts["total"])
