"""Columns named like a GeoIP2 record or trait, or an ipinfo field: every client parses every answer.

Each case is a dataset of its own, one small CSV or MaxMind DB loaded by the real loader into this
module's dynalite, that holds ``11.N.0.0/24`` and one hostile column: a record's or a trait's name
(``traits``, ``country``, ``location``...), an ipinfo field's (``ip``, ``org``, ``loc``, ``geo``,
``as``...), a dotted name (``traits.network``, ``city.names``, ``a..b``, ``.x``, ``x.``), or a value
of the wrong kind where a record is expected (a number, a boolean, a list, a map). Beside the cases,
over all of ``11.0.0.0/8``, a DB-IP City Lite and a DB-IP ASN Lite dataset answer everywhere; they
are named to come after the cases in precedence, so a hostile value is what each answer meets first.

Each case's address is asked through the real local server (TLS, one key), by the official
clients where they exist: ``geoip2.webservice.Client`` (``/geoip/v2.1/{country,city,insights}``),
ipinfo's ``Handler``, ``HandlerLite`` and ``HandlerCore`` (``/ipinfo``, ``/ipinfo/lite``,
``/ipinfo/lookup``), and ``/v1/ip``. Every case must hold: no 5xx; every GeoIP2 record an object
(``subdivisions`` a list of objects); the clients parse every answer (no ``TypeError``, no
``HTTPError``); ipinfo's fields of ipinfo's types; and the other datasets still answer (a GeoIP2
City document keeps a city name, a country code and an AS number).
"""

from __future__ import annotations

import csv
import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geoip2.models
import geoip2.webservice
import pytest
import requests

from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import Settings
from ipmeta.shapes import geoip2_document
from ipmeta_cli.dynalite import Dynalite
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.formats.mmdb_fields import ALL_FIELDS
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.client_servers import ClientServer, IpinfoClients, ipinfo_clients, serving_clients

KEY = "hostile-column-names-key"


@dataclass(frozen=True)
class Case:
    id: str
    #: CSV: one column and its one value (the loader types it: "7" is a number); MaxMind DB: the record.
    column: str | None = None
    value: str = ""
    record: Mapping[str, Any] | None = None


def _deep(depth: int) -> dict[str, Any]:
    record: dict[str, Any] = {"iso_code": "GB"}
    for level in range(depth):
        record = {f"level{level}": record}
    return record


