"""Check a feed, fetch what changed, verify it, hand its files to a load (``ipmeta update``, the Fetch state).

The order of a run, and what each step costs:

1. ``check_feed``: the vendor's latest release against the state of the one
   loaded last; one small request (a metadata answer, a checksum file, or a
   conditional GET). Unchanged: the run ends here and starts no load.
2. ``fetch_release``: the download, streamed and counted against
   ``Content-Length`` and the cap, hashed as it passes; an archive goes to a
   scratch file, is checked against the vendor's checksum, and is unpacked
   into the sinks (``loader.feeds.archives``); a gzip is checked by inflating
   it on the way and stored compressed; the vendor's checksums of the
   download or of a member are compared. Only when every check passed are the
   sinks closed (committed); any failure aborts them all, so a refused
   release leaves no file for a load and the active version keeps serving.
3. ``record_loaded``: after the load activated, the release becomes the
   feed's state. A fetch whose load failed is fetched again on the next run.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

from loader.feeds.archives import UNPACKERS, ExtractedFile, Extraction, FileRole
from loader.feeds.errors import DownloadTooLarge, FeedProtocolError
from loader.feeds.feed import Download, Feed, FeedStateStore, LoadFormat, Packaging, Release
from loader.feeds.http_client import display_url
from loader.feeds.verify import DOWNLOAD, Digests, GzipCheck, SinkFactory, copy_counted, require_match
from loader.records import FeedState

log = logging.getLogger(__name__)

#: GeoLite2 City's CSV zip is about 50 MB, DB-IP City Lite's .mmdb.gz about 130 MB:
#: the caps leave room for growth and paid editions, and stop a runaway body.
DEFAULT_MAX_DOWNLOAD_BYTES: Final = 4 << 30
DEFAULT_MAX_UNPACKED_BYTES: Final = 16 << 30


@dataclass(frozen=True)
class FetchLimits:
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES
    #: The files unpacked from one archive, together (a zip bomb stops here).
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES


class Progress(Protocol):
    """A progress bar's two calls (the CLI adapts tqdm to it)."""

    def begin(self, feed: str, total_bytes: int | None) -> None: ...

    def advance(self, size: int) -> None: ...


@dataclass(frozen=True)
class FeedCheck:
    """The vendor's latest release of a feed, and whether it is the one loaded last."""

    release: Release
    known: FeedState | None

    @property
    def unchanged(self) -> bool:
        return self.release.same_as(self.known)

    def describe(self) -> str:
        """One line for ``ipmeta update`` (and ``--dry-run``)."""
        if self.unchanged:
            return f"{self.release.feed}: unchanged (release {self.release.release_id})"
        loaded = f"; loaded: {self.known.release_id}" if self.known else "; none loaded yet"
        return f"{self.release.feed}: would fetch {self.release.describe()}{loaded}"


@dataclass(frozen=True)
class FetchedFile:
    name: str
    role: FileRole
    size: int
    sha256: str


@dataclass(frozen=True)
class FetchedRelease:
    """A verified release, its files in the sinks: what the load reads, one version for all its files."""

    release: Release
    dataset: str
    load_format: LoadFormat
    files: tuple[FetchedFile, ...]
    fetched_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def sources(self) -> list[str]:
        """The files a load reads, in order (a GeoIP2 CSV edition's Blocks files)."""
        return [file.name for file in self.files if file.role != FileRole.LOCATIONS]

    @property
    def locations(self) -> str | None:
        """The GeoIP2 CSV Locations file the sources join, if the edition has one (``--locations``)."""
        return next((file.name for file in self.files if file.role == FileRole.LOCATIONS), None)

    def state(self) -> FeedState:
        release = self.release
        checksum = release.checksum.describe() if release.checksum is not None else None
        return FeedState(
            release.feed, release.release_id, checksum, release.etag, release.last_modified, self.fetched_at
        )

    def to_event(self) -> dict[str, Any]:
        """A Step Functions payload: names and checksums only (no credential is ever part of a release)."""
        return {
            "feed": self.release.feed,
            "release": self.release.release_id,
            "dataset": self.dataset,
            "format": self.load_format,
            "sources": self.sources,
            "locations": self.locations,
            "files": [{"name": f.name, "bytes": f.size, "sha256": f.sha256} for f in self.files],
            "state": self.state().to_dict(),
        }


def check_feed(feed: Feed, states: FeedStateStore) -> FeedCheck:
    known = states.get(feed.name)
    check = FeedCheck(feed.latest(known), known)
    log.info("feed checked", extra={"feed": feed.name, "outcome": check.describe()})
    return check


def record_loaded(states: FeedStateStore, fetched: FetchedRelease) -> FeedState:
    """The release is loaded and active: the next run compares the vendor's latest with it."""
    state = fetched.state()
    states.put(state)
    return state


