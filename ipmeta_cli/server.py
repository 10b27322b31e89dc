"""The local API: a real HTTP server that calls the very Lambda handler.

Each request becomes the event its front delivers in AWS (``ipmeta_cli.events``: the REST
proxy event, or payload 2.0 from an HTTP API or a function URL; ``--front``), and the
handler's response becomes the HTTP response. Nothing about routing or errors is
reimplemented here.

What the server itself adds to a lookup is kept small, because one worker is
one Python process and every microsecond of it is taken from the handler
(``bench/lookup.py``): headers are read without the ``email`` package, and a
response leaves in one write.

It is bounded as a front must be: every size a client chooses is capped
(``ipmeta_cli.framing``: request line, headers, a 10 MB body), every request
has a deadline, a connection an idle timeout, and a worker a number of
connections; the key is checked from the headers before the body is read; and
every refusal is the API's JSON with a stable code, never http.server's HTML.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import functools
import io
import json
import os
import signal
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from ipmeta.api.fronts import key_check
from ipmeta.api.fronts.credentials import (
    REFUSAL_STATUS,
    client_of,
    family_of_path,
    needs_key,
    refusal_body,
    request_key,
    route_of_path,
)
from ipmeta.schema.errors import IpmetaError, RequestTimeout, ServerBusy
from ipmeta.schema.settings import DEFAULT_FRONT, Front
from ipmeta_cli.dynalite import die_with_parent
from ipmeta_cli.events import EVENT_BUILDERS, proxy_event, query_parameters
from ipmeta_cli.framing import (
    MAX_REQUEST_LINE,
    RequestHeaders,
    body_framing,
    check_body_size,
    parse_request_line,
    read_body,
    read_headers,
)

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]

__all__ = ["LocalApiServer", "LocalLambdaContext", "proxy_event", "serve_in_workers", "tls_context"]


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
    #: What the invocation has left: API Gateway's 29 s by default; a loader task's up to 15 minutes.
    remaining_millis: int = 29_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_millis


#: How long a connection may wait for its next request line (keep-alive, or a half-open socket).
IDLE_TIMEOUT_SECONDS = 15.0
#: How long a request's headers and body may take to arrive once its request line has.
REQUEST_TIMEOUT_SECONDS = 10.0
#: How long one reply may take to leave, for a client that does not read.
WRITE_TIMEOUT_SECONDS = 10.0
#: Connections one worker holds at once (a thread each); at the bound an idle one makes room.
MAX_CONNECTIONS = 128
#: After a refusal that left a body unread, what is read and dropped before closing: closing with
#: unread bytes sends a reset, which can destroy the answer before the client reads it.
LINGER_SECONDS = 1.0
LINGER_BYTES = 16 * 1024 * 1024
SERVER_NAME = "ipmeta-local"


@dataclass(frozen=True)
class ConnectionLimits:
    """Every request bounded in time, and the connections in number (defaults above)."""

    idle_timeout: float = IDLE_TIMEOUT_SECONDS
    request_timeout: float = REQUEST_TIMEOUT_SECONDS
    write_timeout: float = WRITE_TIMEOUT_SECONDS
    max_connections: int = MAX_CONNECTIONS


class DeadlineReader(io.RawIOBase):
    """A socket's reads, each allowed only the time left until ``deadline``.

    A per-read timeout alone lets a client that sends a byte now and then hold a
    request open for ever (slowloris); a deadline bounds the whole request.
    """

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        self._connection = connection
        self.deadline = deadline
        #: Bytes read so far: a timeout after some of a request line is a request timing out.
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the read deadline passed")
        self._connection.settimeout(left)
        count = self._connection.recv_into(buffer)
        self.received += count
        return count


class ConnectionSlots:
    """The open connections of one worker, each idle (waiting for a request line) or busy.

    Bounded: at the bound the oldest idle connection is closed to admit a new one,
    so half-open sockets cannot keep a good client out; only when every connection
    is busy with a request (each bounded by the request timeout) is the newcomer refused.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._idle: dict[socket.socket, bool] = {}
        self._lock = threading.Lock()

    def admit(self, connection: socket.socket) -> bool:
        with self._lock:
            if len(self._idle) >= self._limit:
                oldest_idle = next((held for held, idle in self._idle.items() if idle), None)
                if oldest_idle is None:
                    return False
                del self._idle[oldest_idle]
                # The raw socket's shutdown (not TLS's): its thread's blocked read returns at once.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(oldest_idle, socket.SHUT_RDWR)
            self._idle[connection] = True
            return True

    def set_idle(self, connection: socket.socket, idle: bool) -> bool:
        """False when the connection was closed to make room: its thread should end."""
        with self._lock:
            if connection not in self._idle:
                return False
            self._idle[connection] = idle
            return True

    def release(self, connection: socket.socket) -> None:
        with self._lock:
            self._idle.pop(connection, None)


