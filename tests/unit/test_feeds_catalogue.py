"""The catalogue of public network lists: specs by name, mirrors, Azure's weekly file found on its page."""

from __future__ import annotations

import pytest

from loader.feeds.catalogue import CATALOGUE, discover_url, parse_network_lists
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


def test_azures_weekly_file_is_the_first_service_tags_link_on_its_page() -> None:
    page = (
        b'<a href="https://download.microsoft.com/download/7/1/D/71D86715-5596-4529-9B13-DA13A5DE5B63/'
        b'ServiceTags_Public_20261123.json" class="mscom-link">Download</a>'
    )
    url = discover_url(CATALOGUE["azure"], page)
    assert url.endswith("/ServiceTags_Public_20261123.json")
    assert url.startswith("https://download.microsoft.com/")
    with pytest.raises(FeedProtocolError, match="links no ServiceTags_Public"):
        discover_url(CATALOGUE["azure"], b"<html>We moved</html>")


def test_a_geofeed_spec_is_a_url_feed_read_as_a_geofeed() -> None:
    config = parse_feed_spec("geofeed:https://example.net/geofeed.csv")
    assert (config.vendor, config.format, config.dataset_name) == ("url", "geofeed", "geofeed")
