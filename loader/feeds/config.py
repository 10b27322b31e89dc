"""Which feeds to keep current: a ``GeoIP.conf``, a ``vendor:edition`` spec, or a feed's settings.

**GeoIP.conf** as geoipupdate reads it (``internal/geoipupdate/config.go``,
``doc/GeoIP.conf.md``): one ``Setting value`` per line, ``#`` comments, the
value is the rest of the line; a setting given twice is an error, and so is
an unknown one. ``AccountID`` (formerly ``UserId``), ``LicenseKey`` and
``EditionIDs`` (formerly ``ProductIds``, space-separated) are required;
``Host`` is a URL, ``https://`` when it has no scheme. geoipupdate's other
settings (``DatabaseDirectory``, ``Proxy``, ``RetryFor``…) are accepted and
listed in ``ignored``: they are about writing local files, or not supported
here. The deprecated ``Protocol``, ``SkipPeerVerification`` and
``SkipHostnameVerification`` are ignored, as geoipupdate ignores them.
Errors name the line and the setting, never a value (a licence key on the
wrong line must not be printed).

**Feed specs** (``ipmeta update --feed``): ``maxmind:GeoLite2-City``,
``maxmind:GeoLite2-City-CSV``, ``dbip:city-lite`` (``.csv`` for the CSV file),
``ipinfo:ipinfo_lite`` (``.csv`` likewise), ``url:https://host/file.mmdb.gz``,
``geofeed:https://host/feed.csv`` (a ``url`` feed read as an RFC 8805 geofeed),
``network:aws,tor=URL,...`` (the public network lists of ``loader.feeds.catalogue``,
into one dataset, ``network`` by default).

**Datasets:** each feed loads into its own dataset, named in its settings,
by default its edition's name in the dataset charset (``ipmeta.schema.keys.check_dataset_name``:
``GeoLite2-City`` -> ``geolite2-city``).

**Secrets** (the stack's feeds): ``credentials_from_secret`` reads a Secrets
Manager value as each vendor needs it; an error names the secret and the
missing field, never a value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import date
from pathlib import Path
from typing import Any, Final, Literal, NoReturn, cast, get_args
from urllib.parse import urlsplit

from ipmeta.schema import keys
from loader.feeds.catalogue import NETWORK_DATASET, parse_network_lists
from loader.feeds.credentials import MaxMindAccount, Secret
from loader.feeds.dbip import DbipFeed, utc_today
from loader.feeds.errors import FeedConfigInvalid
from loader.feeds.feed import Feed, LoadFormat
from loader.feeds.http_client import HttpClient
from loader.feeds.ipinfo import IpinfoFeed
from loader.feeds.maxmind import DEFAULT_HOST, EDITION_ID, MaxMindFeed
from loader.feeds.url import UrlFeed, check_url

#: Where geoipupdate looks for its configuration (``internal/vars/defaults_notwin.go``).
DEFAULT_GEOIP_CONF: Final = Path("/usr/local/etc/GeoIP.conf")

Vendor = Literal["maxmind", "dbip", "ipinfo", "url", "network"]
#: ``geofeed``: a ``url`` feed of one RFC 8805 geofeed (``geofeed:https://...``).
FileFormat = Literal["mmdb", "csv", "geofeed"]
#: The credentials a feed is built with: a MaxMind account, a token, or headers (``url``).
Credentials = MaxMindAccount | Secret | Mapping[str, Secret] | None

_ALIASES: Final = {"UserId": "AccountID", "ProductIds": "EditionIDs"}
_USED: Final = frozenset({"AccountID", "LicenseKey", "EditionIDs", "Host"})
_IGNORED: Final = frozenset(
    {
        "DatabaseDirectory",
        "LockFile",
        "PreserveFileTimes",
        "Proxy",
        "ProxyUserPassword",
        "RetryFor",
        "Parallelism",
    }
)
_DEPRECATED: Final = frozenset({"Protocol", "SkipPeerVerification", "SkipHostnameVerification"})


def dataset_name_for(text: str) -> str:
    """``text`` in the dataset charset: lower case, other characters as dashes, a letter first, 32 at most."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower())
    name = re.sub(r"^[^a-z]+", "", name)[: keys.MAX_DATASET_NAME_LENGTH].strip("-")
    try:
        return keys.check_dataset_name(name)
    except keys.DatasetNameInvalid:
        raise FeedConfigInvalid(
            f"{text!r} gives no dataset name; name the feed's dataset ([a-z][a-z0-9-]*)"
        ) from None


