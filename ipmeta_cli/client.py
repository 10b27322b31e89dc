"""How the CLI talks to the API: the very handler in-process, or a deployed API over HTTPS.

Without ``--endpoint`` a request becomes an API Gateway proxy event for the same
handler Lambda runs, on the local store (or ``--table``); with it, an HTTPS
request carrying ``x-api-key`` (from ``--api-key``, ``--api-key-file`` or
``IPMETA_API_KEY``). Either way the answer is ``(status, JSON body)``,
and an error page that is not the API's JSON (a gateway's HTML) still becomes one.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from decimal import Decimal
from typing import Any

from ipmeta_cli.arguments import ENV_API_KEY, key_file

TIMEOUT_SECONDS = 30


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", help="a deployed API's base URL, e.g. https://abc.execute-api.../prod")
    parser.add_argument(
        "--api-key",
        help=f"the API key sent as x-api-key (with --endpoint); ps shows it to every user, so prefer "
        f"--api-key-file or {ENV_API_KEY}",
    )
    parser.add_argument(
        "--api-key-file", type=key_file, metavar="PATH", help="read the API key from this file (one line)"
    )


def endpoint_key(args: argparse.Namespace) -> str | None:
    """The key sent with ``--endpoint``: ``--api-key``, else ``--api-key-file``, else the environment."""
    if args.api_key:
        return str(args.api_key)
    if args.api_key_file:
        if len(args.api_key_file) > 1:
            raise RuntimeError("--api-key-file holds several keys; a request sends one")
        return str(args.api_key_file[0])
    return os.environ.get(ENV_API_KEY) or None


def call_api(args: argparse.Namespace, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request to ``args.endpoint`` if set, else to the in-process handler."""
    data = json.dumps(body).encode() if body is not None else b""
    headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
    if not args.endpoint:
        return _local(method, path, headers, data)
    if key := endpoint_key(args):
        headers["x-api-key"] = key
    request = urllib.request.Request(
        args.endpoint.rstrip("/") + path, data=data or None, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return response.status, parse_answer(response.read())
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, parse_answer(text or b"{}")
        except ValueError:  # a gateway's own error page, not the API's JSON
            return error.code, {"code": f"HTTP_{error.code}", "message": text.decode(errors="replace")[:500]}


def _local(method: str, path: str, headers: dict[str, str], data: bytes) -> tuple[int, Any]:
    from ipmeta.api.handler import handler
    from ipmeta_cli.server import LocalLambdaContext, proxy_event

    response = handler(proxy_event(method, path, headers, data, "127.0.0.1"), LocalLambdaContext())
    return int(response["statusCode"]), parse_answer(response["body"])


def parse_answer(body: str | bytes) -> Any:
    """An answer's JSON with its numbers exact: a decimal as ``Decimal``, so it prints as it came."""
    return json.loads(body, parse_float=Decimal)
