"""An HTTP/1.1 request's framing, read with a bound on every size the client chooses.

The local server reads what http.server would (request line, headers, body) but
never trusts a length before capping it: the request line, each header line,
the header count and the whole header block, the body (API Gateway's 10 MB
payload limit) and each chunk-size line. A message that cannot be framed
exactly (two Content-Lengths, Content-Length beside Transfer-Encoding, a
length that is not digits) is refused, because a guess would desynchronise a
keep-alive connection: the next request would start inside this one's body.
Every refusal is a domain error with a stable code (``ipmeta.schema.errors``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ipmeta.schema.errors import (
    HeadersTooLarge,
    HttpVersionNotSupported,
    NotImplementedByServer,
    RequestMalformed,
    RequestTooLarge,
    UriTooLong,
)

#: http.server's bound on the request line.
MAX_REQUEST_LINE = 65_536
#: ``http.client``'s limits on a header line and the number of headers.
MAX_HEADER_LINE = 65_536
MAX_HEADERS = 100
#: The whole header block (trailers of a chunked body too): 100 lines of 64 KiB would be 6.4 MB.
MAX_HEADER_BYTES = 65_536
#: API Gateway's payload limit; a bigger body is refused before a byte of it is read.
MAX_BODY_BYTES = 10 * 1024 * 1024
#: A chunk-size line: hex digits and any chunk extensions.
MAX_CHUNK_LINE = 1024
#: The methods API Gateway's ``ANY`` passes to the function; any other is 501.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
VERSIONS = ("HTTP/1.0", "HTTP/1.1")

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_VERSION = re.compile(r"HTTP/[0-9]+\.[0-9]+")


class RequestHeaders:
    """A request's headers in arrival order; names compare case-insensitively, as in HTTP."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self._pairs if key.lower() == wanted), default)

    def get_all(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self._pairs if key.lower() == wanted]

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(self._pairs)


@dataclass(frozen=True, slots=True)
class RequestLine:
    method: str
    target: str
    version: str


def parse_request_line(raw: bytes) -> RequestLine:
    """``METHOD target HTTP/1.x``; anything else is refused with the status that says why."""
    if len(raw) > MAX_REQUEST_LINE:
        raise UriTooLong(f"the request line is over {MAX_REQUEST_LINE} bytes")
    words = raw.decode("iso-8859-1").rstrip("\r\n").split()
    if len(words) == 2 and words[0] in METHODS:
        raise HttpVersionNotSupported("HTTP/0.9 is not supported: send HTTP/1.1")
    if len(words) != 3:
        raise RequestMalformed("the request line is not METHOD target HTTP/1.1")
    method, target, version = words
    if version not in VERSIONS:
        if _VERSION.fullmatch(version):
            raise HttpVersionNotSupported(f"{version} is not supported: send HTTP/1.1")
        raise RequestMalformed("the request line does not end with an HTTP version")
    if not _TOKEN.fullmatch(method):
        raise RequestMalformed("the method is not a token")
    if method not in METHODS:
        raise NotImplementedByServer(f"method {method[:20]!r} is not implemented")
    if not target.startswith(("/", "http://", "https://")):
        raise RequestMalformed("the request target is not a path")
    # http.server's guard against //host paths read as absolute URIs (gh-87389).
    return RequestLine(method, "/" + target.lstrip("/") if target.startswith("//") else target, version)


def read_headers(stream: io.BufferedIOBase) -> RequestHeaders:
    """The header block up to its blank line, as ``http.client`` reads it, without the ``email`` parser.

    The ``email`` package made header parsing half of the server's own CPU per
    request. Values lose their surrounding blanks; an obsolete folded line joins
    the value before it. A line without a colon, a name that is not a token
    (``Content-Length :``) or a bare CR or NUL in a line is refused: each is
    read differently by different parsers, the root of request smuggling.
    """
    pairs: list[tuple[str, str]] = []
    total = 0
    while True:
        line = stream.readline(MAX_HEADER_LINE + 1)
        total += len(line)
        if len(line) > MAX_HEADER_LINE or total > MAX_HEADER_BYTES:
            raise HeadersTooLarge(
                f"a header line is over {MAX_HEADER_LINE} bytes, or the block over {MAX_HEADER_BYTES}"
            )
        if line in (b"\r\n", b"\n"):
            return RequestHeaders(pairs)
        if not line.endswith(b"\n"):
            raise RequestMalformed("the header block ended before its blank line")
        if len(pairs) >= MAX_HEADERS:
            raise HeadersTooLarge(f"more than {MAX_HEADERS} headers")
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if "\r" in text or "\0" in text:
            raise RequestMalformed("a header line holds a bare CR or a NUL")
        if text[:1] in (" ", "\t") and pairs:
            name, value = pairs[-1]
            pairs[-1] = (name, value + " " + text.strip(" \t"))
            continue
        name, colon, value = text.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise RequestMalformed("a header line is not name: value")
        pairs.append((name, value.strip(" \t")))