@dataclass(frozen=True)
class FeedConfig:
    """One feed to keep current, as the CLI, a ``GeoIP.conf`` or the stack's ``feeds`` context names it."""

    vendor: Vendor
    #: MaxMind's edition ID, DB-IP's Lite edition, IPinfo's database name, or the ``url`` feed's URL.
    edition: str
    format: FileFormat = "mmdb"
    #: The dataset it loads into; empty: the edition's name (``dataset_name_for``).
    dataset: str = ""
    #: MaxMind's ``Host``, or another base URL for DB-IP and IPinfo (a mirror, a test server).
    host: str = ""
    #: ``url`` feeds: the checksum file beside the URL.
    checksum_url: str = ""
    #: The secret holding the credentials (Secrets Manager's name; read by the fetch function alone).
    secret: str = ""
    #: MaxMind CSV editions: the language of the Locations file loaded.
    locale: str = "en"

    def __post_init__(self) -> None:
        if self.vendor not in get_args(Vendor):
            raise FeedConfigInvalid(
                f"unknown vendor {self.vendor!r}; use one of {', '.join(get_args(Vendor))}"
            )
        if self.format not in get_args(FileFormat):
            raise FeedConfigInvalid(f"{self.vendor}: format {self.format!r} is neither mmdb nor csv")
        if self.format == "geofeed" and self.vendor != "url":
            raise FeedConfigInvalid(f"{self.vendor}: only a url feed is read as a geofeed")
        if self.dataset:
            try:
                keys.check_dataset_name(self.dataset)
            except keys.DatasetNameInvalid as error:
                raise FeedConfigInvalid(f"dataset: {error}") from None
        if self.host:
            check_url(self.host, "host")
        if self.vendor == "url":
            check_url(self.edition)
        if self.vendor == "network":
            parse_network_lists(self.edition)

    @property
    def dataset_name(self) -> str:
        if self.dataset:
            return self.dataset
        if self.vendor == "network":
            return NETWORK_DATASET
        if self.vendor == "url":
            # The file's name, without its query string (a version or a signature) or its extensions.
            file_name = urlsplit(self.edition).path.rsplit("/", 1)[-1]
            return dataset_name_for(re.sub(r"(\.(gz|mmdb|csv|zip))+$", "", file_name))
        return dataset_name_for(f"dbip-{self.edition}" if self.vendor == "dbip" else self.edition)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeedConfig:
        """A feed of the stack's ``feeds`` context (``name`` is its dataset; ``cron`` is the stack's)."""
        known = {f.name for f in fields(cls)}
        settings = {
            ("dataset" if key == "name" else key): value for key, value in data.items() if key != "cron"
        }
        unknown = sorted(set(settings) - known)
        if unknown:
            raise FeedConfigInvalid(
                f"feed settings: unknown {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        if not all(isinstance(value, str) for value in settings.values()):
            raise FeedConfigInvalid("feed settings: every value is a string")
        if "vendor" not in settings or "edition" not in settings:
            raise FeedConfigInvalid("feed settings: a feed names its vendor and its edition")
        return cls(**settings)


def parse_feed_spec(spec: str, dataset: str = "") -> FeedConfig:
    """``vendor:edition`` (``.csv`` after a DB-IP or IPinfo edition for its CSV file)."""
    vendor, _, edition = spec.partition(":")
    if vendor == "geofeed" and edition:
        return FeedConfig("url", edition, "geofeed", dataset)
    if vendor not in get_args(Vendor) or not edition:
        raise FeedConfigInvalid(
            f"feed {spec!r}: expected vendor:edition, such as maxmind:GeoLite2-City, dbip:city-lite, "
            "ipinfo:ipinfo_lite, url:https://host/file.mmdb, geofeed:https://host/feed.csv or network:aws,tor"
        )
    file_format: FileFormat = "mmdb"
    if vendor in ("dbip", "ipinfo"):
        for suffix in (".csv", ".mmdb"):
            if edition.endswith(suffix):
                edition, file_format = edition.removesuffix(suffix), "csv" if suffix == ".csv" else "mmdb"
    elif vendor == "maxmind" and edition.endswith("-CSV"):
        file_format = "csv"
    return FeedConfig(cast(Vendor, vendor), edition, file_format, dataset)


@dataclass(frozen=True)
class GeoIPConf:
    account: MaxMindAccount
    edition_ids: tuple[str, ...]
    host: str = DEFAULT_HOST
    #: geoipupdate settings present in the file that a fetch here does not use.
    ignored: tuple[str, ...] = ()

    def feeds(self) -> list[FeedConfig]:
        """One feed per edition, each into its own dataset."""
        return [
            FeedConfig("maxmind", edition, "csv" if edition.endswith("-CSV") else "mmdb", host=self.host)
            for edition in self.edition_ids
        ]


def read_geoip_conf(path: Path = DEFAULT_GEOIP_CONF) -> GeoIPConf:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise FeedConfigInvalid(f"{path}: cannot be read ({error.strerror})") from error
    return parse_geoip_conf(text, str(path))


def parse_geoip_conf(text: str, source: str = "GeoIP.conf") -> GeoIPConf:
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    ignored: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) < 2:
            raise FeedConfigInvalid(f"{source}: line {number}: expected a setting and its value")
        key = _ALIASES.get(words[0], words[0])
        if key in lines:
            raise FeedConfigInvalid(f"{source}: line {number}: {key} is set twice (line {lines[key]} too)")
        lines[key] = number
        if key in _USED:
            values[key] = " ".join(words[1:])
        elif key in _IGNORED:
            ignored.append(key)
        elif key not in _DEPRECATED:
            raise FeedConfigInvalid(f"{source}: line {number}: unknown setting {words[0]!r}")
    return _geoip_conf_of(values, lines, tuple(ignored), source)


