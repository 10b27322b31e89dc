"""`ipmeta`: the local service, and a client for any ipmeta table.

Commands register themselves from one module each (serving here, loading in
``loading``, exports in ``exporting``, lookups in ``lookups``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ipmeta_cli import exporting, loading, lookups, planning, reverse, versions
from ipmeta_cli.arguments import positive_int
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.dynalite import PROJECT_ROOT

if TYPE_CHECKING:
    from loader.options import LoadOptions

DATASET_DIR = PROJECT_ROOT / "node_modules" / "@ip-location-db" / "asn"
DEFAULT_DATASET = (DATASET_DIR / "asn-ipv4.csv", DATASET_DIR / "asn-ipv6.csv")
DEFAULT_DATASET_COLUMNS = ("start", "end", "asn", "organization")
#: `make run` indexes the demo data by ASN, so `GET /v1/ranges?field=asn&value=13335` answers.
DEFAULT_INDEX_FIELD = "asn"
ATTRIBUTION = (
    "ASN data: @ip-location-db/asn (CC BY 4.0), from RouteViews, DB-IP and the NRO; "
    "see node_modules/@ip-location-db/asn/README.md"
)


def default_dataset_options() -> LoadOptions:
    """How `make run` (and the benchmarks, which share its store) load the ASN dataset."""
    from loader.options import LoadOptions

    return LoadOptions(columns=DEFAULT_DATASET_COLUMNS, index_field=DEFAULT_INDEX_FIELD)


def command_serve(args: argparse.Namespace) -> int:
    from ipmeta.api.handler import handler
    from ipmeta_cli.server import LocalApiServer, serve_in_workers

    with backend(args) as settings:
        if args.load_default_dataset:
            print(f"Loading the ASN dataset unless it is already active. {ATTRIBUTION}", flush=True)
            outcome = loading.load_files(
                settings,
                DEFAULT_DATASET,
                DEFAULT_DATASET_COLUMNS,
                Path(args.data_dir),
                options=default_dataset_options(),
            )
            print(f"dataset {outcome['version']}: {outcome['status']} ({outcome['items']} items)", flush=True)
        server = LocalApiServer(args.host, args.port, handler)
        base = server.url
        print(
            f"\nipmeta API on {base}  (Ctrl-C stops it and the local DynamoDB)\n"
            f"  curl {base}/v1/ip/1.1.1.1\n"
            f"  curl {base}/v1/ip/2001:200::1\n"
            f"  curl {base}/v1/ip/10.0.0.1     # 404 IP_ADDRESS_RESERVED (private, not in the data)\n"
            f"  curl {base}/v1/ip/999.1.1.1    # 400 IP_ADDRESS_INVALID\n"
            f"  curl '{base}/v1/ranges?field=asn&value=13335&limit=5'\n"
            f"  open {base}/v1/docs\n",
            flush=True,
        )
        try:
            serve_in_workers(server, args.workers)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="ipmeta", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the API locally")
    add_backend_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers",
        type=positive_int,
        default=min(4, os.cpu_count() or 1),
        help="processes serving requests, like concurrent Lambda containers (default: cores, at most 4)",
    )
    serve.add_argument("--dynamodb-port", type=int, default=0, help="local DynamoDB port (default: any)")
    serve.add_argument(
        "--load-default-dataset", action="store_true", help="load the ASN dataset unless it is already active"
    )
    serve.set_defaults(run=command_serve)

    loading.register(commands)
    planning.register(commands)
    exporting.register(commands)
    lookups.register(commands)
    versions.register(commands)
    reverse.register(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    # Locally, metrics would print an EMF blob per request; CloudWatch is not there to read it.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    args = parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    from ipmeta.errors import IpmetaError
    from loader.errors import LoadError

    try:
        return int(args.run(args))
    except (LoadError, IpmetaError, OSError, BotoCoreError, ClientError, RuntimeError) as error:
        # Bad input, AWS refusing (credentials, a missing object), or dynalite failing
        # to start: a one-line reason, never a traceback.
        print(f"ipmeta {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
