"""`ipmeta lookup`: IPs sent as one batch, answers printed as JSON, from every dataset (or ``--dataset``).

Without ``--endpoint`` the batch goes to the very handler the API runs, on the
local store (or ``--table``); with it, to a deployed API over HTTPS.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from contextlib import ExitStack
from typing import Any

from ipmeta.schema.settings import ApiSettings
from ipmeta.shapes import exact_json
from ipmeta_cli.arguments import dataset_names
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.client import add_endpoint_arguments, call_api
from loader.batching import batched

#: Exit codes: every IP answered; some IPs answered with an error; the request failed.
ALL_ANSWERED, SOME_ERRORS, REQUEST_FAILED = 0, 1, 2


def batch_path(fields: str | None, datasets: str | None = None, version: str | None = None) -> str:
    query = {
        name: value
        for name, value in (("fields", fields), ("datasets", datasets), ("version", version))
        if value
    }
    return "/v1/batch" + (f"?{urllib.parse.urlencode(query)}" if query else "")


def command_lookup(args: argparse.Namespace) -> int:
    size = ApiSettings().batch_max_ips
    answers: dict[str, Any] = {}
    with ExitStack() as stack:
        if not args.endpoint:
            stack.enter_context(backend(args))
        for ips in batched(args.ips, size):
            path = batch_path(args.fields, args.dataset, args.version)
            status, body = call_api(args, "POST", path, list(ips))
            if status != 200:
                print(exact_json.dumps(body, indent=2), file=sys.stderr)
                return REQUEST_FAILED
            answers.update(body)
    print(exact_json.dumps(answers, indent=2))
    failed = any(isinstance(answer, dict) and "error" in answer for answer in answers.values())
    return SOME_ERRORS if failed else ALL_ANSWERED


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lookup = commands.add_parser(
        "lookup",
        help="look up IPs (one batch) and print JSON keyed by IP",
        description="Exit status: 0 all answered, 1 some IPs answered with an error, 2 the request failed.",
    )
    add_backend_arguments(lookup)
    lookup.add_argument("ips", nargs="+", metavar="IP")
    lookup.add_argument("--fields", help="comma-separated data attributes to keep, e.g. asn,organization")
    lookup.add_argument(
        "--dataset",
        type=dataset_names,
        help="answer from these datasets only, e.g. city,asn (default: every active dataset)",
    )
    lookup.add_argument(
        "--version", help="retained versions to answer from: v3 with one dataset, else city:v3,asn:v12"
    )
    add_endpoint_arguments(lookup)
    lookup.set_defaults(run=command_lookup)
