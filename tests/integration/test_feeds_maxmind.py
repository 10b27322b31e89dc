"""MaxMind feeds against a fake MaxMind on 127.0.0.1 that speaks geoipupdate's protocol.

A new release is fetched, checked against the metadata's md5 and unpacked; an
unchanged one costs the metadata request alone; every bad case is refused with
a stable code, leaves no file for a load, and never shows the licence key.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loader.feeds.credentials import MaxMindAccount, Secret
from loader.feeds.errors import FeedError
from loader.feeds.fetch import FeedCheck, FetchedRelease, FetchLimits
from loader.feeds.maxmind import MaxMindFeed
from loader.feeds.verify import DirectorySinks
from loader.store.feed_states import FeedStates
from tests.fakes.releases import Entry, maxmind_city_csv_zip, maxmind_tarball, md5_of, mmdb_bytes
from tests.fakes.vendors import Edition, FakeMaxMind, Reply
from tests.integration.feeds import (
    Sleeps,
    assert_refused_cleanly,
    check_then_fetch,
    fetched_then_recorded,
    files_in,
    quick_http,
    rerun_unchanged,
)

ACCOUNT_ID = 42
LICENSE_KEY = "Xk9-s3cret-licence-key"
COUNTRY = "GeoLite2-Country"
DATE = "2026-11-24"
MMDB = mmdb_bytes(COUNTRY, "release 2026-11-24")


def country_edition(mmdb: bytes = MMDB, *extra: Entry, md5: str | None = None) -> Edition:
    return Edition(DATE, maxmind_tarball(COUNTRY, DATE, mmdb, *extra), md5 or md5_of(mmdb))


@pytest.fixture
def maxmind() -> Iterator[FakeMaxMind]:
    csv_edition = Edition(DATE, maxmind_city_csv_zip(DATE), md5_of(b"csv"))
    with FakeMaxMind(
        ACCOUNT_ID, LICENSE_KEY, {COUNTRY: country_edition(), "GeoLite2-City-CSV": csv_edition}
    ) as fake:
        yield fake


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def feed_of(fake: FakeMaxMind, sleeps: Sleeps, edition: str = COUNTRY, key: str = LICENSE_KEY) -> MaxMindFeed:
    account = MaxMindAccount(ACCOUNT_ID, Secret(key))
    return MaxMindFeed(edition, account, quick_http(sleeps, timeout=0.3), host=fake.api.url)


def update(feed: MaxMindFeed, states: FeedStates, out: Path) -> FeedCheck | FetchedRelease:
    return check_then_fetch(feed, states, DirectorySinks(out), dataset="geolite2-country", workdir=out.parent)


def test_a_new_release_is_fetched_checked_and_unpacked_from_its_dated_folder(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    # Given an edition none of whose releases was loaded
    fetched = update(feed_of(maxmind, sleeps), feed_states, tmp_path / "out")
    # Then its .mmdb, out of GeoLite2-Country_20261124/, is the one file for the load
    assert isinstance(fetched, FetchedRelease)
    assert (fetched.release.release_id, fetched.load_format, fetched.sources) == (
        DATE,
        "mmdb",
        [f"{COUNTRY}.mmdb"],
    )
    assert (tmp_path / "out" / f"{COUNTRY}.mmdb").read_bytes() == MMDB
    assert files_in(tmp_path / "out") == [f"{COUNTRY}.mmdb"]
    # And it took the metadata, then the dated download, with the account's Basic auth
    assert maxmind.api.paths() == ["/geoip/updates/metadata", f"/geoip/databases/{COUNTRY}/download"]
    download = maxmind.api.seen[1]
    assert download.query == {"date": "20261124", "suffix": "tar.gz"}
    assert all(seen.headers["authorization"].startswith("Basic ") for seen in maxmind.api.seen)
    # And followed the redirect to storage without taking the licence key there
    assert [seen.path for seen in maxmind.storage.seen] == [f"/blobs/{COUNTRY}_20261124.tar.gz"]
    assert "authorization" not in maxmind.storage.seen[0].headers
    # And what goes on to the load, and into the state, holds no credential
    assert LICENSE_KEY not in json.dumps(fetched.to_event()) + repr(fetched)


@dataclass
class Bar:
    total: int | None = None
    done: int = 0

    def begin(self, feed: str, total_bytes: int | None) -> None:
        self.total = total_bytes

    def advance(self, size: int) -> None:
        self.done += size


def test_the_progress_bar_hears_the_size_and_every_byte(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    bar = Bar()
    sinks = DirectorySinks(tmp_path / "out")
    check_then_fetch(feed_of(maxmind, sleeps), feed_states, sinks, dataset="d", progress=bar)
    size = len(maxmind.editions[COUNTRY].archive)
    assert (bar.total, bar.done) == (size, size)


def test_a_download_larger_than_the_cap_is_refused_before_its_body_is_read(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    sinks = DirectorySinks(tmp_path / "out")
    limits = FetchLimits(max_download_bytes=100)
    with pytest.raises(FeedError, match=r"announces \d+ bytes, more than the feed's cap of 100") as error:
        check_then_fetch(feed_of(maxmind, sleeps), feed_states, sinks, dataset="d", limits=limits)
    assert error.value.code == "FEED_DOWNLOAD_TOO_LARGE"
    assert files_in(tmp_path / "out") == []


def test_an_unchanged_release_costs_the_metadata_request_and_nothing_else(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = feed_of(maxmind, sleeps)
    fetched_then_recorded(feed, feed_states, tmp_path / "first")
    # When the next scheduled run finds the same date and md5
    again = rerun_unchanged(feed, feed_states, tmp_path / "second", maxmind.api, maxmind.storage)
    # Then it says so, sent the metadata request alone, and downloaded nothing
    assert again.describe() == f"maxmind:{COUNTRY}: unchanged (release {DATE})"
    assert maxmind.api.paths() == ["/geoip/updates/metadata"]
    assert maxmind.storage.seen == []


def test_a_release_the_vendor_replaced_is_fetched_again(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = feed_of(maxmind, sleeps)
    fetched_then_recorded(feed, feed_states, tmp_path / "first")
    # MaxMind publishes the next release
    newer = mmdb_bytes(COUNTRY, "release 2026-11-28")
    maxmind.editions[COUNTRY] = Edition(
        "2026-11-28", maxmind_tarball(COUNTRY, "2026-11-28", newer), md5_of(newer)
    )
    second = update(feed, feed_states, tmp_path / "second")
    assert isinstance(second, FetchedRelease)
    assert second.release.release_id == "2026-11-28"
    assert (tmp_path / "second" / f"{COUNTRY}.mmdb").read_bytes() == newer


def test_a_csv_edition_brings_its_blocks_and_one_locations_file_checked_by_sha256(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    fetched = update(feed_of(maxmind, sleeps, "GeoLite2-City-CSV"), feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    # The Blocks files are the sources and Locations-en is the file they join; the German one stays behind
    assert fetched.load_format == "geoip2-csv"
    assert fetched.sources == ["GeoLite2-City-Blocks-IPv4.csv", "GeoLite2-City-Blocks-IPv6.csv"]
    assert fetched.locations == "GeoLite2-City-Locations-en.csv"
    assert files_in(tmp_path / "out") == sorted([*fetched.sources, "GeoLite2-City-Locations-en.csv"])
    # The zip was checked against the .sha256 MaxMind publishes beside it, fetched only for the download
    suffixes = [seen.query.get("suffix") for seen in maxmind.api.seen]
    assert suffixes == [None, "zip.sha256", "zip"]


BAD_CASES = {
    "wrong key (401)": "FEED_AUTH_REFUSED",
    "unknown edition (404)": "FEED_NOT_FOUND",
    "md5 mismatch": "FEED_CHECKSUM_MISMATCH",
    "sha256 mismatch of a CSV zip": "FEED_CHECKSUM_MISMATCH",
    "truncated body": "FEED_DOWNLOAD_TRUNCATED",
    "../ in a member's name": "FEED_ARCHIVE_REJECTED",
    "a symlink member": "FEED_ARCHIVE_REJECTED",
    "a member the edition does not publish": "FEED_ARCHIVE_REJECTED",
    "a stalled server (timeout)": "FEED_TIMEOUT",
    "5xx after every retry": "FEED_UNAVAILABLE",
}


def arrange(case: str, fake: FakeMaxMind, sleeps: Sleeps) -> MaxMindFeed:
    """The fake set up for one bad case; the feed that will meet it."""
    folder = f"{COUNTRY}_20261124"
    archives = {
        "md5 mismatch": country_edition(md5=md5_of(b"another database")),
        "../ in a member's name": country_edition(MMDB, Entry(f"{folder}/../../evil.mmdb", b"x")),
        "a symlink member": country_edition(
            MMDB, Entry(f"{folder}/GeoIP.conf", kind="symlink", target="/etc/passwd")
        ),
        "a member the edition does not publish": country_edition(
            MMDB, Entry(f"{folder}/run.sh", b"#!/bin/sh\n")
        ),
    }
    if case in archives:
        fake.editions[COUNTRY] = archives[case]
    elif case == "sha256 mismatch of a CSV zip":
        fake.editions["GeoLite2-City-CSV"].sha256 = "0" * 64
        return feed_of(fake, sleeps, "GeoLite2-City-CSV")
    elif case == "truncated body":
        fake.storage.inject(Reply(200, fake.editions[COUNTRY].archive, cut_after=200))
    elif case == "a stalled server (timeout)":
        fake.api.inject(*[Reply(stall_seconds=5.0)] * 3)
    elif case == "5xx after every retry":
        fake.api.inject(*[Reply(503, b"busy")] * 3)
    return feed_of(
        fake,
        sleeps,
        "GeoLite2-Cty" if case == "unknown edition (404)" else COUNTRY,
        "wrong-key" if case == "wrong key (401)" else LICENSE_KEY,
    )


@pytest.mark.parametrize("case", BAD_CASES)
def test_every_bad_case_is_refused_with_its_code_leaves_no_file_and_never_shows_the_key(  # noqa: PLR0917 - pytest passes fixtures by position
    case: str,
    maxmind: FakeMaxMind,
    sleeps: Sleeps,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    feed_states: FeedStates,
) -> None:
    caplog.set_level(logging.DEBUG)
    feed = arrange(case, maxmind, sleeps)
    started = time.monotonic()
    with pytest.raises(FeedError) as error:
        update(feed, feed_states, tmp_path / "out")
    # A clear, stable refusal that names the feed, and no trace of the key anywhere
    assert_refused_cleanly(error, BAD_CASES[case], [LICENSE_KEY], caplog)
    assert f"maxmind:{feed.edition}" in str(error.value)
    # Nothing for a load: no file, not even a partial one, and no release remembered
    assert files_in(tmp_path / "out") == []
    assert feed_states.get(feed.name) is None
    # Fast: the timeouts are short and the backoff never really sleeps
    assert time.monotonic() - started < 5


def test_a_wrong_key_names_the_account_and_not_the_key(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    with pytest.raises(FeedError) as error:
        update(feed_of(maxmind, sleeps, key="wrong-key"), feed_states, tmp_path / "out")
    assert f"MaxMind account {ACCOUNT_ID}" in str(error.value)
    assert "wrong-key" not in str(error.value)
    # A refusal is not retried: the key will not become right
    assert maxmind.api.paths() == ["/geoip/updates/metadata"]


def test_429_with_retry_after_is_waited_out_and_then_answered(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    # Given a rate limit on the metadata, then on the download
    maxmind.api.inject(Reply(429, headers={"Retry-After": "7"}))
    fetched = update(feed_of(maxmind, sleeps), feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    # Then the client waited what the server asked, on the injected clock, and asked again
    assert sleeps.waits == [7.0]
    assert maxmind.api.paths()[:2] == ["/geoip/updates/metadata"] * 2


def test_a_retry_after_longer_than_a_run_waits_fails_the_run_at_once(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    maxmind.api.inject(Reply(429, headers={"Retry-After": "86400"}))
    with pytest.raises(FeedError, match="asks to wait 86400 s") as error:
        update(feed_of(maxmind, sleeps), feed_states, tmp_path / "out")
    assert error.value.code == "FEED_UNAVAILABLE"
    assert sleeps.waits == []


def test_5xx_is_retried_with_growing_backoff(
    maxmind: FakeMaxMind, sleeps: Sleeps, tmp_path: Path, feed_states: FeedStates
) -> None:
    maxmind.api.inject(Reply(500), Reply(502))
    fetched = update(feed_of(maxmind, sleeps), feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    # 1 s then 2 s, at the jitter's middle (0.75 of each)
    assert sleeps.waits == [0.75, 1.5]
