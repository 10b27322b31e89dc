"""Named datasets in one table, against dynalite: each with its own versions, loads and lifecycle,
and one answer from all of them over the real HTTP server.

The two fixtures are shaped like the databases users combine: a city database
(small ranges with country, city and coordinates) and an ASN database (larger
ranges with the AS number and organization), whose ranges differ.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema import keys
from ipmeta.schema.records import VersionStatus
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import make_client
from ipmeta_cli.server import LocalApiServer
from loader.errors import LoadRejected
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter, get_json, running_api_server, skip_drain

CITY = "city"
ASN = "asn"


def city_csv(tmp_path: Path, name: str = "city.csv", city: str = "Sydney") -> Path:
    """/24s inside the ASN fixture's ranges, and one outside every ASN range."""
    path = tmp_path / name
    path.write_text(
        "network,country,city,latitude,longitude\n"
        f"1.0.1.0/24,AU,{city},-33.8688,151.2093\n"
        "1.0.2.0/24,AU,Melbourne,-37.8136,144.9631\n"
        "2001:db8::/48,JP,Tokyo,35.6895,139.6917\n"
        "9.9.9.0/24,CH,Zurich,47.3769,8.5417\n"
    )
    return path


def asn_csv(tmp_path: Path, name: str = "asn.csv", organization: str = "Example Net") -> Path:
    path = tmp_path / name
    path.write_text(
        "start,end,asn,organization\n"
        f"1.0.0.0,1.0.3.255,64500,{organization}\n"
        "2001:db8::,2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,64501,Doc Net\n"
        "8.8.8.0,8.8.8.255,15169,Google LLC\n"
    )
    return path


def load(store: LoaderTable, tmp_path: Path, dataset: str, path: Path, **options: Any) -> driver.LoadResult:
    staging = LocalStaging(tmp_path / "staging")
    return driver.run_load([path], LoadOptions(dataset=dataset, **options), store, staging)


def active(store: LoaderTable, dataset: str) -> int | None:
    return store.for_dataset(dataset).lookup.read_active_version(consistent=True)


@pytest.fixture
def two_datasets(store: LoaderTable, tmp_path: Path) -> LoaderTable:
    load(store, tmp_path, CITY, city_csv(tmp_path), flag_column="city")
    load(store, tmp_path, ASN, asn_csv(tmp_path), index_field="asn")
    return store


def test_two_datasets_loaded_apart_answer_together(two_datasets: LoaderTable) -> None:
    with running_api_server(two_datasets) as server:
        status, body = get_json(server, "/v1/ip/1.0.1.77")
    assert status == 200
    # Each dataset keeps its own range, version and data
    city, asn = body["datasets"][CITY], body["datasets"][ASN]
    assert (city["range"]["start"], city["range"]["end"]) == ("1.0.1.0", "1.0.1.255")
    assert (asn["range"]["start"], asn["range"]["end"]) == ("1.0.0.0", "1.0.3.255")
    assert city["data"] == {"country": "AU", "city": "Sydney", "latitude": -33.8688, "longitude": 151.2093}
    assert asn["data"] == {"asn": 64500, "organization": "Example Net"}
    assert city["version"] == f"v{active(two_datasets, CITY)}"
    assert asn["version"] == f"v{active(two_datasets, ASN)}"
    # And the merged view holds both, over the range both share
    assert body["data"] == {**asn["data"], **city["data"]}
    assert (body["range"]["start"], body["range"]["end"]) == ("1.0.1.0", "1.0.1.255")
    assert body["inactive"] == []


def test_an_address_one_dataset_lacks_answers_from_the_other(two_datasets: LoaderTable) -> None:
    with running_api_server(two_datasets) as server:
        _, google = get_json(server, "/v1/ip/8.8.8.8")
        _, zurich = get_json(server, "/v1/ip/9.9.9.9")
        status, nowhere = get_json(server, "/v1/ip/5.5.5.5")
        _, v6 = get_json(server, "/v1/ip/2001:db8::1")
    assert google["datasets"][CITY] == {
        "version": google["datasets"][CITY]["version"],
        "range": None,
        "data": None,
    }
    assert google["data"] == {"asn": 15169, "organization": "Google LLC"}
    assert zurich["datasets"][ASN]["range"] is None
    assert zurich["data"]["city"] == "Zurich"
    assert (status, nowhere["code"]) == (404, "IP_ADDRESS_NOT_FOUND")
    assert v6["data"] == {"asn": 64501, "organization": "Doc Net", "country": "JP", "city": "Tokyo",
                          "latitude": 35.6895, "longitude": 139.6917}  # fmt: skip


