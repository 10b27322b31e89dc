"""Which feeds to keep current: GeoIP.conf as geoipupdate reads it, vendor:edition specs, dataset names."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path

import pytest

from loader.feeds.config import (
    DEFAULT_GEOIP_CONF,
    FeedConfig,
    build_feed,
    credentials_from_secret,
    dataset_name_for,
    parse_feed_spec,
    parse_geoip_conf,
    read_geoip_conf,
)
from loader.feeds.credentials import MaxMindAccount, Secret
from loader.feeds.errors import FeedConfigInvalid
from loader.feeds.http_client import HttpClient
from loader.feeds.maxmind import MaxMindFeed

KEY = "AbC123_licence_KEY"
#: geoipupdate's own default file, filled in (conf/GeoIP.conf.default).
GEOIP_CONF = f"""
# Replace YOUR_ACCOUNT_ID_HERE and YOUR_LICENSE_KEY_HERE with an active account
AccountID 123456
LicenseKey {KEY}

# Enter the edition IDs of the databases you would like to update.
EditionIDs GeoLite2-Country GeoLite2-City   GeoLite2-ASN
# Host https://updates.maxmind.com
# DatabaseDirectory DATADIR
RetryFor 5m
"""


def test_a_filled_in_default_geoip_conf_names_the_account_and_its_editions() -> None:
    conf = parse_geoip_conf(GEOIP_CONF)
    assert conf.account.account_id == 123456
    assert conf.account.license_key.reveal() == KEY
    assert conf.edition_ids == ("GeoLite2-Country", "GeoLite2-City", "GeoLite2-ASN")
    assert conf.host == "https://updates.maxmind.com"
    assert conf.ignored == ("RetryFor",)
    # One feed per edition, each into its own dataset
    assert [(feed.edition, feed.dataset_name) for feed in conf.feeds()] == [
        ("GeoLite2-Country", "geolite2-country"),
        ("GeoLite2-City", "geolite2-city"),
        ("GeoLite2-ASN", "geolite2-asn"),
    ]


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://updates.example.com/", "https://updates.example.com"),
        ("updates.maxmind.com", "https://updates.maxmind.com"),
    ],
)
def test_host_keeps_its_scheme_and_defaults_to_https(host: str, expected: str) -> None:
    conf = parse_geoip_conf(f"AccountID 1\nLicenseKey k\nEditionIDs A B-CSV\nHost {host}\n")
    assert conf.host == expected
    # Every edition's feed asks that host
    assert [(feed.host, feed.format) for feed in conf.feeds()] == [(expected, "mmdb"), (expected, "csv")]


def test_the_old_names_of_settings_are_read() -> None:
    conf = parse_geoip_conf("UserId 9\nLicenseKey k\nProductIds GeoLite2-ASN\nProtocol https\n")
    assert (conf.account.account_id, conf.edition_ids) == (9, ("GeoLite2-ASN",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"AccountID 1\nLicenseKey {KEY}\n", "EditionIDs setting is required"),
        (f"LicenseKey {KEY}\nEditionIDs A\n", "AccountID setting is required"),
        (f"AccountID 1\nUserId 2\nLicenseKey {KEY}\nEditionIDs A\n", "line 2: AccountID is set twice"),
        (f"AccountID {KEY}\nLicenseKey x\nEditionIDs A\n", "line 1: AccountID is not a positive number"),
        (f"AccountID 1\nLicenceKey {KEY}\nEditionIDs A\n", "line 2: unknown setting 'LicenceKey'"),
        (f"AccountID 1\nLicenseKey {KEY}\nEditionIDs A B_C\n", "line 3: 'B_C' is not an edition ID"),
        ("AccountID 999999\nLicenseKey 000000000000\nEditionIDs A\n", "old free placeholder"),
        (f"AccountID\nLicenseKey {KEY}\n", "line 1: expected a setting and its value"),
        (
            f"AccountID 1\nLicenseKey {KEY}\nEditionIDs A\nHost ftp://x\n",
            "line 4: Host: ftp://x is not an https",
        ),
        (
            f"AccountID 1\nLicenseKey {KEY}\nEditionIDs A\nHost http://mirror.example\n",
            "line 4: Host: http://mirror",
        ),
    ],
)
def test_a_bad_geoip_conf_names_the_line_and_never_a_value(text: str, message: str) -> None:
    with pytest.raises(FeedConfigInvalid, match=message) as error:
        parse_geoip_conf(text, "GeoIP.conf")
    assert KEY not in str(error.value)
    assert error.value.code == "FEED_CONFIG_INVALID"


def test_the_default_path_is_geoipupdates_and_a_missing_file_says_so(tmp_path: Path) -> None:
    assert Path("/usr/local/etc/GeoIP.conf") == DEFAULT_GEOIP_CONF
    with pytest.raises(FeedConfigInvalid, match="cannot be read"):
        read_geoip_conf(tmp_path / "GeoIP.conf")


@pytest.mark.parametrize(
    ("spec", "vendor", "edition", "file_format", "dataset"),
    [
        ("maxmind:GeoLite2-City", "maxmind", "GeoLite2-City", "mmdb", "geolite2-city"),
        ("maxmind:GeoLite2-City-CSV", "maxmind", "GeoLite2-City-CSV", "csv", "geolite2-city-csv"),
        ("dbip:city-lite", "dbip", "city-lite", "mmdb", "dbip-city-lite"),
        ("dbip:asn-lite.csv", "dbip", "asn-lite", "csv", "dbip-asn-lite"),
        ("ipinfo:ipinfo_lite", "ipinfo", "ipinfo_lite", "mmdb", "ipinfo-lite"),
        ("ipinfo:country_asn.csv", "ipinfo", "country_asn", "csv", "country-asn"),
        (
            "url:https://h.example/x/dbip-city-lite-2026-11.mmdb.gz",
            "url",
            None,
            "mmdb",
            "dbip-city-lite-2026-11",
        ),
    ],
)
def test_feed_specs(spec: str, vendor: str, edition: str | None, file_format: str, dataset: str) -> None:
    config = parse_feed_spec(spec)
    assert (config.vendor, config.edition, config.format, config.dataset_name) == (
        vendor,
        edition or spec.removeprefix("url:"),
        file_format,
        dataset,
    )


@pytest.mark.parametrize("spec", ["GeoLite2-City", "geoip:GeoLite2-City", "maxmind:", "dbip"])
def test_a_spec_without_a_known_vendor_and_an_edition_is_refused(spec: str) -> None:
    with pytest.raises(FeedConfigInvalid, match="expected vendor:edition"):
        parse_feed_spec(spec)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("GeoLite2-City", "geolite2-city"),
        ("ipinfo_lite", "ipinfo-lite"),
        ("2026 DB--IP  Lite!", "db-ip-lite"),
        ("A" * 40, "a" * 32),
    ],
)
def test_dataset_names_fit_the_dataset_charset(text: str, name: str) -> None:
    assert dataset_name_for(text) == name


def test_a_text_with_no_letter_gives_no_dataset_name() -> None:
    with pytest.raises(FeedConfigInvalid, match="name the feed's dataset"):
        dataset_name_for("2026-11")


def test_the_stacks_feed_settings_are_checked_like_the_cli() -> None:
    settings = {"name": "city", "vendor": "maxmind", "edition": "GeoLite2-City", "secret": "ipmeta/maxmind"}
    config = FeedConfig.from_dict({**settings, "cron": "cron(0 6 ? * WED,SAT *)"})
    assert (config.dataset_name, config.secret) == ("city", "ipmeta/maxmind")
    with pytest.raises(FeedConfigInvalid, match="unknown licenseKey"):
        FeedConfig.from_dict({**settings, "licenseKey": "never here"})
    with pytest.raises(FeedConfigInvalid, match="is not a dataset name"):
        FeedConfig.from_dict({**settings, "name": "City Data"})
    with pytest.raises(FeedConfigInvalid, match="not an https URL"):
        FeedConfig.from_dict({**settings, "host": "http://updates.example.com"})


def test_a_feed_is_built_only_with_the_credentials_its_vendor_needs() -> None:
    http = HttpClient()
    account = MaxMindAccount(1, Secret(KEY))
    assert isinstance(build_feed(parse_feed_spec("maxmind:GeoLite2-ASN"), http, account), MaxMindFeed)
    with pytest.raises(FeedConfigInvalid, match="needs a MaxMind account"):
        build_feed(parse_feed_spec("maxmind:GeoLite2-ASN"), http, Secret("token"))
    with pytest.raises(FeedConfigInvalid, match="needs an IPinfo token"):
        build_feed(parse_feed_spec("ipinfo:ipinfo_lite"), http)
    assert build_feed(parse_feed_spec("dbip:city-lite"), http).name == "dbip:city-lite"


def test_a_secret_never_prints_or_travels() -> None:
    secret = Secret(KEY)
    account = MaxMindAccount(5, secret)
    for shown in (repr(secret), str(secret), f"{secret}", repr(account), str(account)):
        assert KEY not in shown
    assert account.describe() == "MaxMind account 5"
    with pytest.raises(TypeError, match="not serialized"):
        pickle.dumps(account)


def test_a_dataset_name_is_the_tables_own_charset() -> None:
    # The table's rules, not a copy: "current" is a route of its own, so no feed may load into it
    with pytest.raises(FeedConfigInvalid, match="reserved"):
        FeedConfig("dbip", "city-lite", dataset="current")
    assert dataset_name_for("x" * 40) == "x" * 32


MAXMIND = FeedConfig("maxmind", "GeoLite2-City", secret="ipmeta/maxmind")
IPINFO = FeedConfig("ipinfo", "ipinfo_lite", secret="ipmeta/ipinfo")
URL = FeedConfig("url", "https://data.example.com/ranges.csv", secret="ipmeta/ranges")


def test_a_secret_gives_each_vendor_its_credentials() -> None:
    account = credentials_from_secret(MAXMIND, {"account_id": "42", "license_key": " k3y "})
    assert isinstance(account, MaxMindAccount)
    assert (account.account_id, account.license_key.reveal()) == (42, "k3y")
    token = credentials_from_secret(IPINFO, {"token": "t0ken"})
    assert isinstance(token, Secret)
    assert token.reveal() == "t0ken"
    whole = credentials_from_secret(IPINFO, "t0ken\n")
    assert isinstance(whole, Secret)
    assert whole.reveal() == "t0ken"
    headers = credentials_from_secret(URL, {"Authorization": "Bearer b3arer"})
    assert isinstance(headers, Mapping)
    assert {name: value.reveal() for name, value in headers.items()} == {"Authorization": "Bearer b3arer"}
    assert credentials_from_secret(FeedConfig("dbip", "city-lite"), {"anything": "x"}) is None


@pytest.mark.parametrize(
    ("config", "value", "says"),
    [
        (MAXMIND, {"license_key": "s3cret-value"}, "account_id is missing"),
        (MAXMIND, {"account_id": "s3cret-value", "license_key": "k"}, "account_id is missing"),
        (MAXMIND, {"account_id": 42, "licence": "s3cret-value"}, "license_key is missing"),
        (IPINFO, {"tok": "s3cret-value"}, "token is missing"),
        (IPINFO, "   ", "token is missing"),
        (URL, "s3cret-value", "expected a JSON object"),
        (URL, {"Authorization": ""}, "Authorization is missing"),
    ],
)
def test_a_secret_without_what_its_vendor_needs_names_the_field_and_never_a_value(
    config: FeedConfig, value: object, says: str
) -> None:
    with pytest.raises(FeedConfigInvalid, match=says) as refused:
        credentials_from_secret(config, value)
    assert config.secret in str(refused.value)
    assert "s3cret-value" not in str(refused.value)
