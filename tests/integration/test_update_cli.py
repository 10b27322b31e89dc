"""`ipmeta update` against fake vendors: a dataset per feed, one lookup over all, one request when unchanged.

The command runs in this process (``ipmeta_cli.main.main``) on the test's
dynalite table, as ``--table`` would on a deployed one: the feeds' state is in
the table. MaxMind is configured by a ``GeoIP.conf`` whose ``Host`` is the fake
server; DB-IP and IPinfo by ``--feed`` and ``--host``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli.main import main
from loader.feeds.dbip import month_of, utc_today
from loader.store.table import LoaderTable
from tests.fakes.releases import Entry, gzipped, maxmind_city_csv_zip, maxmind_tarball, md5_of, mmdb_bytes
from tests.fakes.vendors import Edition, FakeMaxMind, FakeServer, Reply, dbip_route, ipinfo_route, serving
from tests.integration.conftest import get_json, running_api_server

ACCOUNT, KEY = 42, "fake-licence-key-0123"
TOKEN = "fake-ipinfo-token-4567"
DATE = "2026-11-24"


def edition(name: str, date: str = DATE, md5: str | None = None) -> Edition:
    mmdb = mmdb_bytes(name, date)
    return Edition(date, maxmind_tarball(name, date, mmdb), md5 or md5_of(mmdb))


@pytest.fixture
def maxmind() -> Iterator[FakeMaxMind]:
    editions = {name: edition(name) for name in ("GeoLite2-Country", "GeoLite2-ASN")}
    with FakeMaxMind(ACCOUNT, KEY, editions) as fake:
        yield fake


def geoip_conf(tmp_path: Path, host: str, editions: str = "GeoLite2-Country GeoLite2-ASN") -> Path:
    path = tmp_path / "GeoIP.conf"
    settings = (f"AccountID {ACCOUNT}", f"LicenseKey {KEY}", f"EditionIDs {editions}", f"Host {host}")
    path.write_text("# as geoipupdate reads it\n" + "\n".join(settings) + "\n")
    return path


@dataclass
class Cli:
    """``ipmeta update`` on the test's table, and what it printed."""

    store: LoaderTable
    tmp_path: Path
    capsys: pytest.CaptureFixture[str]

    @property
    def data(self) -> Path:
        return self.tmp_path / "data"

    def update(self, *arguments: str) -> int:
        return main(["update", "--data-dir", str(self.data), *arguments])

    def printed(self) -> tuple[str, str]:
        captured = self.capsys.readouterr()
        return captured.out, captured.err

    def active(self, dataset: str) -> int | None:
        return self.store.for_dataset(dataset).lookup.read_active_version(consistent=True)