def test_datasets_narrow_the_answer_and_versions_pin_each_dataset(
    two_datasets: LoaderTable, tmp_path: Path
) -> None:
    first_city = active(two_datasets, CITY)
    load(two_datasets, tmp_path, CITY, city_csv(tmp_path, "city2.csv", city="Sydney CBD"))
    with running_api_server(two_datasets) as server:
        _, only_asn = get_json(server, "/v1/ip/1.0.1.77?datasets=asn")
        _, pinned = get_json(server, f"/v1/ip/1.0.1.77?version=city:v{first_city}")
        _, bare = get_json(server, f"/v1/ip/1.0.1.77?datasets=city&version=v{first_city}")
        ambiguous = get_json(server, f"/v1/ip/1.0.1.77?version=v{first_city}")
        unknown = get_json(server, "/v1/ip/1.0.1.77?datasets=nosuch")
        invalid = get_json(server, "/v1/ip/1.0.1.77?datasets=Not_A_Name")
        text = urllib.request.urlopen(server.url + "/v1/ip/1.0.1.77/city", timeout=10).read()
    assert list(only_asn["datasets"]) == [ASN]
    assert "city" not in only_asn["data"]
    assert pinned["data"]["city"] == "Sydney"
    assert pinned["datasets"][ASN]["version"] == f"v{active(two_datasets, ASN)}"
    assert bare["data"]["city"] == "Sydney"
    assert (ambiguous[0], ambiguous[1]["code"]) == (400, "VERSION_INVALID")
    assert (unknown[0], unknown[1]["code"]) == (404, "DATASET_NOT_FOUND")
    assert (invalid[0], invalid[1]["code"]) == (400, "DATASET_INVALID")
    assert text == b"Sydney CBD\n"


def test_the_batch_answers_from_every_dataset(two_datasets: LoaderTable) -> None:
    with running_api_server(two_datasets) as server:
        request = urllib.request.Request(
            server.url + "/v1/batch?fields=asn,city",
            data=json.dumps(["1.0.1.1", "8.8.8.8", "5.5.5.5"]).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answers = json.loads(response.read())
    assert answers["1.0.1.1"]["data"] == {"asn": 64500, "city": "Sydney"}
    assert answers["8.8.8.8"]["data"] == {"asn": 15169}
    assert answers["5.5.5.5"]["error"]["code"] == "IP_ADDRESS_NOT_FOUND"


def test_a_reload_and_a_rollback_of_one_dataset_leave_the_other_alone(
    two_datasets: LoaderTable, tmp_path: Path
) -> None:
    asn_before = active(two_datasets, ASN)
    city_one = active(two_datasets, CITY)
    # A reload of city activates a new city version; asn's stays
    reloaded = load(two_datasets, tmp_path, CITY, city_csv(tmp_path, "city2.csv", city="Sydney CBD"))
    assert reloaded.status == "activated"
    assert active(two_datasets, CITY) == reloaded.version != city_one
    assert active(two_datasets, ASN) == asn_before
    # Versions are numbered per dataset
    assert [meta.version for meta in two_datasets.for_dataset(ASN).lookup.list_version_metas()] == [
        asn_before
    ]
    # A rollback of city moves only city's pointer
    outcome = retention.rollback(two_datasets.for_dataset(CITY))
    assert outcome == {"dataset": CITY, "active": f"v{city_one}", "previous": f"v{reloaded.version}"}
    assert active(two_datasets, ASN) == asn_before
    asn_meta = two_datasets.for_dataset(ASN).lookup.get_version_meta(asn_before or 0)
    assert asn_meta is not None
    assert asn_meta.status == VersionStatus.ACTIVE
    with running_api_server(two_datasets) as server:
        _, body = get_json(server, "/v1/ip/1.0.1.77")
    assert (body["data"]["city"], body["data"]["asn"]) == ("Sydney", 64500)


def test_a_failed_load_of_one_dataset_leaves_both_serving(two_datasets: LoaderTable, tmp_path: Path) -> None:
    before = {name: active(two_datasets, name) for name in (CITY, ASN)}
    bad = tmp_path / "bad.csv"
    bad.write_text("network,country\n1.0.1.0/24,AU\nnot-a-network,XX\n")
    with pytest.raises(LoadRejected):
        load(two_datasets, tmp_path, CITY, bad)
    assert {name: active(two_datasets, name) for name in (CITY, ASN)} == before
    with running_api_server(two_datasets) as server:
        _, body = get_json(server, "/v1/ip/1.0.1.77")
    assert (body["data"]["city"], body["data"]["asn"]) == ("Sydney", 64500)


def test_two_loads_at_once_one_per_dataset_both_activate(store: LoaderTable, tmp_path: Path) -> None:
    paths = {CITY: city_csv(tmp_path), ASN: asn_csv(tmp_path)}
    results: dict[str, driver.LoadResult] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        try:
            barrier.wait(timeout=10)
            # Small chunks: each load writes and marks several, interleaved with the other's
            results[name] = driver.run_load(
                [paths[name]], LoadOptions(dataset=name, chunk_size=1), store, LocalStaging(tmp_path / name)
            )
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(name,)) for name in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert {name: result.status for name, result in results.items()} == {CITY: "activated", ASN: "activated"}
    # Separate locks and progress: each load item is in its own dataset's keys, all chunks done
    for name, result in results.items():
        table = store.for_dataset(name)
        item = table.loads.get(result.version)
        assert item is not None
        assert sorted(item.done) == list(range(item.chunks))
        assert table.lock.read() is None
        assert active(store, name) == result.version
    assert store.lookup.read_dataset_names(consistent=True) == [ASN, CITY]


