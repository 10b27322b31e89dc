"""`ipmeta`: the local service, and a client for any ipmeta table (local dynalite or AWS).

``serve`` lives here: the real Lambda handler behind the local HTTP server (``server``), fed each
front's event (``--front``: rest, http, url; ``events``), with keys checked as that front checks
them. Every other command registers itself from one module: ``loading`` (load), ``exporting``
(export), ``lookups`` (lookup), ``reverse`` (ranges, flagged), ``versions`` (versions, rollback,
cleanup), ``updating`` (vendor feeds), ``replicas`` (follow a replica region) and ``planning``
(plan: capacity and cost). ``backend`` picks the table (``--table`` in AWS, or a local dynalite
under ``--data-dir``, ``dynalite``) for all of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ipmeta.schema.settings import DEFAULT_FRONT, ENV_SHOW_SOURCES, Front
from ipmeta_cli.arguments import ENV_API_KEY, key_file, positive_int
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.demo import demo_datasets

if TYPE_CHECKING:
    from ipmeta.schema.settings import Settings


def load_demo(settings: Settings, data_dir: Path) -> None:
    """`make run`'s datasets, each loaded unless its active version already holds these files."""
    from ipmeta_cli import loading

    for dataset in demo_datasets(data_dir):
        print(
            f"Loading dataset {dataset.name} unless it is already active. {dataset.attribution}", flush=True
        )
        outcome = loading.load_files(settings, dataset.files, None, data_dir, options=dataset.options)
        print(
            f"dataset {dataset.name} {outcome['version']}: {outcome['status']} ({outcome['items']} items)",
            flush=True,
        )


def serve_keys(args: argparse.Namespace) -> list[str]:
    """The keys `ipmeta serve` requires: ``--api-key``, each ``--api-key-file``'s lines and
    ``IPMETA_API_KEY``; none, and any request is served."""
    from_files = [key for keys in args.api_key_file or () for key in keys]
    from_environment = [key] if (key := os.environ.get(ENV_API_KEY, "").strip()) else []
    return [*(args.api_key or ()), *from_files, *from_environment]


def command_serve(args: argparse.Namespace) -> int:
    if args.show_sources:
        # Read by the handler's settings when its first request builds them.
        os.environ[ENV_SHOW_SOURCES] = "true"
    from ipmeta.api import observability
    from ipmeta.api.handler import handler
    from ipmeta_cli.server import LocalApiServer, serve_in_workers, tls_context

    # The lookup function's metrics line, once a minute at most per worker and at its end: on stderr.
    observability.minute_metrics.write = observability.write_to_stderr

    if bool(args.tls_cert) != bool(args.tls_key):
        raise RuntimeError("--tls-cert and --tls-key go together")
    tls = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    keys = serve_keys(args)
    with backend(args) as settings:
        if args.load_default_dataset:
            load_demo(settings, Path(args.data_dir))
        server = LocalApiServer(args.host, args.port, handler, api_keys=keys, tls=tls, front=args.front)
        base = server.url
        guarded = f", requests need one of {len(keys)} API keys" if keys else ""
        print(
            f"\nipmeta API on {base}  ({args.front} front{guarded}; Ctrl-C stops it and the local DynamoDB)\n"
            f"  curl {base}/v1/ip/104.16.132.229   # two datasets, one answer: asn and cloud\n"
            f"  curl {base}/v1/ip/1.1.1.1\n"
            f"  curl {base}/v1/ip/2001:200::1\n"
            f"  curl {base}/v1/ip/10.0.0.1     # 404 IP_ADDRESS_RESERVED (private, not in the data)\n"
            f"  curl {base}/v1/ip/999.1.1.1    # 400 IP_ADDRESS_INVALID\n"
            f"  curl '{base}/v1/ranges?field=asn&value=13335&limit=5'\n"
            f"  curl '{base}/v1/flagged?dataset=cloud'\n"
            f"  curl {base}/v1/datasets\n"
            f"  open {base}/                 # the lookup page\n"
            f"  open {base}/v1/docs\n"
            f"Metrics: one line a minute at most per worker, on stderr.\n",
            flush=True,
        )
        try:
            serve_in_workers(server, args.workers)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            observability.minute_metrics.publish()  # one worker: it served here; several: nothing
    return 0


def register_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        "--front",
        type=Front,
        choices=list(Front),
        default=DEFAULT_FRONT,
        help="the event the handler gets, and who checks keys, as the deployed front: rest (the "
        "REST proxy event; keys checked by the server, as API Gateway's authorizer), http (an HTTP "
        f"API's payload 2.0; keys checked by the server), url (a function URL's payload 2.0; keys "
        f"checked by the function itself). Default: {DEFAULT_FRONT}, the stack's default apiType",
    )
    serve.add_argument(
        "--api-key",
        action="append",
        metavar="KEY",
        help="refuse requests without this key (repeat for several), in the form each route family "
        "takes in AWS: x-api-key on /v1, HTTP Basic's password on /geoip, Bearer or ?token= on "
        f"/ipinfo. Default: any request. ps shows it: prefer --api-key-file or {ENV_API_KEY}",
    )
    serve.add_argument(
        "--api-key-file",
        action="append",
        type=key_file,
        metavar="PATH",
        help="refuse requests without one of the keys in this file (one a line; repeatable)",
    )
    serve.add_argument(
        "--show-sources",
        action="store_true",
        help="/v1/datasets shows each version's sources whole (paths, URLs), not file names",
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain)")
    serve.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    serve.add_argument(
        "--load-default-dataset",
        action="store_true",
        help="load the demo datasets (asn, cloud) unless they are already active",
    )
    serve.set_defaults(run=command_serve)


#: What registers each command's arguments (``module.function``), in ``--help``'s order. A
#: command line imports only its own command's module: each module imports what its commands
#: need (boto3, pyarrow, the feeds), and a command should not wait for the others' (0.1 s).
COMMAND_REGISTRARS: Final = {
    "load": "ipmeta_cli.loading.register",
    "plan": "ipmeta_cli.planning.register",
    "export": "ipmeta_cli.exporting.register",
    "enrich": "ipmeta_cli.enriching.register",
    "lookup": "ipmeta_cli.lookups.register",
    "versions": "ipmeta_cli.versions.register",
    "activate": "ipmeta_cli.versions.register",
    "rollback": "ipmeta_cli.versions.register",
    "cleanup": "ipmeta_cli.versions.register",
    "ranges": "ipmeta_cli.reverse.register",
    "flagged": "ipmeta_cli.reverse.register",
    "update": "ipmeta_cli.updating.register",
    "follow": "ipmeta_cli.replicas.register",
}


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every command, or (``command``, a known name) only that one."""
    root = argparse.ArgumentParser(prog="ipmeta", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    if command in (None, "serve"):
        register_serve(commands)
    if command == "serve":
        return root
    registrars = [COMMAND_REGISTRARS[command]] if command is not None else COMMAND_REGISTRARS.values()
    for registrar in dict.fromkeys(registrars):  # in order, each once
        module, function = registrar.rsplit(".", maxsplit=1)
        getattr(importlib.import_module(module), function)(commands)
    return root


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, when it is its first word; None (every command) otherwise."""
    first = argv[0] if argv else None
    return first if first == "serve" or first in COMMAND_REGISTRARS else None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    args = parser(_command_named(words)).parse_args(words)
    # `serve` prints the lookup function's metrics line as Lambda does, on stderr; the other
    # commands that call the handler (`lookup --endpoint` aside) have no minute to count.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "false" if args.command == "serve" else "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from botocore.exceptions import BotoCoreError, ClientError

    from ipmeta.schema.errors import IpmetaError
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
