"""The catalogue of public network-kind lists by name: where each is published, how often, its limits.

``ipmeta update --feed network:aws,tor,apple-relay`` loads the lists named into
one dataset (``network`` by default) with ``--overlaps merge``, so one Query
answers every kind at once (docs/feeds.md). Any entry may name its own URL
(``aws=https://mirror/ip-ranges.json``: a mirror, a test server); an entry the
owner publishes as two files (Cloudflare's and Spamhaus's v4 and v6 lists)
then takes its URLs joined by ``|``.

The files are read by ``loader.formats.network_lists`` (same names, one parser
per owner format): each is stored as ``<list>-<n>.<ext>``, which is how the
reader knows its list. Each entry holds the guard's limit (``max_change_ratio``),
a schedule the owner's publishing pace justifies, and its floor (``min_ranges``):
about a tenth of the ranges the owner's list held when counted, so a download
from the owner's URLs with fewer is cut, and refused on its first fetch too
(``loader.pipeline.network_feed.refuse_lists_under_floor``). Beside it the reader
refuses a file with no ranges at all, and the guard holds a release with under
half the ranges of the list's current file (``loader.pipeline.guard.moved_too_far``).

Azure's Service Tags file is renamed every week (``ServiceTags_Public_<date>.json``);
its stable address is the download page, and the catalogue names the page:
the week's file is the newest ``ServiceTags_Public_<date>.json`` on
``download.microsoft.com`` the page names, wherever it names it (``discover_url``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final
from urllib.parse import urlsplit

from loader.feeds.errors import FeedConfigInvalid, FeedProtocolError
from loader.feeds.http_client import HttpClient, Request
from loader.feeds.url import UrlFeed, check_url

#: The dataset the lists load into unless the spec names another.
NETWORK_DATASET: Final = "network"
#: A discovery page is read whole, so it is capped.
MAX_DISCOVERY_BYTES: Final = 2 << 20


@dataclass(frozen=True)
class NetworkList:
    name: str
    #: The owner's published files (two where IPv4 and IPv6 are separate).
    urls: tuple[str, ...]
    #: What a row of the list says of an address (``network_kinds``).
    kind: str
    #: EventBridge schedule expression of the stack's scheduled fetch.
    schedule: str
    #: A release whose ranges differ from the active release's by more than this share is held.
    max_change_ratio: float
    #: The page whose link names the current file, where the file's own name changes.
    discovery: str = ""
    #: The fewest ranges the owner's list (all its files) may hold: about a tenth of what it
    #: held when counted (docs/feeds.md). Fewer from the owner's own URLs is a cut download.
    min_ranges: int = 0

    def file_name(self, part: int, url: str) -> str:
        """``<list>-<n><suffix>``: the name ``loader.formats.network_lists.list_of`` reads the list from."""
        suffix = "".join(PurePosixPath(urlsplit(url).path).suffixes[-1:]) or ".txt"
        return f"{self.name}-{part + 1}{suffix}"


def _list(
    name: str, kind: str, schedule: str, ratio: float, floor: int, *urls: str, discovery: str = ""
) -> NetworkList:
    return NetworkList(name, urls, kind, schedule, ratio, discovery=discovery, min_ranges=floor)


#: Cloud ranges grow by a few percent a month; Tor's exits churn daily; DROP and crawlers change slowly.
CATALOGUE: Final[Mapping[str, NetworkList]] = {
    entry.name: entry
    for entry in (
        _list("aws", "cloud", "rate(6 hours)", 0.1, 1000, "https://ip-ranges.amazonaws.com/ip-ranges.json"),
        _list("gcp", "cloud", "rate(1 day)", 0.1, 100, "https://www.gstatic.com/ipranges/cloud.json"),
        _list(
            "azure",
            "cloud",
            "rate(7 days)",
            0.1,
            5000,
            discovery="https://www.microsoft.com/en-us/download/details.aspx?id=56519",
        ),
        _list(
            "oracle",
            "cloud",
            "rate(1 day)",
            0.1,
            100,
            "https://docs.oracle.com/en-us/iaas/tools/public_ip_ranges.json",
        ),
        _list(
            "cloudflare",
            "cloud",
            "rate(7 days)",
            0.2,
            10,
            "https://www.cloudflare.com/ips-v4",
            "https://www.cloudflare.com/ips-v6",
        ),
        _list("fastly", "cloud", "rate(7 days)", 0.2, 10, "https://api.fastly.com/public-ip-list"),
        _list("github", "cloud", "rate(1 day)", 0.2, 500, "https://api.github.com/meta"),
        _list(
            "googlebot",
            "crawler",
            "rate(1 day)",
            0.2,
            30,
            "https://developers.google.com/crawling/ipranges/googlebot.json",
        ),
        _list("bingbot", "crawler", "rate(1 day)", 0.2, 10, "https://www.bing.com/toolbox/bingbot.json"),
        _list("tor", "tor", "rate(1 hour)", 0.5, 100, "https://check.torproject.org/torbulkexitlist"),
        _list(
            "apple-relay",
            "relay",
            "rate(1 day)",
            0.2,
            20000,
            "https://mask-api.icloud.com/egress-ip-ranges.csv",
        ),
        _list(
            "spamhaus-drop",
            "drop",
            "rate(12 hours)",
            0.2,
            0,
            "https://www.spamhaus.org/drop/drop.txt",
            "https://www.spamhaus.org/drop/dropv6.txt",
        ),
    )
}


@dataclass(frozen=True)
class ChosenList:
    """A catalogue entry as a spec chose it: its own URLs, or those the spec named."""

    entry: NetworkList
    urls: tuple[str, ...]

    @property
    def named_urls(self) -> bool:
        return self.urls != self.entry.urls


def parse_network_lists(text: str) -> tuple[ChosenList, ...]:
    """``aws,tor=http://127.0.0.1:8000/tor.txt,cloudflare=URL4|URL6``: the lists chosen, each once."""
    chosen: dict[str, ChosenList] = {}
    for item in (part.strip() for part in text.split(",")):
        name, equals, urls = item.partition("=")
        entry = CATALOGUE.get(name.strip())
        if entry is None:
            raise FeedConfigInvalid(
                f"network list {name.strip()!r} is not in the catalogue; use some of {', '.join(CATALOGUE)}"
            )
        if entry.name in chosen:
            raise FeedConfigInvalid(f"network list {entry.name} is named twice")
        own = tuple(url.strip() for url in urls.split("|")) if equals else entry.urls
        if equals and not all(own):
            raise FeedConfigInvalid(f"network list {entry.name}: an empty URL")
        for url in own:
            check_url(url, f"network list {entry.name}")
        chosen[entry.name] = ChosenList(entry, own)
    if not chosen:
        raise FeedConfigInvalid("network: name at least one list, e.g. network:aws,tor")
    return tuple(chosen.values())


