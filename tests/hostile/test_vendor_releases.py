"""Hostile vendor releases: what a feed downloads (archives, checksums, slow, huge or cut-off servers, names).

Every case is named by what the vendor sends. The fetch must refuse it with its
stable code, leave no file behind (not a ``.part``, not the scratch copy of the
archive), and, through ``ipmeta update``, leave the dataset that served serving.
The servers are the fake vendors of ``tests/fakes/vendors.py`` on 127.0.0.1; a
slow server sends a byte at a time and stops when the test does. Bombs are
built small: a gibibyte of zeros is two thousand gzip members of one mebibyte.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.main import main
from loader.errors import LoadError
from loader.feeds.credentials import MaxMindAccount, Secret
from loader.feeds.fetch import FetchLimits
from loader.feeds.http_client import HttpClient, HttpSettings
from loader.feeds.maxmind import MaxMindFeed
from loader.feeds.verify import DirectorySinks
from loader.records import FeedState
from loader.store.table import LoaderTable
from tests.fakes.releases import (
    CITY_BLOCKS_V6,
    CITY_LOCATIONS,
    Entry,
    maxmind_city_csv_zip,
    maxmind_tarball,
    md5_of,
    mmdb_bytes,
    tar_gz,
    zip_bytes,
)
from tests.fakes.vendors import Edition, FakeMaxMind, Reply, serving
from tests.integration.conftest import dynalite_endpoint, store, table_environment, table_settings
from tests.integration.feeds import check_then_fetch

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT, KEY = 42, "hostile-licence-key-0123"
COUNTRY, CITY_CSV = "GeoLite2-Country", "GeoLite2-City-CSV"
DATE = "2026-11-24"
FOLDER = f"{COUNTRY}_20261124"
CSV_FOLDER = f"{CITY_CSV}_20261124"
MMDB = mmdb_bytes(COUNTRY, DATE)
MIB = 1 << 20
#: Unpacking is capped lower than the default 16 GiB, so a bomb is refused in a blink.
LIMITS = FetchLimits(max_download_bytes=16 * MIB, max_unpacked_bytes=64 * MIB)


class NoFeedStateYet:
    """A feed's first run: no release loaded before, and a refused one is never recorded."""

    def get(self, feed: str) -> FeedState | None:
        return None

    def put(self, state: FeedState) -> None:
        raise AssertionError(f"a refused release was recorded: {state}")


__all__ = ["dynalite_endpoint", "store", "table_environment", "table_settings"]  # the integration fixtures


# -- archives built to hurt -------------------------------------------------------------------------


def zeros_gzip(mebibytes: int) -> bytes:
    """``mebibytes`` MiB of zeros as a valid gzip of ~1 KB a MiB: one member repeated."""
    return gzip.compress(b"\x00" * MIB, compresslevel=9, mtime=0) * mebibytes


def tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mtime = size, kind, 1_790_000_000
    return info.tobuf(format=tarfile.GNU_FORMAT)


def tar_member(name: str, data: bytes) -> bytes:
    return tar_header(name, len(data)) + data + b"\x00" * (-len(data) % 512)


def trailing_zeros(gib: int = 2) -> bytes:
    """A whole release, then ``gib`` GiB of zeros inside the gzip, after the tar's end."""
    return maxmind_tarball(COUNTRY, DATE, MMDB) + zeros_gzip(gib * 1024)


def skipped_member_of(gib: int = 2) -> bytes:
    """LICENSE.txt of ``gib`` GiB of zeros (a member the edition skips, read through), then the database."""
    head = tar_header(f"{FOLDER}/", 0, tarfile.DIRTYPE) + tar_header(f"{FOLDER}/LICENSE.txt", gib << 30)
    tail = tar_member(f"{FOLDER}/{COUNTRY}.mmdb", MMDB) + b"\x00" * 1024
    return gzip.compress(head, mtime=0) + zeros_gzip(gib * 1024) + gzip.compress(tail, mtime=0)


def tar_with(*members: tuple[str, bytes, bytes]) -> bytes:
    """A ``.tar.gz`` of ``(name, type, data)``: the types ``Entry`` cannot say (FIFOs, devices)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data)
            archive.addfile(info, io.BytesIO(data) if data else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def crc_flipped(gzipped: bytes) -> bytes:
    """The gzip trailer's CRC-32 (its last 8 bytes: CRC, then length) with one byte flipped."""
    return gzipped[:-8] + bytes([gzipped[-8] ^ 0xFF]) + gzipped[-7:]


def with_database(*extra: Entry) -> bytes:
    return tar_gz([Entry(FOLDER, kind="dir"), Entry(f"{FOLDER}/{COUNTRY}.mmdb", MMDB), *extra])


def csv_zip(*entries: Entry) -> bytes:
    return zip_bytes([Entry(CSV_FOLDER, kind="dir"), *entries])