def test_an_uncached_lookup_sends_one_query_per_dataset_at_once(
    two_datasets: LoaderTable, table_settings: Settings
) -> None:
    # Given a client that holds every Query until both datasets' are in flight
    client = make_client(table_settings)
    counter = RequestCounter()
    both_in_flight = threading.Barrier(2)

    def hold_queries(request: Any, **_: Any) -> None:
        if request.headers["X-Amz-Target"].decode().endswith(".Query"):
            both_in_flight.wait(timeout=5)  # a Query sent alone would break the barrier

    client.meta.events.register("before-send.dynamodb", counter)
    client.meta.events.register("before-send.dynamodb", hold_queries)
    store = LoaderTable(client, table_settings.table_name)
    with running_api_server(store) as server:
        get_json(server, "/v1/health")  # the catalog's reads happen here, not during the lookup
        counter.reset()
        status, body = get_json(server, "/v1/ip/1.0.1.77")
    # Then the lookup answered from both, with one Query per dataset, sent together
    assert status == 200, body
    assert set(body["datasets"]) == {CITY, ASN}
    queries = [call for name, call in counter.calls if name == "Query"]
    assert len(queries) == 2
    assert {query["ExpressionAttributeValues"][":pk"]["S"].split("#v")[0] for query in queries} == {
        "ds#city",
        "ds#asn",
    }
    assert not both_in_flight.broken


def test_a_dataset_with_no_active_version_is_named_not_fatal(two_datasets: LoaderTable) -> None:
    # Given a dataset the deployment declares but never loaded
    with running_api_server(two_datasets) as server:
        deps_api = _declare(server, [ASN, CITY, "blocklist"])
        request = urllib.request.urlopen(server.url + "/v1/ip/1.0.1.77", timeout=10)
        body = json.loads(request.read())
        header = request.headers["X-Ipmeta-Inactive-Datasets"]
        health = get_json(server, "/v1/health")
    assert deps_api == (ASN, CITY, "blocklist")
    assert body["inactive"] == ["blocklist"]
    assert header == "blocklist"
    assert set(body["datasets"]) == {ASN, CITY}
    # Health names it: it is not serving
    assert health[0] == 503
    assert health[1]["code"] == "NO_DATASET"
    assert health[1]["datasets"]["blocklist"]["status"] == "inactive"
    assert health[1]["datasets"][CITY]["status"] == "ok"


def _declare(server: LocalApiServer, names: list[str]) -> tuple[str, ...]:
    """Give the running server's dependencies a declared dataset list (``IPMETA_DATASETS``)."""
    from dataclasses import replace

    from ipmeta.api import dependencies
    from ipmeta.lookup.catalog import DatasetCatalog

    deps = dependencies.current()
    deps.api = replace(deps.api, datasets=tuple(names))
    deps.catalog = DatasetCatalog(deps.store, 0.0, deps.api.datasets)
    return deps.catalog.declared


