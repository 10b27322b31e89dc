"""DB-IP's Lite editions: country, city and ASN, as MaxMind DB or CSV, one file a month.

The files are public (no key) at
``https://download.db-ip.com/free/dbip-<edition>-<YYYY-MM>.<mmdb|csv>.gz``, the
month in the name (``dbip-city-lite-2026-11.mmdb.gz``; the pattern scripts
that fetch them use, and DB-IP's Lite download page shows). DB-IP publishes
no checksum file, so a release is its month, and the download is checked by
``Content-Length`` and by inflating the gzip (its CRC-32 and length trailer).

``latest`` asks for the current month's file (UTC) with a GET whose body is
not read; a 404 means the month's file is not out yet (the first days of a
month), and the previous month's answers. The month loaded last is asked
for with ``If-None-Match`` / ``If-Modified-Since``, so an unchanged month is
one small exchange (a 304, or the same ETag).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import Final, Literal

from loader.feeds.errors import FeedConfigInvalid, FeedNotFound
from loader.feeds.feed import Download, Packaging, Release, conditional_headers, release_from_head
from loader.feeds.http_client import HttpClient, Request
from loader.records import FeedState

DEFAULT_BASE_URL: Final = "https://download.db-ip.com/free"
EDITIONS: Final = ("country-lite", "city-lite", "asn-lite")
DbipFormat = Literal["mmdb", "csv"]


def utc_today() -> date:
    return datetime.now(UTC).date()


def month_of(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def previous_month(day: date) -> str:
    return month_of(date(day.year - 1, 12, 1) if day.month == 1 else date(day.year, day.month - 1, 1))


class DbipFeed:
    def __init__(
        self,
        edition: str,
        http: HttpClient,
        *,
        file_format: DbipFormat = "mmdb",
        base_url: str = DEFAULT_BASE_URL,
        today: Callable[[], date] = utc_today,
    ) -> None:
        if edition not in EDITIONS:
            raise FeedConfigInvalid(
                f"dbip: {edition!r} is not a Lite edition; use one of {', '.join(EDITIONS)}"
            )
        self.edition = edition
        self.file_format = file_format
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._today = today

    @property
    def name(self) -> str:
        return f"dbip:{self.edition}" + (".csv" if self.file_format == "csv" else "")

    @property
    def packaging(self) -> Packaging:
        # One name for every month: the release id says which month it is.
        name = f"dbip-{self.edition}.{self.file_format}.gz"
        return Packaging("gzip", "mmdb" if self.file_format == "mmdb" else "dbip-csv", file_name=name)

    def url_of(self, month: str) -> str:
        return f"{self._base_url}/dbip-{self.edition}-{month}.{self.file_format}.gz"

    def latest(self, known: FeedState | None) -> Release:
        today = self._today()
        months = (month_of(today), previous_month(today))
        for month in months:
            headers = conditional_headers(known) if known is not None and known.release_id == month else {}
            try:
                head = self._http.peek(Request(self.url_of(month), self.name, headers=headers))
            except FeedNotFound:
                continue
            return release_from_head(self.name, month, head, known, published=month)
        raise FeedNotFound(
            f"{self.name}: DB-IP has published neither {months[0]} nor {months[1]} "
            f"({self.url_of(months[0])} and the month before answer 404)"
        )

    @contextmanager
    def stream(self, release: Release) -> Iterator[Download]:
        with self._http.get(Request(self.url_of(release.release_id), self.name)) as response:
            yield Download(response)