CASES = (
    # Records named by a flat text column, and a number where a record is expected
    Case("csv-traits-text", "traits", "gold customer"),
    Case("csv-traits-number", "traits", "7"),
    Case("csv-country-code", "country", "GB"),
    Case("csv-country-name", "country", "Narnia"),
    Case("csv-country-number", "country", "826"),
    Case("csv-city", "city", "Gotham"),
    Case("csv-location-text", "location", "51.5,-0.1"),
    Case("csv-location-number", "location", "42"),
    Case("csv-subdivisions", "subdivisions", "England"),
    Case("csv-continent", "continent", "Atlantis"),
    Case("csv-postal", "postal", "EC1A"),
    Case("csv-registered_country", "registered_country", "DE"),
    Case("csv-represented_country", "represented_country", "US"),
    Case("csv-maxmind", "maxmind", "queries_remaining"),
    Case("csv-anonymizer", "anonymizer", "vpn"),
    Case("csv-names", "names", "London"),
    # ipinfo's own field names
    Case("csv-ip", "ip", "6.6.6.6"),
    Case("csv-hostname", "hostname", "evil.example"),
    Case("csv-org", "org", "AS666 Evil Corp"),
    Case("csv-loc", "loc", "north,south"),
    Case("csv-bogon", "bogon", "true"),
    Case("csv-asn-text", "asn", "not-a-number"),
    Case("csv-asn-without-a-name", "asn", "7018"),
    Case("csv-geo", "geo", "Mars"),
    Case("csv-as", "as", "AS1"),
    Case("csv-country_code-number", "country_code", "840"),
    # Dotted names: traits MaxMind defines, fields of the wrong kind, names no record has
    Case("csv-traits.network", "traits.network", "not-a-network"),
    Case("csv-traits.ip_address", "traits.ip_address", "999.1.1.1"),
    Case("csv-traits.is_anycast-text", "traits.is_anycast", "maybe"),
    Case("csv-traits.autonomous_system_number-text", "traits.autonomous_system_number", "AS-x"),
    Case("csv-city.names", "city.names", "London"),
    Case("csv-city.locales", "city.locales", "en"),
    Case("csv-subdivisions.0", "subdivisions.0", "England"),
    Case("csv-subdivisions.x.iso_code", "subdivisions.x.iso_code", "ENG"),
    Case("csv-location.latitude-text", "location.latitude", "north"),
    Case("csv-country.names.en-number", "country.names.en", "826"),
    Case("csv-anonymizer.network_last_seen", "anonymizer.network_last_seen", "not-a-date"),
    Case("csv-a..b", "a..b", "x"),
    Case("csv-.x", ".x", "x"),
    Case("csv-x.", "x.", "x"),
    Case("csv-traits.", "traits.", "x"),
    Case("csv-..", "..", "x"),
    Case("csv-0", "0", "x"),
    Case("csv-subdivisions.²", "subdivisions.²", "x"),
    # MaxMind DB records: booleans, lists, doubles and maps where records and fields are expected
    Case("mmdb-traits-true", record={"traits": True}),
    Case("mmdb-country-list", record={"country": ["GB", "FR"]}),
    Case("mmdb-city-names-text", record={"city": {"names": "London"}}),
    Case("mmdb-subdivisions-map", record={"subdivisions": {"iso_code": "ENG"}}),
    Case("mmdb-subdivisions-numbers", record={"subdivisions": [1, 2]}),
    Case("mmdb-location-double", record={"location": 3.5}),
    Case("mmdb-location.latitude-map", record={"location": {"latitude": {"degrees": 51}}}),
    Case(
        "mmdb-traits-wrong-kinds",
        record={
            "traits": {
                "autonomous_system_organization": 5,
                "is_anycast": "yes",
                "network": 7,
                "ip_address": ["1.2.3.4"],
                "prefix_len": "x",
            }
        },
    ),
    Case("mmdb-country-wrong-kinds", record={"country": {"is_in_european_union": "yes", "iso_code": 826}}),
    Case("mmdb-names-list", record={"names": {"en": ["a", "b"]}}),
    Case("mmdb-geo-and-as-maps", record={"geo": {"city": "Mars"}, "as": {"asn": 5, "name": True}}),
    Case("mmdb-anonymizer.residential-list", record={"anonymizer": {"residential": [1, 2]}}),
    Case("mmdb-maxmind-map", record={"maxmind": {"queries_remaining": "lots"}}),
    Case("mmdb-deeply-nested-map", record={"country": _deep(24)}),
)
#: The datasets every address of the cases' /8 holds too: DB-IP City Lite and ASN Lite CSVs.
BASE_CITY = "11.0.0.0,11.255.255.255,NA,US,Virginia,Arlington,38.8809,-77.1032\n"
BASE_ASN = '11.0.0.0,11.255.255.255,749,"DoD Network Information Center"\n'
BASE_NETWORK = ipaddress.ip_network("11.0.0.0/8")


def address_of(index: int) -> str:
    return f"11.{index + 1}.0.1"


def _source_of(case: Case, index: int, folder: Path) -> tuple[Path, LoadOptions]:
    network = ipaddress.ip_network(f"11.{index + 1}.0.0/24")
    dataset = f"case-{index + 1:02d}"
    if case.record is None:
        path = folder / f"{dataset}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([["network", case.column], [str(network), case.value]])
        return path, LoadOptions(dataset=dataset)
    path = folder / f"{dataset}.mmdb"
    first, last = int(network.network_address), int(network.broadcast_address)
    write_database([(4, first, last, case.record)], path, DatabaseMetadata("Hostile-Test", {"en": case.id}))
    return path, LoadOptions(dataset=dataset, mmdb_fields=ALL_FIELDS)