@dataclass(frozen=True, slots=True)
class BodyFraming:
    """How the body is delimited: ``length`` bytes, or chunks."""

    length: int = 0
    chunked: bool = False

    @property
    def has_body(self) -> bool:
        return self.chunked or self.length > 0


def body_framing(headers: RequestHeaders, version: str) -> BodyFraming:
    """The body's framing from Content-Length or Transfer-Encoding, refused unless it is exact.

    A length over ``MAX_BODY_BYTES`` is kept as ``MAX_BODY_BYTES + 1``, to be refused by
    ``check_body_size`` once the key is checked, before a byte of the body is read.
    """
    lengths = headers.get_all("Content-Length")
    encodings = headers.get_all("Transfer-Encoding")
    if encodings:
        if lengths:
            raise RequestMalformed("Content-Length and Transfer-Encoding together")
        codings = [coding.strip(" \t").lower() for value in encodings for coding in value.split(",")]
        if codings != ["chunked"]:
            raise NotImplementedByServer("the only transfer coding implemented is chunked")
        if version != "HTTP/1.1":
            raise RequestMalformed("chunked bodies need HTTP/1.1")
        return BodyFraming(chunked=True)
    if not lengths:
        return BodyFraming()
    if len(lengths) > 1 or "," in lengths[0]:
        raise RequestMalformed("more than one Content-Length")
    if not _DIGITS.fullmatch(lengths[0]):
        raise RequestMalformed(f"Content-Length {lengths[0][:20]!r} is not a whole number of bytes")
    # More digits than the limit has are too large whatever they say: never make a huge int.
    if len(lengths[0].lstrip("0")) > len(str(MAX_BODY_BYTES)):
        return BodyFraming(length=MAX_BODY_BYTES + 1)
    return BodyFraming(length=min(int(lengths[0]), MAX_BODY_BYTES + 1))


def check_body_size(framing: BodyFraming) -> None:
    """Refuse a declared length over ``MAX_BODY_BYTES`` (a chunked body is counted as it is read)."""
    if framing.length > MAX_BODY_BYTES:
        raise RequestTooLarge(f"the body is over {MAX_BODY_BYTES} bytes (API Gateway's payload limit)")


def read_body(stream: io.BufferedIOBase, framing: BodyFraming) -> bytes:
    """The body, whole: ``framing.length`` bytes, or the chunks up to ``MAX_BODY_BYTES``."""
    check_body_size(framing)
    if framing.chunked:
        return read_chunks(stream)
    body = stream.read(framing.length) if framing.length else b""
    if len(body) < framing.length:
        raise RequestMalformed("the body ended before its Content-Length")
    return body


def read_chunks(stream: io.BufferedIOBase) -> bytes:
    """A chunked body (RFC 9112 7.1), its extensions ignored and its trailers read and dropped."""
    body = bytearray()
    while True:
        line = stream.readline(MAX_CHUNK_LINE + 1)
        if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\n"):
            raise RequestMalformed("a chunk-size line is too long, or the body ended inside one")
        size_text = line.split(b";", 1)[0].strip(b" \t\r\n")
        if not _HEX.fullmatch(size_text):
            raise RequestMalformed("a chunk size is not hexadecimal")
        size = int(size_text[-16:], 16) if len(size_text.lstrip(b"0")) <= 16 else MAX_BODY_BYTES + 1
        if len(body) + size > MAX_BODY_BYTES:
            raise RequestTooLarge(f"the body is over {MAX_BODY_BYTES} bytes (API Gateway's payload limit)")
        if size == 0:
            read_headers(stream)  # the trailers, bounded as headers are
            return bytes(body)
        chunk = stream.read(size)
        if len(chunk) < size or stream.readline(3) not in (b"\r\n", b"\n"):
            raise RequestMalformed("a chunk is shorter than its size, or not followed by CRLF")
        body += chunk
