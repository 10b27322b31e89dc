"""DB-IP Lite, IPinfo and plain-URL feeds against fake servers on 127.0.0.1.

DB-IP: the month's file, the fall back to the month before while the new one
is not out, a conditional GET for the month loaded last. IPinfo: its
checksums endpoint, the token in a header and never in a URL. A plain URL:
its checksum file, or a conditional GET; headers from a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from loader.feeds.credentials import Secret
from loader.feeds.dbip import DbipFeed
from loader.feeds.errors import FeedConfigInvalid, FeedError
from loader.feeds.fetch import FeedCheck, FetchedRelease
from loader.feeds.ipinfo import IpinfoFeed
from loader.feeds.url import UrlFeed
from loader.store.feed_states import FeedStates
from tests.fakes.releases import gzipped, mmdb_bytes
from tests.fakes.vendors import FakeServer, Reply, dbip_route, file_route, ipinfo_route, serving
from tests.integration.feeds import (
    Sleeps,
    assert_refused_cleanly,
    fetched_then_recorded,
    files_in,
    quick_http,
    rerun_unchanged,
    run,
)

NOVEMBER = gzipped(mmdb_bytes("DBIP-City-Lite", "2026-11"))
DECEMBER = gzipped(mmdb_bytes("DBIP-City-Lite", "2026-12"))


# -- DB-IP ---------------------------------------------------------------------------------------


@pytest.fixture
def dbip_files() -> dict[str, bytes]:
    return {"dbip-city-lite-2026-11.mmdb.gz": NOVEMBER}


@pytest.fixture
def dbip(dbip_files: dict[str, bytes]) -> Iterator[FakeServer]:
    with serving(dbip_route(dbip_files)) as server:
        yield server


def dbip_feed(server: FakeServer, today: date, sleeps: Sleeps | None = None) -> DbipFeed:
    http = quick_http(sleeps or Sleeps(), timeout=0.3, attempts=1)
    return DbipFeed("city-lite", http, base_url=f"{server.url}/free", today=lambda: today)


def test_dbip_fetches_the_months_file_and_keeps_it_compressed(
    dbip: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    fetched = run(dbip_feed(dbip, date(2026, 11, 20)), feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    assert (fetched.release.release_id, fetched.load_format) == ("2026-11", "mmdb")
    # One name for every month: the release id says which month it is
    assert (tmp_path / "out" / "dbip-city-lite.mmdb.gz").read_bytes() == NOVEMBER
    # A look at the headers (the body left unread), then the download
    assert dbip.paths() == ["/free/dbip-city-lite-2026-11.mmdb.gz"] * 2


def test_dbip_unchanged_month_is_one_conditional_request(
    dbip: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = dbip_feed(dbip, date(2026, 11, 20))
    fetched_then_recorded(feed, feed_states, tmp_path / "first")
    rerun_unchanged(feed, feed_states, tmp_path / "second", dbip)
    # One request, conditional on the ETag and date loaded last, answered 304
    assert dbip.paths() == ["/free/dbip-city-lite-2026-11.mmdb.gz"]
    assert dbip.seen[0].headers["if-none-match"].startswith('"')
    assert "if-modified-since" in dbip.seen[0].headers


def test_dbip_month_rollover_falls_back_until_the_new_month_is_out(
    dbip: FakeServer, dbip_files: dict[str, bytes], tmp_path: Path, feed_states: FeedStates
) -> None:
    fetched_then_recorded(dbip_feed(dbip, date(2026, 11, 20)), feed_states, tmp_path / "nov")
    dbip.forget()
    # On December 1st the December file is not out yet: November, loaded already, is the latest
    december_first = dbip_feed(dbip, date(2026, 12, 1))
    check = run(december_first, feed_states, tmp_path / "dec1")
    assert isinstance(check, FeedCheck)
    assert (check.unchanged, check.release.release_id) == (True, "2026-11")
    assert dbip.paths() == ["/free/dbip-city-lite-2026-12.mmdb.gz", "/free/dbip-city-lite-2026-11.mmdb.gz"]
    # Once DB-IP publishes December, the next run fetches it
    dbip_files["dbip-city-lite-2026-12.mmdb.gz"] = DECEMBER
    fetched = run(december_first, feed_states, tmp_path / "dec2")
    assert isinstance(fetched, FetchedRelease)
    assert fetched.release.release_id == "2026-12"
    assert (tmp_path / "dec2" / "dbip-city-lite.mmdb.gz").read_bytes() == DECEMBER


def test_january_falls_back_to_december_of_the_year_before(tmp_path: Path, feed_states: FeedStates) -> None:
    with serving(
        dbip_route({"dbip-asn-lite-2026-12.csv.gz": gzipped(b"1.0.0.0,1.0.0.255,13335,Cloudflare\n")})
    ) as server:
        feed = DbipFeed(
            "asn-lite",
            quick_http(Sleeps()),
            file_format="csv",
            base_url=f"{server.url}/free",
            today=lambda: date(2027, 1, 2),
        )
        fetched = run(feed, feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    assert (fetched.release.release_id, fetched.load_format, fetched.sources) == (
        "2026-12",
        "dbip-csv",
        ["dbip-asn-lite.csv.gz"],
    )


DBIP_BAD_CASES = {
    "neither month published": "FEED_NOT_FOUND",
    "truncated body": "FEED_DOWNLOAD_TRUNCATED",
    "corrupt gzip": "FEED_DOWNLOAD_REJECTED",
    "gzip cut short inside, whole over HTTP": "FEED_DOWNLOAD_TRUNCATED",
    "a stall in the middle of the body": "FEED_TIMEOUT",
}


@pytest.mark.parametrize("case", DBIP_BAD_CASES)
def test_dbip_bad_downloads_are_refused_and_leave_no_file(  # noqa: PLR0917 - pytest passes fixtures by position
    case: str,
    dbip: FakeServer,
    dbip_files: dict[str, bytes],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    feed_states: FeedStates,
) -> None:
    corrupt = bytearray(NOVEMBER)
    corrupt[len(corrupt) // 2] ^= 0xFF
    headers = Reply(200, b"")  # the look at the headers, before the download
    replies = {
        "truncated body": Reply(200, NOVEMBER, cut_after=len(NOVEMBER) // 2),
        "corrupt gzip": Reply(200, bytes(corrupt)),
        "gzip cut short inside, whole over HTTP": Reply(200, NOVEMBER[:-12]),
        "a stall in the middle of the body": Reply(200, NOVEMBER, stall_after=100, stall_seconds=5.0),
    }
    if case == "neither month published":
        dbip_files.clear()
    else:
        dbip.inject(headers, replies[case])
    with pytest.raises(FeedError) as error:
        run(dbip_feed(dbip, date(2026, 11, 20)), feed_states, tmp_path / "out")
    assert_refused_cleanly(error, DBIP_BAD_CASES[case], [], caplog)
    assert files_in(tmp_path / "out") == []


# -- IPinfo --------------------------------------------------------------------------------------

TOKEN = "ipinfo-t0ken-9f8e7d"
LITE = mmdb_bytes("ipinfo lite.mmdb", "lite")


@pytest.fixture
def ipinfo() -> Iterator[FakeServer]:
    with serving(ipinfo_route(TOKEN, {"ipinfo_lite.mmdb": LITE, "free/country_asn.mmdb": LITE})) as server:
        yield server


def ipinfo_feed(server: FakeServer, token: str = TOKEN, edition: str = "ipinfo_lite") -> IpinfoFeed:
    return IpinfoFeed(edition, Secret(token), quick_http(Sleeps()), base_url=f"{server.url}/data")


def test_ipinfo_fetches_by_its_checksums_and_never_puts_the_token_in_a_url(
    ipinfo: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = ipinfo_feed(ipinfo)
    fetched = fetched_then_recorded(feed, feed_states, tmp_path / "first")
    assert (tmp_path / "first" / "ipinfo_lite.mmdb").read_bytes() == LITE
    assert fetched.release.checksum is not None
    assert fetched.release.checksum.algorithm == "sha256"
    assert ipinfo.paths() == ["/data/ipinfo_lite.mmdb/checksums", "/data/ipinfo_lite.mmdb"]
    assert all("token" not in seen.query for seen in ipinfo.seen)
    # Unchanged: the checksums request alone
    rerun_unchanged(feed, feed_states, tmp_path / "second", ipinfo)
    assert ipinfo.paths() == ["/data/ipinfo_lite.mmdb/checksums"]


def test_ipinfo_older_free_databases_are_under_free(
    ipinfo: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    fetched = run(ipinfo_feed(ipinfo, edition="country_asn"), feed_states, tmp_path / "out")
    assert isinstance(fetched, FetchedRelease)
    assert ipinfo.paths()[0] == "/data/free/country_asn.mmdb/checksums"


def test_ipinfo_wrong_token_names_the_feed_never_the_token(
    ipinfo: FakeServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, feed_states: FeedStates
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(FeedError) as error:
        run(ipinfo_feed(ipinfo, token="wrong-t0ken-123"), feed_states, tmp_path / "out")
    assert_refused_cleanly(error, "FEED_AUTH_REFUSED", ["wrong-t0ken-123", TOKEN], caplog)
    assert "ipinfo:ipinfo_lite" in str(error.value)


def test_ipinfo_checksum_mismatch_is_refused(
    ipinfo: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    # The checksums announce other bytes than the file served
    served = ipinfo_route(TOKEN, {"ipinfo_lite.mmdb": LITE})
    announced = ipinfo_route(TOKEN, {"ipinfo_lite.mmdb": b"another file"})
    ipinfo.route = lambda seen: (announced if seen.path.endswith("/checksums") else served)(seen)
    with pytest.raises(FeedError) as error:
        run(ipinfo_feed(ipinfo), feed_states, tmp_path / "out")
    assert error.value.code == "FEED_CHECKSUM_MISMATCH"
    assert files_in(tmp_path / "out") == []


# -- A plain URL ---------------------------------------------------------------------------------

BEARER = "Bearer url-s3cret-abc"
CSV = gzipped(b"network,asn\n1.0.0.0/24,13335\n")


@pytest.fixture
def files() -> Iterator[FakeServer]:
    with serving(file_route({"asn.csv.gz": CSV}, {"Authorization": BEARER})) as server:
        yield server


def url_feed(server: FakeServer, *, checksum: bool, bearer: str = BEARER) -> UrlFeed:
    return UrlFeed(
        f"{server.url}/files/asn.csv.gz",
        quick_http(Sleeps()),
        checksum_url=f"{server.url}/files/asn.csv.gz.sha256" if checksum else None,
        headers={"Authorization": Secret(bearer)},
    )


def test_a_url_with_a_checksum_file_is_checked_and_skipped_when_unchanged(
    files: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = url_feed(files, checksum=True)
    fetched = fetched_then_recorded(feed, feed_states, tmp_path / "first")
    assert (fetched.load_format, fetched.sources) == ("csv", ["asn.csv.gz"])
    rerun_unchanged(feed, feed_states, tmp_path / "second", files)
    assert files.paths() == ["/files/asn.csv.gz.sha256"]


def test_a_url_without_a_checksum_is_asked_with_a_conditional_get(
    files: FakeServer, tmp_path: Path, feed_states: FeedStates
) -> None:
    feed = url_feed(files, checksum=False)
    fetched_then_recorded(feed, feed_states, tmp_path / "first")
    rerun_unchanged(feed, feed_states, tmp_path / "second", files)
    assert files.paths() == ["/files/asn.csv.gz"]
    assert "if-none-match" in files.seen[0].headers
    # The secret's header went with every request
    assert all(seen.headers["authorization"] == BEARER for seen in files.seen)


def test_a_url_refused_for_its_headers_names_the_feed_never_the_header(
    files: FakeServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, feed_states: FeedStates
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(FeedError) as error:
        run(url_feed(files, checksum=True, bearer="Bearer wrong-s3cret"), feed_states, tmp_path / "out")
    assert_refused_cleanly(error, "FEED_AUTH_REFUSED", ["wrong-s3cret", BEARER], caplog)


def test_a_plain_http_url_is_refused_unless_it_is_loopback() -> None:
    with pytest.raises(FeedConfigInvalid, match="not an https URL"):
        UrlFeed("http://example.com/a.csv", quick_http(Sleeps()))
    assert UrlFeed("http://[::1]:8080/a.csv", quick_http(Sleeps())).file_name == "a.csv"