_RATE: Final = re.compile(r"rate\((\d+) (minute|hour|day)s?\)")
_UNIT_SECONDS: Final = {"minute": 60, "hour": 3600, "day": 86400}


def period_seconds(schedule: str) -> int:
    """How often a catalogue schedule (``rate(6 hours)``) runs, in seconds."""
    found = _RATE.fullmatch(schedule)
    if found is None:
        raise ValueError(f"{schedule!r} is not a rate(N unit) expression")
    return int(found.group(1)) * _UNIT_SECONDS[found.group(2)]


def set_schedule(text: str) -> str:
    """The schedule of the lists ``text`` names, run as one feed: the most frequent of theirs.

    Each run asks every list whether it changed (one conditional GET a file), so the slower
    lists cost a small request per run and are fetched only when their owner renamed them.
    """
    return min((chosen.entry.schedule for chosen in parse_network_lists(text)), key=period_seconds)


_SERVICE_TAGS_FILE: Final = re.compile(r"ServiceTags_Public_(\d{8})\.json")
#: The file's documented address: ``https://download.microsoft.com/download/<path>/ServiceTags_Public_<date>.json``.
_SERVICE_TAGS_LINK: Final = re.compile(
    r'https://download\.microsoft\.com/[^"\'<>\s\\]*?ServiceTags_Public_\d{8}\.json'
)
#: The Download Center's page data: ``<script>window.__DLCDetails__={...}</script>``.
_DLC_DETAILS: Final = re.compile(rb"window\.__DLCDetails__\s*=\s*(\{.*?\})\s*;?\s*</script>", re.DOTALL)
#: How a page's script may spell a slash inside a string.
_ESCAPED_SLASHES: Final = re.compile(r"\\/|\\u002[fF]")


