"""Unpacking a vendor's archive safely: exactly the files expected, nothing else, no paths of its own.

MaxMind publishes each edition as one dated folder in an archive
(``GeoLite2-City_20261124/GeoLite2-City.mmdb`` in a ``.tar.gz``;
``GeoLite2-City-CSV_20261124/GeoLite2-City-Blocks-IPv4.csv`` and its siblings in a
``.zip``), beside ``LICENSE.txt``, ``COPYRIGHT.txt`` and sometimes ``README.txt``.
An ``ArchiveLayout`` says which members a feed wants (each with its role),
which it skips, and the folder they sit in. Every member must fit it:

- a regular file or a directory; a symlink, hard link, device or FIFO is refused;
- a relative name without ``..``, a backslash or a NUL, inside the one folder;
- a name the layout wants (once) or skips; anything else is refused;
- the sizes actually read, not the ones the headers claim, stay under the cap. In a
  ``.tar.gz`` that is every byte the gzip stream inflates to: members skipped
  (licence texts) and data after the tar's end are read through to check the
  gzip trailer, so they count as much as the files kept (``CountedInflation``).

Wanted members are written to sinks under their plain file names (never the
archive's path), hashed as they stream. The archive is read once, from a local
copy, in bounded memory: ``tarfile`` in stream mode over ``gzip`` (whose CRC is
checked by reading the stream to its end), ``zipfile`` member by member (each
member's CRC-32 is checked as its last byte is read).
"""

from __future__ import annotations

import gzip
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import IO, Final, cast

from loader.feeds.errors import ArchiveRejected, DownloadTooLarge, DownloadTruncated
from loader.feeds.verify import Algorithm, Digests, Sink, SinkFactory, copy_counted

_BLOCK: Final = 1 << 20


class FileRole(StrEnum):
    """What a fetched file is to a load."""

    DATABASE = "database"  #: a MaxMind DB, or any single-file source
    BLOCKS = "blocks"  #: a GeoIP2 CSV Blocks file (IPv4 or IPv6)
    LOCATIONS = "locations"  #: the GeoIP2 CSV Locations file the Blocks join on ``geoname_id``


@dataclass(frozen=True)
class Member:
    name: str
    role: FileRole
    required: bool = True


@dataclass(frozen=True)
class ArchiveLayout:
    #: The one folder every member sits in (MaxMind's ``<edition>_<YYYYMMDD>``).
    folder: re.Pattern[str]
    members: tuple[Member, ...]
    #: Published beside the data and never extracted (licence texts, other languages' Locations).
    skipped: re.Pattern[str] = field(default=re.compile(r"(LICENSE|COPYRIGHT|README)\.txt"))

    def wanted(self, name: str) -> Member | None:
        return next((member for member in self.members if member.name == name), None)


@dataclass(frozen=True)
class ExtractedFile:
    name: str
    role: FileRole
    size: int
    sha256: str
    md5: str

    def hexdigest(self, algorithm: Algorithm) -> str:
        return self.sha256 if algorithm == "sha256" else self.md5


@dataclass(frozen=True)
class _Entry:
    """An archive member as both formats describe it."""

    name: str
    is_file: bool
    is_dir: bool
    size: int


