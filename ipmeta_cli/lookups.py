"""`ipmeta lookup`: answers printed as JSON, from the same handler the API runs."""

from __future__ import annotations

import argparse
import json

from ipmeta_cli.backend import add_backend_arguments, backend


def command_lookup(args: argparse.Namespace) -> int:
    from ipmeta.api.handler import handler
    from ipmeta_cli.server import LocalLambdaContext, proxy_event

    worst = 0
    with backend(args):
        for ip in args.ips:
            response = handler(proxy_event("GET", f"/v1/ip/{ip}", {}, b"", "127.0.0.1"), LocalLambdaContext())
            print(json.dumps(json.loads(response["body"]), indent=2))
            worst = max(worst, 0 if response["statusCode"] == 200 else 1)
    return worst


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lookup = commands.add_parser("lookup", help="look up IPs and print JSON")
    add_backend_arguments(lookup)
    lookup.add_argument("ips", nargs="+")
    lookup.set_defaults(run=command_lookup)
