"""Which table a command works on: an explicit endpoint/table, or the local store."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import SharedLocalStore


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", help="a DynamoDB table in AWS (uses your AWS credentials)")
    parser.add_argument("--data-dir", default=".data", help="where the local store lives (default .data)")


@contextmanager
def backend(args: argparse.Namespace) -> Iterator[Settings]:
    """Settings for the chosen table; starts the local store's dynalite when needed.

    Without ``IPMETA_DYNAMODB_ENDPOINT`` or ``--table`` the local store under
    ``--data-dir`` is used, whether `ipmeta serve` is running or not.
    """
    if args.table:
        os.environ[ENV_TABLE_NAME] = args.table
    with ExitStack() as stack:
        if not os.environ.get(ENV_DYNAMODB_ENDPOINT) and not args.table:
            local = SharedLocalStore(
                Path(args.data_dir),
                port=getattr(args, "dynamodb_port", 0),
                long_lived=args.command == "serve",
            )
            os.environ[ENV_DYNAMODB_ENDPOINT] = stack.enter_context(local)
        settings = Settings.from_environment()
        if settings.dynamodb_endpoint:
            from ipmeta.store.dynamodb import make_client
            from loader.store.table_creation import create_table_if_missing

            # In AWS the stack owns the table; locally the first command creates it.
            create_table_if_missing(make_client(settings), settings.table_name)
        yield settings
