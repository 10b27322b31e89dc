"""IPinfo's downloadable databases: IPinfo Lite (``ipinfo_lite``, free with a token) and the older free ones.

The protocol (IPinfo's "database download" developer pages, and the public
clients that follow them, such as Elasticsearch's ipinfo downloader):

- **Files:** ``https://ipinfo.io/data/<name>.<ext>``; the older free
  databases (``country``, ``asn``, ``country_asn``) sit under ``free/``.
  Extensions: ``mmdb``, ``csv.gz`` (a ``network`` column, read as a range CSV).
- **Checksums:** ``<file URL>/checksums`` answers
  ``{"checksums": {"md5": "…", "sha1": "…", "sha256": "…"}}`` for the file as
  served: the release's identity (its sha256), and the check of the download.
  An unchanged database costs this one request.
- **Token:** sent as the HTTP Basic user name with an empty password (the
  ``Authorization`` header), never in the URL (``?token=`` would put it in
  logs, the template and the state machine's history).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal

from loader.feeds.credentials import Secret, basic_authorization
from loader.feeds.errors import FeedConfigInvalid, FeedProtocolError
from loader.feeds.feed import Download, Packaging, Release
from loader.feeds.http_client import HttpClient, Request
from loader.feeds.verify import Checksum
from loader.records import FeedState

DEFAULT_BASE_URL: Final = "https://ipinfo.io/data"
#: The older free databases, published under ``free/``.
LEGACY_FREE: Final = frozenset({"country", "asn", "country_asn"})
IpinfoFormat = Literal["mmdb", "csv"]


class IpinfoFeed:
    def __init__(
        self,
        edition: str,
        token: Secret,
        http: HttpClient,
        *,
        file_format: IpinfoFormat = "mmdb",
        base_url: str = DEFAULT_BASE_URL,
    ) -> None:
        if not edition.replace("_", "").isalnum() or not edition.isascii():
            raise FeedConfigInvalid(f"ipinfo: {edition!r} is not a database name such as ipinfo_lite")
        self.edition = edition
        self.file_format = file_format
        self._token = token
        self._http = http
        self._base_url = base_url.rstrip("/")

    @property
    def name(self) -> str:
        return f"ipinfo:{self.edition}" + (".csv" if self.file_format == "csv" else "")

    @property
    def packaging(self) -> Packaging:
        if self.file_format == "csv":
            return Packaging("gzip", "csv", file_name=f"{self.edition}.csv.gz")
        return Packaging("plain", "mmdb", file_name=f"{self.edition}.mmdb")

    @property
    def file_url(self) -> str:
        folder = "free/" if self.edition in LEGACY_FREE else ""
        extension = "csv.gz" if self.file_format == "csv" else "mmdb"
        return f"{self._base_url}/{folder}{self.edition}.{extension}"

    def latest(self, known: FeedState | None) -> Release:
        body = self._http.get_small(self._request(f"{self.file_url}/checksums"))
        try:
            data: Any = json.loads(body)
        except ValueError as error:
            raise FeedProtocolError(f"{self.name}: the checksums answer is not JSON") from error
        checksums = data.get("checksums") if isinstance(data, dict) else None
        sha256 = checksums.get("sha256") if isinstance(checksums, dict) else None
        if not isinstance(sha256, str):
            raise FeedProtocolError(f"{self.name}: the checksums answer has no sha256")
        checksum = Checksum.parse("sha256", sha256, feed=self.name)
        return Release(self.name, checksum.hex, checksum=checksum)

    @contextmanager
    def stream(self, release: Release) -> Iterator[Download]:
        with self._http.get(self._request(self.file_url)) as response:
            yield Download(response, release.checks())

    def _request(self, url: str) -> Request:
        return Request(
            url,
            self.name,
            principal=f"the IPinfo token of feed {self.name}",
            credentials={"Authorization": basic_authorization(self._token.reveal(), "")},
        )