def discover_url(entry: NetworkList, page: bytes) -> str:
    """The current file's URL, from the page that links it (Azure's weekly Service Tags).

    Microsoft documents where the file is published (the download page) and its URL's
    shape, not the page's markup, which has changed before: the details page carries its
    files as page data (``window.__DLCDetails__``: ``dlcDetailsView.downloadFile[]``, each a
    ``name`` and a ``url``), the older confirmation page linked the file from an ``<a>``.
    So every ``https://download.microsoft.com/…/ServiceTags_Public_<date>.json`` anywhere
    in the page counts (in the page data when it parses, in a link, in any script, its
    slashes escaped or not), and the newest date is taken: a page that also links last
    week's file still gives this week's.
    """
    found = set(_files_in_details(page)) | set(_SERVICE_TAGS_LINK.findall(_page_text(page)))
    if not found:
        raise FeedProtocolError(
            f"network:{entry.name}: {entry.discovery} links no ServiceTags_Public_<date>.json "
            "on https://download.microsoft.com/; name the file with azure=URL"
        )
    return max(found, key=lambda url: (_date_of(url), url))


def _page_text(page: bytes) -> str:
    return _ESCAPED_SLASHES.sub("/", page.decode("utf-8", errors="replace"))


def _date_of(url: str) -> str:
    found = _SERVICE_TAGS_FILE.search(url)
    return found.group(1) if found else ""


def _files_in_details(page: bytes) -> list[str]:
    """The Service Tags files among the page data's files; none where it is absent or no longer JSON."""
    details = _DLC_DETAILS.search(page)
    try:
        data = json.loads(details.group(1)) if details else None
    except ValueError:
        return []  # the links on the page are still read
    view = data.get("dlcDetailsView") if isinstance(data, dict) else None
    files = view.get("downloadFile") if isinstance(view, dict) else None
    found = []
    for file in files if isinstance(files, list) else []:
        name, url = (file.get("name"), file.get("url")) if isinstance(file, dict) else (None, None)
        if (
            isinstance(name, str)
            and isinstance(url, str)
            and _SERVICE_TAGS_FILE.fullmatch(name)
            and _SERVICE_TAGS_LINK.fullmatch(url)
        ):
            found.append(url)
    return found


def list_feeds(chosen: ChosenList, http: HttpClient) -> list[UrlFeed]:
    """One feed per published file of a list: named ``network:<list>[/<n>]``, stored as ``<list>-<n>.<ext>``.

    A list without URLs (Azure's) is found on its discovery page first.
    """
    entry = chosen.entry
    urls = chosen.urls or (_discovered(entry, http),)
    return [
        UrlFeed(
            url,
            http,
            load_format="network",
            name=f"network:{entry.name}" + (f"/{part + 1}" if len(urls) > 1 else ""),
            stored_as=entry.file_name(part, url),
        )
        for part, url in enumerate(urls)
    ]


def _discovered(entry: NetworkList, http: HttpClient) -> str:
    page = http.get_small(Request(entry.discovery, f"network:{entry.name}"), MAX_DISCOVERY_BYTES)
    return discover_url(entry, page)