def _geoip_conf_of(
    values: dict[str, str], lines: dict[str, int], ignored: tuple[str, ...], source: str
) -> GeoIPConf:
    if values.get("LicenseKey") == "000000000000" and values.get("AccountID") in (None, "0", "999999"):
        raise FeedConfigInvalid(
            f"{source}: the old free placeholder account; set your AccountID and LicenseKey"
        )
    for required in ("AccountID", "LicenseKey", "EditionIDs"):
        if required not in values:
            raise FeedConfigInvalid(f"{source}: the {required} setting is required")
    account_id = values["AccountID"]
    if not account_id.isdigit() or int(account_id) <= 0:
        raise FeedConfigInvalid(f"{source}: line {lines['AccountID']}: AccountID is not a positive number")
    editions = tuple(values["EditionIDs"].split())
    bad = [edition for edition in editions if not EDITION_ID.fullmatch(edition)]
    if bad:
        raise FeedConfigInvalid(f"{source}: line {lines['EditionIDs']}: {bad[0]!r} is not an edition ID")
    host = values.get("Host", DEFAULT_HOST)
    if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", host):
        host = f"https://{host}"
    # The licence key travels with every request: plain http only to this machine (a test server).
    check_url(host, f"{source}: line {lines.get('Host')}: Host")
    account = MaxMindAccount(int(account_id), Secret(values["LicenseKey"]))
    return GeoIPConf(account, editions, host.rstrip("/"), ignored)


def build_feed(
    config: FeedConfig,
    http: HttpClient,
    credentials: Credentials = None,
    *,
    today: Callable[[], date] = utc_today,
) -> Feed:
    """The vendor module for ``config``, with the credentials its protocol sends."""
    if config.vendor == "network":
        raise FeedConfigInvalid("network lists are several feeds: loader.feeds.catalogue.list_feeds")
    if config.vendor == "maxmind":
        if not isinstance(credentials, MaxMindAccount):
            raise FeedConfigInvalid(f"maxmind:{config.edition}: needs a MaxMind account ID and licence key")
        return MaxMindFeed(
            config.edition, credentials, http, host=config.host or DEFAULT_HOST, locale=config.locale
        )
    if config.vendor == "dbip":
        extra = {"base_url": config.host} if config.host else {}
        return DbipFeed(config.edition, http, file_format=_database_format(config), today=today, **extra)
    if config.vendor == "ipinfo":
        if not isinstance(credentials, Secret):
            raise FeedConfigInvalid(f"ipinfo:{config.edition}: needs an IPinfo token")
        extra = {"base_url": config.host} if config.host else {}
        return IpinfoFeed(config.edition, credentials, http, file_format=_database_format(config), **extra)
    headers = credentials if isinstance(credentials, Mapping) else None
    load_format: LoadFormat | None = "geofeed" if config.format == "geofeed" else None
    return UrlFeed(
        config.edition,
        http,
        checksum_url=config.checksum_url or None,
        headers=headers,
        load_format=load_format,
    )


def _database_format(config: FeedConfig) -> Literal["mmdb", "csv"]:
    """A vendor database's file format (``geofeed`` is a ``url`` feed's alone: ``__post_init__``)."""
    return "csv" if config.format == "csv" else "mmdb"


def credentials_from_secret(config: FeedConfig, value: Any) -> Credentials:
    """What ``config``'s vendor sends, from its secret's value (a parsed JSON object, or text).

    - ``maxmind``: ``{"account_id": 42, "license_key": "…"}``;
    - ``ipinfo``: ``{"token": "…"}``, or the token as the whole text;
    - ``url``: an object of header name to value (``{"Authorization": "Bearer …"}``);
    - ``dbip``: none (its Lite files are public).
    """
    where = f"{config.vendor}:{config.edition}: secret {config.secret or '(none)'}"
    if config.vendor in ("dbip", "network"):
        return None
    if config.vendor == "ipinfo" and isinstance(value, str):
        return Secret(value.strip()) if value.strip() else _missing(where, "token")
    if not isinstance(value, Mapping):
        raise FeedConfigInvalid(f"{where}: expected a JSON object")
    if config.vendor == "ipinfo":
        return Secret(_text(value, "token", where))
    if config.vendor == "url":
        return {str(name): Secret(_text(value, str(name), where)) for name in value}
    account = str(value.get("account_id", "")).strip()
    if not account.isdigit() or int(account) <= 0:
        raise FeedConfigInvalid(f"{where}: account_id is missing or not a positive number")
    return MaxMindAccount(int(account), Secret(_text(value, "license_key", where)))


def _text(value: Mapping[str, Any], name: str, where: str) -> str:
    text = value.get(name)
    if not isinstance(text, str) or not text.strip():
        _missing(where, name)
    return str(text).strip()


def _missing(where: str, name: str) -> NoReturn:
    # Only the field's name: the value of a neighbouring field may be the key itself.
    raise FeedConfigInvalid(f"{where}: {name} is missing or empty")