def test_datasets_and_health_report_each_dataset(two_datasets: LoaderTable) -> None:
    with running_api_server(two_datasets) as server:
        status, listing = get_json(server, "/v1/datasets")
        one = get_json(server, "/v1/datasets/city")
        missing = get_json(server, "/v1/datasets/nosuch")
        health = get_json(server, "/v1/health")
    assert status == 200
    assert [entry["name"] for entry in listing["datasets"]] == [ASN, CITY]
    city = next(entry for entry in listing["datasets"] if entry["name"] == CITY)
    assert city["active"] == f"v{active(two_datasets, CITY)}"
    assert [version["id"] for version in city["versions"]] == [city["active"]]
    assert one == (200, city)
    assert (missing[0], missing[1]["code"]) == (404, "DATASET_NOT_FOUND")
    assert health[0] == 200
    assert set(health[1]["datasets"]) == {ASN, CITY}
    assert all(entry["status"] == "ok" for entry in health[1]["datasets"].values())


def test_reverse_indexes_are_per_dataset(two_datasets: LoaderTable) -> None:
    with running_api_server(two_datasets) as server:
        by_value = get_json(server, "/v1/ranges?field=asn&value=AS64500")
        named = get_json(server, "/v1/ranges?field=asn&value=64500&dataset=asn")
        not_indexed = get_json(server, "/v1/ranges?field=asn&value=64500&dataset=city")
        flagged = get_json(server, "/v1/flagged?limit=2")
        flagged_named = get_json(server, "/v1/flagged?dataset=city&limit=2")
        wrong_token = get_json(server, f"/v1/flagged?dataset=asn&next={flagged[1]['next']}")
    # Without dataset=, the dataset whose version has the index answers
    assert by_value[0] == 200
    assert by_value[1]["dataset"]["name"] == ASN
    assert [entry["start"] for entry in by_value[1]["ranges"]] == ["1.0.0.0"]
    assert named[1]["ranges"] == by_value[1]["ranges"]
    assert (not_indexed[0], not_indexed[1]["code"]) == (400, "FIELD_NOT_INDEXED")
    assert flagged[1]["dataset"]["name"] == CITY
    assert [entry["start"] for entry in flagged[1]["ranges"]] == ["1.0.1.0", "1.0.2.0"]
    assert flagged_named[1]["ranges"] == flagged[1]["ranges"]
    # A page token belongs to its dataset
    assert (wrong_token[0], wrong_token[1]["code"]) == (400, "INVALID_TOKEN")


def test_covers_are_per_dataset(store: LoaderTable, tmp_path: Path) -> None:
    # Given one dataset with a huge range (a cover) and another with a small one inside it
    wide = tmp_path / "wide.csv"
    wide.write_text("network,zone\n0.0.0.0/1,lower half\n")
    load(store, tmp_path, "zones", wide)
    load(store, tmp_path, ASN, asn_csv(tmp_path))
    zones = store.for_dataset("zones")
    version = active(store, "zones") or 0
    assert zones.lookup.read_covers(version)  # the /1 spans whole buckets: a cover
    assert store.for_dataset(ASN).lookup.read_covers(active(store, ASN) or 0) == []
    with running_api_server(store) as server:
        _, inside = get_json(server, "/v1/ip/1.0.0.9")
        _, covered_only = get_json(server, "/v1/ip/100.1.2.3")
    assert inside["data"] == {"zone": "lower half", "asn": 64500, "organization": "Example Net"}
    assert inside["datasets"]["zones"]["range"]["end"] == "127.255.255.255"
    assert covered_only["data"] == {"zone": "lower half"}


def test_cleanup_of_one_dataset_deletes_only_its_versions(two_datasets: LoaderTable, tmp_path: Path) -> None:
    old_city = active(two_datasets, CITY) or 0
    load(two_datasets, tmp_path, CITY, city_csv(tmp_path, "city2.csv", city="Sydney CBD"))
    later = 10**10  # past every grace period
    outcome = retention.cleanup(
        two_datasets.for_dataset(CITY),
        LocalStaging(tmp_path / "staging"),
        retention=0,
        now=later,
        sleep=skip_drain,
    )
    assert [entry["version"] for entry in outcome["deleted"]] == [f"v{old_city}"]
    asn = two_datasets.for_dataset(ASN)
    assert [meta.status for meta in asn.lookup.list_version_metas()] == [VersionStatus.ACTIVE]
    assert asn.partitions.count(asn.space.partition_key(active(two_datasets, ASN) or 0, 4, 1)) == 1


