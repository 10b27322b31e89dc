"""The local API: a real HTTP server that calls the very Lambda handler.

Each request becomes an API Gateway REST proxy event (the shape the `/v1`
proxy resource delivers in AWS), and the handler's proxy response becomes the
HTTP response. Nothing about routing or errors is reimplemented here.

What the server itself adds to a lookup is kept small, because one worker is
one Python process and every microsecond of it is taken from the handler
(``bench/lookup.py``): headers are read without the ``email`` package, and a
response leaves in one write.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ipmeta.api.credentials import REFUSAL_STATUS, client_of, presented_key, refusal_body
from ipmeta_cli.dynalite import die_with_parent

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]
STAGE = "local"
#: The limits ``http.client`` puts on a header block.
MAX_HEADER_LINE = 65_536
MAX_HEADERS = 100


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
    """An API Gateway REST proxy event for ``/v1/{proxy+}``, or ``/{proxy+}`` for the other APIs."""
    split = urlsplit(raw_path)
    path = unquote(split.path)
    pairs = parse_qsl(split.query, keep_blank_values=True) if split.query else []
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
    versioned = path == "/v1" or path.startswith("/v1/")
    resource = "/v1/{proxy+}" if versioned else "/{proxy+}"
    proxy = (
        (path.removeprefix("/v1/") if path.startswith("/v1/") else None) if versioned else path.lstrip("/")
    )
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": {name: values[-1] for name, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": proxy} if proxy else None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
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


class HeaderBlockTooLarge(Exception):
    """A header line or the number of headers is over ``http.client``'s limits."""


class RequestHeaders:
    """A request's headers in arrival order; names compare case-insensitively, as in HTTP."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self._pairs if key.lower() == wanted), default)

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(self._pairs)


def read_headers(stream: io.BufferedIOBase) -> RequestHeaders:
    """The header block up to its blank line, as ``http.client`` reads it, without the ``email`` parser.

    The ``email`` package made header parsing half of the server's own CPU per
    request. Values lose their leading blanks; an obsolete folded line joins
    the value before it; a line without a colon is dropped.
    """
    pairs: list[tuple[str, str]] = []
    while True:
        line = stream.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise HeaderBlockTooLarge("Line too long")
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(pairs)
        if len(pairs) >= MAX_HEADERS:
            raise HeaderBlockTooLarge(f"got more than {MAX_HEADERS} headers")
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and pairs:
            name, value = pairs[-1]
            pairs[-1] = (name, f"{value} {text.strip()}")
            continue
        name, colon, value = text.partition(":")
        if colon:
            pairs.append((name, value.lstrip(" \t")))


class _HttpDate:
    """The ``Date`` header, formatted once a second rather than once a response."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self, handler: BaseHTTPRequestHandler) -> str:
        now = int(time.time())
        if now != self._second:
            self._text, self._second = handler.date_time_string(now), now
        return self._text


