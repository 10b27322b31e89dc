"""MaxMind's and ipinfo's own clients, pointed at ipmeta, answer what the loaded files hold.

Given a GeoIP2-City-layout database and a GeoLite2-ASN-layout one (``tests.geoip2_databases``)
loaded as datasets ``city`` and ``asn`` (``--mmdb-fields all``, ``--no-coalesce``), beside them
(on addresses of their own) a DB-IP City Lite and a DB-IP ASN Lite CSV and a dataset whose text
column is named ``traits``, and the real local server speaking TLS with a throwaway certificate
and one API key:

- ``geoip2.webservice.Client(...).city(ip)`` equals ``geoip2.database.Reader(...).city(ip)``
  with the ASN reader's traits, for every network's first and last address: every locale's
  names, location, postal, subdivisions, registered and represented countries, and
  ``traits.network`` (the narrower of the two databases' networks, as the web service's
  "largest network where every field is the same"); ``.country(ip)`` equals the City
  record's country part;
- the DB-IP CSVs' flat columns answer as MaxMind's records (a ``City`` model, not a
  ``TypeError``), and the ``traits`` text column breaks no answer;
- not found, reserved, invalid and a bad key raise the client's own exceptions;
- ``ipinfo.getHandler(token)`` with ``ipinfo.handler.API_URL`` at ipmeta gives the
  same city, region, country, loc and org, one by one and in a batch (``org`` is
  ``AS7018`` alone where the AS has no name); ``HandlerLite``, ``HandlerCore`` and
  ``HandlerPlus`` with their API URLs at ipmeta give Lite's and Core's answers.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geoip2.database
import geoip2.errors
import geoip2.models
import geoip2.webservice
import pytest
import requests
from ipinfo.error import APIError

from ipmeta.api import dependencies
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Front, Settings
from ipmeta.shapes import geoip2_document as shapes
from ipmeta_cli import main as cli
from ipmeta_cli.server import LocalApiServer, tls_context
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.tls import ServerCertificate
from tests.client_servers import ClientServer, IpinfoClients, ipinfo_clients, serving_clients
from tests.geoip2_databases import write_asn, write_city

KEY = "k3y-of-the-test-team"
ACCOUNT = 123456


@dataclass(frozen=True)
class Deployment:
    served: ClientServer
    city: Path
    asn: Path

    @property
    def host(self) -> str:
        return self.served.host

    @property
    def certificate(self) -> ServerCertificate:
        return self.served.certificate


#: DB-IP City Lite and ASN Lite as DB-IP writes them (no header; ``loader.formats.dbip_csv``:
#: start,end,continent,country,stateprov,city,latitude,longitude and start,end,asn,organization),
#: on addresses the City database does not hold.
DBIP_CITY_LITE = (
    '1.0.0.0,1.0.0.255,OC,AU,Queensland,"South Brisbane",-27.4767,153.017\n'
    '2001:480::,2001:480:ffff:ffff:ffff:ffff:ffff:ffff,NA,US,California,"San Diego",32.7157,-117.165\n'
)
DBIP_ASN_LITE = (
    '1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n'
    '2001:480::,2001:480:ffff:ffff:ffff:ffff:ffff:ffff,668,"DoD Network Information Center"\n'
)
#: A team's own list whose one text column happens to be named like MaxMind's traits record.
NOTES = "network,traits\n1.0.0.0/24,gold customer\n"


@dataclass(frozen=True)
class Loaded:
    table: LoaderTable
    folder: Path
    city: Path
    asn: Path


@pytest.fixture(scope="module")
def loaded(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    folder = tmp_path_factory.mktemp("clients")
    settings = Settings("ipmeta-test-clients", dynalite_endpoint, 0.0)
    table = LoaderTable.from_settings(settings)
    create_table_if_missing(table.client, table.table_name)
    city, asn = write_city(folder / "city.mmdb"), write_asn(folder / "asn.mmdb")
    (folder / "dbip-city-lite.csv").write_text(DBIP_CITY_LITE, encoding="utf-8")
    (folder / "dbip-asn-lite.csv").write_text(DBIP_ASN_LITE, encoding="utf-8")
    (folder / "notes.csv").write_text(NOTES, encoding="utf-8")
    loads = [
        ["--dataset", "city", "--mmdb-fields", "all", "--no-coalesce", str(city)],
        ["--dataset", "asn", "--mmdb-fields", "all", "--no-coalesce", str(asn)],
        ["--dataset", "dbip-city", "--format", "dbip-csv", str(folder / "dbip-city-lite.csv")],
        ["--dataset", "dbip-asn", "--format", "dbip-csv", str(folder / "dbip-asn-lite.csv")],
        ["--dataset", "notes", str(folder / "notes.csv")],
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_DYNAMODB_ENDPOINT, dynalite_endpoint)
        patch.setenv(ENV_TABLE_NAME, settings.table_name)
        for arguments in loads:
            assert cli.main(["load", "--data-dir", str(folder), *arguments]) == 0
        yield Loaded(table, folder, city, asn)


@pytest.fixture(scope="module", params=[Front.REST, Front.URL], ids=str)
def deployment(loaded: Loaded, request: pytest.FixtureRequest) -> Iterator[Deployment]:
    """The local server as each front serves it: REST (the server refuses a key before the function)
    and url (the function checks the key itself, and answers a refusal in each API's own shape)."""
    with serving_clients(loaded.table, loaded.folder, KEY, front=request.param) as served:
        yield Deployment(served, loaded.city, loaded.asn)


def edges(path: Path) -> list[str]:
    """The first and last address of every network in the file."""
    addresses = []
    with geoip2.database.Reader(str(path)) as reader:
        for network, _ in reader._db_reader:  # the reader's own network iterator
            addresses += [str(network.network_address), str(network.broadcast_address)]
    return addresses


def expected_city(city: geoip2.database.Reader, asn: geoip2.database.Reader, ip: str) -> dict[str, Any]:
    """The reader's City answer, with the ASN reader's traits where it holds the address."""
    wanted = city.city(ip).to_dict()
    try:
        number = asn.asn(ip)
    except geoip2.errors.AddressNotFoundError:
        return wanted
    traits = wanted["traits"]
    traits["autonomous_system_number"] = number.autonomous_system_number
    if number.autonomous_system_organization is not None:  # a model's to_dict leaves None out
        traits["autonomous_system_organization"] = number.autonomous_system_organization
    narrower = min(ipaddress.ip_network(traits["network"]), number.network, key=lambda net: net.num_addresses)
    traits["network"] = str(narrower)
    return wanted


def expected_country(city: geoip2.database.Reader, ip: str) -> dict[str, Any]:
    """The City record's country part, as a Country model holds it."""
    record, prefix = city._db_reader.get_with_prefix_len(ip)
    assert isinstance(record, dict)
    return geoip2.models.Country(["en"], ip_address=ip, prefix_len=prefix, **record).to_dict()


def test_the_geoip2_client_answers_what_the_readers_answer_at_every_network_edge(
    deployment: Deployment,
) -> None:
    client = geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host)
    with (
        geoip2.database.Reader(str(deployment.city)) as city,
        geoip2.database.Reader(str(deployment.asn)) as asn,
    ):
        addresses = edges(deployment.city)
        assert len(addresses) == 18  # 9 networks: the no-CIDR range is two, the equal neighbours two
        for ip in addresses:
            answer = client.city(ip)
            assert answer.to_dict() == expected_city(city, asn, ip), ip
            assert client.country(ip).to_dict() == expected_country(city, ip), ip
        # Spot checks of what the equality covers
        london = client.city("81.2.69.0")
        assert london.city.names["ja"] == "ロンドン"
        assert [sub.iso_code for sub in london.subdivisions] == ["ENG", "WBK"]
        assert london.traits.network == ipaddress.ip_network("81.2.69.0/24")  # City's, inside ASN's /23
        assert london.traits.autonomous_system_number == 20712
        zurich = client.city("81.2.70.1")
        assert zurich.traits.network == ipaddress.ip_network("81.2.70.0/26")  # ASN's, inside City's /25
        assert zurich.registered_country.iso_code == "DE"
        assert client.city("81.2.70.200").traits.network == ipaddress.ip_network("81.2.70.128/25")
        ramstein = client.city("2a02:2770::1")
        assert ramstein.represented_country.type == "military"
        assert ramstein.country.is_in_european_union is True