def test_the_partition_keys_of_two_datasets_never_meet(two_datasets: LoaderTable) -> None:
    client = two_datasets.client
    pages = client.get_paginator("scan").paginate(TableName=two_datasets.table_name)
    partitions = {item[keys.PARTITION_KEY]["S"] for page in pages for item in page["Items"]}
    city = {pk for pk in partitions if pk.startswith("ds#city#")}
    asn = {pk for pk in partitions if pk.startswith("ds#asn#")}
    assert city
    assert asn
    # Every key but the table's list of datasets belongs to exactly one dataset
    assert partitions - city - asn == {keys.DATASETS_PK}


def test_a_table_written_before_datasets_is_served_then_joined(store: LoaderTable, tmp_path: Path) -> None:
    # Given a table in the single-dataset layout: the default keys, and no list of datasets
    load(store, tmp_path, keys.DEFAULT_DATASET, asn_csv(tmp_path))
    store.client.delete_item(
        TableName=store.table_name, Key={"pk": {"S": keys.DATASETS_PK}, "sk": {"N": str(keys.META_SORT_KEY)}}
    )
    pages = store.client.get_paginator("scan").paginate(TableName=store.table_name)
    partitions = {item[keys.PARTITION_KEY]["S"] for page in pages for item in page["Items"]}
    assert all(pk.startswith(("v", "meta#")) for pk in partitions)
    # When it is served, it answers as the default dataset, with no migration
    with running_api_server(store) as server:
        _, old = get_json(server, "/v1/ip/8.8.8.8")
        assert list(old["datasets"]) == [keys.DEFAULT_DATASET]
        assert old["data"] == {"asn": 15169, "organization": "Google LLC"}
        # And a named dataset loaded beside it joins the answer without hiding it
        load(store, tmp_path, CITY, city_csv(tmp_path))
        _, both = get_json(server, "/v1/ip/1.0.1.1")
    assert set(both["datasets"]) == {keys.DEFAULT_DATASET, CITY}
    assert (both["data"]["asn"], both["data"]["city"]) == (64500, "Sydney")


def test_the_cli_loads_lists_exports_and_looks_up_per_dataset(
    table_environment: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipmeta_cli import main as cli

    common = ["--data-dir", str(tmp_path / "data")]
    assert cli.main(["load", "--dataset", CITY, str(city_csv(tmp_path)), *common]) == 0
    assert cli.main(["load", "--dataset", ASN, "--index-field", "asn", str(asn_csv(tmp_path)), *common]) == 0
    capsys.readouterr()
    # versions lists each dataset's own versions
    assert cli.main(["versions", "--json", *common]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((row["dataset"], row["version"], row["active"]) for row in rows) == [
        (ASN, "v1", True),
        (CITY, "v1", True),
    ]
    # lookup answers from every dataset, --dataset narrows it
    assert cli.main(["lookup", "1.0.1.1", *common]) == 0
    answer = json.loads(capsys.readouterr().out)["1.0.1.1"]
    assert set(answer["datasets"]) == {ASN, CITY}
    assert cli.main(["lookup", "--dataset", CITY, "1.0.1.1", *common]) == 0
    assert list(json.loads(capsys.readouterr().out)["1.0.1.1"]["datasets"]) == [CITY]
    # rollback and export need a dataset when the table holds several
    assert cli.main(["rollback", *common]) == 2
    assert "--dataset" in capsys.readouterr().err
    out = tmp_path / "city.csv.out"
    assert cli.main(["export", "--dataset", CITY, "--format", "csv", str(out), *common]) == 0
    assert capsys.readouterr().out.startswith(f"exported {CITY} v1 to")
    assert "Sydney" in out.read_text()
    assert "Example Net" not in out.read_text()
    # ranges reads the dataset that has the index
    assert cli.main(["ranges", "--field", "asn", "--value", "64500", *common]) == 0
    assert json.loads(capsys.readouterr().out)["dataset"]["name"] == ASN