def encrypted_zip() -> bytes:
    archive = bytearray(maxmind_city_csv_zip(DATE))
    # The general-purpose flag's bit 0, in the local header and the central directory's entry.
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = archive.index(signature)
        archive[at + offset] |= 1
    return bytes(archive)


def zip_bomb() -> bytes:
    """A Blocks file of 80 MiB of zeros, deflated to about 80 KB."""
    return csv_zip(
        Entry(f"{CSV_FOLDER}/GeoLite2-City-Blocks-IPv4.csv", b"\x00" * (80 * MIB)),
        Entry(f"{CSV_FOLDER}/GeoLite2-City-Blocks-IPv6.csv", CITY_BLOCKS_V6),
        Entry(f"{CSV_FOLDER}/GeoLite2-City-Locations-en.csv", CITY_LOCATIONS),
    )


@dataclass(frozen=True)
class Case:
    """What the vendor publishes, and the refusal expected."""

    archive: Callable[[], bytes]
    code: str
    pattern: str
    edition: str = COUNTRY
    #: The metadata's md5 of the .mmdb (MMDB's by default: the archive is the lie).
    md5: str = md5_of(MMDB)
    #: Answers the download itself (the storage server), when set.
    reply: Callable[[bytes], Reply] | None = None
    limits: FetchLimits = LIMITS


