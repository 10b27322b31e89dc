"""`ipmeta update`'s plan: which feeds, into which datasets, with which credentials, and its progress bar."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from ipmeta_cli.updating import DownloadBar, feed_argument, header_argument, planned_feeds
from loader.feeds.credentials import MaxMindAccount
from loader.feeds.errors import FeedConfigInvalid

KEY = "env-licence-key-0123"


def test_a_feed_argument_may_name_its_dataset() -> None:
    named = feed_argument("city=maxmind:GeoLite2-City")
    assert (named.vendor, named.edition, named.dataset_name) == ("maxmind", "GeoLite2-City", "city")
    plain = feed_argument("dbip:city-lite.csv")
    assert (plain.format, plain.dataset_name) == ("csv", "dbip-city-lite")
    # An "=" inside a URL is not a dataset name
    url = feed_argument("url:https://data.example.com/ranges.csv?v=2")
    assert (url.edition, url.dataset_name) == ("https://data.example.com/ranges.csv?v=2", "ranges")
    for bad in ("geoip:GeoLite2-City", "City Data=dbip:city-lite", "maxmind"):
        with pytest.raises(argparse.ArgumentTypeError):
            feed_argument(bad)


def test_maxmind_feeds_take_the_account_from_the_environment_without_a_geoip_conf() -> None:
    environment = {"GEOIPUPDATE_ACCOUNT_ID": "42", "GEOIPUPDATE_LICENSE_KEY": KEY}
    [feed] = planned_feeds([feed_argument("maxmind:GeoLite2-ASN")], None, environment=environment)
    assert isinstance(feed.credentials, MaxMindAccount)
    assert (feed.credentials.account_id, feed.credentials.license_key.reveal()) == (42, KEY)
    with pytest.raises(FeedConfigInvalid, match="GEOIPUPDATE_ACCOUNT_ID") as refused:
        planned_feeds([feed_argument("maxmind:GeoLite2-ASN")], None, environment={})
    assert KEY not in str(refused.value)


def test_a_geoip_conf_gives_its_account_and_host_to_maxmind_feeds(tmp_path: Path) -> None:
    conf = tmp_path / "GeoIP.conf"
    conf.write_text(f"AccountID 7\nLicenseKey {KEY}\nEditionIDs GeoLite2-Country\nHost http://127.0.0.1:9\n")
    # Without --feed: its editions
    [edition] = planned_feeds([], conf, environment={})
    assert (edition.config.edition, edition.config.host) == ("GeoLite2-Country", "http://127.0.0.1:9")
    # With --feed: those feeds, with its account and host
    [feed] = planned_feeds([feed_argument("maxmind:GeoLite2-ASN")], conf, environment={})
    assert isinstance(feed.credentials, MaxMindAccount)
    assert (feed.config.edition, feed.credentials.account_id, feed.config.host) == (
        "GeoLite2-ASN",
        7,
        "http://127.0.0.1:9",
    )


def test_url_headers_come_from_the_environment_and_host_points_every_feed_at_a_mirror() -> None:
    header = header_argument("Authorization=RANGES_TOKEN")
    [feed] = planned_feeds(
        [feed_argument("url:https://data.example.com/ranges.csv")],
        None,
        [header],
        environment={"RANGES_TOKEN": "Bearer s3cret"},
    )
    assert isinstance(feed.credentials, dict)
    assert feed.credentials["Authorization"].reveal() == "Bearer s3cret"
    with pytest.raises(FeedConfigInvalid, match="set the environment variable RANGES_TOKEN"):
        planned_feeds([feed_argument("url:https://data.example.com/r.csv")], None, [header], environment={})
    [mirrored] = planned_feeds(
        [feed_argument("dbip:city-lite")], None, host="https://mirror.example.com/dbip"
    )
    assert mirrored.config.host == "https://mirror.example.com/dbip"
    with pytest.raises(argparse.ArgumentTypeError):
        header_argument("Authorization")


def test_the_progress_bar_counts_the_bytes_of_each_download() -> None:
    out = io.StringIO()
    with DownloadBar(out) as bar:
        bar.begin("maxmind:GeoLite2-City", 3 << 20)
        for _ in range(3):
            bar.advance(1 << 20)
        assert bar.bar is not None
        assert (bar.bar.n, bar.bar.total) == (3 << 20, 3 << 20)
        bar.begin("dbip:city-lite", None)
        assert bar.bar.n == 0
    assert bar.bar is None
    assert "fetching maxmind:GeoLite2-City" in out.getvalue()
    assert "3.00M" in out.getvalue()
