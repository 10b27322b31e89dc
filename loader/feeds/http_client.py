"""The feeds' one door to the network: HTTP GETs with timeouts, retries, redirects and no leaked credentials.

Built on the standard library's ``http.client`` (no dependency to pin in the
Lambda asset), one connection per request:

- **Timeouts:** ``timeout_seconds`` bounds the connect and every read, so a
  server that stalls before its headers or in the middle of a body fails with
  ``FeedTimeout`` instead of holding the function until Lambda kills it.
- **A deadline** (``deadline_seconds``) bounds each answer as a whole, every
  attempt and redirect up to its last byte: a server that sends a byte every few
  seconds never trips a read's timeout. A timer shuts the connection down when
  the time is up (the one way to end a read blocked in another thread's
  ``recv``, and it ends a trickle of header lines too), and the read that
  breaks raises ``FeedTimeout``, not retried within the run.
- **Retries** on 408, 429 and 5xx, and on a connection that fails before any
  answer, with exponential backoff and jitter; ``Retry-After`` (RFC 9110
  10.2.3: delay-seconds or an HTTP-date) is honoured, and a server that asks
  for more than ``max_retry_after_seconds`` fails the run at once rather than
  holding it. The sleep and the clock are injectable, so tests do not wait.
- **Redirects** (301, 302, 303, 307, 308) are followed, as MaxMind's download
  endpoint redirects to a presigned storage URL. Credentials go to the first
  origin only: once the chain leaves it, the ``Authorization`` header stays
  behind (the storage URL is signed by itself, and must not see the key). An
  ``https`` chain never continues over plain ``http``.
- **Errors** name the feed, the principal (``MaxMind account 42``) and the URL
  without its query string (a signature or a key may sit there); never a
  credential, and never the server's body, which may echo what was sent.
- **Content-Length** is held to: ``http.client`` returns a short body without
  complaint when the connection closes early, so the bytes are counted here.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final
from urllib.parse import urljoin, urlsplit

from loader.feeds.credentials import Secret
from loader.feeds.errors import (
    DownloadTruncated,
    FeedAuthRefused,
    FeedError,
    FeedNotFound,
    FeedProtocolError,
    FeedTimeout,
    FeedUnavailable,
)

log = logging.getLogger(__name__)

REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
#: Worth asking again: a request timeout, a rate limit, a server-side failure.
RETRYABLE: Final = frozenset({408, 429})
BLOCK_BYTES: Final = 1 << 20


@dataclass(frozen=True)
class HttpSettings:
    #: Each connect and each read; a stalled server fails after this long.
    timeout_seconds: float = 60.0
    #: Requests sent for one answer, the first included.
    max_attempts: int = 5
    #: The wait before the first retry; it doubles each time (with jitter), up to ``max_backoff_seconds``.
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0
    #: The longest ``Retry-After`` this run waits; a longer one fails the run, to be tried on the next.
    max_retry_after_seconds: float = 300.0
    max_redirects: int = 5
    user_agent: str = "ipmeta-feeds/1"
    #: One answer, from its first request to its last byte (retries and redirects included). GeoLite2
    #: City's zip is 50 MB and DB-IP City Lite's .mmdb.gz 130 MB: half an hour is 75 KB/s for both.
    deadline_seconds: float = 1800.0


@dataclass(frozen=True)
class Request:
    url: str
    #: The feed the request is for: every error names it.
    feed: str
    #: Who the credentials belong to, named when the vendor refuses them (never the key).
    principal: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Sent to the request's own origin only, never after a redirect to another one.
    credentials: Mapping[str, Secret] = field(default_factory=dict)


@dataclass(frozen=True)
class ResponseHead:
    """The part of an answer that tells whether anything changed: status and validators."""

    status: int
    etag: str | None
    last_modified: str | None
    content_length: int | None


def display_url(url: str) -> str:
    """The URL as errors and logs show it: no user info, no query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """``Retry-After`` in seconds from ``now`` (delay-seconds or HTTP-date); None if absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


class Deadline:
    """The end of one answer's time: a timer that shuts its connection down, and the error it makes."""

    def __init__(self, request: Request, seconds: float) -> None:
        self.request, self.seconds = request, seconds
        self.ends_at = time.monotonic() + seconds
        self.expired = False
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return self.ends_at - time.monotonic()

    def watch(self, connection: http.client.HTTPConnection) -> None:
        """Shut ``connection`` down when the time is up (one connection at a time)."""
        self.cancel()
        self._timer = threading.Timer(max(0.0, self.left()), self._expire, args=(connection,))
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, connection: http.client.HTTPConnection) -> None:
        self.expired = True
        raw = connection.sock
        if raw is not None:
            # socket's own shutdown, not SSLSocket's (which drops its TLS state under the reader);
            # a connection already closed needs none.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(raw, socket.SHUT_RDWR)

    def error(self, url: str) -> FeedTimeout:
        return FeedTimeout(
            f"{self.request.feed}: {display_url(url)} did not finish within the deadline of "
            f"{self.seconds:g} s (deadline_seconds); refused"
        )