def http_date() -> str:
    """The ``Date`` header, formatted once a second rather than once a response."""
    return _http_date(int(time.time()))


@functools.lru_cache(maxsize=2)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


def encode_response(response: dict[str, Any], *, head_only: bool = False, close: bool = False) -> bytes:
    """A proxy response as HTTP/1.1 bytes: status line, headers and body, to leave in one write.

    A HEAD answer has the GET's status and headers and no body; its Content-Length
    is left out rather than sent as 0 (RFC 9110 9.3.2), the handler having dropped the body.
    """
    payload = response.get("body") or ""
    data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
    status = int(response.get("statusCode", 500))
    phrase = BaseHTTPRequestHandler.responses[status][0] if status in BaseHTTPRequestHandler.responses else ""
    lines = [f"HTTP/1.1 {status} {phrase}", f"Server: {SERVER_NAME}", f"Date: {http_date()}"]
    headers = [(name, str(value)) for name, value in (response.get("headers") or {}).items()]
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers.extend((name, str(value)) for value in values)
    # The head is written by hand: a line break in a value would split the response.
    lines.extend(f"{name}: {' '.join(value.splitlines())}" for name, value in headers)
    if close:
        lines.append("Connection: close")
    if not head_only:
        lines.append(f"Content-Length: {len(data)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
    return head if head_only else head + data


def asks_to_close(response: dict[str, Any]) -> bool:
    headers = response.get("headers") or {}
    return any(
        name.lower() == "connection" and str(value).lower() == "close" for name, value in headers.items()
    )


def refusal(path: str) -> dict[str, Any]:
    """A missing or unknown key, as a proxy response: the gateway's 401, naming the key forms of
    the family ``path`` belongs to."""
    return {
        "statusCode": REFUSAL_STATUS,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(refusal_body(family_of_path(path).refusal_message)),
    }


def front_refusal(error: IpmetaError) -> dict[str, Any]:
    """A request the server refuses before the function (framing, size, time): the shape of the
    key refusal, ``{code, error, message}``, which /v1's, MaxMind's and ipinfo's clients all read."""
    body = {"code": error.code, "error": error.message, "message": error.message}
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
    }


