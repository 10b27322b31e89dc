"""Fake vendor servers: real HTTP on 127.0.0.1 that speaks MaxMind, DB-IP, IPinfo and plain URL protocols.

Each is a ``FakeServer`` (a threaded ``http.server`` in a daemon thread) that
records every request it sees (``seen``) and answers through a routing
function; ``inject`` queues faults (a 429 with ``Retry-After``, a 503, a
stall, a cut-off body, a body or headers sent a byte at a time) that answer
the next requests before the routing does.
The protocols follow what ``loader.feeds`` documents for each vendor, so a
test can assert what a run sent: "only the metadata request", "no download".
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class Seen:
    """A request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Send only this many bytes of the body, though Content-Length announces all of it, then close.
    cut_after: int | None = None
    #: Wait this long before answering at all (the client's timeout is shorter)...
    stall_seconds: float = 0.0
    #: ...or, with this set, after the headers and this many bytes of the body.
    stall_after: int | None = None
    #: Send the body one byte at a time, this many seconds apart (each read is quick, the whole is not).
    trickle_seconds: float = 0.0
    #: Trickle the header lines too: one byte of a header at a time, before the body.
    trickle_headers: bool = False


def json_reply(data: Any, status: int = 200) -> Reply:
    return Reply(status, json.dumps(data).encode(), {"Content-Type": "application/json"})


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def conditional_reply(seen: Seen, body: bytes, last_modified: str, etag: str | None = None) -> Reply:
    """A static file's answer: 304 when the client's ETag or date still matches (RFC 9110 13.1)."""
    etag = etag or etag_of(body)
    validators = {"ETag": etag, "Last-Modified": last_modified}
    if seen.headers.get("if-none-match") == etag or (
        "if-none-match" not in seen.headers and seen.headers.get("if-modified-since") == last_modified
    ):
        return Reply(304, b"", validators)
    return Reply(200, body, validators)


def basic_user_password(seen: Seen) -> tuple[str, str] | None:
    value = seen.headers.get("authorization", "")
    if not value.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(value[6:]).decode().partition(":")
    return user, password