class Extraction:
    """The members of one archive as they are written: sinks stay open until the caller commits them."""

    def __init__(self, feed: str, archive: str, layout: ArchiveLayout, sinks: SinkFactory, cap: int) -> None:
        self.feed, self.archive, self.layout = feed, archive, layout
        self._sinks, self.cap = sinks, cap
        self.files: list[ExtractedFile] = []
        self.open_sinks: list[Sink] = []
        self._total = 0

    def refuse(self, reason: str) -> ArchiveRejected:
        return ArchiveRejected(f"{self.feed}: {self.archive}: {reason}; refused, nothing extracted")

    def member_of(self, entry: _Entry) -> Member | None:
        """The wanted member an entry is, None for one to skip; raises for anything unsafe or unexpected."""
        path = PurePosixPath(entry.name.rstrip("/"))
        if entry.name.startswith("/") or "\\" in entry.name or "\x00" in entry.name or ".." in path.parts:
            raise self.refuse(f"member {entry.name!r} has a path outside the archive")
        if not (entry.is_file or entry.is_dir):
            raise self.refuse(f"member {entry.name!r} is a link or a special file")
        if not path.parts or not self.layout.folder.fullmatch(path.parts[0]):
            raise self.refuse(f"member {entry.name!r} is outside the release's dated folder")
        if entry.is_dir:
            if len(path.parts) != 1:
                raise self.refuse(f"member {entry.name!r} is a folder inside the release's folder")
            return None
        if len(path.parts) != 2:
            raise self.refuse(f"member {entry.name!r} is not directly in the release's folder")
        wanted = self.layout.wanted(path.name)
        if wanted is None and not self.layout.skipped.fullmatch(path.name):
            raise self.refuse(f"member {entry.name!r} is not a file this edition publishes")
        if wanted is not None and any(file.name == wanted.name for file in self.files):
            raise self.refuse(f"member {path.name!r} appears twice")
        return wanted

    def extract(self, member: Member, entry: _Entry, stream: IO[bytes]) -> None:
        sink = self._sinks.open(member.name)
        self.open_sinks.append(sink)
        digests = Digests()

        def write(block: bytes) -> None:
            digests.update(block)
            sink.write(block)

        size = copy_counted(
            _blocks(stream),
            write,
            cap=self.cap - self._total,
            feed=self.feed,
            what=f"{self.archive} unpacked",
        )
        if size != entry.size:
            raise DownloadTruncated(f"{self.feed}: {self.archive}: {member.name} ends after {size} bytes")
        self._total += size
        self.files.append(
            ExtractedFile(
                member.name, member.role, size, digests.hexdigest("sha256"), digests.hexdigest("md5")
            )
        )

    def check_complete(self) -> None:
        missing = [m.name for m in self.layout.members if m.required and not self._has(m.name)]
        if missing:
            raise self.refuse(f"it holds no {', '.join(missing)}")

    def _has(self, name: str) -> bool:
        return any(file.name == name for file in self.files)

    def abort(self) -> None:
        for sink in self.open_sinks:
            sink.abort()


class CountedInflation:
    """A gzip stream as ``tarfile`` reads it, every inflated byte counted against the archive's cap.

    ``tarfile`` reads a skipped member through, and the trailer check reads past
    the tar's end: without this, a small release could inflate gibibytes there.
    """

    def __init__(self, stream: IO[bytes], extraction: Extraction) -> None:
        self._stream = stream
        self._extraction = extraction
        self.inflated = 0

    def read(self, size: int = -1) -> bytes:
        room = self._extraction.cap - self.inflated + 1
        block = self._stream.read(room if size < 0 else min(size, room))
        self.inflated += len(block)
        if self.inflated > self._extraction.cap:
            raise DownloadTooLarge(
                f"{self._extraction.feed}: {self._extraction.archive} inflates past the feed's cap of "
                f"{self._extraction.cap} bytes (skipped members and data after the archive's end "
                "count too); refused"
            )
        return block


def _blocks(stream: IO[bytes]) -> Iterator[bytes]:
    while block := stream.read(_BLOCK):
        yield block


def extract_tar_gz(path: Path, extraction: Extraction) -> None:
    """Members of a ``.tar.gz``, in order, then the gzip stream read to its end for its CRC."""
    try:
        with gzip.open(path, "rb") as raw:
            inflated = CountedInflation(cast(IO[bytes], raw), extraction)
            # tarfile reads any object with read(); typeshed asks for a file.
            with tarfile.open(fileobj=cast(IO[bytes], inflated), mode="r|") as archive:
                for info in archive:
                    entry = _Entry(info.name, info.isreg(), info.isdir(), info.size)
                    member = extraction.member_of(entry)
                    stream = archive.extractfile(info) if member is not None else None
                    if member is not None and stream is not None:
                        extraction.extract(member, entry, stream)
            while inflated.read(_BLOCK):
                pass
    except (EOFError, tarfile.ReadError, gzip.BadGzipFile, zlib.error) as error:
        raise extraction.refuse(f"not a whole .tar.gz ({error})") from error
    extraction.check_complete()


def extract_zip(path: Path, extraction: Extraction) -> None:
    """Members of a ``.zip``; a symlink is one whose Unix mode (``external_attr``'s high bits) says so."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                mode = info.external_attr >> 16
                special = bool(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
                if info.flag_bits & 0x1:
                    raise extraction.refuse(f"member {info.filename!r} is encrypted")
                entry = _Entry(
                    info.filename, not info.is_dir() and not special, info.is_dir(), info.file_size
                )
                member = extraction.member_of(entry)
                if member is not None:
                    with archive.open(info) as stream:
                        extraction.extract(member, entry, stream)
    except (EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise extraction.refuse(f"not a whole .zip ({error})") from error
    extraction.check_complete()


#: The unpackers by packaging, for the fetch to pick from.
UNPACKERS: Final[dict[str, Callable[[Path, Extraction], None]]] = {
    "tar.gz": extract_tar_gz,
    "zip": extract_zip,
}
