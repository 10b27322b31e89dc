"""The local API: a real HTTP server that calls the very Lambda handler.

Each request becomes an API Gateway REST proxy event (the shape the `/v1`
proxy resource delivers in AWS), and the handler's proxy response becomes the
HTTP response. Nothing about routing or errors is reimplemented here.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ipmeta_cli.dynalite import die_with_parent

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]
STAGE = "local"


@dataclass
class LocalLambdaContext:
    """The attributes powertools reads from a Lambda context."""

    function_name: str = "ipmeta-lookup-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:ipmeta-lookup-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def proxy_event(
    method: str,
    raw_path: str,
    headers: dict[str, str],
    body: bytes,
    source_ip: str,
) -> dict[str, Any]:
    """An API Gateway REST proxy event for ``/v1/{proxy+}``."""
    split = urlsplit(raw_path)
    path = unquote(split.path)
    pairs = parse_qsl(split.query, keep_blank_values=True)
    multi_query: dict[str, list[str]] = {}
    for name, value in pairs:
        multi_query.setdefault(name, []).append(value)
    request_id = str(uuid.uuid4())
    text_body: str | None = None
    is_base64 = False
    if body:
        try:
            text_body = body.decode("utf-8")
        except UnicodeDecodeError:
            text_body, is_base64 = base64.b64encode(body).decode(), True
    return {
        "resource": "/v1/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": path.removeprefix("/v1/")} if path.startswith("/v1/") else None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/v1/{proxy+}",
            "httpMethod": method,
            # As behind a custom domain: the stage is not part of the URL, so the
            # OpenAPI servers entry (and Swagger UI's "Try it out") stays /v1/...
            "path": path,
            "stage": STAGE,
            "requestId": request_id,
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": source_ip, "userAgent": headers.get("User-Agent")},
        },
        "body": text_body,
        "isBase64Encoded": is_base64,
    }


def make_request_handler(lambda_handler: LambdaHandler) -> type[BaseHTTPRequestHandler]:
    class ProxyRequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections as with API Gateway
        server_version = "ipmeta-local"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            event = proxy_event(
                self.command, self.path, dict(self.headers.items()), body, self.client_address[0]
            )
            response = lambda_handler(
                event, LocalLambdaContext(aws_request_id=event["requestContext"]["requestId"])
            )
            self._reply(response)

        def setup(self) -> None:
            super().setup()
            # Headers and body leave in two writes; with Nagle's algorithm the second
            # waits for the client's delayed ACK (~40 ms) on every keep-alive request.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _reply(self, response: dict[str, Any]) -> None:
            payload = response.get("body") or ""
            data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
            self.send_response(int(response.get("statusCode", 500)))
            for name, value in (response.get("headers") or {}).items():
                self.send_header(name, str(value))
            for name, values in (response.get("multiValueHeaders") or {}).items():
                for value in values:
                    self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the handler's own logger reports requests; stderr lines per request only slow us down

    return ProxyRequestHandler


class LocalApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, host: str, port: int, lambda_handler: LambdaHandler) -> None:
        super().__init__((host, port), make_request_handler(lambda_handler))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def serve_in_workers(server: LocalApiServer, workers: int) -> None:
    """Serve from ``workers`` forked processes that accept on one listening socket.

    In AWS every concurrent request may get its own Lambda container; one Python
    process serialises the handler on its GIL. Forked workers are the local
    stand-in for several containers: each builds its own clients and pointer
    cache on first use (``ipmeta.api.dependencies``), exactly as a container does.
    """
    if workers <= 1:
        server.serve_forever()
        return
    children: list[int] = []
    try:
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:  # the worker
                die_with_parent()
                code = 0
                try:
                    server.serve_forever()
                except KeyboardInterrupt:
                    pass
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