class FakeServer:
    def __init__(self, route: Callable[[Seen], Reply]) -> None:
        self.route = route
        self.seen: list[Seen] = []
        self._faults: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the loop to notice, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(self, *replies: Reply) -> None:
        """Answer the next requests with these, whatever they ask, before routing again."""
        with self._lock:
            self._faults.extend(replies)

    def paths(self) -> list[str]:
        with self._lock:
            return [seen.path for seen in self.seen]

    def forget(self) -> None:
        with self._lock:
            self.seen.clear()

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            fault = self._faults.popleft() if self._faults else None
        return fault or self.route(seen)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                seen = Seen(
                    "GET",
                    parts.path,
                    dict(parse_qsl(parts.query)),
                    {name.lower(): value for name, value in self.headers.items()},
                )
                fake._send(self, fake._answer(seen))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def _send(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.trickle_seconds:
            self._trickle(handler, reply)
            return
        if reply.stall_seconds and reply.stall_after is None and self._stop.wait(reply.stall_seconds):
            return
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.status != 304:
            handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        body = reply.body if reply.cut_after is None else reply.body[: reply.cut_after]
        first = len(body) if reply.stall_after is None else reply.stall_after
        try:
            handler.wfile.write(body[:first])
            handler.wfile.flush()
            if first < len(body) and not self._stop.wait(reply.stall_seconds):
                handler.wfile.write(body[first:])
        except OSError:
            pass  # the client gave up first (a test of its timeout or cap)
        if reply.cut_after is not None:
            handler.close_connection = True

    def _trickle(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        """A byte at a time: bounded by what there is to send, and it stops when the server does."""
        head = f"HTTP/1.1 {reply.status} OK\r\nContent-Length: {len(reply.body)}\r\n".encode()
        slow = b"X-Slow: " + b"x" * 1024 + b"\r\n\r\n" if reply.trickle_headers else b""
        handler.close_connection = True
        try:
            handler.wfile.write(head if reply.trickle_headers else head + b"\r\n")
            for byte in slow + reply.body:
                handler.wfile.write(bytes([byte]))
                if self._stop.wait(reply.trickle_seconds):
                    return
        except OSError:
            pass  # the client gave up: what a deadline is for


@contextmanager
def serving(route: Callable[[Seen], Reply]) -> Iterator[FakeServer]:
    server = FakeServer(route).start()
    try:
        yield server
    finally:
        server.stop()


# -- MaxMind -----------------------------------------------------------------------------------


@dataclass
class Edition:
    """One published release of a MaxMind edition: its archive and what the metadata says of it."""

    date: str  #: YYYY-MM-DD
    archive: bytes
    #: The metadata's md5: of the .mmdb inside, for an mmdb edition.
    md5: str
    #: What the ``.sha256`` file beside the download says (default: the archive's true sha256).
    sha256: str = ""

    @property
    def compact_date(self) -> str:
        return self.date.replace("-", "")


class FakeMaxMind:
    """``/geoip/updates/metadata`` and ``/geoip/databases/<E>/download``, Basic auth, a redirect to storage.

    The storage is a second server (another origin), as MaxMind's is: it records
    whether the account's ``Authorization`` followed the redirect there.
    """

    def __init__(self, account_id: int, license_key: str, editions: dict[str, Edition]) -> None:
        self.account_id, self.license_key, self.editions = account_id, license_key, editions
        self.api = FakeServer(self._route)
        self.storage = FakeServer(self._storage)
        self._blobs: dict[str, bytes] = {}

    def __enter__(self) -> FakeMaxMind:
        self.api.start()
        self.storage.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.api.stop()
        self.storage.stop()

    def downloads(self) -> list[str]:
        """The download requests the API saw (checksum files apart)."""
        return [
            seen.path
            for seen in self.api.seen
            if seen.path.endswith("/download") and not seen.query.get("suffix", "").endswith(".sha256")
        ]

    def _authorized(self, seen: Seen) -> bool:
        return basic_user_password(seen) == (str(self.account_id), self.license_key)

    def _route(self, seen: Seen) -> Reply:
        if not self._authorized(seen):
            refusal = {"code": "AUTHORIZATION_INVALID", "error": "Invalid account ID or license key"}
            return json_reply(refusal, 401)
        if seen.path == "/geoip/updates/metadata":
            edition = self.editions.get(seen.query.get("edition_id", ""))
            if edition is None:
                return json_reply({"code": "EDITION_ID_UNKNOWN", "error": "Unknown edition ID"}, 404)
            entry = {"edition_id": seen.query["edition_id"], "md5": edition.md5, "date": edition.date}
            return json_reply({"databases": [entry]})
        return self._download(seen)

    def _download(self, seen: Seen) -> Reply:
        parts = seen.path.split("/")
        name = parts[3] if len(parts) == 5 and parts[1:3] == ["geoip", "databases"] else ""
        edition = self.editions.get(name)
        if edition is None or seen.query.get("date") != edition.compact_date:
            return json_reply({"code": "NOT_FOUND", "error": "No such database"}, 404)
        suffix = seen.query.get("suffix", "")
        file_name = f"{name}_{edition.compact_date}.{suffix.removesuffix('.sha256')}"
        if suffix.endswith(".sha256"):
            digest = edition.sha256 or hashlib.sha256(edition.archive).hexdigest()
            return Reply(200, f"{digest}  {file_name}\n".encode())
        self._blobs[file_name] = edition.archive
        return Reply(302, headers={"Location": f"{self.storage.url}/blobs/{file_name}?X-Signature=abc"})

    def _storage(self, seen: Seen) -> Reply:
        blob = self._blobs.get(seen.path.removeprefix("/blobs/"))
        if blob is None:
            return Reply(404)
        return Reply(200, blob, {"Content-Type": "application/gzip"})


# -- DB-IP, IPinfo, a plain URL ------------------------------------------------------------------

LAST_MODIFIED = formatdate(1_790_000_000, usegmt=True)


def dbip_route(files: dict[str, bytes]) -> Callable[[Seen], Reply]:
    """``/free/dbip-<edition>-<YYYY-MM>.<mmdb|csv>.gz``: public, with ETag and Last-Modified."""

    def route(seen: Seen) -> Reply:
        body = files.get(seen.path.removeprefix("/free/"))
        if body is None:
            return Reply(404, b"<html>Not Found</html>")
        return conditional_reply(seen, body, LAST_MODIFIED)

    return route


def ipinfo_route(token: str, files: dict[str, bytes]) -> Callable[[Seen], Reply]:
    """``/data/<name>.<ext>`` and ``/<...>/checksums``; the token as Basic user (or ``?token=``)."""

    def route(seen: Seen) -> Reply:
        credentials = basic_user_password(seen)
        if (credentials or ("", ""))[0] != token and seen.query.get("token") != token:
            return json_reply({"status": 403, "error": {"title": "Unknown token"}}, 403)
        path = seen.path.removeprefix("/data/")
        if path.endswith("/checksums") and path.removesuffix("/checksums") in files:
            body = files[path.removesuffix("/checksums")]
            digests = {name: hashlib.new(name, body).hexdigest() for name in ("md5", "sha1", "sha256")}
            return json_reply({"checksums": digests})
        if path in files:
            return Reply(200, files[path])
        return json_reply({"error": "not found"}, 404)

    return route


def file_route(
    files: dict[str, bytes], required_headers: dict[str, str] | None = None
) -> Callable[[Seen], Reply]:
    """Static files at ``/files/<name>`` (and ``<name>.sha256``), refusing requests without the headers."""

    def route(seen: Seen) -> Reply:
        for name, value in (required_headers or {}).items():
            if seen.headers.get(name.lower()) != value:
                return Reply(403, b"forbidden")
        name = seen.path.removeprefix("/files/")
        if name.endswith(".sha256") and name.removesuffix(".sha256") in files:
            digest = hashlib.sha256(files[name.removesuffix(".sha256")]).hexdigest()
            return Reply(200, f"{digest}  {name.removesuffix('.sha256')}\n".encode())
        if name not in files:
            return Reply(404)
        return conditional_reply(seen, files[name], LAST_MODIFIED)

    return route
