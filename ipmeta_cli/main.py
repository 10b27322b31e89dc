"""`ipmeta serve | load | lookup`: the local service and a client for any table.

Without ``IPMETA_DYNAMODB_ENDPOINT`` or ``--table``, every command works on the
local store under ``.data/`` (dynalite), whether `serve` is running or not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ipmeta.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, SharedLocalStore

DATASET_DIR = PROJECT_ROOT / "node_modules" / "@ip-location-db" / "asn"
DEFAULT_DATASET = (DATASET_DIR / "asn-ipv4.csv", DATASET_DIR / "asn-ipv6.csv")
DEFAULT_DATASET_COLUMNS = ("start", "end", "asn", "organization")
ATTRIBUTION = (
    "ASN data: @ip-location-db/asn (CC BY 4.0), from RouteViews, DB-IP and the NRO; "
    "see node_modules/@ip-location-db/asn/README.md"
)


@contextmanager
def backend(args: argparse.Namespace) -> Iterator[Settings]:
    """Settings pointing at the chosen table: an explicit endpoint/table, or the local store."""
    if args.table:
        os.environ[ENV_TABLE_NAME] = args.table
    with ExitStack() as stack:
        if not os.environ.get(ENV_DYNAMODB_ENDPOINT) and not args.table:
            local = SharedLocalStore(Path(args.data_dir), port=getattr(args, "dynamodb_port", 0))
            os.environ[ENV_DYNAMODB_ENDPOINT] = stack.enter_context(local)
        settings = Settings.from_environment()
        from ipmeta.store import Store

        Store.from_settings(settings).create_table_if_missing()
        yield settings


def load_files(
    settings: Settings, sources: Sequence[Path], columns: Sequence[str] | None, data_dir: Path
) -> dict[str, Any]:
    from tqdm import tqdm

    from ipmeta.store import Store
    from loader import driver, tasks
    from loader.staging import LocalStaging

    store = Store.from_settings(settings)
    bar = tqdm(total=0, unit="items", desc="writing", disable=None)

    def advance(count: int) -> None:
        bar.update(count)

    def prepared(result: tasks.Prepared) -> None:
        bar.reset(total=result.items if result.status == "prepared" else 0)

    result = driver.run_load(
        sources,
        tasks.LoadOptions(columns=columns),
        store,
        LocalStaging(data_dir / "staging"),
        on_items_written=advance,
        on_prepared=prepared,
    )
    bar.close()
    return {
        "status": result.status,
        "version": f"v{result.version}",
        "items": result.items,
        "seconds": result.seconds,
        "write": result.write,
        "report": result.report,
    }


def command_load(args: argparse.Namespace) -> int:
    columns = [column.strip() for column in args.columns.split(",")] if args.columns else None
    with backend(args) as settings:
        outcome = load_files(settings, [Path(name) for name in args.files], columns, Path(args.data_dir))
    print(json.dumps(outcome, indent=2))
    return 0


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


def command_serve(args: argparse.Namespace) -> int:
    from ipmeta.api.handler import handler
    from ipmeta_cli.server import LocalApiServer

    with backend(args) as settings:
        if args.load_default_dataset:
            print(f"Loading the ASN dataset (first run only). {ATTRIBUTION}", flush=True)
            outcome = load_files(settings, DEFAULT_DATASET, DEFAULT_DATASET_COLUMNS, Path(args.data_dir))
            print(f"dataset {outcome['version']}: {outcome['status']} ({outcome['items']} items)", flush=True)
        server = LocalApiServer(args.host, args.port, handler)
        base = server.url
        print(
            f"\nipmeta API on {base}  (Ctrl-C stops it and the local DynamoDB)\n"
            f"  curl {base}/v1/ip/1.1.1.1\n"
            f"  curl {base}/v1/ip/2001:200::1\n"
            f"  curl {base}/v1/ip/10.0.0.1     # 404 IP_ADDRESS_NOT_FOUND\n"
            f"  curl {base}/v1/ip/999.1.1.1    # 400 IP_ADDRESS_INVALID\n",
            flush=True,
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="ipmeta", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--table", help="a DynamoDB table in AWS (uses your AWS credentials)")
    common.add_argument("--data-dir", default=".data", help="where the local store lives (default .data)")
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="serve the API locally")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--dynamodb-port", type=int, default=0, help="port of the local DynamoDB (default: any)"
    )
    serve.add_argument(
        "--load-default-dataset", action="store_true", help="load the ASN dataset unless it is already active"
    )
    serve.set_defaults(run=command_serve)

    load = commands.add_parser("load", parents=[common], help="load CSV files as one new dataset version")
    load.add_argument("files", nargs="+")
    load.add_argument("--columns", help="column names for files without a header row, e.g. start,end,asn,org")
    load.set_defaults(run=command_load)

    lookup = commands.add_parser("lookup", parents=[common], help="look up IPs and print JSON")
    lookup.add_argument("ips", nargs="+")
    lookup.set_defaults(run=command_lookup)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    # Locally, metrics would print an EMF blob per request; CloudWatch is not there to read it.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    args = parser().parse_args(argv)
    from ipmeta.errors import IpmetaError
    from loader.source import SourceError

    try:
        return int(args.run(args))
    except (SourceError, IpmetaError, OSError) as error:
        print(f"ipmeta {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
