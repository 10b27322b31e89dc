"""Any HTTPS URL: one file, with an optional checksum file and optional headers from a secret.

What ``sourceUrl`` did, made safe:

- **https only** (plain ``http`` to a loopback address alone, for tests and a
  local mirror);
- **headers** such as ``Authorization: Bearer …`` come from a secret, so a
  token never sits in the URL, ``cdk.json`` or the template;
- **checksum URL** (optional): a file in ``sha256sum`` / ``md5sum`` form
  (``<hex>  <name>``) or a bare digest; its digest is the release's identity
  and the download's check (64 hex digits: sha256; 32: md5). Without one,
  ``latest`` is a conditional GET (``If-None-Match`` / ``If-Modified-Since``
  from the release loaded last; the body is not read): a 304 or the same ETag
  is unchanged. A server that sends neither an ETag nor a Last-Modified gives
  no way to tell, so every run fetches (and the load's own checksum, in
  ``start``, still writes nothing for the same bytes).
- The file is stored under its URL's file name: a ``.gz`` is checked by
  inflating it and kept compressed; anything else as it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import get_args
from urllib.parse import urlsplit

from loader.feeds.credentials import Secret
from loader.feeds.errors import FeedConfigInvalid
from loader.feeds.feed import (
    Download,
    LoadFormat,
    Packaging,
    Release,
    conditional_headers,
    release_from_head,
)
from loader.feeds.http_client import HttpClient, Request, display_url
from loader.feeds.verify import HEX_LENGTHS, Checksum
from loader.records import FeedState


def check_url(url: str, what: str = "url") -> str:
    """``url`` if it is https, or http to a loopback address; refused otherwise."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and _is_loopback(parts.hostname):
        return url
    raise FeedConfigInvalid(f"{what}: {display_url(url)} is not an https URL")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def format_for(file_name: str) -> LoadFormat:
    return "mmdb" if file_name.lower().endswith((".mmdb", ".mmdb.gz")) else "csv"


class UrlFeed:
    def __init__(
        self,
        url: str,
        http: HttpClient,
        *,
        checksum_url: str | None = None,
        headers: Mapping[str, Secret] | None = None,
        load_format: LoadFormat | None = None,
        name: str = "",
        stored_as: str = "",
    ) -> None:
        """``name`` and ``stored_as`` replace the URL's in state records and on disk (a catalogue list)."""
        self.url = check_url(url)
        self.checksum_url = check_url(checksum_url, "checksum_url") if checksum_url else None
        self._name = name
        self.file_name = stored_as or PurePosixPath(urlsplit(url).path).name
        # ".." and "." name folders: the file would land beside the feed's folder, or on it.
        if self.file_name in ("", ".", ".."):
            shown = f" ({self.file_name!r} is a folder)" if self.file_name else ""
            raise FeedConfigInvalid(f"url: {display_url(url)} names no file{shown}; refused")
        if load_format is not None and load_format not in get_args(LoadFormat):
            raise FeedConfigInvalid(f"url: unknown format {load_format!r}")
        self._load_format = load_format or format_for(self.file_name)
        self._headers = dict(headers or {})
        self._http = http

    @property
    def name(self) -> str:
        return self._name or f"url:{display_url(self.url)}"

    @property
    def packaging(self) -> Packaging:
        gzipped = self.file_name.lower().endswith(".gz")
        return Packaging("gzip" if gzipped else "plain", self._load_format, file_name=self.file_name)

    def latest(self, known: FeedState | None) -> Release:
        if self.checksum_url is not None:
            checksum = self._published_checksum(self.checksum_url)
            return Release(self.name, checksum.hex, checksum=checksum)
        head = self._http.peek(self._request(self.url, conditional_headers(known)))
        version = head.etag or head.last_modified or ""
        return release_from_head(self.name, version, head, known)

    @contextmanager
    def stream(self, release: Release) -> Iterator[Download]:
        with self._http.get(self._request(self.url)) as response:
            yield Download(response, release.checks())

    def _published_checksum(self, url: str) -> Checksum:
        fields = self._http.get_small(self._request(url), 4096).decode("ascii", "replace").split()
        digest = fields[0] if fields else ""
        if len(digest) == HEX_LENGTHS["sha256"]:
            return Checksum.parse("sha256", digest, feed=self.name)
        return Checksum.parse("md5", digest, feed=self.name)

    def _request(self, url: str, headers: Mapping[str, str] | None = None) -> Request:
        return Request(
            url,
            self.name,
            principal=f"the headers of feed {self.name}" if self._headers else None,
            headers=headers or {},
            credentials=self._headers,
        )
