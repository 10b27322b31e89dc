"""Unpacking and verifying without the network: exactly the files expected, whole, or nothing at all."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from loader.feeds.archives import ArchiveLayout, Extraction, FileRole, Member, extract_tar_gz, extract_zip
from loader.feeds.errors import DownloadRejected, FeedError
from loader.feeds.feed import Release, conditional_headers
from loader.feeds.fetch import FeedCheck
from loader.feeds.http_client import display_url, retry_after_seconds
from loader.feeds.verify import Checksum, DirectorySinks, GzipCheck
from loader.formats import FORMATS
from loader.records import FeedState
from tests.fakes.releases import Entry, maxmind_tarball, tar_gz, zip_bytes

FOLDER = "GeoLite2-ASN_20261124"
LAYOUT = ArchiveLayout(re.compile(r"GeoLite2-ASN_\d{8}"), (Member("GeoLite2-ASN.mmdb", FileRole.DATABASE),))


def unpack(tmp_path: Path, archive: bytes, kind: str = "tar.gz", cap: int = 1 << 20) -> list[str]:
    path = tmp_path / f"archive.{kind}"
    path.write_bytes(archive)
    extraction = Extraction(
        "maxmind:GeoLite2-ASN", "the archive", LAYOUT, DirectorySinks(tmp_path / "out"), cap
    )
    try:
        (extract_tar_gz if kind == "tar.gz" else extract_zip)(path, extraction)
    except FeedError:
        extraction.abort()
        raise
    for sink in extraction.open_sinks:
        sink.close()
    return [file.name for file in extraction.files]


def left_behind(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in (tmp_path / "out").glob("*"))


def test_the_wanted_member_is_extracted_under_its_plain_name_and_the_licence_skipped(tmp_path: Path) -> None:
    assert unpack(tmp_path, maxmind_tarball("GeoLite2-ASN", "2026-11-24", b"mmdb bytes")) == [
        "GeoLite2-ASN.mmdb"
    ]
    assert (tmp_path / "out" / "GeoLite2-ASN.mmdb").read_bytes() == b"mmdb bytes"
    assert left_behind(tmp_path) == ["GeoLite2-ASN.mmdb"]


UNSAFE = {
    "../ in a name": [
        Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", b"ok"),
        Entry(f"{FOLDER}/../../etc/cron.d/x", b"x"),
    ],
    "an absolute name": [Entry("/etc/passwd", b"x")],
    "a symlink": [Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", kind="symlink", target="/etc/shadow")],
    "a hard link": [
        Entry(f"{FOLDER}/a", b"x"),
        Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", kind="hardlink", target="a"),
    ],
    "a member outside the dated folder": [Entry("GeoLite2-ASN.mmdb", b"x")],
    "a folder inside the folder": [Entry(f"{FOLDER}/sub", kind="dir")],
    "an unexpected file": [Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", b"ok"), Entry(f"{FOLDER}/install.sh", b"x")],
    "a member twice": [
        Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", b"a"),
        Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", b"b"),
    ],
    "no database": [Entry(f"{FOLDER}/LICENSE.txt", b"licence")],
}


@pytest.mark.parametrize(
    ("case", "kind"),
    # zip has no hard links
    [(case, kind) for case in UNSAFE for kind in ("tar.gz", "zip") if (case, kind) != ("a hard link", "zip")],
)
def test_an_unsafe_or_unexpected_archive_is_refused_and_leaves_nothing(
    tmp_path: Path, case: str, kind: str
) -> None:
    entries = UNSAFE[case]
    archive = tar_gz(entries) if kind == "tar.gz" else zip_bytes(entries)
    with pytest.raises(FeedError) as error:
        unpack(tmp_path, archive, kind)
    assert error.value.code == "FEED_ARCHIVE_REJECTED"
    assert "refused, nothing extracted" in str(error.value)
    assert left_behind(tmp_path) == []


def test_an_archive_that_unpacks_past_the_cap_is_refused(tmp_path: Path) -> None:
    # A zip bomb's shape: a megabyte of zeros packs into about a kilobyte
    bomb = zip_bytes([Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", bytes(1 << 20))])
    assert len(bomb) < 8192
    with pytest.raises(FeedError) as error:
        unpack(tmp_path, bomb, "zip", cap=64 << 10)
    assert error.value.code == "FEED_DOWNLOAD_TOO_LARGE"
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_a_cut_off_or_corrupt_archive_is_refused(tmp_path: Path, kind: str) -> None:
    entries = [Entry(f"{FOLDER}/GeoLite2-ASN.mmdb", bytes(range(256)) * 64)]
    whole = tar_gz(entries) if kind == "tar.gz" else zip_bytes(entries)
    corrupt = bytearray(whole)
    corrupt[len(corrupt) // 2] ^= 0xFF
    for archive in (whole[: len(whole) // 2], bytes(corrupt)):
        with pytest.raises(DownloadRejected):
            unpack(tmp_path, archive, kind)
        assert left_behind(tmp_path) == []


def test_gzip_check_accepts_concatenated_members_and_refuses_a_cut_or_a_flipped_bit() -> None:
    data = gzip.compress(b"a" * 5000) + gzip.compress(b"b" * 5000)
    whole = GzipCheck("f", "x.gz", cap=1 << 20)
    for start in range(0, len(data), 7):
        whole.update(data[start : start + 7])
    whole.finish()
    assert whole.inflated == 10_000
    cut = GzipCheck("f", "x.gz", cap=1 << 20)
    cut.update(data[:-5])
    with pytest.raises(DownloadRejected, match="ends in the middle"):
        cut.finish()
    flipped = bytearray(gzip.compress(bytes(range(256)) * 40))
    flipped[-6] ^= 0x01  # in the CRC-32 trailer
    with pytest.raises(DownloadRejected, match="corrupt"):
        GzipCheck("f", "x.gz", cap=1 << 20).update(bytes(flipped))


def test_a_gzip_that_inflates_past_the_cap_is_refused() -> None:
    with pytest.raises(DownloadRejected, match="inflates past"):
        GzipCheck("f", "x.gz", cap=1000).update(gzip.compress(bytes(1 << 20)))


def test_a_sink_that_is_aborted_leaves_no_file_and_a_closed_one_is_whole(tmp_path: Path) -> None:
    sinks = DirectorySinks(tmp_path)
    aborted, closed = sinks.open("a.mmdb"), sinks.open("b.mmdb")
    aborted.write(b"partial")
    closed.write(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mmdb.part", "b.mmdb.part"]
    aborted.abort()
    closed.close()
    assert [p.name for p in tmp_path.iterdir()] == ["b.mmdb"]
    with pytest.raises(ValueError, match="plain file name"):
        sinks.open("../escape")


def test_checksums_are_hex_of_the_right_length() -> None:
    assert (
        Checksum.parse("md5", " D41D8CD98F00B204E9800998ECF8427E\n", feed="f").hex
        == "d41d8cd98f00b204e9800998ecf8427e"
    )
    with pytest.raises(FeedError, match="not a sha256 hex digest"):
        Checksum.parse("sha256", "d41d8cd98f00b204e9800998ecf8427e", feed="f")


def test_retry_after_is_seconds_or_an_http_date() -> None:
    assert retry_after_seconds("7", now=0.0) == 7.0
    assert retry_after_seconds("Thu, 01 Jan 1970 00:01:40 GMT", now=40.0) == 60.0
    assert retry_after_seconds("soon", now=0.0) is None
    assert retry_after_seconds(None, now=0.0) is None


def test_errors_and_logs_show_urls_without_their_query_or_user() -> None:
    assert (
        display_url("https://user:pw@h.example:8443/a/b.mmdb?token=x&sig=y")
        == "https://h.example:8443/a/b.mmdb"
    )


def test_a_release_is_the_one_loaded_when_its_id_and_checksum_or_etag_agree() -> None:
    checksum = Checksum("md5", "0" * 32, "x.mmdb")
    release = Release("maxmind:X", "2026-11-24", checksum=checksum)
    assert release.same_as(FeedState("maxmind:X", "2026-11-24", "md5:" + "0" * 32))
    assert not release.same_as(FeedState("maxmind:X", "2026-11-24", "md5:" + "1" * 32))
    assert not release.same_as(FeedState("maxmind:X", "2026-11-21", "md5:" + "0" * 32))
    assert not release.same_as(None)
    month = Release("dbip:city-lite", "2026-11", etag='"b"')
    assert not month.same_as(FeedState("dbip:city-lite", "2026-11", etag='"a"'))
    # A server with no validators gives no way to tell: every run fetches
    assert not Release("url:x", "").same_as(FeedState("url:x", ""))
    assert conditional_headers(FeedState("u", "1", etag='"a"', last_modified="Tue")) == {
        "If-None-Match": '"a"',
        "If-Modified-Since": "Tue",
    }
    assert (
        FeedCheck(month, None).describe()
        == "dbip:city-lite: would fetch dbip:city-lite release 2026-11; none loaded yet"
    )


def test_every_load_format_a_feed_names_is_one_the_loader_reads() -> None:
    from typing import get_args

    from loader.feeds.feed import LoadFormat

    assert set(get_args(LoadFormat)) <= set(FORMATS)