def drain_before_close(connection: socket.socket) -> None:
    """Read and drop, for a moment, what the client still sends after a refusal left its body unread."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(connection, socket.SHUT_WR)
        deadline, drained = time.monotonic() + LINGER_SECONDS, 0
        while drained < LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
            connection.settimeout(left)
            chunk = socket.socket.recv(connection, 65_536)
            if not chunk:
                return
            drained += len(chunk)


class ProxyRequestHandler(BaseHTTPRequestHandler):
    """Requests to proxy events for ``lambda_handler``, set per server by ``make_request_handler``.

    http.server reads the request line and headers unbounded in time and answers
    errors with HTML pages; here every read has a deadline (``DeadlineReader``),
    every size a bound (``ipmeta_cli.framing``), and every refusal is the API's JSON.
    """

    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections as with API Gateway
    server_version = SERVER_NAME
    request_headers = RequestHeaders([])
    raw_requestline: bytes
    server: LocalApiServer
    lambda_handler: LambdaHandler
    #: The front whose event the handler gets, and which checks keys (the server, or the function).
    front: Front = DEFAULT_FRONT
    #: One per server class; a forked worker has its own copy, as each container is its own.
    invocation_lock: threading.Lock
    #: The keys a request must carry one of, in a form its route family takes in AWS
    #: (``ipmeta.api.fronts.credentials.request_key``); empty: none.
    api_keys: dict[str, str] = {}  # noqa: RUF012 - set per server class, never mutated
    _handshake_failed = False
    #: A refusal left input unread (a body, the rest of a header block): the connection closes,
    #: after ``drain_before_close``.
    _unread_input = False

    def setup(self) -> None:
        limits = self.server.limits
        self.request.settimeout(limits.idle_timeout)  # a TLS handshake that never comes, too
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
        self.rfile.close()
        self.reader = DeadlineReader(self.connection, time.monotonic() + limits.idle_timeout)
        self.rfile = io.BufferedReader(self.reader)

    def handle(self) -> None:
        if self._handshake_failed:
            return
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.handle_one_request()

    def finish(self) -> None:
        super().finish()
        if self._unread_input:
            drain_before_close(self.connection)

    def handle_one_request(self) -> None:
        """One request, read within its deadlines; what cannot be served is refused in JSON."""
        self.command = ""  # a refusal before the request line is read answers no method (nor HEAD)
        try:
            if not self._next_request_line():
                self.close_connection = True
                return
            self._serve_request()
        except TimeoutError:
            self._refuse(RequestTimeout("the request did not arrive whole within the server's timeout"))
        except IpmetaError as error:
            self._refuse(error)
        except OSError:  # the client went away: nobody to answer
            self.close_connection = True

    def _next_request_line(self) -> bool:
        """Wait for the next request line; meanwhile the connection is idle, and may be closed
        to admit another (``ConnectionSlots``). False: no request came (the connection ends).

        An idle timeout is silent, as keep-alive ends; one after part of a request line
        is that request timing out (``TimeoutError``, answered 408).
        """
        slots, limits = self.server.slots, self.server.limits
        slots.set_idle(self.connection, True)
        self.reader.deadline = time.monotonic() + limits.idle_timeout
        waited_from = self.reader.received
        try:
            line = self.rfile.readline(MAX_REQUEST_LINE + 1)
            if line in (b"\r\n", b"\n"):  # RFC 9112 2.2: an empty line before a request is ignored
                line = self.rfile.readline(MAX_REQUEST_LINE + 1)
        except TimeoutError:
            if self.reader.received > waited_from and slots.set_idle(self.connection, False):
                raise
            return False
        except OSError:  # closed to make room, or by the client
            return False
        if not line or not slots.set_idle(self.connection, False):
            return False
        self.raw_requestline = line
        self.reader.deadline = time.monotonic() + limits.request_timeout
        return True

    def _serve_request(self) -> None:
        line = parse_request_line(self.raw_requestline)
        self.command, self.path, self.request_version = line.method, line.target, line.version
        self.requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        self.request_headers = read_headers(self.rfile)
        tokens = {
            token.strip(" \t").lower() for token in (self.request_headers.get("Connection") or "").split(",")
        }
        self.close_connection = "close" in tokens or (
            line.version == "HTTP/1.0" and "keep-alive" not in tokens
        )
        framing = body_framing(self.request_headers, line.version)
        self._unread_input = framing.has_body
        if self.front.checks_keys and not self._admitted(dict(self.request_headers.items())):
            self._reply(refusal(unquote(urlsplit(self.path).path)))
            return
        check_body_size(framing)
        if framing.has_body and (self.request_headers.get("Expect") or "").lower() == "100-continue":
            self.handle_expect_100()  # only now: a refused client never sends its body
        body = read_body(self.rfile, framing)
        self._unread_input = False
        pairs = list(self.request_headers.items())
        event = EVENT_BUILDERS[self.front](self.command, self.path, pairs, body, self.client_address[0])
        context = LocalLambdaContext(aws_request_id=event["requestContext"]["requestId"])
        # A Lambda container runs one invocation at a time, and the handler relies on it: the
        # powertools resolver, logger and metrics keep the current request on module-level
        # objects, so two threads inside it at once mix their requests (a 500 with
        # KeyError '_route' was seen under 16 clients). Workers are the concurrency.
        with self.invocation_lock:
            response = self.lambda_handler(event, context)
        self._reply(response)

    def _admitted(self, headers: dict[str, str]) -> bool:
        """What an API Gateway front does before the function, from the headers alone (the body
        is not read yet): a known key, read as the deployed authorizers read it, in the forms of
        the route family the path would match. Preflights pass, as API Gateway answers them
        without a key, and so do the lookup page's GETs (they hold no data). Behind the url
        front the function checks keys itself (``key_check``)."""
        split = urlsplit(self.path)
        if not self.api_keys or not needs_key(self.command, unquote(split.path)):
            return True
        query = query_parameters(split.query)
        every_header: dict[str, list[str]] = {}
        for name, value in self.request_headers.items():
            every_header.setdefault(name, []).append(value)
        single_query = {name: values[-1] for name, values in query.items()}
        key = request_key(route_of_path(unquote(split.path)), headers, single_query, every_header, query)
        return client_of(key, self.api_keys) is not None

    def _refuse(self, error: IpmetaError) -> None:
        # The rest of a refused message cannot be framed: the connection carries no other request,
        # and what the client still sends is drained before closing, not answered with a reset.
        self.close_connection = self._unread_input = True
        self._reply(front_refusal(error))

    def _reply(self, response: dict[str, Any]) -> None:
        """Status line, headers and body in one write: one syscall, one segment for the client."""
        self.close_connection = self.close_connection or self._unread_input or asks_to_close(response)
        data = encode_response(response, head_only=self.command == "HEAD", close=self.close_connection)
        try:
            self.connection.settimeout(self.server.limits.write_timeout)
            self.wfile.write(data)
        except OSError:  # gone, or not reading: the connection ends
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the handler's own logger reports requests; stderr lines per request only slow us down


def client_keys(api_keys: Collection[str]) -> dict[str, str]:
    return {f"key-{index}": key for index, key in enumerate(api_keys)}


def make_request_handler(
    lambda_handler: LambdaHandler, api_keys: Collection[str] = (), front: Front = DEFAULT_FRONT
) -> type[BaseHTTPRequestHandler]:
    """A request handler class whose requests go to ``lambda_handler`` as ``front``'s events; the
    server admits ``api_keys`` only where that front checks keys before the function."""
    return type(
        "BoundProxyRequestHandler",
        (ProxyRequestHandler,),
        {
            "lambda_handler": staticmethod(lambda_handler),
            "api_keys": client_keys(api_keys) if front.checks_keys else {},
            "front": front,
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
    ``api_keys`` it refuses requests without one of them where a deployment's ``front`` does:
    the server itself (REST, HTTP API), or the function (url, ``ipmeta.api.fronts.key_check``)."""

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
        limits: ConnectionLimits | None = None,
        front: Front = DEFAULT_FRONT,
    ) -> None:
        super().__init__((host, port), make_request_handler(lambda_handler, api_keys, front))
        self.front = front
        # Behind the url front this process's handler checks the keys, as the function does in AWS;
        # the check it replaces comes back when the server closes.
        self._replaced_check = None if front.checks_keys else key_check.current()
        if not front.checks_keys:
            ring = key_check.StaticKeys(client_keys(api_keys)) if api_keys else None
            key_check.install(key_check.KeyCheck(ring))
        self.tls = tls
        self.limits = limits or ConnectionLimits()
        # Per process: a forked worker's copy is its own, as its threads are.
        self.slots = ConnectionSlots(self.limits.max_connections)
        if tls is not None:
            # Wrapped once, before any worker forks: every worker accepts TLS connections.
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls is not None else 'http'}://{host!s}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection if a slot is free (or an idle one can be freed), else 503."""
        if self.slots.admit(request):
            super().process_request(request, client_address)
            return
        if not isinstance(request, ssl.SSLSocket):  # before its handshake a TLS client reads nothing
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                busy = ServerBusy(f"all {self.limits.max_connections} connections are busy; try again")
                request.sendall(encode_response(front_refusal(busy), close=True))
        self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        self.slots.release(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        if self._replaced_check is not None:
            key_check.install(self._replaced_check)
            self._replaced_check = None


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