def fetch_release(
    feed: Feed,
    release: Release,
    sinks: SinkFactory,
    *,
    dataset: str,
    workdir: Path | None = None,
    limits: FetchLimits | None = None,
    progress: Progress | None = None,
) -> FetchedRelease:
    limits = limits or FetchLimits()
    packaging = feed.packaging
    with feed.stream(release) as download:
        _refuse_announced_oversize(feed.name, download, limits)
        if progress is not None:
            progress.begin(feed.name, download.response.content_length)
        advance = progress.advance if progress is not None else None
        if packaging.kind in UNPACKERS:
            files = _fetch_archive(
                feed.name,
                download=download,
                packaging=packaging,
                sinks=sinks,
                workdir=workdir,
                limits=limits,
                progress=advance,
            )
        else:
            single = _fetch_single(
                feed.name,
                download=download,
                packaging=packaging,
                sinks=sinks,
                limits=limits,
                progress=advance,
            )
            files = (single,)
    fetched = FetchedRelease(release, dataset, packaging.load_format, files)
    log.info("feed fetched", extra={"feed": feed.name, "release": release.release_id, "files": len(files)})
    return fetched


def _refuse_announced_oversize(feed: str, download: Download, limits: FetchLimits) -> None:
    announced = download.response.content_length
    if announced is not None and announced > limits.max_download_bytes:
        raise DownloadTooLarge(
            f"{feed}: {display_url(download.response.url)} announces {announced} bytes, more than the "
            f"feed's cap of {limits.max_download_bytes}; refused before downloading"
        )


def _fetch_single(
    feed: str,
    *,
    download: Download,
    packaging: Packaging,
    sinks: SinkFactory,
    limits: FetchLimits,
    progress: Callable[[int], None] | None,
) -> FetchedFile:
    what = packaging.file_name
    digests = Digests()
    inflation = GzipCheck(feed, what, limits.max_unpacked_bytes) if packaging.kind == "gzip" else None
    sink = sinks.open(packaging.file_name)
    try:

        def write(block: bytes) -> None:
            digests.update(block)
            if inflation is not None:
                inflation.update(block)
            sink.write(block)

        size = copy_counted(
            download.chunks(), write, cap=limits.max_download_bytes, feed=feed, what=what, progress=progress
        )
        if inflation is not None:
            inflation.finish()
        for checksum in download.checksums:
            _require_download_checksum(feed, checksum.covers)
            digests.verify(checksum, feed, what)
    except BaseException:
        sink.abort()
        raise
    sink.close()
    return FetchedFile(packaging.file_name, FileRole.DATABASE, size, digests.hexdigest("sha256"))


def _fetch_archive(
    feed: str,
    *,
    download: Download,
    packaging: Packaging,
    sinks: SinkFactory,
    workdir: Path | None,
    limits: FetchLimits,
    progress: Callable[[int], None] | None,
) -> tuple[FetchedFile, ...]:
    assert packaging.layout is not None, "an archive's packaging names its layout"
    archive_name = f"{feed} .{packaging.kind}"
    with tempfile.TemporaryDirectory(prefix="ipmeta-feed-", dir=workdir) as scratch:
        archive = Path(scratch) / f"release.{packaging.kind}"
        digests = Digests()
        with archive.open("wb") as out:

            def write(block: bytes) -> None:
                digests.update(block)
                out.write(block)

            copy_counted(
                download.chunks(),
                write,
                cap=limits.max_download_bytes,
                feed=feed,
                what=archive_name,
                progress=progress,
            )
        for checksum in download.checksums:
            if checksum.covers == DOWNLOAD:
                digests.verify(checksum, feed, archive_name)
        extraction = Extraction(feed, archive_name, packaging.layout, sinks, limits.max_unpacked_bytes)
        try:
            UNPACKERS[packaging.kind](archive, extraction)
            _verify_members(feed, extraction.files, download)
        except BaseException:
            extraction.abort()
            raise
    for sink in extraction.open_sinks:
        sink.close()
    return tuple(FetchedFile(f.name, f.role, f.size, f.sha256) for f in extraction.files)


def _verify_members(feed: str, files: list[ExtractedFile], download: Download) -> None:
    for checksum in download.checksums:
        if checksum.covers == DOWNLOAD:
            continue
        member = next((file for file in files if file.name == checksum.covers), None)
        if member is None:
            raise FeedProtocolError(
                f"{feed}: the vendor's checksum names {checksum.covers}, not in the archive"
            )
        require_match(checksum, member.hexdigest(checksum.algorithm), feed, member.name)


def _require_download_checksum(feed: str, covers: str) -> None:
    if covers != DOWNLOAD:
        raise FeedProtocolError(
            f"{feed}: a checksum of member {covers} for a download that is not an archive"
        )
