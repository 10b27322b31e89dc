"""Where a release's bytes go, and the checks they pass on the way: size, length, checksum, gzip integrity.

Nothing is held whole in memory: bytes are hashed and counted as they stream
into a ``Sink``. A sink commits on ``close()`` and leaves nothing on
``abort()``, so a release whose last check fails leaves no file for a load:
the fetch closes its sinks only after every check passed. ``DirectorySinks``
writes local files (the CLI, the tests); an S3 multipart sink, whose
``close()`` completes the upload and ``abort()`` aborts it, is the
integration's, through ``loader.store.s3``.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from loader.feeds.errors import (
    ChecksumMismatch,
    DownloadRejected,
    DownloadTooLarge,
    DownloadTruncated,
    FeedProtocolError,
)

Algorithm = Literal["md5", "sha256"]
HEX_LENGTHS: Final[dict[Algorithm, int]] = {"md5": 32, "sha256": 64}
#: The name a checksum uses for "the bytes as downloaded" (otherwise it names an archive member).
DOWNLOAD: Final = ""
#: Inflated at most this much per step, so a small compressed block cannot balloon in memory.
_INFLATE_STEP: Final = 1 << 20


class Sink(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None:
        """Commit: the file exists, whole, from now on."""

    def abort(self) -> None:
        """Discard whatever was written; no file remains."""


class SinkFactory(Protocol):
    """Opens one sink per file of a release, named by its plain file name (never a path)."""

    def open(self, name: str) -> Sink: ...


class FileSink:
    """A local file, written as ``<name>.part`` and renamed into place on ``close()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = path.with_name(path.name + ".part")
        self._file = self._partial.open("wb")

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def close(self) -> None:
        self._file.close()
        self._partial.replace(self.path)

    def abort(self) -> None:
        self._file.close()
        self._partial.unlink(missing_ok=True)


class DirectorySinks:
    """Sinks for files in one folder: what ``ipmeta update`` hands to a local load."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def open(self, name: str) -> Sink:
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"a sink is named by a plain file name, not {name!r}")
        return FileSink(self.folder / name)


@dataclass(frozen=True)
class Checksum:
    """A vendor's checksum: the algorithm, the hex digest, and what it covers."""

    algorithm: Algorithm
    hex: str
    #: ``DOWNLOAD`` for the bytes as downloaded, else the name of the archive member it covers.
    covers: str = DOWNLOAD

    @classmethod
    def parse(cls, algorithm: Algorithm, text: str, *, feed: str, covers: str = DOWNLOAD) -> Checksum:
        """A digest as a vendor publishes it; anything else is the vendor breaking its protocol."""
        digest = text.strip().lower()
        if len(digest) != HEX_LENGTHS[algorithm] or any(c not in "0123456789abcdef" for c in digest):
            raise FeedProtocolError(f"{feed}: the vendor's {algorithm} is not a {algorithm} hex digest")
        return cls(algorithm, digest, covers)

    def describe(self) -> str:
        return f"{self.algorithm}:{self.hex}"


class Digests:
    """md5 and sha256 of one stream, updated as it passes (sha256 names every fetched file)."""

    def __init__(self) -> None:
        self._hashes = {"md5": hashlib.md5(usedforsecurity=False), "sha256": hashlib.sha256()}

    def update(self, data: bytes) -> None:
        for digest in self._hashes.values():
            digest.update(data)

    def hexdigest(self, algorithm: Algorithm) -> str:
        return self._hashes[algorithm].hexdigest()

    def verify(self, checksum: Checksum, feed: str, what: str) -> None:
        require_match(checksum, self.hexdigest(checksum.algorithm), feed, what)


def require_match(checksum: Checksum, actual: str, feed: str, what: str) -> None:
    if actual != checksum.hex:
        raise ChecksumMismatch(
            f"{feed}: {what} has {checksum.algorithm} {actual}, the vendor published {checksum.hex}: "
            "corrupt or not the release announced; refused"
        )


class GzipCheck:
    """Inflates a gzip stream only to check it (RFC 1952: each member's CRC-32 and ISIZE), keeping nothing.

    The loader reads ``.gz`` sources itself, so they are stored compressed; this
    catches a corrupt or cut-off file before a load does.
    """

    def __init__(self, feed: str, what: str, cap: int) -> None:
        self._feed, self._what, self._cap = feed, what, cap
        self._inflater = zlib.decompressobj(wbits=31)
        self.inflated = 0

    def update(self, data: bytes) -> None:
        pending = data
        while True:
            if self._inflater.eof and pending:
                # Concatenated members are one valid gzip file: check the next one too.
                self._inflater = zlib.decompressobj(wbits=31)
            try:
                out = self._inflater.decompress(pending, _INFLATE_STEP)
            except zlib.error as error:
                raise DownloadRejected(f"{self._feed}: {self._what} is corrupt ({error})") from error
            self.inflated += len(out)
            if self.inflated > self._cap:
                raise DownloadTooLarge(f"{self._feed}: {self._what} inflates past {self._cap} bytes; refused")
            inflater = self._inflater
            pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
            # A full step may leave output inside zlib even with no input left: ask again.
            if not pending and len(out) < _INFLATE_STEP:
                return

    def finish(self) -> None:
        if not self._inflater.eof:
            raise DownloadTruncated(f"{self._feed}: {self._what} ends in the middle of its gzip stream")


def copy_counted(
    chunks: Iterable[bytes],
    write: Callable[[bytes], None],
    *,
    cap: int,
    feed: str,
    what: str,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Stream ``chunks`` into ``write``, refusing more than ``cap`` bytes; returns the count."""
    written = 0
    for block in chunks:
        written += len(block)
        if written > cap:
            raise DownloadTooLarge(f"{feed}: {what} is larger than the feed's cap of {cap} bytes; refused")
        write(block)
        if progress is not None:
            progress(len(block))
    return written