CASES: dict[str, Case] = {
    "tar-trailing-zeros-2gib": Case(
        trailing_zeros, "FEED_DOWNLOAD_TOO_LARGE", r"inflates past the feed's cap"
    ),
    "tar-skipped-member-2gib": Case(
        skipped_member_of, "FEED_DOWNLOAD_TOO_LARGE", r"inflates past the feed's cap"
    ),
    "tar-member-dotdot": Case(
        lambda: with_database(Entry(f"{FOLDER}/../../etc/cron.d/ipmeta", b"* * * * * root sh\n")),
        "FEED_ARCHIVE_REJECTED",
        r"member '.*\.\./\.\./etc/cron.d/ipmeta' has a path outside the archive",
    ),
    "tar-member-absolute-path": Case(
        lambda: with_database(Entry("/etc/passwd", b"root:x:0:0\n")),
        "FEED_ARCHIVE_REJECTED",
        r"member '/etc/passwd' has a path outside the archive",
    ),
    "tar-member-backslash": Case(
        lambda: with_database(Entry(f"{FOLDER}\\..\\x", b"x")),
        "FEED_ARCHIVE_REJECTED",
        r"has a path outside the archive",
    ),
    "tar-member-symlink": Case(
        lambda: tar_gz(
            [
                Entry(FOLDER, kind="dir"),
                Entry(f"{FOLDER}/{COUNTRY}.mmdb", kind="symlink", target="/etc/shadow"),
            ]
        ),
        "FEED_ARCHIVE_REJECTED",
        r"is a link or a special file",
    ),
    "tar-member-hardlink": Case(
        lambda: with_database(Entry(f"{FOLDER}/COPYRIGHT.txt", kind="hardlink", target="/etc/shadow")),
        "FEED_ARCHIVE_REJECTED",
        r"is a link or a special file",
    ),
    "tar-member-fifo": Case(
        lambda: tar_with((f"{FOLDER}/{COUNTRY}.mmdb", tarfile.FIFOTYPE, b"")),
        "FEED_ARCHIVE_REJECTED",
        r"is a link or a special file",
    ),
    "tar-member-device": Case(
        lambda: tar_with((f"{FOLDER}/{COUNTRY}.mmdb", tarfile.CHRTYPE, b"")),
        "FEED_ARCHIVE_REJECTED",
        r"is a link or a special file",
    ),
    "tar-nested-folder": Case(
        lambda: with_database(Entry(f"{FOLDER}/deeper", kind="dir")),
        "FEED_ARCHIVE_REJECTED",
        r"is a folder inside the release's folder",
    ),
    "tar-database-twice": Case(
        lambda: with_database(Entry(f"{FOLDER}/{COUNTRY}.mmdb", b"a second one")),
        "FEED_ARCHIVE_REJECTED",
        r"appears twice",
    ),
    "tar-unexpected-member": Case(
        lambda: with_database(Entry(f"{FOLDER}/install.sh", b"#!/bin/sh\n")),
        "FEED_ARCHIVE_REJECTED",
        r"is not a file this edition publishes",
    ),
    "tar-without-the-database": Case(
        lambda: tar_gz([Entry(FOLDER, kind="dir"), Entry(f"{FOLDER}/LICENSE.txt", b"licence\n")]),
        "FEED_ARCHIVE_REJECTED",
        rf"it holds no {COUNTRY}.mmdb",
    ),
    "tar-gz-truncated": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB)[:-100],
        "FEED_ARCHIVE_REJECTED",
        r"not a whole .tar.gz",
    ),
    "tar-gz-crc-mismatch": Case(
        lambda: crc_flipped(maxmind_tarball(COUNTRY, DATE, MMDB)),
        "FEED_ARCHIVE_REJECTED",
        r"not a whole .tar.gz",
    ),
    "checksum-md5-mismatch": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB),
        "FEED_CHECKSUM_MISMATCH",
        r"the vendor published 0{32}",
        md5="0" * 32,
    ),
    "server-200-with-html": Case(
        lambda: b"<html><body>Service temporarily unavailable</body></html>",
        "FEED_ARCHIVE_REJECTED",
        r"not a whole .tar.gz",
    ),
    "server-cuts-the-body": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB),
        "FEED_DOWNLOAD_TRUNCATED",
        r"announced \d+ bytes \(Content-Length\) and sent 100",
        reply=lambda body: Reply(200, body, cut_after=100),
    ),
    "server-announces-more-than-the-cap": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB),
        "FEED_DOWNLOAD_TOO_LARGE",
        r"announces \d+ bytes, more than the feed's cap of 100; refused before downloading",
        limits=FetchLimits(max_download_bytes=100),
    ),
    "server-trickles-the-body": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB),
        "FEED_TIMEOUT",
        r"did not finish within the deadline of 1 s",
        reply=lambda body: Reply(200, body, trickle_seconds=0.02),
    ),
    "server-trickles-the-headers": Case(
        lambda: maxmind_tarball(COUNTRY, DATE, MMDB),
        "FEED_TIMEOUT",
        r"did not finish within the deadline of 1 s",
        reply=lambda body: Reply(200, body, trickle_seconds=0.02, trickle_headers=True),
    ),
    "zip-member-dotdot": Case(
        lambda: csv_zip(Entry(f"{CSV_FOLDER}/../../../tmp/x.csv", b"x")),
        "FEED_ARCHIVE_REJECTED",
        r"has a path outside the archive",
        edition=CITY_CSV,
    ),
    "zip-member-symlink": Case(
        lambda: csv_zip(
            Entry(f"{CSV_FOLDER}/GeoLite2-City-Blocks-IPv4.csv", kind="symlink", target="/etc/passwd")
        ),
        "FEED_ARCHIVE_REJECTED",
        r"is a link or a special file",
        edition=CITY_CSV,
    ),
    "zip-member-encrypted": Case(encrypted_zip, "FEED_ARCHIVE_REJECTED", r"is encrypted", edition=CITY_CSV),
    "zip-bomb-80-mib-of-zeros": Case(
        zip_bomb, "FEED_DOWNLOAD_TOO_LARGE", r"unpacked is larger than the feed's cap", edition=CITY_CSV
    ),
    "zip-truncated": Case(
        lambda: maxmind_city_csv_zip(DATE)[:-40],
        "FEED_ARCHIVE_REJECTED",
        r"not a whole .zip",
        edition=CITY_CSV,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_release_is_refused_with_its_code_and_leaves_nothing(case: str, tmp_path: Path) -> None:
    expected = CASES[case]
    archive = expected.archive()
    assert len(archive) < 4 * MIB  # small on disk, whatever it inflates to
    published = Edition(DATE, archive, expected.md5)
    with FakeMaxMind(ACCOUNT, KEY, {expected.edition: published}) as vendor:
        if expected.reply is not None:
            vendor.storage.inject(expected.reply(archive))
        settings = HttpSettings(timeout_seconds=5.0, max_attempts=1, deadline_seconds=1.0)
        feed = MaxMindFeed(
            expected.edition, MaxMindAccount(ACCOUNT, Secret(KEY)), HttpClient(settings), host=vendor.api.url
        )
        began = time.monotonic()
        with pytest.raises(LoadError) as refusal:
            check_then_fetch(
                feed,
                NoFeedStateYet(),
                DirectorySinks(tmp_path / "out"),
                dataset="d",
                workdir=tmp_path,
                limits=expected.limits,
            )
    assert refusal.value.code == expected.code, refusal.value
    assert re.search(expected.pattern, str(refusal.value)), refusal.value
    assert str(refusal.value).startswith(f"maxmind:{expected.edition}: ")
    assert KEY not in str(refusal.value)
    # Nothing left: no file, no partial one, no scratch copy of the archive; and soon
    assert sorted(path.name for path in tmp_path.rglob("*") if path.is_file()) == []
    assert time.monotonic() - began < 10


def test_a_metadata_answer_of_ten_mebibytes_is_a_protocol_error(tmp_path: Path) -> None:
    """``metadata-answer-10-mib``: the metadata request expects a few hundred bytes."""
    with FakeMaxMind(
        ACCOUNT, KEY, {COUNTRY: Edition(DATE, maxmind_tarball(COUNTRY, DATE, MMDB), md5_of(MMDB))}
    ) as vendor:
        vendor.api.inject(Reply(200, b" " * (10 * MIB)))
        feed = MaxMindFeed(COUNTRY, MaxMindAccount(ACCOUNT, Secret(KEY)), HttpClient(), host=vendor.api.url)
        with pytest.raises(LoadError) as refusal:
            check_then_fetch(
                feed, NoFeedStateYet(), DirectorySinks(tmp_path / "out"), dataset="d", workdir=tmp_path
            )
    assert refusal.value.code == "FEED_PROTOCOL_ERROR"
    assert "answered more than" in str(refusal.value)


# -- through `ipmeta update`: a bad name, and a run killed in the middle of a download ------------------

RANGES = b"start,end,org\n1.0.0.0,1.0.0.255,first\n"


def test_a_url_feed_whose_file_name_is_dotdot_fails_alone_and_the_next_feed_runs(
    store: LoaderTable, table_environment: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``url-file-name-dotdot``: it gave a traceback, and the feeds after it never ran."""
    # A server that answers every path, "/files/.." too (a 404 would hide the name's danger)
    with serving(lambda seen: Reply(200, RANGES, {"ETag": '"ranges-1"'})) as server:
        status = main(
            [
                "update",
                "--data-dir",
                str(tmp_path / "data"),
                "--feed",
                f"bad=url:{server.url}/files/..",
                "--feed",
                f"good=url:{server.url}/files/ranges.csv",
            ]
        )
    out, err = capsys.readouterr()
    assert status == 1
    assert re.search(
        r"url: http://127\.0\.0\.1:\d+/files/\.\. names no file \('\.\.' is a folder\); "
        r"refused \(FEED_CONFIG_INVALID\)",
        err,
    ), err
    assert "1 of 2 feeds failed: bad" in err
    assert "Traceback" not in err
    # And the next feed ran, loaded and serves; nothing was written beside the feeds' folders
    assert store.for_dataset("good").lookup.read_active_version(consistent=True) == 1
    assert "loaded" in out
    assert store.for_dataset("bad").lookup.read_active_version(consistent=True) is None
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["feeds", "reports", "staging"]


@pytest.mark.parametrize(
    ("stop", "status"),
    [(signal.SIGTERM, 143), (signal.SIGINT, 130)],
    ids=["update-sigterm-mid-download", "update-sigint-mid-download"],
)
def test_a_killed_update_leaves_no_scratch_archive_and_no_partial_file(
    stop: signal.Signals, status: int, store: LoaderTable, table_settings: Settings, tmp_path: Path
) -> None:
    """A killed update left ``<data-dir>/ipmeta-feed-*/release.tar.gz`` behind."""
    data = tmp_path / "data"
    # Given a dataset already served from an earlier release, and a vendor that now sends slowly
    archive = maxmind_tarball(COUNTRY, DATE, MMDB) + b"\x00" * 4096
    with FakeMaxMind(ACCOUNT, KEY, {COUNTRY: Edition(DATE, archive, md5_of(MMDB))}) as vendor:
        vendor.storage.inject(Reply(200, archive, trickle_seconds=0.01))
        conf = tmp_path / "GeoIP.conf"
        conf.write_text(
            f"AccountID {ACCOUNT}\nLicenseKey {KEY}\nEditionIDs {COUNTRY}\nHost {vendor.api.url}\n"
        )
        environment = {
            **os.environ,
            ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint),
            ENV_TABLE_NAME: table_settings.table_name,
            "PYTHONPATH": f"{ROOT / 'lambdas'}{os.pathsep}{ROOT}",
        }
        command = [
            sys.executable,
            "-m",
            "ipmeta_cli.main",
            "update",
            "--config",
            str(conf),
            "--data-dir",
            str(data),
        ]
        child = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # When the scratch copy of the archive is being written, the update is stopped
        began = time.monotonic()
        while not list(data.glob("ipmeta-feed-*/release.tar.gz")) and time.monotonic() - began < 20:
            time.sleep(0.05)
        assert list(data.glob("ipmeta-feed-*/release.tar.gz")), "the download never started"
        child.send_signal(stop)
        _, err = child.communicate(timeout=30)
    # Then it leaves nothing of the release, ends by itself and says so
    assert list(data.glob("ipmeta-feed-*/*")) == []
    assert list(data.glob("ipmeta-feed-*")) == []
    assert [path.name for path in data.rglob("*") if path.is_file() and "feeds" in path.parts] == []
    assert child.returncode == status, err
    assert f"stopped by {stop.name}; nothing partial kept" in err.decode()
    assert store.for_dataset("geolite2-country").lookup.read_active_version(consistent=True) is None