class Response:
    """An open answer; read it with ``chunks`` (streaming) or ``read_small``, then close it."""

    def __init__(
        self,
        raw: http.client.HTTPResponse,
        connection: http.client.HTTPConnection,
        request: Request,
        url: str,
        deadline: Deadline,
    ) -> None:
        self.status = raw.status
        self.url = url
        self._raw = raw
        self._connection = connection
        self._request = request
        self._deadline = deadline

    def header(self, name: str) -> str | None:
        return self._raw.getheader(name)

    @property
    def content_length(self) -> int | None:
        value = self.header("Content-Length")
        return int(value) if value is not None and value.strip().isdigit() else None

    def head(self) -> ResponseHead:
        return ResponseHead(
            self.status, self.header("ETag"), self.header("Last-Modified"), self.content_length
        )

    def chunks(self, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
        """The body as it arrives; fewer bytes than ``Content-Length`` raise ``DownloadTruncated``."""
        received = 0
        while block := self._read(block_bytes):
            received += len(block)
            yield block
        expected = self.content_length
        if expected is not None and received != expected:
            raise DownloadTruncated(
                f"{self._request.feed}: {display_url(self.url)} announced {expected} bytes "
                f"(Content-Length) and sent {received}: the download is truncated"
            )

    def read_small(self, limit: int) -> bytes:
        """A metadata answer or a checksum file, whole; more than ``limit`` bytes is a protocol error."""
        body = bytearray()
        for block in self.chunks(min(limit + 1, BLOCK_BYTES)):
            body += block
            if len(body) > limit:
                raise FeedProtocolError(
                    f"{self._request.feed}: {display_url(self.url)} answered more than {limit} bytes "
                    "where a short metadata answer was expected"
                )
        return bytes(body)

    def _read(self, block_bytes: int) -> bytes:
        feed, url = self._request.feed, display_url(self.url)
        try:
            # read1: at most one receive, so a trickle returns what came and the deadline is seen.
            block = self._raw.read1(block_bytes)
        except (OSError, http.client.HTTPException) as error:
            if self._deadline.expired:
                raise self._deadline.error(self.url) from error
            if isinstance(error, TimeoutError):
                raise FeedTimeout(f"{feed}: {url} stopped sending in the middle of its answer") from error
            if isinstance(error, http.client.IncompleteRead):
                raise DownloadTruncated(f"{feed}: {url} closed the connection before the end") from error
            raise FeedUnavailable(f"{feed}: reading {url} failed ({type(error).__name__})") from error
        if self._deadline.expired:
            raise self._deadline.error(self.url)
        return block

    def close(self) -> None:
        self._deadline.cancel()
        self._raw.close()
        self._connection.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class HttpClient:
    """GETs with retries, redirects and timeouts; tests replace ``sleep``, ``now`` and ``jitter``."""

    def __init__(
        self,
        settings: HttpSettings | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings or HttpSettings()
        self._sleep = sleep
        self._now = now
        self._jitter = jitter
        self._tls = ssl.create_default_context()

    def get(self, request: Request, accept: frozenset[int] = frozenset({200})) -> Response:
        """An answer whose status is in ``accept``, after the retries; any other status raises."""
        attempts = self.settings.max_attempts
        deadline = Deadline(request, self.settings.deadline_seconds)
        for attempt in range(1, attempts + 1):
            try:
                response = self._follow(request, deadline)
            except FeedUnavailable as failure:
                if attempt == attempts or deadline.expired:
                    raise
                self._pause(request, self._backoff(attempt), str(failure), deadline)
                continue
            if response.status in accept:
                return response
            response.close()
            wait = self._retry_wait(request, response, attempt)
            self._pause(request, wait, f"HTTP {response.status}", deadline)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def get_small(self, request: Request, limit: int = 64 << 10) -> bytes:
        with self.get(request) as response:
            return response.read_small(limit)

    def peek(self, request: Request, accept: frozenset[int] = frozenset({200, 304})) -> ResponseHead:
        """A GET's status and validators, the body left unread: one small exchange that says what changed.

        A GET, not a HEAD, because a presigned URL is signed for one method.
        """
        with self.get(request, accept) as response:
            return response.head()

    def _retry_wait(self, request: Request, response: Response, attempt: int) -> float:
        status, url = response.status, display_url(response.url)
        if status not in RETRYABLE and status < 500:
            raise _refusal(request, status, url)
        if attempt == self.settings.max_attempts:
            raise FeedUnavailable(
                f"{request.feed}: {url} still answered HTTP {status} after {attempt} attempts"
            )
        asked = retry_after_seconds(response.header("Retry-After"), self._now())
        if asked is None:
            return self._backoff(attempt)
        if asked > self.settings.max_retry_after_seconds:
            raise FeedUnavailable(
                f"{request.feed}: {url} answered HTTP {status} and asks to wait {asked:.0f} s, longer than "
                f"the {self.settings.max_retry_after_seconds:.0f} s a run waits; the next run tries again"
            )
        return asked

    def _backoff(self, attempt: int) -> float:
        settings = self.settings
        ceiling = min(settings.max_backoff_seconds, settings.backoff_seconds * 2 ** (attempt - 1))
        # Half fixed, half random: retries of many feeds do not arrive together.
        return float(ceiling * (0.5 + self._jitter() / 2))

    def _pause(self, request: Request, seconds: float, reason: str, deadline: Deadline) -> None:
        if seconds >= deadline.left():
            raise deadline.error(request.url)
        log.warning(
            "feed request retried",
            extra={"feed": request.feed, "url": display_url(request.url), "reason": reason, "wait": seconds},
        )
        self._sleep(seconds)

    def _follow(self, request: Request, deadline: Deadline) -> Response:
        url, credentials = request.url, request.credentials
        for _ in range(self.settings.max_redirects + 1):
            response = self._send(request, url, credentials, deadline)
            location = response.header("Location")
            if response.status not in REDIRECTS or not location:
                return response
            response.close()
            target = urljoin(url, location)
            _check_redirect(request, url, target)
            if _origin(target) != _origin(request.url):
                credentials = {}
            url = target
        raise FeedProtocolError(
            f"{request.feed}: {display_url(request.url)} redirected more than "
            f"{self.settings.max_redirects} times"
        )

    def _send(
        self, request: Request, url: str, credentials: Mapping[str, Secret], deadline: Deadline
    ) -> Response:
        parts = urlsplit(url)
        timeout = self.settings.timeout_seconds
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=timeout, context=self._tls
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {
            "User-Agent": self.settings.user_agent,
            # Bytes as published: a checksum covers them, not a re-encoding.
            "Accept-Encoding": "identity",
            **request.headers,
            **{name: secret.reveal() for name, secret in credentials.items()},
        }
        deadline.watch(connection)
        try:
            connection.request("GET", target, headers=headers)
            raw = connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            deadline.cancel()
            connection.close()
            raise (
                deadline.error(url) if deadline.expired else _unreachable(request, url, timeout, error)
            ) from error
        if deadline.expired:
            connection.close()
            raise deadline.error(url)
        return Response(raw, connection, request, url, deadline)


def _unreachable(request: Request, url: str, timeout: float, error: Exception) -> FeedUnavailable:
    if isinstance(error, TimeoutError):
        return FeedTimeout(f"{request.feed}: {display_url(url)} did not answer within {timeout:g} s")
    return FeedUnavailable(
        f"{request.feed}: {display_url(url)} could not be reached ({type(error).__name__})"
    )


def _check_redirect(request: Request, source: str, target: str) -> None:
    scheme = urlsplit(target).scheme
    if scheme not in ("http", "https") or (urlsplit(source).scheme == "https" and scheme == "http"):
        raise FeedProtocolError(
            f"{request.feed}: {display_url(source)} redirected to a {scheme or 'relative'} URL "
            "that is not https; refused"
        )


def _refusal(request: Request, status: int, url: str) -> FeedError:
    if status in (401, 403):
        who = request.principal or f"the credentials of feed {request.feed}"
        return FeedAuthRefused(
            f"{request.feed}: {url} refused {who} (HTTP {status}); check the feed's account and key "
            "(the key itself is never printed)"
        )
    if status == 404:
        return FeedNotFound(f"{request.feed}: {url} not found (HTTP 404)")
    return FeedError(f"{request.feed}: {url} answered HTTP {status}")
