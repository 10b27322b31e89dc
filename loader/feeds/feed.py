"""The one small interface every vendor module implements, and the records around it.

A ``Feed`` answers two questions:

- ``latest(known)``: what is the newest release (an id, a checksum, a date)?
  ``known`` is the release loaded last, so a vendor without a metadata endpoint
  can ask with a conditional GET (``If-None-Match`` / ``If-Modified-Since``)
  and answer "the same" from a 304;
- ``stream(release)``: its bytes, as an open ``Download`` with the checks the
  vendor publishes for them.

``Packaging`` says how the bytes are packed; ``loader.feeds.fetch`` verifies,
unpacks and hands the files on. A ``FeedState`` (``loader.records``) is what is
remembered of the release loaded last; a ``FeedStateStore`` keeps one per feed
(in the table: ``loader.store.feed_states``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

from loader.feeds.archives import ArchiveLayout
from loader.feeds.http_client import Response, ResponseHead
from loader.feeds.verify import Checksum
from loader.records import FeedState

#: How a download is packed: an archive to unpack, a gzip stored as it is (the
#: loader reads ``.gz``) after its CRC is checked, or a plain file.
PackingKind = Literal["tar.gz", "zip", "gzip", "plain"]
#: The ``--format`` a load reads the fetched files with (``loader.formats.FORMATS``).
LoadFormat = Literal["mmdb", "geoip2-csv", "dbip-csv", "csv", "geofeed", "network"]


@dataclass(frozen=True)
class Packaging:
    kind: PackingKind
    load_format: LoadFormat
    #: For a single file (``gzip``, ``plain``): the name it is stored under.
    file_name: str = ""
    #: For an archive: what it must hold.
    layout: ArchiveLayout | None = None


@dataclass(frozen=True)
class Release:
    """A vendor's release of one feed, as its metadata (or a conditional GET) describes it."""

    feed: str
    #: The vendor's name for it: MaxMind's date, DB-IP's month, a checksum, an ETag.
    release_id: str
    #: When the vendor published it (ISO date), where the protocol says.
    published: str | None = None
    #: The vendor's checksum, when one is known before the download.
    checksum: Checksum | None = None
    etag: str | None = None
    last_modified: str | None = None

    def same_as(self, known: FeedState | None) -> bool:
        """Whether ``known`` is this release: same id, and same checksum, ETag or date where both have one."""
        if known is None or not self.release_id or known.release_id != self.release_id:
            return False
        if self.checksum is not None and known.checksum is not None:
            return self.checksum.describe() == known.checksum
        if self.etag and known.etag:
            return self.etag == known.etag
        if self.last_modified and known.last_modified:
            return self.last_modified == known.last_modified
        return True

    def checks(self) -> tuple[Checksum, ...]:
        """The vendor's checksum as the checks of a download of this release (none if it published none)."""
        return (self.checksum,) if self.checksum is not None else ()

    def describe(self) -> str:
        published = f", published {self.published}" if self.published else ""
        return f"{self.feed} release {self.release_id}{published}"


def conditional_headers(known: FeedState | None) -> dict[str, str]:
    """``If-None-Match`` and ``If-Modified-Since`` (RFC 9110 13.1) from the release loaded last."""
    headers = {}
    if known is not None and known.etag:
        headers["If-None-Match"] = known.etag
    if known is not None and known.last_modified:
        headers["If-Modified-Since"] = known.last_modified
    return headers


def release_from_head(
    feed: str, release_id: str, head: ResponseHead, known: FeedState | None, *, published: str | None = None
) -> Release:
    """The release a conditional GET describes: on 304, the one loaded last."""
    if head.status == 304 and known is not None:
        return Release(feed, known.release_id, published, etag=known.etag, last_modified=known.last_modified)
    return Release(feed, release_id, published, etag=head.etag, last_modified=head.last_modified)


class FeedStateStore(Protocol):
    def get(self, feed: str) -> FeedState | None: ...

    def put(self, state: FeedState) -> None: ...


@dataclass
class Download:
    """An open download: the response to stream, and the checks its bytes must pass."""

    response: Response
    #: The vendor's checksums of these bytes (``covers`` the download) or of archive members.
    checksums: tuple[Checksum, ...] = ()

    def chunks(self) -> Iterator[bytes]:
        return self.response.chunks()


class Feed(Protocol):
    """One vendor protocol for one edition: ``maxmind``, ``dbip``, ``ipinfo``, ``url``."""

    @property
    def name(self) -> str:
        """``vendor:edition``: named in every error, log line and state record."""

    @property
    def packaging(self) -> Packaging: ...

    def latest(self, known: FeedState | None) -> Release: ...

    def stream(self, release: Release) -> AbstractContextManager[Download]: ...
