"""`ipmeta ranges` and `ipmeta flagged`: reverse lookups, every page followed, printed as JSON.

Without ``--endpoint`` the requests go to the very handler the API runs, on the
local store (or ``--table``); with it, to a deployed API over HTTPS.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from ipmeta.shapes import exact_json
from ipmeta_cli.arguments import dataset_name
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.client import add_endpoint_arguments, call_api

OK, REQUEST_FAILED = 0, 2


def follow_pages(args: argparse.Namespace, path: str, query: Mapping[str, str]) -> int:
    """Every page of a listing, merged into one JSON answer; stops at ``--max-pages``."""
    params = {name: value for name, value in query.items() if value}
    answer: dict[str, Any] = {}
    ranges: list[Any] = []
    with ExitStack() as stack:
        if not args.endpoint:
            stack.enter_context(backend(args))
        for _ in range(args.max_pages):
            url = f"{path}?{urllib.parse.urlencode(params)}"
            status, body = call_api(args, "GET", url)
            if status != 200:
                print(exact_json.dumps(body, indent=2), file=sys.stderr)
                return REQUEST_FAILED
            ranges.extend(body.pop("ranges"))
            answer = body
            if not body.get("next"):
                break
            params["next"] = body["next"]
    print(exact_json.dumps({**answer, "count": len(ranges), "ranges": ranges}, indent=2))
    return OK


def command_ranges(args: argparse.Namespace) -> int:
    query = {"field": args.field, "value": args.value, **_listing_query(args)}
    return follow_pages(args, "/v1/ranges", query)


def command_flagged(args: argparse.Namespace) -> int:
    return follow_pages(args, "/v1/flagged", _listing_query(args))


def _listing_query(args: argparse.Namespace) -> dict[str, str]:
    return {"limit": str(args.limit), "dataset": args.dataset, "version": args.version}


def _common(parser: argparse.ArgumentParser) -> None:
    add_backend_arguments(parser)
    parser.add_argument("--limit", type=int, default=1000, help="ranges per request (1-1000)")
    parser.add_argument("--max-pages", type=int, default=1_000_000, help="stop after this many pages")
    parser.add_argument(
        "--dataset",
        type=dataset_name,
        help="the dataset to list from (default: the first, in precedence order, with the index)",
    )
    parser.add_argument("--version", help="a retained dataset version (default: the active one)")
    add_endpoint_arguments(parser)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ranges = commands.add_parser(
        "ranges",
        help="list the ranges whose indexed field has a value (load with --index-field)",
        description="Exit status: 0 listed (possibly nothing), 2 the request failed.",
    )
    _common(ranges)
    ranges.add_argument("--field", required=True, help="the indexed field, e.g. asn")
    ranges.add_argument("--value", required=True, help="the value, e.g. 13335")
    ranges.set_defaults(run=command_ranges)

    flagged = commands.add_parser(
        "flagged",
        help="list the flagged ranges (load with --flag-column)",
        description="Exit status: 0 listed (possibly nothing), 2 the request failed.",
    )
    _common(flagged)
    flagged.set_defaults(run=command_flagged)
