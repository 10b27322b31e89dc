"""The catalogue of public network lists: specs by name, mirrors, Azure's weekly file found on its page."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.feeds.catalogue import CATALOGUE, discover_url, parse_network_lists, period_seconds, set_schedule
from loader.feeds.config import parse_feed_spec
from loader.feeds.errors import FeedConfigInvalid, FeedProtocolError
from loader.formats.network_lists import NETWORK_LISTS, list_of


def test_every_catalogue_entry_has_its_reader_and_a_file_name_the_reader_knows() -> None:
    assert set(CATALOGUE) == set(NETWORK_LISTS)
    for entry in CATALOGUE.values():
        for part, url in enumerate(entry.urls or ("https://example.com/ServiceTags_Public_20261123.json",)):
            assert list_of(entry.file_name(part, url)) == entry.name
        assert entry.schedule.startswith("rate(")
        assert 0 < entry.max_change_ratio <= 1


def test_a_spec_names_lists_and_any_list_its_own_urls() -> None:
    chosen = parse_network_lists("aws,tor=http://127.0.0.1:8000/tor.txt,cloudflare=https://m/4|https://m/6")
    assert [(item.entry.name, item.urls) for item in chosen] == [
        ("aws", ("https://ip-ranges.amazonaws.com/ip-ranges.json",)),
        ("tor", ("http://127.0.0.1:8000/tor.txt",)),
        ("cloudflare", ("https://m/4", "https://m/6")),
    ]
    config = parse_feed_spec("network:aws,tor")
    assert (config.vendor, config.dataset_name) == ("network", "network")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("aws,nosuch", "'nosuch' is not in the catalogue"),
        ("aws,aws", "named twice"),
        ("tor=http://example.com/tor.txt", "not an https URL"),
        ("tor=", "an empty URL"),
    ],
)
def test_a_bad_spec_is_refused_by_name(spec: str, problem: str) -> None:
    with pytest.raises(FeedConfigInvalid, match=problem):
        parse_network_lists(spec)


PAGES = Path(__file__).parent.parent / "fixtures" / "download_center"
WEEKLY_FILE = (
    "https://download.microsoft.com/download/7/1/D/71D86715-5596-4529-9B13-DA13A5DE5B63/"
    "ServiceTags_Public_{date}.json"
)


def test_azures_weekly_file_is_read_from_the_download_centers_page_data() -> None:
    # Given the details page as the Download Center serves it: its files in window.__DLCDetails__
    page = (PAGES / "details-56519.html").read_bytes()
    # Then the week's file is the Service Tags entry of dlcDetailsView.downloadFile
    assert discover_url(CATALOGUE["azure"], page) == WEEKLY_FILE.format(date="20261123")
    # And JSON's escaped slashes (a page may write "\/" or "\u002F") are read as JSON reads them
    escaped = page.replace(
        b"https://download.microsoft.com/download/7/", b"https:\\/\\/download.microsoft.com\\u002Fdownload/7/"
    )
    assert discover_url(CATALOGUE["azure"], escaped) == WEEKLY_FILE.format(date="20261123")


def test_azures_weekly_file_is_the_failover_link_of_the_older_confirmation_page() -> None:
    page = (PAGES / "confirmation-56519.html").read_bytes()
    assert discover_url(CATALOGUE["azure"], page) == WEEKLY_FILE.format(date="20200518")


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        (b"<html>We moved</html>", "links no ServiceTags_Public"),
        # The page data lists other files only (another cloud's tags), and no link names the week's
        (
            b'<script>window.__DLCDetails__={"dlcDetailsView":{"downloadFile":[{"name":'
            b'"ServiceTags_AzureGovernment_20261123.json","url":"https://download.microsoft.com/x/'
            b'ServiceTags_AzureGovernment_20261123.json"}]}};</script>',
            "links no ServiceTags_Public",
        ),
        (b"<script>window.__DLCDetails__={not json};</script>", "links no ServiceTags_Public"),
        # A file of that name elsewhere than Microsoft's download host is not taken
        (
            b'<script>window.__DLCDetails__={"dlcDetailsView":{"downloadFile":[{"name":'
            b'"ServiceTags_Public_20261123.json","url":"https://evil.example/ServiceTags_Public_20261123.json"}]}};'
            b"</script>",
            "links no ServiceTags_Public",
        ),
    ],
    ids=["moved", "other-files-only", "broken-page-data", "other-host"],
)
def test_a_page_without_the_weeks_file_is_refused_by_name(page: bytes, problem: str) -> None:
    with pytest.raises(FeedProtocolError, match=problem):
        discover_url(CATALOGUE["azure"], page)


def test_a_set_of_lists_runs_at_its_most_frequent_lists_pace() -> None:
    assert period_seconds("rate(1 hour)") == 3600
    assert period_seconds("rate(7 days)") == 7 * 86400
    assert set_schedule("azure,spamhaus-drop") == "rate(12 hours)"
    assert set_schedule("azure,tor=https://mirror.example/exits.txt") == "rate(1 hour)"
    with pytest.raises(ValueError, match="not a rate"):
        period_seconds("cron(0 3 * * ? *)")


def test_a_geofeed_spec_is_a_url_feed_read_as_a_geofeed() -> None:
    config = parse_feed_spec("geofeed:https://example.net/geofeed.csv")
    assert (config.vendor, config.format, config.dataset_name) == ("url", "geofeed", "geofeed")


@pytest.mark.parametrize(
    ("page", "date"),
    [
        # The page data no longer parses (a new field written as JavaScript), but the file is linked
        (
            b'<script>window.__DLCDetails__={dlcDetailsView: {downloadFile: []}};</script><a href="'
            + WEEKLY_FILE.format(date="20261123").encode()
            + b'">download</a>',
            "20261123",
        ),
        # The page data moved to another name, its URL written with JSON's escaped slashes
        (
            b'<script>self.__NEXT_DATA__={"files":[{"url":"'
            + WEEKLY_FILE.format(date="20261123").replace("/", "\\/").encode()
            + b'"}]}</script>',
            "20261123",
        ),
        # Last week's file linked above this week's (a "previous versions" box): the newest is taken
        (
            b'<a href="' + WEEKLY_FILE.format(date="20261116").encode() + b'">previous</a>'
            b'<a href="' + WEEKLY_FILE.format(date="20261123").encode() + b'">download</a>',
            "20261123",
        ),
        # Page data naming an older file than a link on the page: the newest is taken
        (
            b'<script>window.__DLCDetails__={"dlcDetailsView":{"downloadFile":[{"name":'
            b'"ServiceTags_Public_20261116.json","url":"'
            + WEEKLY_FILE.format(date="20261116").encode()
            + b'"}]}};'
            b'</script><a href="' + WEEKLY_FILE.format(date="20261123").encode() + b'">download</a>',
            "20261123",
        ),
    ],
    ids=["page-data-not-json", "escaped-elsewhere", "two-links", "page-data-older"],
)
def test_azures_weekly_file_is_found_by_its_url_pattern_wherever_the_page_puts_it(
    page: bytes, date: str
) -> None:
    # Microsoft documents the file's URL, not the page's markup: the file is found by its URL
    assert discover_url(CATALOGUE["azure"], page) == WEEKLY_FILE.format(date=date)
