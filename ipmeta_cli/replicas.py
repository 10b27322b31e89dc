"""`ipmeta follow`: a replica region's pointers follow home's, each version once it has wholly arrived.

What each replica region's scheduled function runs in AWS (``loader.pipeline.arrival``),
run by hand against one region: ``ipmeta follow --region eu-west-1 --table TABLE`` with
AWS credentials, or against a local DynamoDB standing in for that region
(``IPMETA_DYNAMODB_ENDPOINT``). It prints each dataset's outcome as JSON and exits 1
while a version has not wholly arrived (the region keeps serving what it served), so
``until ipmeta follow --region R; do sleep 10; done`` waits for it.
"""

from __future__ import annotations

import argparse
import json
import os

from ipmeta_cli.arguments import positive_float, region_name
from ipmeta_cli.backend import add_backend_arguments, backend
from loader.settings import DEFAULT_POLL_SECONDS

#: What the AWS SDK reads for the region of a client it builds.
AWS_REGION_VARIABLE = "AWS_DEFAULT_REGION"


def command_follow(args: argparse.Namespace) -> int:
    from loader.pipeline import arrival
    from loader.store.table import LoaderTable

    if args.table:
        # The replica of that region, not the table of the profile's region.
        os.environ[AWS_REGION_VARIABLE] = args.region
    with backend(args) as settings:
        outcomes = arrival.follow_home(
            LoaderTable.from_settings(settings),
            args.region,
            wait_seconds=args.wait_seconds,
            poll_seconds=args.poll_seconds,
        )
    print(json.dumps([outcome.to_dict() for outcome in outcomes], indent=2))
    return 1 if any(outcome.status == "waiting" for outcome in outcomes) else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    follow = commands.add_parser(
        "follow",
        help="a replica region's pointers follow home's, each version once it has wholly arrived there",
    )
    add_backend_arguments(follow)
    follow.add_argument(
        "--region", type=region_name, required=True, help="the replica region, e.g. eu-west-1"
    )
    follow.add_argument(
        "--wait-seconds",
        type=float,
        default=0.0,
        help="count a version's partitions again until it arrived, up to this long (default: once)",
    )
    follow.add_argument(
        "--poll-seconds",
        type=positive_float,
        default=DEFAULT_POLL_SECONDS,
        help="between two counts of the partitions still short",
    )
    follow.set_defaults(run=command_follow)