@dataclass(frozen=True)
class Served:
    server: ClientServer
    geoip2: geoip2.webservice.Client
    ipinfo: IpinfoClients


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("column-names")
    (folder / "base-city.csv").write_text(BASE_CITY, encoding="utf-8")
    (folder / "base-asn.csv").write_text(BASE_ASN, encoding="utf-8")
    with Dynalite() as endpoint, pytest.MonkeyPatch.context() as patch:
        table = LoaderTable.from_settings(Settings("ipmeta-hostile-columns", endpoint, 0.0))
        create_table_if_missing(table.client, table.table_name)
        staging = LocalStaging(folder / "staging")
        loads = [_source_of(case, index, folder) for index, case in enumerate(CASES)]
        for dataset in ("city", "asn"):  # "zz-" sorts after every case: the cases answer first
            options = LoadOptions(dataset=f"zz-base-{dataset}", format="dbip-csv")
            loads.append((folder / f"base-{dataset}.csv", options))
        for path, options in loads:
            assert driver.run_load([path], options, table, staging).status == "activated", path
        # Nothing loads once it serves: the pointers and ranges may be cached, as a container does
        # (each case's address asks ~60 datasets, ten times)
        with serving_clients(
            table, folder, KEY, pointer_cache_seconds=600.0, ranges=RangeCache(1 << 24)
        ) as server:
            client = geoip2.webservice.Client(1, KEY, host=server.host)
            yield Served(server, client, ipinfo_clients(f"https://{server.host}/ipinfo", KEY, patch))


def assert_records_are_objects(document: Mapping[str, Any]) -> None:
    for name, record in document.items():
        if name == "subdivisions":
            assert isinstance(record, list), record
            assert all(isinstance(item, dict) for item in record), record
        else:
            assert isinstance(record, dict), (name, record)
        assert name in geoip2_document.RECORDS["insights"], name


def assert_geoip2_answers(served: Served, ip: str) -> None:
    for service in geoip2_document.SERVICES:
        response = requests.get(
            f"https://{served.server.host}/geoip/v2.1/{service}/{ip}", auth=("1", KEY), timeout=10
        )
        assert response.status_code == 200, (service, response.text)
        assert_records_are_objects(response.json())
    country = served.geoip2.country(ip)
    insights = served.geoip2.insights(ip)
    city = served.geoip2.city(ip)
    assert isinstance(city, geoip2.models.City)
    for model in (country, city, insights):
        model.to_dict()  # walks every record the client built
    # The other datasets still answer
    assert city.city.name is not None
    assert city.country.iso_code is not None
    assert isinstance(city.traits.autonomous_system_number, int)
    # The case's /24 where its dataset gave the document a field, else the base datasets' /8
    assert city.traits.network in (ipaddress.ip_network(f"{ip}/24", strict=False), BASE_NETWORK)
    assert city.subdivisions.most_specific.name is not None
    assert (city.location.latitude is None) or isinstance(city.location.latitude, float | int)


#: The classic answer's fields: text, every one (``bogon`` is a boolean).
IPINFO_TEXT_FIELDS = ("city", "region", "country", "loc", "org", "postal", "timezone")


def assert_ipinfo_answers(served: Served, ip: str) -> None:
    classic = served.ipinfo.classic.getDetails(ip).all
    assert classic["ip"] == ip
    assert all(isinstance(value, str) for name, value in classic.items() if name in IPINFO_TEXT_FIELDS)
    lite = served.ipinfo.lite.getDetails(ip).all
    assert lite["ip"] == ip
    assert all(isinstance(lite[name], str) for name in ("asn", "as_name", "country_code") if name in lite)
    core = served.ipinfo.core.getDetails(ip).all
    assert core["ip"] == ip
    assert isinstance(core.get("geo", {}), dict)
    assert isinstance(core.get("as", {}), dict)
    geo = core.get("geo", {})
    assert all(isinstance(geo[name], float | int) for name in ("latitude", "longitude") if name in geo)
    assert all(isinstance(core[flag], bool) for flag in ("is_anycast", "is_anonymous") if flag in core)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case.id for case in CASES])
def test_a_column_named_like_a_record_or_field_breaks_no_answer(served: Served, index: int) -> None:
    # Given the case's dataset, and beside it datasets that hold the address too
    ip = address_of(index)
    # When /v1, the GeoIP2 web service and ipinfo's three APIs answer it: Then no 5xx, and
    # every official client parses its answer
    v1 = requests.get(f"https://{served.server.host}/v1/ip/{ip}", headers={"x-api-key": KEY}, timeout=10)
    assert v1.status_code == 200, v1.text
    assert f"case-{index + 1:02d}" in v1.json()["datasets"]
    assert_geoip2_answers(served, ip)
    assert_ipinfo_answers(served, ip)