def test_the_service_documents_and_their_content_types_are_maxminds(deployment: Deployment) -> None:
    for service in shapes.SERVICES:
        response = requests.get(
            f"https://{deployment.host}/geoip/v2.1/{service}/81.2.69.160",
            auth=(str(ACCOUNT), KEY),
            timeout=10,
        )
        assert response.status_code == 200
        assert response.headers["Content-Type"] == shapes.CONTENT_TYPES[service]
        assert set(response.json()) <= set(shapes.RECORDS[service])
    country = requests.get(
        f"https://{deployment.host}/geoip/v2.1/country/81.2.69.160", auth=("1", KEY), timeout=10
    )
    assert "autonomous_system_number" not in country.json()["traits"]  # Country has no ASN traits
    assert "city" not in country.json()


@pytest.mark.parametrize(
    ("ip", "code"),
    [
        ("8.8.8.8", "IP_ADDRESS_NOT_FOUND"),
        ("192.168.1.1", "IP_ADDRESS_RESERVED"),
        ("2001:db8::1", "IP_ADDRESS_RESERVED"),
    ],
)
def test_addresses_no_dataset_holds_raise_the_clients_address_not_found(
    deployment: Deployment, ip: str, code: str
) -> None:
    client = geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host)
    with pytest.raises(geoip2.errors.AddressNotFoundError):
        client.city(ip)
    response = requests.get(f"https://{deployment.host}/geoip/v2.1/city/{ip}", auth=("1", KEY), timeout=10)
    assert response.json()["code"] == code
    assert response.status_code == (404 if code == "IP_ADDRESS_NOT_FOUND" else 400)  # MaxMind's statuses
    assert response.headers["Content-Type"] == shapes.ERROR_CONTENT_TYPE