class ProxyRequestHandler(BaseHTTPRequestHandler):
    """Requests to proxy events for ``lambda_handler``, set per server by ``make_request_handler``."""

    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections as with API Gateway
    server_version = "ipmeta-local"
    request_headers = RequestHeaders([])
    raw_requestline: bytes
    lambda_handler: LambdaHandler
    #: One per server class; a forked worker has its own copy, as each container is its own.
    invocation_lock: threading.Lock
    #: The keys a request must carry one of (any form ``ipmeta.api.credentials`` reads); empty: none.
    api_keys: dict[str, str] = {}  # noqa: RUF012 - set per server class, never mutated
    http_date = _HttpDate()
    _handshake_failed = False

    def parse_request(self) -> bool:
        """The request line and headers, by http.server's rules for HTTP/1.0 and 1.1.

        Anything else (HTTP/0.9, HTTP/2 over cleartext, garbage) gets the
        status http.server gives it; only the header parser differs
        (``read_headers``).
        """
        self.command = None  # type: ignore[assignment]  # as http.server has it until parsed
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or words[2] not in ("HTTP/1.0", "HTTP/1.1"):
            return super().parse_request() if words else False
        command, path, version = words
        self.command, self.request_version = command, version
        try:
            self.request_headers = read_headers(self.rfile)
        except HeaderBlockTooLarge as error:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(error))
            return False
        # http.server's guard against //host paths read as absolute URIs (gh-87389).
        self.path = "/" + path.lstrip("/") if path.startswith("//") else path
        connection = (self.request_headers.get("Connection") or "").lower()
        self.close_connection = connection == "close" or (
            version == "HTTP/1.0" and connection != "keep-alive"
        )
        expect = (self.request_headers.get("Expect") or "").lower()
        if expect == "100-continue" and version == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def _handle(self) -> None:
        length = int(self.request_headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        event = proxy_event(
            self.command, self.path, dict(self.request_headers.items()), body, self.client_address[0]
        )
        if self.api_keys and self.command != "OPTIONS" and not self._admitted(event):
            self._reply(refusal())
            return
        context = LocalLambdaContext(aws_request_id=event["requestContext"]["requestId"])
        # A Lambda container runs one invocation at a time, and the handler relies on it: the
        # powertools resolver, logger and metrics keep the current request on module-level
        # objects, so two threads inside it at once mix their requests (a 500 with
        # KeyError '_route' was seen under 16 clients). Workers are the concurrency.
        with self.invocation_lock:
            response = self.lambda_handler(event, context)
        self._reply(response)

    def _admitted(self, event: dict[str, Any]) -> bool:
        """What the gateway does before the function: the key, in any form, must be a known one.
        Preflights pass, as API Gateway answers them without a key."""
        key = presented_key(event["headers"], event["queryStringParameters"])
        return client_of(key, self.api_keys) is not None

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            # The handshake runs here, in the connection's own thread, not in accept():
            # a slow or broken client must not hold up the others.
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self._handshake_failed = True
        super().setup()
        # A reply leaves in one write (``_reply``); without TCP_NODELAY a write that
        # follows another unacknowledged one waits for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        if not self._handshake_failed:
            super().handle()

    def _reply(self, response: dict[str, Any]) -> None:
        """Status line, headers and body in one write: one syscall, one segment for the client."""
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
        status = int(response.get("statusCode", 500))
        phrase = self.responses[status][0] if status in self.responses else ""
        lines = [
            f"{self.protocol_version} {status} {phrase}",
            f"Server: {self.version_string()}",
            f"Date: {self.http_date(self)}",
        ]
        headers = [(name, str(value)) for name, value in (response.get("headers") or {}).items()]
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.extend((name, str(value)) for value in values)
        for name, value in headers:
            lines.append(f"{name}: {value}")
            if name.lower() == "connection" and value.lower() == "close":
                self.close_connection = True
        lines.append(f"Content-Length: {len(data)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "strict")
        self.wfile.write(head if self.command == "HEAD" else head + data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the handler's own logger reports requests; stderr lines per request only slow us down


def refusal() -> dict[str, Any]:
    """A missing or unknown key: the REST front's gateway response, as a proxy response."""
    return {
        "statusCode": REFUSAL_STATUS,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(refusal_body()),
    }


def make_request_handler(
    lambda_handler: LambdaHandler, api_keys: Collection[str] = ()
) -> type[BaseHTTPRequestHandler]:
    """A request handler class whose requests go to ``lambda_handler``, admitting ``api_keys`` only."""
    keys = {f"key-{index}": key for index, key in enumerate(api_keys)}
    return type(
        "BoundProxyRequestHandler",
        (ProxyRequestHandler,),
        {
            "lambda_handler": staticmethod(lambda_handler),
            "api_keys": keys,
            "invocation_lock": threading.Lock(),
        },
    )


def tls_context(certificate: str, key: str) -> ssl.SSLContext:
    """A server context for ``ipmeta serve --tls-cert --tls-key`` (PEM files)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return context


class LocalApiServer(ThreadingHTTPServer):
    """The local API; with ``tls`` it speaks HTTPS (the GeoIP2 clients speak nothing else), with
    ``api_keys`` it refuses requests without one of them, as a deployment's front does."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        host: str,
        port: int,
        lambda_handler: LambdaHandler,
        *,
        api_keys: Collection[str] = (),
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__((host, port), make_request_handler(lambda_handler, api_keys))
        self.tls = tls
        if tls is not None:
            # Wrapped once, before any worker forks: every worker accepts TLS connections.
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls is not None else 'http'}://{host!s}:{port}"


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
