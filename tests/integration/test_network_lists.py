"""`ipmeta update --feed network:...`: the public network lists from the fake vendor, one dataset, one Query.

The samples (``tests/fixtures/network``) are served as static files; each list
names its URL on the fake server, as a mirror would. The dataset is loaded with
``--overlaps merge``, so an AWS range that is also a Tor exit answers both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli.main import main
from loader.feeds.catalogue import CATALOGUE, MAX_DISCOVERY_BYTES, ChosenList, list_feeds
from loader.feeds.errors import FeedProtocolError
from loader.store.table import LoaderTable
from tests.fakes.vendors import FakeServer, Reply, Seen, file_route, serving
from tests.integration.conftest import RequestCounter, get_json, running_api_server
from tests.integration.feeds import Sleeps, quick_http

SAMPLES = Path(__file__).parent.parent / "fixtures" / "network"
#: The acceptance's lists, and the sample each is served from.
LISTS = {
    "aws": "aws.json",
    "gcp": "gcp.json",
    "tor": "tor.txt",
    "apple-relay": "apple-relay.csv",
    "googlebot": "googlebot.json",
}


@pytest.fixture
def published() -> dict[str, bytes]:
    return {name: (SAMPLES / name).read_bytes() for name in LISTS.values()}


@pytest.fixture
def vendor(published: dict[str, bytes]) -> Iterator[FakeServer]:
    with serving(file_route(published)) as server:
        yield server


def spec(server: FakeServer) -> str:
    return "network:" + ",".join(f"{name}={server.url}/files/{file}" for name, file in LISTS.items())


def update(data: Path, *arguments: str) -> int:
    return main(["update", "--data-dir", str(data), *arguments])


def active(store: LoaderTable) -> int | None:
    return store.for_dataset("network").lookup.read_active_version(consistent=True)


def test_one_command_loads_every_list_into_one_dataset_and_one_query_answers_both_kinds(
    vendor: FakeServer,
    counted_store: tuple[LoaderTable, RequestCounter],
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, counter = counted_store
    # When `ipmeta update --feed network:aws=URL,gcp=URL,tor=URL,apple-relay=URL,googlebot=URL` runs
    assert update(tmp_path, "--feed", spec(vendor)) == 0
    out = capsys.readouterr().out
    # Then the five lists are one dataset, one version
    assert "into dataset network" in out
    assert active(store) == 1
    with running_api_server(store, pointer_cache_seconds=60.0) as server:
        get_json(server, "/v1/ip/66.249.64.1")  # the pointer and the catalog, read once and cached
        counter.reset()
        # When an address in an AWS range that is also a Tor exit is looked up
        status, body = get_json(server, "/v1/ip/3.5.140.10")
        # Then one Query answered it, with the fields of both lists
        assert counter.operations() == ["Query"]
        # And ipinfo's route says so in its privacy object
        privacy = get_json(server, "/ipinfo/3.5.140.10")[1]["privacy"]
    assert status == 200, body
    data = body["data"]
    assert data["network_kinds"] == ["cloud", "tor"]
    assert (data["cloud_provider"], data["cloud_region"], data["tor_exit"]) == ("aws", "ap-northeast-2", True)
    assert data["cloud_services"] == ["AMAZON", "S3"]
    assert (privacy["tor"], privacy["hosting"], privacy["relay"], privacy["service"]) == (
        True,
        True,
        False,
        "aws",
    )
    assert (body["range"]["start"], body["range"]["end"]) == ("3.5.140.10", "3.5.140.10")


def test_each_kind_answers_for_ipv4_and_ipv6_and_an_unchanged_rerun_loads_nothing(
    vendor: FakeServer,
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert update(tmp_path, "--feed", spec(vendor)) == 0
    with running_api_server(store) as server:
        answers = {
            ip: get_json(server, f"/v1/ip/{ip}")[1]["data"]
            for ip in (
                "3.5.141.1",
                "2600:1f14::1",
                "34.80.0.1",
                "2600:1900:4010::1",
                "185.220.101.1",
                "172.224.224.1",
                "2a02:26f7:b3c0:4000::1",
                "66.249.66.1",
                "2001:4860:4801:10::1",
            )
        }
    assert answers["3.5.141.1"]["network_kinds"] == ["cloud"]
    assert answers["2600:1f14::1"]["cloud_services"] == ["AMAZON", "EC2"]
    assert answers["34.80.0.1"]["cloud_provider"] == "gcp"
    assert answers["2600:1900:4010::1"]["cloud_region"] == "europe-west1"
    assert answers["185.220.101.1"] == {"network_kinds": ["tor"], "tor_exit": True}
    # Tor's bulk exit list holds no IPv6 address (tests/fixtures/network/README.md)
    assert answers["172.224.224.1"]["relay_city"] == "London"
    assert answers["2a02:26f7:b3c0:4000::1"]["relay_country"] == "FR"
    assert answers["66.249.66.1"]["crawler"] == "googlebot"
    assert answers["2001:4860:4801:10::1"]["crawler"] == "googlebot"
    # When it runs again on the same releases: conditional requests only, nothing loaded
    capsys.readouterr()
    vendor.forget()
    assert update(tmp_path, "--feed", spec(vendor)) == 0
    assert capsys.readouterr().out.strip() == "network:network: unchanged (5 files)"
    assert all(seen.headers.get("if-none-match") for seen in vendor.seen)
    assert active(store) == 1


@pytest.mark.parametrize(
    ("body", "reply_kind", "code"),
    [
        (b'{"syncToken": "1", "prefixes": [{"ip_prefix": "3.5.140.0/22"', None, "SOURCE_UNREADABLE"),
        (b"<html><body>Sign in to the hotel Wi-Fi</body></html>", None, "SOURCE_UNREADABLE"),
        (None, "cut", "FEED_DOWNLOAD_TRUNCATED"),
        (
            b'{"prefixes": [{"ip_prefix": "52.94.76.0/22", "region": "us-west-2", "service": "EC2"},'
            b' {"ip_prefix": "3.5.140.1/22", "region": "ap-northeast-2", "service": "S3"}],'
            b' "ipv6_prefixes": []}',
            None,
            None,
        ),
        (b'{"syncToken": "2", "prefixes": [], "ipv6_prefixes": []}', None, "SOURCE_UNREADABLE"),
    ],
    ids=["malformed-json", "html", "truncated", "host-bits", "empty"],
)
def test_a_bad_release_is_refused_clearly_and_the_active_version_keeps_serving(  # noqa: PLR0917 - pytest passes fixtures by position
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    body: bytes | None,
    reply_kind: str | None,
    code: str | None,
) -> None:
    with serving(file_route(published)) as server:
        assert update(tmp_path, "--feed", spec(server)) == 0
    capsys.readouterr()
    # Given a new AWS release that is broken
    broken = {**published, "aws.json": body if body is not None else published["aws.json"] + b"\n"}
    route = file_route(broken)

    def cut_when_asked(seen: Seen) -> Reply:
        reply = route(seen)
        if reply_kind == "cut" and seen.path.endswith("/aws.json") and reply.status == 200:
            reply.cut_after = 100
        return reply

    with serving(cut_when_asked) as server:
        # When the update runs
        status = update(tmp_path, "--feed", spec(server))
    err = capsys.readouterr().err
    # Then it fails with a message naming the list, and version 1 still answers
    assert status == 1
    assert "aws" in err
    if code:
        assert f"({code})" in err
    else:
        assert "host bits set" in err
    assert active(store) == 1


def assert_held_with_its_alarm(
    store: LoaderTable, out: str, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Version 1 still serves, the alarm's metric line is out, and `ipmeta versions` lists v2 held."""
    assert active(store) == 1
    metric = next(json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"'))
    assert (metric["ReleaseHeld"], metric["dataset"]) == ([1.0], "network")
    assert main(["versions", "--data-dir", str(data), "--dataset", "network", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["version"], row["status"]) for row in rows] == [("v2", "held"), ("v1", "active")]


def tor_release(count: int, first: int = 1) -> bytes:
    return "".join(f"185.220.{(n >> 8) & 255}.{n & 255}\n" for n in range(first, first + count)).encode()


def test_a_tor_release_that_changes_90_percent_is_held_and_activates_on_request(  # noqa: PLR0917 - fixtures
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # the alarm's metric line is printed
    # Given the lists loaded, with a Tor list of 100 exits
    first = {**published, "tor.txt": tor_release(100)}
    with serving(file_route(first)) as server:
        assert update(tmp_path, "--feed", spec(server)) == 0
    capsys.readouterr()
    # When the next Tor release replaces 90 of them
    moved = {**published, "tor.txt": tor_release(10) + tor_release(90, first=1000)}
    with serving(file_route(moved)) as server:
        status = update(tmp_path, "--feed", spec(server))
        out, err = capsys.readouterr()
        # Then the release is loaded but held: version 1 still answers, the alarm's metric is out
        assert status == 1
        assert "(RELEASE_HELD)" in err
        assert "tor: changes 90% of its ranges, above 50%" in err
        # And `ipmeta versions` shows it held
        assert_held_with_its_alarm(store, out, tmp_path, capsys)
        # When the scheduled run comes again, on the same release: nothing is fetched or loaded again
        server.forget()
        assert update(tmp_path, "--feed", spec(server)) == 0
        assert capsys.readouterr().out.strip() == "network:network: unchanged (5 files)"
    # When `ipmeta activate` accepts the held one, it serves
    assert main(["activate", "--data-dir", str(tmp_path), "network.v2"]) == 0
    assert active(store) == 2
    with running_api_server(store) as api:
        assert get_json(api, "/v1/ip/185.220.3.232")[1]["data"]["tor_exit"] is True


def test_a_release_ten_times_larger_is_held(
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(file_route({**published, "tor.txt": tor_release(20)})) as server:
        assert update(tmp_path, "--feed", spec(server)) == 0
    with serving(file_route({**published, "tor.txt": tor_release(200)})) as server:
        assert update(tmp_path, "--feed", spec(server)) == 1
    assert "tor: changes 900% of its ranges" in capsys.readouterr().err
    assert active(store) == 1


def test_a_geofeed_url_feed_loads_the_rfc_example_and_answers_country_region_and_city(
    store: LoaderTable, table_environment: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given RFC 8805's example feed, published at a URL
    with serving(file_route({"geofeed.csv": (SAMPLES / "rfc8805.csv").read_bytes()})) as server:
        # When `ipmeta update --feed geofeed:URL` runs
        assert update(tmp_path, "--feed", f"geo=geofeed:{server.url}/files/geofeed.csv") == 0
    assert "into dataset geo" in capsys.readouterr().out
    with running_api_server(store) as api:
        answers = {
            ip: get_json(api, f"/v1/ip/{ip}")[1]["data"]
            for ip in ("192.0.2.5", "192.0.2.6", "192.0.2.200", "2001:db8:cafe::1", "2001:db8:1::1")
        }
    # Then each address answers its entry's country, region and city; the narrower entry wins
    assert answers["192.0.2.5"] == {"country": "US", "region": "US-AL", "city": "Alabaster"}
    assert answers["192.0.2.6"] == {"country": "US", "region": "US-AL"}
    assert answers["192.0.2.200"] == {"country": "PL", "region": "PL-MZ", "postal": "02-784"}
    assert answers["2001:db8:cafe::1"] == {"country": "PL", "region": "PL-MZ", "postal": "02-784"}
    assert answers["2001:db8:1::1"] == {"country": "PL"}


def googlebot_release(count: int) -> bytes:
    """Google's ``googlebot.json`` shape: ``count`` IPv4 /27s and one IPv6 /64 each."""
    prefixes = [{"ipv4Prefix": f"66.249.{n}.0/27"} for n in range(count)]
    prefixes += [{"ipv6Prefix": f"2001:4860:4801:{n:x}::/64"} for n in range(count)]
    return json.dumps({"creationTime": "2026-11-20T12:00:00.000000", "prefixes": prefixes}).encode()


def aws_release(count: int) -> bytes:
    """AWS's ``ip-ranges.json`` shape, ``count`` /24s of IPv4 and of IPv6 /48s."""
    where = {"region": "us-east-1", "service": "EC2", "network_border_group": "us-east-1"}
    document = {
        "syncToken": "1",
        "createDate": "2026-11-20-12-00-00",
        "prefixes": [{"ip_prefix": f"3.5.{n}.0/24", **where} for n in range(count)],
        "ipv6_prefixes": [{"ipv6_prefix": f"2600:1f18:{n:x}::/48", **where} for n in range(count)],
    }
    return json.dumps(document).encode()


def test_one_list_that_drops_half_its_ranges_holds_the_combined_dataset(  # noqa: PLR0917 - fixtures
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    # Given the lists loaded, AWS's 240 ranges beside Googlebot's 20
    first = {**published, "aws.json": aws_release(120), "googlebot.json": googlebot_release(10)}
    with serving(file_route(first)) as server:
        assert update(tmp_path, "--feed", spec(server)) == 0
    capsys.readouterr()
    # When Googlebot's next release drops half its ranges and every other list is unchanged: 10 of
    # the dataset's 260-odd ranges (4%), but half of Googlebot's (its limit is 20%)
    with serving(file_route({**first, "googlebot.json": googlebot_release(5)})) as server:
        status = update(tmp_path, "--feed", spec(server))
    out, err = capsys.readouterr()
    # Then the dataset's release is held, the list named, and the alarm's metric emitted
    assert status == 1
    assert "googlebot: changes 50% of its ranges, above 20% (0 added, 10 removed, 0 modified)" in err
    assert_held_with_its_alarm(store, out, tmp_path, capsys)
    # And `ipmeta activate` accepts it: the dropped range answers no crawler
    assert main(["activate", "--data-dir", str(tmp_path), "network.v2"]) == 0
    with running_api_server(store) as api:
        assert get_json(api, "/v1/ip/66.249.9.1")[0] == 404
        assert get_json(api, "/v1/ip/66.249.4.1")[1]["data"]["crawler"] == "googlebot"


DOWNLOAD_CENTER = Path(__file__).parent.parent / "fixtures" / "download_center"


@pytest.mark.parametrize(
    ("page", "found"),
    [
        ((DOWNLOAD_CENTER / "details-56519.html").read_bytes(), "ServiceTags_Public_20261123.json"),
        ((DOWNLOAD_CENTER / "confirmation-56519.html").read_bytes(), "ServiceTags_Public_20200518.json"),
        (b"<html><body>This download is no longer available.</body></html>", "links no ServiceTags_Public"),
        # A page past the 2 MB a discovery reads (a portal's, a loop of redirects' body) is refused
        (b"<html>" + b" " * MAX_DISCOVERY_BYTES + b"</html>", f"more than {MAX_DISCOVERY_BYTES} bytes"),
    ],
    ids=["details-page-data", "confirmation-link", "no-link", "page-too-large"],
)
def test_azures_weekly_file_is_found_on_its_page_served_over_http(page: bytes, found: str) -> None:
    # Given Azure's download page on the fake vendor, in place of Microsoft's
    with serving(file_route({"details.aspx": page})) as server:
        azure = replace(CATALOGUE["azure"], discovery=f"{server.url}/files/details.aspx")
        http = quick_http(Sleeps())
        if found.endswith(".json"):
            # When the list's feeds are built, Then the week's file is the one the page names
            (feed,) = list_feeds(ChosenList(azure, ()), http)
            assert feed.url.endswith(f"/{found}")
            assert feed.url.startswith("https://download.microsoft.com/")
            assert (feed.name, feed.file_name) == ("network:azure", "azure-1.json")
        else:
            # Otherwise the run fails by name, and says how to name the file instead
            with pytest.raises(FeedProtocolError, match=found) as error:
                list_feeds(ChosenList(azure, ()), http)
            assert "network:azure" in str(error.value)
        assert server.paths() == ["/files/details.aspx"]


@pytest.mark.parametrize(
    ("aws", "tor", "cut_after", "code", "says"),
    [
        # The server announced more bytes than it sent
        (None, None, 100, "FEED_DOWNLOAD_TRUNCATED", "network:aws"),
        # A JSON list cut where the server said nothing (its Content-Length was the cut body's)
        ((SAMPLES / "aws.json").read_bytes()[:150], None, None, "SOURCE_UNREADABLE", "aws-1.json: not valid"),
        # A text list cut inside its last line
        (None, b"3.5.140.10\n185.220.101.1\n185.220.10", None, "SOURCE_UNREADABLE", "tor-1.txt: line 3: the"),
    ],
    ids=["fewer-bytes-than-announced", "json-cut", "text-cut-mid-line"],
)
def test_a_list_cut_short_on_its_first_fetch_is_refused_and_nothing_activates(  # noqa: PLR0917 - fixtures
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    aws: bytes | None,
    tor: bytes | None,
    cut_after: int | None,
    code: str,
    says: str,
) -> None:
    # Given lists never fetched before (no active version to compare with), one of them cut short
    files = {**published, "aws.json": aws or published["aws.json"], "tor.txt": tor or published["tor.txt"]}
    route = file_route(files)

    def cut(seen: Seen) -> Reply:
        reply = route(seen)
        if cut_after is not None and seen.path.endswith("/aws.json"):
            reply.cut_after = cut_after
        return reply

    with serving(cut) as server:
        # When the first update runs
        status = update(tmp_path, "--feed", spec(server))
    err = capsys.readouterr().err
    # Then it is refused with its code and the list named, and no version of the dataset serves
    assert status == 1
    assert f"({code})" in err
    assert says in err
    assert active(store) is None


def test_a_list_from_its_owner_under_its_known_floor_is_refused_even_on_its_first_fetch(  # noqa: PLR0917 - fixtures
    published: dict[str, bytes],
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given Tor's list served where the catalogue names the owner's file, cut at a line's end to 50
    # exits, under a floor of 100
    exits = tor_release(50)
    with serving(file_route({**published, "tor.txt": exits, "mirror.txt": exits})) as server:
        owner = replace(CATALOGUE["tor"], urls=(f"{server.url}/files/tor.txt",), min_ranges=100)
        monkeypatch.setitem(CATALOGUE, "tor", owner)
        # When the first update runs, without naming a URL for it
        status = update(tmp_path, "--feed", "network:tor")
        err = capsys.readouterr().err
        # Then it is refused as truncated, naming the list, its count and the floor; nothing serves
        assert status == 1
        assert "tor: 50 ranges, under the floor of 100 set for the owner's list" in err
        assert "(FEED_DOWNLOAD_TRUNCATED)" in err
        assert active(store) is None
        # And the same list on a URL of its own (a mirror of part of it, a test) has no known size
        assert update(tmp_path, "--feed", f"network:tor={server.url}/files/mirror.txt") == 0
        assert active(store) == 1
