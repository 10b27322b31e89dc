"""MaxMind GeoIP2 / GeoLite2 editions, over the protocol of MaxMind's ``geoipupdate``.

The protocol, as ``github.com/maxmind/geoipupdate`` speaks it (``client/metadata.go``,
``client/download.go``, ``internal/geoipupdate/config.go``; read, not copied):

- Every request carries HTTP Basic auth: the account ID as user, the licence
  key as password.
- **Metadata:** ``GET {Host}/geoip/updates/metadata?edition_id=<E>`` answers
  ``{"databases": [{"edition_id": "<E>", "md5": "<hex>", "date": "YYYY-MM-DD"}]}``;
  the md5 is that of the edition's ``.mmdb`` file, so an unchanged edition
  costs this one request.
- **Download:** ``GET {Host}/geoip/databases/<E>/download?date=YYYYMMDD&suffix=tar.gz``
  (the date of the metadata, dashes removed) redirects to MaxMind's storage;
  the ``.tar.gz`` holds ``<E>_<YYYYMMDD>/<E>.mmdb`` beside ``LICENSE.txt`` and
  ``COPYRIGHT.txt``. geoipupdate checks the ``.mmdb``'s md5 against the
  metadata's (``local_file_writer.go``); so does this module.
- **Host:** ``GeoIP.conf``'s ``Host``, scheme included; without a scheme,
  ``https://`` (``config.go``). Default ``https://updates.maxmind.com``.

CSV editions (``GeoLite2-City-CSV``…) are the same download with ``suffix=zip``:
``<E>_<YYYYMMDD>/`` holds ``<P>-Blocks-IPv4.csv``, ``<P>-Blocks-IPv6.csv`` and,
for City and Country, ``<P>-Locations-<lang>.csv`` in eight languages (``<P>``
is the edition without ``-CSV``). geoipupdate never fetches CSV editions, so
which file the metadata's md5 covers for one is not documented: here it is
the release's identity only, and the zip is checked against the sha256
MaxMind publishes beside every download (``suffix=zip.sha256``, a
``sha256sum`` line: ``<hex>  <file name>``), fetched only when the release changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any, Final
from urllib.parse import quote, urlencode

from loader.feeds.archives import ArchiveLayout, FileRole, Member
from loader.feeds.credentials import MaxMindAccount
from loader.feeds.errors import FeedConfigInvalid, FeedNotFound, FeedProtocolError
from loader.feeds.feed import Download, Packaging, Release
from loader.feeds.http_client import HttpClient, Request
from loader.feeds.verify import DOWNLOAD, Checksum
from loader.records import FeedState

DEFAULT_HOST: Final = "https://updates.maxmind.com"
#: geoipupdate's rule for edition IDs (doc/GeoIP.conf.md): letters, digits and dashes.
EDITION_ID: Final = re.compile(r"[A-Za-z0-9-]+")
#: CSV editions whose Blocks name places by ``geoname_id``, so a Locations file must come with them.
_PLACES: Final = re.compile(r"-(City|Country|Enterprise)")


class MaxMindFeed:
    def __init__(
        self,
        edition: str,
        account: MaxMindAccount,
        http: HttpClient,
        *,
        host: str = DEFAULT_HOST,
        locale: str = "en",
    ) -> None:
        if not EDITION_ID.fullmatch(edition):
            raise FeedConfigInvalid(f"maxmind: {edition!r} is not an edition ID (letters, digits, dashes)")
        self.edition = edition
        self._account = account
        self._http = http
        self._host = host.rstrip("/")
        self._locale = locale

    @property
    def name(self) -> str:
        return f"maxmind:{self.edition}"

    @property
    def is_csv(self) -> bool:
        return self.edition.endswith("-CSV")

    @property
    def packaging(self) -> Packaging:
        folder = re.compile(re.escape(self.edition) + r"_\d{8}")
        if not self.is_csv:
            layout = ArchiveLayout(folder, (Member(f"{self.edition}.mmdb", FileRole.DATABASE),))
            return Packaging("tar.gz", "mmdb", layout=layout)
        product = self.edition.removesuffix("-CSV")
        members = (
            Member(f"{product}-Blocks-IPv4.csv", FileRole.BLOCKS),
            Member(f"{product}-Blocks-IPv6.csv", FileRole.BLOCKS),
            Member(
                f"{product}-Locations-{self._locale}.csv", FileRole.LOCATIONS, bool(_PLACES.search(product))
            ),
        )
        # The other languages' Locations files are published too; one is loaded.
        skipped = re.compile(
            rf"(LICENSE|COPYRIGHT|README)\.txt|{re.escape(product)}-Locations-[A-Za-z-]+\.csv"
        )
        return Packaging("zip", "geoip2-csv", layout=ArchiveLayout(folder, members, skipped))

    def latest(self, known: FeedState | None) -> Release:
        url = f"{self._host}/geoip/updates/metadata?{urlencode({'edition_id': self.edition})}"
        released, md5 = self._parse_metadata(self._http.get_small(self._request(url)))
        covers = DOWNLOAD if self.is_csv else f"{self.edition}.mmdb"
        return Release(
            self.name, released, released, Checksum.parse("md5", md5, feed=self.name, covers=covers)
        )

    @contextmanager
    def stream(self, release: Release) -> Iterator[Download]:
        suffix = "zip" if self.is_csv else "tar.gz"
        checksums: tuple[Checksum, ...]
        if self.is_csv:
            listing = self._http.get_small(self._request(self._download_url(release, "zip.sha256")), 4096)
            checksums = (self._parse_sha256_line(listing),)
        else:
            # The metadata's md5 is the .mmdb's: checked on the unpacked member.
            checksums = release.checks()
        with self._http.get(self._request(self._download_url(release, suffix))) as response:
            yield Download(response, checksums)

    def _download_url(self, release: Release, suffix: str) -> str:
        query = urlencode({"date": release.release_id.replace("-", ""), "suffix": suffix})
        return f"{self._host}/geoip/databases/{quote(self.edition)}/download?{query}"

    def _request(self, url: str) -> Request:
        return Request(
            url,
            self.name,
            principal=self._account.describe(),
            credentials={"Authorization": self._account.authorization()},
        )

    def _parse_metadata(self, body: bytes) -> tuple[str, str]:
        """The edition's latest date and md5 from the metadata answer."""
        try:
            data: Any = json.loads(body)
        except ValueError as error:
            raise FeedProtocolError(f"{self.name}: the metadata answer is not JSON") from error
        entries = data.get("databases") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise FeedProtocolError(f"{self.name}: the metadata answer has no list of databases")
        matching = [e for e in entries if isinstance(e, dict) and e.get("edition_id") == self.edition]
        if not matching:
            raise FeedNotFound(f"{self.name}: MaxMind's metadata has no edition {self.edition}")
        released, md5 = matching[0].get("date"), matching[0].get("md5")
        if not isinstance(released, str) or not isinstance(md5, str) or not _is_date(released):
            raise FeedProtocolError(f"{self.name}: the metadata answer lacks a YYYY-MM-DD date or an md5")
        return released, md5

    def _parse_sha256_line(self, listing: bytes) -> Checksum:
        """A ``sha256sum`` line, ``<hex>  <file name>``: the first field is the digest."""
        fields = listing.decode("ascii", "replace").split()
        return Checksum.parse("sha256", fields[0] if fields else "", feed=self.name)


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10