def test_an_invalid_address_and_a_bad_key_raise_the_clients_own_errors(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python's ipaddress takes a zone id; ipmeta refuses it (it names an interface, not an address)
    with pytest.raises(geoip2.errors.InvalidRequestError) as invalid:
        geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host).city("fe80::1%eth0")
    _, code, status, _ = invalid.value.args  # (message, code, status, uri)
    assert (code, status) == ("IP_ADDRESS_INVALID", 400)
    response = requests.get(
        f"https://{deployment.host}/geoip/v2.1/city/999.1.1.1", auth=("1", KEY), timeout=10
    )
    assert (response.status_code, response.json()["code"]) == (400, "IP_ADDRESS_INVALID")
    with pytest.raises(geoip2.errors.AuthenticationError):
        geoip2.webservice.Client(ACCOUNT, "not-the-key", host=deployment.host).city("81.2.69.160")
    refusing = ipinfo_at(deployment, monkeypatch, "not-the-key")
    for handler in (refusing.classic, refusing.lite, refusing.core):
        with pytest.raises(APIError) as refused:
            handler.getDetails("81.2.69.160")
        assert refused.value.error_code == 401
    # The handlers check an address themselves before asking; the routes refuse a malformed one as ipinfo
    for api in ("lite", "lookup"):
        wrong = requests.get(f"https://{deployment.host}/ipinfo/{api}/999.1.1.1?token={KEY}", timeout=10)
        assert (wrong.status_code, wrong.json()["error"]["title"]) == (404, "Wrong ip"), api


def ipinfo_at(deployment: Deployment, patch: pytest.MonkeyPatch, token: str = KEY) -> IpinfoClients:
    return ipinfo_clients(f"https://{deployment.host}/ipinfo", token, patch)


def expected_ipinfo(city: geoip2.database.Reader, asn: geoip2.database.Reader, ip: str) -> dict[str, str]:
    record = city.city(ip)
    wanted = {"ip": ip}
    if record.city.name:
        wanted["city"] = record.city.name
    if record.subdivisions:
        wanted["region"] = record.subdivisions[0].names["en"]
    wanted["country"] = str(record.country.iso_code)
    wanted["loc"] = f"{record.location.latitude!r},{record.location.longitude!r}"
    try:
        number = asn.asn(ip)
        name = number.autonomous_system_organization
        wanted["org"] = f"AS{number.autonomous_system_number}" + (f" {name}" if name else "")
    except geoip2.errors.AddressNotFoundError:
        pass
    if record.postal.code:
        wanted["postal"] = record.postal.code
    wanted["timezone"] = str(record.location.time_zone)
    return wanted


FIELDS = ("city", "region", "country", "loc", "org", "postal", "timezone")


