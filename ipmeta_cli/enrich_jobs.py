"""`ipmeta enrich s3://in/ --out s3://out/ --stack NAME`: the job on AWS, started and followed.

The stack's enrich state machine (``EnrichStateMachineArn``, deployed with ``enrichInputs``
and ``enrichOutputs``) runs the job; this command writes its input JSON (docs/enrich.md,
"Starting it another way"), starts it, and shows the parts done as they finish. The summary
it prints is the execution's output, also at ``<out>/_SUMMARY.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

#: Between two looks at the execution: a part takes seconds to minutes.
POLL_SECONDS = 5.0


def execution_input(args: argparse.Namespace) -> dict[str, Any]:
    """The execution's input JSON from the command's arguments (``loader.pipeline.enrich_task``)."""
    from ipmeta.lookup.catalog import parse_version_selector

    source = "manifest" if args.manifest else "input"
    job: dict[str, Any] = {source: args.input, "output": args.out, "overwrite": bool(args.overwrite)}
    if args.column:
        job["column"] = int(args.column) if args.column.isdigit() else args.column
    if args.datasets:
        job["datasets"] = [name.strip() for name in str(args.datasets).split(",") if name.strip()]
    if args.version:
        job["versions"] = parse_version_selector(
            args.version, job.get("datasets") or _one_named(args.version)
        )
    if args.format:
        job["format"] = args.format
    return job


def _one_named(version: str) -> list[str]:
    return [part.rpartition(":")[0] for part in version.split(",") if ":" in part]


def command_enrich_job(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ipmeta.schema.errors import IpmetaError
    from loader.errors import SourceError
    from loader.store.enrich_executions import EnrichExecutions

    executions = EnrichExecutions(args.region)
    try:
        job = execution_input(args)
        arn = executions.start(executions.state_machine_arn(args.stack), job)
    except (SourceError, IpmetaError, ValueError) as error:
        print(f"ipmeta enrich: {error}", file=sys.stderr)
        return 2
    print(f"started {arn}", file=sys.stderr)
    with tqdm(unit=" parts", desc="enrich", leave=False) as bar:
        while True:
            state = executions.state(arn)
            if state.parts:
                bar.total = state.parts
                bar.n = state.parts_done
                bar.refresh()
            if state.status != "RUNNING":
                break
            time.sleep(args.poll_seconds)
    if state.status != "SUCCEEDED":
        print(f"ipmeta enrich: the job {state.status.lower()}: {state.error}: {state.cause}", file=sys.stderr)
        return 2
    print(json.dumps(state.output, indent=2))
    return 1 if state.output and state.output.get("invalid_rows") else 0


def add_job_arguments(enrich: argparse.ArgumentParser) -> None:
    enrich.add_argument(
        "--stack",
        help="with INPUT and --out as s3:// prefixes: run the job on the stack's enrich state machine",
    )
    enrich.add_argument(
        "--manifest",
        action="store_true",
        help="with --stack: INPUT is an S3 Inventory "
        "manifest.json, or a CSV of bucket,key,size (an Athena query's result)",
    )
    enrich.add_argument("--region", help="with --stack: the stack's region (default: the profile's)")
    enrich.add_argument("--poll-seconds", type=float, default=POLL_SECONDS, help=argparse.SUPPRESS)