@pytest.fixture
def cli(
    store: LoaderTable, table_environment: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Cli:
    return Cli(store, tmp_path, capsys)


def answer(store: LoaderTable, ip: str) -> dict[str, Any]:
    with running_api_server(store) as server:
        status, body = get_json(server, f"/v1/ip/{ip}")
    assert status == 200, body
    return body


def test_a_geoip_conf_keeps_each_edition_in_its_own_dataset_and_a_second_run_is_unchanged(
    maxmind: FakeMaxMind, cli: Cli, tmp_path: Path
) -> None:
    conf = geoip_conf(tmp_path, maxmind.api.url)
    # When `ipmeta update --config GeoIP.conf` runs the first time
    assert cli.update("--config", str(conf)) == 0
    first = cli.printed()
    # Then each edition is loaded into a dataset named after it
    assert "into dataset geolite2-country" in first[0]
    assert "into dataset geolite2-asn" in first[0]
    assert (cli.active("geolite2-country"), cli.active("geolite2-asn")) == (1, 1)
    # And one lookup answers from both
    body = answer(cli.store, "1.0.0.1")
    datasets = body["datasets"]
    assert set(datasets) == {"geolite2-country", "geolite2-asn"}
    assert body["data"] == {**datasets["geolite2-country"]["data"], **datasets["geolite2-asn"]["data"]}
    assert "AU" in datasets["geolite2-country"]["data"].values()
    assert datasets["geolite2-asn"]["data"]["autonomous_system_number"] == 13335
    # When it runs again, on the same releases
    maxmind.api.forget()
    maxmind.storage.forget()
    assert cli.update("--config", str(conf)) == 0
    again = cli.printed()
    # Then each edition says "unchanged", after its metadata request and nothing else
    assert again[0].splitlines() == [
        "maxmind:GeoLite2-Country: unchanged (release 2026-11-24)",
        "maxmind:GeoLite2-ASN: unchanged (release 2026-11-24)",
    ]
    assert maxmind.api.paths() == ["/geoip/updates/metadata"] * 2
    assert maxmind.storage.paths() == []
    assert (cli.active("geolite2-country"), cli.active("geolite2-asn")) == (1, 1)
    # And the licence key was never printed
    assert KEY not in "".join((*first, *again))


def test_a_new_release_is_loaded_as_the_next_version(maxmind: FakeMaxMind, cli: Cli, tmp_path: Path) -> None:
    conf = geoip_conf(tmp_path, maxmind.api.url, "GeoLite2-Country")
    assert cli.update("--config", str(conf)) == 0
    maxmind.editions["GeoLite2-Country"] = edition("GeoLite2-Country", "2026-11-27")
    assert cli.update("--config", str(conf)) == 0
    assert cli.active("geolite2-country") == 2
    state = cli.store.for_dataset("geolite2-country").feed_states.get("maxmind:GeoLite2-Country")
    assert state is not None
    assert state.release_id == "2026-11-27"


NEXT = "2026-11-27"
NEXT_FOLDER = f"GeoLite2-Country_{NEXT.replace('-', '')}"


def bad_archive(*extra: Entry) -> Edition:
    """The next country release, its .mmdb as the metadata names it, with ``extra`` members."""
    mmdb = mmdb_bytes("GeoLite2-Country", NEXT)
    return Edition(NEXT, maxmind_tarball("GeoLite2-Country", NEXT, mmdb, *extra), md5_of(mmdb))


#: A bad next release of the country edition, and the code it is refused with.
BAD_RELEASES: dict[str, tuple[Callable[[], Edition], str]] = {
    "md5 mismatch": (lambda: edition("GeoLite2-Country", NEXT, md5="0" * 32), "FEED_CHECKSUM_MISMATCH"),
    "../ in a member's name": (
        lambda: bad_archive(Entry(f"{NEXT_FOLDER}/../../evil.mmdb", b"x")),
        "FEED_ARCHIVE_REJECTED",
    ),
    "a symlink member": (
        lambda: bad_archive(Entry(f"{NEXT_FOLDER}/GeoIP.conf", kind="symlink", target="/etc/passwd")),
        "FEED_ARCHIVE_REJECTED",
    ),
    "a member the edition does not publish": (
        lambda: bad_archive(Entry(f"{NEXT_FOLDER}/run.sh", b"#!/bin/sh\n")),
        "FEED_ARCHIVE_REJECTED",
    ),
    "truncated body": (lambda: edition("GeoLite2-Country", NEXT), "FEED_DOWNLOAD_TRUNCATED"),
}


@pytest.mark.parametrize("case", BAD_RELEASES)
def test_a_bad_release_loads_nothing_and_the_previous_version_keeps_serving(
    case: str, maxmind: FakeMaxMind, cli: Cli, tmp_path: Path
) -> None:
    # Given both editions loaded, and then a bad country release
    conf = geoip_conf(tmp_path, maxmind.api.url)
    assert cli.update("--config", str(conf)) == 0
    folder = cli.data / "feeds" / "geolite2-country"
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    published, code = BAD_RELEASES[case]
    maxmind.editions["GeoLite2-Country"] = published()
    if case == "truncated body":
        maxmind.storage.inject(Reply(200, maxmind.editions["GeoLite2-Country"].archive, cut_after=200))
    cli.printed()
    # When update runs
    status = cli.update("--config", str(conf))
    out, err = cli.printed()
    # Then that feed fails with a clear error, and the other one still runs
    assert status == 1
    assert "maxmind:GeoLite2-Country" in err
    assert f"({code})" in err
    assert "1 of 2 feeds failed: geolite2-country" in err
    assert out.splitlines() == ["maxmind:GeoLite2-ASN: unchanged (release 2026-11-24)"]
    # And nothing was loaded or remembered: version 1 serves, from the files it was loaded from
    country = cli.store.for_dataset("geolite2-country")
    assert [meta.version for meta in country.lookup.list_version_metas()] == [1]
    assert cli.active("geolite2-country") == 1
    state = country.feed_states.get("maxmind:GeoLite2-Country")
    assert state is not None
    assert state.release_id == DATE
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert "AU" in answer(cli.store, "1.0.0.1")["data"].values()
    assert KEY not in out + err


def test_a_wrong_key_is_refused_naming_the_account_and_loads_nothing(
    maxmind: FakeMaxMind, cli: Cli, tmp_path: Path
) -> None:
    maxmind.license_key = "another-key"
    assert cli.update("--config", str(geoip_conf(tmp_path, maxmind.api.url))) == 1
    err = cli.printed()[1]
    assert f"MaxMind account {ACCOUNT}" in err
    assert "(FEED_AUTH_REFUSED)" in err
    assert KEY not in err
    assert (cli.active("geolite2-country"), cli.active("geolite2-asn")) == (None, None)


def test_dry_run_says_what_it_would_fetch_and_fetches_nothing(
    maxmind: FakeMaxMind, cli: Cli, tmp_path: Path
) -> None:
    conf = geoip_conf(tmp_path, maxmind.api.url, "GeoLite2-ASN")
    assert cli.update("--config", str(conf), "--dry-run") == 0
    assert cli.printed()[0].splitlines() == [
        "maxmind:GeoLite2-ASN: would fetch maxmind:GeoLite2-ASN release 2026-11-24, published 2026-11-24; "
        "none loaded yet; into dataset geolite2-asn"
    ]
    assert maxmind.api.paths() == ["/geoip/updates/metadata"]
    assert cli.active("geolite2-asn") is None


@pytest.fixture
def dbip() -> Iterator[FakeServer]:
    published = {
        f"dbip-country-lite-{month_of(utc_today())}.mmdb.gz": gzipped(mmdb_bytes("DBIP-Country-Lite"))
    }
    with serving(dbip_route(published)) as server:
        yield server


@pytest.fixture
def ipinfo() -> Iterator[FakeServer]:
    with serving(ipinfo_route(TOKEN, {"ipinfo_lite.mmdb": mmdb_bytes("ipinfo lite")})) as server:
        yield server


@dataclass(frozen=True)
class VendorCase:
    fixture: str
    spec: str
    dataset: str
    base_path: str


@pytest.mark.parametrize(
    "case",
    [
        VendorCase("dbip", "dbip:country-lite", "dbip-country-lite", "/free"),
        VendorCase("ipinfo", "ipinfo:ipinfo_lite", "ipinfo-lite", "/data"),
    ],
    ids=lambda case: case.fixture,
)
def test_dbip_and_ipinfo_feeds_load_into_their_datasets_and_a_second_run_is_unchanged(
    case: VendorCase, request: pytest.FixtureRequest, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: FakeServer = request.getfixturevalue(case.fixture)
    monkeypatch.setenv("IPINFO_TOKEN", TOKEN)
    arguments = ("--feed", case.spec, "--host", f"{server.url}{case.base_path}")
    # The first run loads the release into the feed's dataset
    assert cli.update(*arguments) == 0
    assert f"into dataset {case.dataset}" in cli.printed()[0]
    assert cli.active(case.dataset) == 1
    assert "AU" in answer(cli.store, "1.0.0.1")["datasets"][case.dataset]["data"].values()
    # The second run sends one small request and loads nothing
    server.forget()
    assert cli.update(*arguments) == 0
    out, err = cli.printed()
    assert out.startswith(f"{case.spec}: unchanged")
    assert len(server.seen) == 1
    assert cli.active(case.dataset) == 1
    assert TOKEN not in out + err
    assert TOKEN not in " ".join(seen.path + str(seen.query) for seen in server.seen)


def test_one_lookup_answers_from_every_feeds_dataset(
    maxmind: FakeMaxMind, dbip: FakeServer, cli: Cli, tmp_path: Path
) -> None:
    assert cli.update("--config", str(geoip_conf(tmp_path, maxmind.api.url))) == 0
    assert cli.update("--feed", "dbip:country-lite", "--host", f"{dbip.url}/free") == 0
    body = answer(cli.store, "8.8.8.8")
    assert set(body["datasets"]) == {"geolite2-country", "geolite2-asn", "dbip-country-lite"}
    assert body["data"]["autonomous_system_number"] == 15169


def test_feeds_are_refused_before_anything_runs_when_two_share_a_dataset_or_a_credential_is_missing(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IPINFO_TOKEN", raising=False)
    assert cli.update("--feed", "city=dbip:city-lite", "--feed", "city=dbip:asn-lite") == 2
    assert "two feeds load into dataset city" in cli.printed()[1]
    assert cli.update("--feed", "ipinfo:ipinfo_lite") == 2
    assert "set the environment variable IPINFO_TOKEN" in cli.printed()[1]
    assert cli.active("city") is None


def test_a_csv_edition_loads_its_blocks_and_locations_as_one_version(tmp_path: Path, cli: Cli) -> None:
    published = Edition(DATE, maxmind_city_csv_zip(DATE), md5_of(b"csv release"))
    with FakeMaxMind(ACCOUNT, KEY, {"GeoLite2-City-CSV": published}) as maxmind:
        conf = geoip_conf(tmp_path, maxmind.api.url, "GeoLite2-City-CSV")
        assert cli.update("--config", str(conf)) == 0
    # Both Blocks files and the English Locations file, one version
    assert cli.active("geolite2-city-csv") == 1
    [load] = cli.store.for_dataset("geolite2-city-csv").loads.list_all()
    assert [Path(source).name for source in load.sources] == [
        "GeoLite2-City-Blocks-IPv4.csv",
        "GeoLite2-City-Blocks-IPv6.csv",
    ]
    assert load.options.format == "geoip2-csv"
    assert Path(str(load.options.locations)).name == "GeoLite2-City-Locations-en.csv"
    assert answer(cli.store, "1.0.0.1")["data"]["country_iso_code"] == "AU"
    assert answer(cli.store, "2001:200::1")["data"]["country_iso_code"] == "JP"