def test_the_ipinfo_client_answers_what_the_files_hold(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = ipinfo_at(deployment, monkeypatch).classic
    located = [
        ip for ip in edges(deployment.city) if not ip.startswith("202.196.224.")
    ]  # that one has no location
    with (
        geoip2.database.Reader(str(deployment.city)) as city,
        geoip2.database.Reader(str(deployment.asn)) as asn,
    ):
        for ip in located:
            details = handler.getDetails(ip).all
            assert {name: details[name] for name in ("ip", *FIELDS) if name in details} == expected_ipinfo(
                city, asn, ip
            ), ip
        batch = handler.getBatchDetails([*located, "8.8.8.8"])
        for ip in located:
            assert {
                name: batch[ip][name] for name in ("ip", *FIELDS) if name in batch[ip]
            } == expected_ipinfo(city, asn, ip)
    assert batch["8.8.8.8"]["ip"] == "8.8.8.8"  # held by no dataset: the address alone, as ipinfo answers
    london = handler.getDetails("81.2.69.160")
    assert (london.org, london.loc, london.region) == (
        "AS20712 Andrews & Arnold Ltd",
        "51.5142,-0.0931",
        "England",
    )
    assert handler.getDetails("10.1.2.3").bogon is True  # the client answers bogons itself
    # An AS with a number and no name (61 of the 640 networks of MaxMind's GeoLite2-ASN test database)
    assert handler.getDetails("89.160.20.120").org == "AS7018"


def test_the_ipinfo_routes_take_a_query_token_a_field_and_refuse_a_wrong_ip(deployment: Deployment) -> None:
    base = f"https://{deployment.host}/ipinfo"
    assert requests.get(f"{base}/81.2.69.160/city?token={KEY}", timeout=10).text == "London\n"
    assert (
        requests.get(f"{base}/81.2.69.160/json?token={KEY}", timeout=10).json()["org"].startswith("AS20712 ")
    )
    bogon = requests.get(f"{base}/10.1.2.3", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert bogon.json() == {"ip": "10.1.2.3", "bogon": True}
    wrong = requests.get(f"{base}/999.1.1.1?token={KEY}", timeout=10)
    assert wrong.status_code == 404
    assert wrong.json() == {
        "status": 404,
        "error": {"title": "Wrong ip", "message": "Please provide a valid IP address"},
    }
    batch = requests.post(
        f"{base}/batch?token={KEY}", json=["81.2.69.160/country", "nope"], timeout=10
    ).json()
    assert batch["81.2.69.160/country"] == "GB"
    assert batch["nope"]["error"]["title"] == "Wrong ip"
    assert requests.get(f"{base}/81.2.69.160", timeout=10).status_code == 401  # no key at all


def test_ipinfo_at_the_root_serves_the_clients_own_paths(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = dependencies.current()
    monkeypatch.setattr(current, "api", dataclasses.replace(current.api, ipinfo_at_root=True))
    clients = ipinfo_clients(f"https://{deployment.host}", KEY, monkeypatch)
    details = clients.classic.getDetails("175.16.199.1")
    assert (details.city, details.country, details.org) == (
        "Changchun",
        "CN",
        "AS4837 CHINA UNICOM China169 Backbone",
    )
    lite, core = clients.lite.getDetails("175.16.199.1"), clients.core.getDetails("175.16.199.1")
    assert (lite.asn, lite.country_code) == ("AS4837", "CN")
    assert (core.geo["city"], core.all["as"]["asn"]) == ("Changchun", "AS4837")
    # The other APIs keep their paths and their errors
    assert (
        requests.get(
            f"https://{deployment.host}/v1/ip/175.16.199.1", headers={"x-api-key": KEY}, timeout=10
        ).status_code
        == 200
    )
    missing = requests.get(f"https://{deployment.host}/v1/nothing", headers={"x-api-key": KEY}, timeout=10)
    assert missing.json()["code"] == "ROUTE_NOT_FOUND"


def test_me_is_the_caller_and_without_keys_any_credentials_pass(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller here is 127.0.0.1: a reserved address no dataset holds
    with pytest.raises(geoip2.errors.AddressNotFoundError):
        geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host).city()
    me = requests.get(f"https://{deployment.host}/geoip/v2.1/country/me", auth=("1", KEY), timeout=10)
    assert (me.status_code, me.json()["code"]) == (400, "IP_ADDRESS_RESERVED")
    clients = ipinfo_at(deployment, monkeypatch)
    # classic: /ipinfo/json; Lite: /ipinfo/lite/me; Core and Plus: /ipinfo/lookup
    for handler in (clients.classic, clients.lite, clients.core, clients.plus):
        caller = handler.getDetails()
        assert (caller.ip, caller.bogon) == ("127.0.0.1", True), handler
    # As `ipmeta serve` runs with no keys configured, so any account and key will do. Behind the
    # url front, whose function checks keys itself: in this process it replaces the key check the
    # `deployment` fixture installed, as a separate `ipmeta serve` process starts without one.
    from ipmeta.api.handler import handler

    tls = tls_context(str(deployment.certificate.certificate), str(deployment.certificate.key))
    open_server = LocalApiServer("127.0.0.1", 0, handler, tls=tls, front=Front.URL)
    threading.Thread(target=open_server.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{open_server.server_address[1]}"
        assert (
            geoip2.webservice.Client(1, "anything", host=host).city("175.16.199.1").city.name == "Changchun"
        )
        assert requests.get(f"https://{host}/v1/ip/175.16.199.1", timeout=10).status_code == 200
    finally:
        open_server.shutdown()
        open_server.server_close()


# -- flat layouts and columns named like records (issue 26) -------------------------------------


def test_the_geoip2_client_gets_a_city_model_from_a_dbip_city_lite_csv_load(deployment: Deployment) -> None:
    # Given DB-IP City Lite's flat continent,country,stateprov,city,latitude,longitude and its ASN Lite
    client = geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host)
    # When MaxMind's client asks for a City document: Then it parses one (it raised TypeError)
    san_diego = client.city("2001:480::1")
    assert isinstance(san_diego, geoip2.models.City)
    assert (san_diego.continent.code, san_diego.country.iso_code, san_diego.city.name) == (
        "NA",
        "US",
        "San Diego",
    )
    assert san_diego.subdivisions.most_specific.name == "California"
    assert (san_diego.location.latitude, san_diego.location.longitude) == (32.7157, -117.165)
    assert san_diego.traits.autonomous_system_number == 668
    assert san_diego.traits.network == ipaddress.ip_network("2001:480::/32")
    brisbane = client.insights("1.0.0.1")  # where the `traits` text column is too (next test)
    assert (brisbane.country.iso_code, brisbane.city.name) == ("AU", "South Brisbane")
    traits = brisbane.traits
    assert (traits.autonomous_system_number, traits.autonomous_system_organization) == (
        13335,
        "Cloudflare, Inc.",
    )
    assert traits.network == ipaddress.ip_network("1.0.0.0/24")
    assert client.country("2001:480::1").to_dict()["country"] == {"iso_code": "US"}
    # Every record of the raw document is an object (MaxMind's clients build each with Record(**value))
    raw = requests.get(f"https://{deployment.host}/geoip/v2.1/city/2001:480::1", auth=("1", KEY), timeout=10)
    assert raw.json()["country"] == {"iso_code": "US"}
    assert raw.json()["location"] == {"latitude": 32.7157, "longitude": -117.165}


def test_a_text_column_named_traits_leaves_every_answer_standing(deployment: Deployment) -> None:
    # Given a dataset whose text column is named `traits`, over DB-IP's 1.0.0.0/24
    client = geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host)
    # When each service answers there: Then 200, the other datasets' fields, traits an object
    for service in shapes.SERVICES:
        response = requests.get(
            f"https://{deployment.host}/geoip/v2.1/{service}/1.0.0.1", auth=("1", KEY), timeout=10
        )
        assert response.status_code == 200, (service, response.text)
        assert response.json()["traits"]["ip_address"] == "1.0.0.1"
        assert response.json()["country"] == {"iso_code": "AU"}
    assert client.city("1.0.0.1").traits.autonomous_system_number == 13335
    # /v1 still answers the column as it was loaded: the GeoIP2 document ignores it
    v1 = requests.get(f"https://{deployment.host}/v1/ip/1.0.0.1", headers={"x-api-key": KEY}, timeout=10)
    assert v1.json()["datasets"]["notes"]["data"] == {"traits": "gold customer"}


# -- ipinfo's Lite and Core/Plus APIs (issue 26) -------------------------------------------------


def expected_lite(city: geoip2.database.Reader, asn: geoip2.database.Reader, ip: str) -> dict[str, str]:
    record = city.city(ip)
    wanted = {"ip": ip}
    try:
        number = asn.asn(ip)
        wanted["asn"] = f"AS{number.autonomous_system_number}"
        if number.autonomous_system_organization:
            wanted["as_name"] = number.autonomous_system_organization
    except geoip2.errors.AddressNotFoundError:
        pass
    wanted["country_code"] = str(record.country.iso_code)
    wanted["country"] = record.country.names["en"]
    wanted["continent_code"] = str(record.continent.code)
    return wanted


def expected_core(city: geoip2.database.Reader, asn: geoip2.database.Reader, ip: str) -> dict[str, Any]:
    record = city.city(ip)
    geo: dict[str, Any] = {"city": record.city.names.get("en")}
    if record.subdivisions:
        geo |= {"region": record.subdivisions[0].names["en"], "region_code": record.subdivisions[0].iso_code}
    geo |= {
        "country": record.country.names["en"],
        "country_code": record.country.iso_code,
        "continent_code": record.continent.code,
        "latitude": record.location.latitude,
        "longitude": record.location.longitude,
        "timezone": record.location.time_zone,
        "postal_code": record.postal.code,
    }
    wanted: dict[str, Any] = {
        "ip": ip,
        "geo": {name: value for name, value in geo.items() if value is not None},
    }
    lite = expected_lite(city, asn, ip)
    if "asn" in lite:
        wanted["as"] = {"asn": lite["asn"], "name": lite.get("as_name")}
        wanted["as"] = {name: value for name, value in wanted["as"].items() if value is not None}
    return wanted


LITE_FIELDS = ("ip", "asn", "as_name", "country_code", "country", "continent_code")
GEO_FIELDS = (
    "city",
    "region",
    "region_code",
    "country",
    "country_code",
    "continent_code",
    "latitude",
    "longitude",
    "timezone",
    "postal_code",
)


def test_the_lite_and_core_handlers_answer_what_the_files_hold(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given HandlerLite, HandlerCore and HandlerPlus with their API URLs at ipmeta's /ipinfo
    clients = ipinfo_at(deployment, monkeypatch)
    with (
        geoip2.database.Reader(str(deployment.city)) as city,
        geoip2.database.Reader(str(deployment.asn)) as asn,
    ):
        for ip in edges(deployment.city):
            # When each asks for an address the City and ASN datasets hold: Then what the files hold
            lite = clients.lite.getDetails(ip).all
            assert {name: lite[name] for name in LITE_FIELDS if name in lite} == expected_lite(
                city, asn, ip
            ), ip
            for handler in (clients.core, clients.plus):
                core = handler.getDetails(ip).all
                shaped = {
                    "ip": core["ip"],
                    "geo": {name: core["geo"][name] for name in GEO_FIELDS if name in core["geo"]},
                }
                if "as" in core:
                    shaped["as"] = core["as"]
                assert shaped == expected_core(city, asn, ip), ip
    # What the clients add from their own tables, and what ipmeta sends: the continent's name
    london = clients.lite.getDetails("81.2.69.160")
    assert (london.asn, london.as_name, london.country_name, london.isEU) == (
        "AS20712",
        "Andrews & Arnold Ltd",
        "United Kingdom",
        False,
    )
    base = f"https://{deployment.host}/ipinfo"
    raw = requests.get(f"{base}/lite/81.2.69.160?token={KEY}", timeout=10).json()
    assert raw["continent"] == "Europe"
    assert clients.lite.getDetails("89.160.20.120").all.get("as_name") is None  # AS7018 has no name
    assert clients.core.getDetails("81.2.70.1").is_anycast is True  # Zurich's trait
    assert clients.core.getDetails("202.196.224.1").is_satellite is True
    # Fields one by one, and an address no dataset holds: the address alone, as ipinfo answers
    assert requests.get(f"{base}/lite/81.2.69.160/asn?token={KEY}", timeout=10).text == "AS20712\n"
    assert requests.get(f"{base}/lookup/81.2.69.160/geo?token={KEY}", timeout=10).json()["city"] == "London"
    assert requests.get(f"{base}/lite/8.8.8.8?token={KEY}", timeout=10).json() == {"ip": "8.8.8.8"}
    assert requests.get(f"{base}/lookup/8.8.8.8?token={KEY}", timeout=10).json() == {"ip": "8.8.8.8"}
