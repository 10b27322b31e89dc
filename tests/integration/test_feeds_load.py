"""What a feed fetches, a load reads: fetched from the fake MaxMind, loaded into dynalite, answered over HTTP.

The CLI's ``ipmeta update`` and the Fetch state will do these two steps; the
named datasets (one per feed) come with them. Here the load is the default
dataset's, through the same driver ``ipmeta load`` runs.
"""

from __future__ import annotations

from pathlib import Path

from loader.feeds.credentials import MaxMindAccount, Secret
from loader.feeds.fetch import FetchedRelease
from loader.feeds.maxmind import MaxMindFeed
from loader.feeds.verify import DirectorySinks
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.feed_states import FeedStates
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.fakes.releases import maxmind_city_csv_zip, maxmind_tarball, md5_of, mmdb_bytes
from tests.fakes.vendors import Edition, FakeMaxMind
from tests.integration.conftest import get_json, running_api_server
from tests.integration.feeds import Sleeps, check_then_fetch, quick_http

DATE = "2026-11-24"


def fetch(edition: str, published: Edition, out: Path, feed_states: FeedStates) -> FetchedRelease:
    with FakeMaxMind(7, "load-test-key", {edition: published}) as fake:
        feed = MaxMindFeed(
            edition, MaxMindAccount(7, Secret("load-test-key")), quick_http(Sleeps()), host=fake.api.url
        )
        fetched = check_then_fetch(feed, feed_states, DirectorySinks(out), dataset="test")
    assert isinstance(fetched, FetchedRelease)
    return fetched


def load(fetched: FetchedRelease, out: Path, store: LoaderTable, tmp_path: Path) -> None:
    locations = str(out / fetched.locations) if fetched.locations else None
    options = LoadOptions(format=fetched.load_format, locations=locations)
    result = driver.run_load(
        [out / name for name in fetched.sources], options, store, LocalStaging(tmp_path / "st")
    )
    assert result.status == "activated", result


def test_a_fetched_mmdb_edition_loads_and_answers(store: LoaderTable, tmp_path: Path) -> None:
    mmdb = mmdb_bytes("GeoLite2-Country", DATE)
    published = Edition(DATE, maxmind_tarball("GeoLite2-Country", DATE, mmdb), md5_of(mmdb))
    fetched = fetch("GeoLite2-Country", published, tmp_path / "out", store.feed_states)
    load(fetched, tmp_path / "out", store, tmp_path)
    with running_api_server(store) as server:
        status, body = get_json(server, "/v1/ip/1.0.0.1")
    assert status == 200, body
    assert "AU" in body["data"].values()


def test_a_fetched_csv_edition_loads_its_blocks_joined_with_its_locations(
    store: LoaderTable, tmp_path: Path
) -> None:
    published = Edition(DATE, maxmind_city_csv_zip(DATE), md5_of(b"csv"))
    fetched = fetch("GeoLite2-City-CSV", published, tmp_path / "out", store.feed_states)
    load(fetched, tmp_path / "out", store, tmp_path)
    with running_api_server(store) as server:
        answers = {ip: get_json(server, f"/v1/ip/{ip}") for ip in ("1.0.0.1", "2001:200::1")}
    assert answers["1.0.0.1"][1]["data"]["country_iso_code"] == "AU"
    assert answers["2001:200::1"][1]["data"]["country_iso_code"] == "JP"
