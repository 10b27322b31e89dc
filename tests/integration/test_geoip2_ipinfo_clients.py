"""MaxMind's and ipinfo's own clients, pointed at ipmeta, answer what the loaded files hold.

Given a GeoIP2-City-layout database and a GeoLite2-ASN-layout one (``tests.geoip2_databases``)
loaded as datasets ``city`` and ``asn`` (``--mmdb-fields all``, ``--no-coalesce``), and the
real local server speaking TLS with a throwaway certificate and one API key:

- ``geoip2.webservice.Client(...).city(ip)`` equals ``geoip2.database.Reader(...).city(ip)``
  with the ASN reader's traits, for every network's first and last address: every locale's
  names, location, postal, subdivisions, registered and represented countries, and
  ``traits.network`` (the narrower of the two databases' networks, as the web service's
  "largest network where every field is the same"); ``.country(ip)`` equals the City
  record's country part;
- not found, reserved, invalid and a bad key raise the client's own exceptions;
- ``ipinfo.getHandler(token)`` with ``ipinfo.handler.API_URL`` at ipmeta gives the
  same city, region, country, loc and org, one by one and in a batch.
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
import ipinfo
import ipinfo.handler
import pytest
import requests
from ipinfo.error import APIError

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta.shapes import geoip2_document as shapes
from ipmeta_cli import main as cli
from ipmeta_cli.server import LocalApiServer, tls_context
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.geoip2_databases import write_asn, write_city
from tests.tls import ServerCertificate, make_server_certificate

KEY = "k3y-of-the-test-team"
ACCOUNT = 123456


@dataclass(frozen=True)
class Deployment:
    server: LocalApiServer
    city: Path
    asn: Path
    certificate: ServerCertificate

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def deployment(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    folder = tmp_path_factory.mktemp("clients")
    settings = Settings("ipmeta-test-clients", dynalite_endpoint, 0.0)
    table = LoaderTable.from_settings(settings)
    create_table_if_missing(table.client, table.table_name)
    city, asn = write_city(folder / "city.mmdb"), write_asn(folder / "asn.mmdb")
    certificate = make_server_certificate(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_DYNAMODB_ENDPOINT, dynalite_endpoint)
        patch.setenv(ENV_TABLE_NAME, settings.table_name)
        # The client trusts the team's own authority, as a deployment's users would.
        patch.setenv("REQUESTS_CA_BUNDLE", str(certificate.authority))
        for dataset, source in (("city", city), ("asn", asn)):
            arguments = ["load", "--data-dir", str(folder), "--dataset", dataset, "--mmdb-fields", "all"]
            assert cli.main([*arguments, "--no-coalesce", str(source)]) == 0
        dependencies.install(
            dependencies.Dependencies(store=table.lookup, pointer_cache_seconds=0.0, ranges=RangeCache(0))
        )
        from ipmeta.api.handler import handler

        server = LocalApiServer(
            "127.0.0.1",
            0,
            handler,
            api_keys=[KEY],
            tls=tls_context(str(certificate.certificate), str(certificate.key)),
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield Deployment(server, city, asn, certificate)
        finally:
            server.shutdown()
            server.server_close()
            dependencies.install(None)


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


def test_an_invalid_address_and_a_bad_key_raise_the_clients_own_errors(deployment: Deployment) -> None:
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
    with pytest.raises(APIError) as refused:
        ipinfo_handler(deployment, "not-the-key").getDetails("81.2.69.160")
    assert refused.value.error_code == 401


def ipinfo_handler(deployment: Deployment, token: str = KEY) -> ipinfo.Handler:
    ipinfo.handler.API_URL = f"https://{deployment.host}/ipinfo"
    # No client cache: every call asks the server.
    return ipinfo.getHandler(token, cache_options={"maxsize": 1, "ttl": 0})


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
        wanted["org"] = f"AS{number.autonomous_system_number} {number.autonomous_system_organization}"
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
    monkeypatch.setattr(ipinfo.handler, "API_URL", ipinfo.handler.API_URL)  # restored after the test
    handler = ipinfo_handler(deployment)
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
    monkeypatch.setattr(ipinfo.handler, "API_URL", f"https://{deployment.host}")
    details = ipinfo.getHandler(KEY, cache_options={"maxsize": 1, "ttl": 0}).getDetails("175.16.199.1")
    assert (details.city, details.country, details.org) == (
        "Changchun",
        "CN",
        "AS4837 CHINA UNICOM China169 Backbone",
    )
    # The other APIs keep their paths and their errors
    assert (
        requests.get(
            f"https://{deployment.host}/v1/ip/175.16.199.1", headers={"x-api-key": KEY}, timeout=10
        ).status_code
        == 200
    )
    missing = requests.get(f"https://{deployment.host}/v1/nothing", headers={"x-api-key": KEY}, timeout=10)
    assert missing.json()["code"] == "ROUTE_NOT_FOUND"


def test_me_is_the_caller_and_without_keys_any_credentials_pass(deployment: Deployment) -> None:
    # The caller here is 127.0.0.1: a reserved address no dataset holds
    with pytest.raises(geoip2.errors.AddressNotFoundError):
        geoip2.webservice.Client(ACCOUNT, KEY, host=deployment.host).city()
    me = requests.get(f"https://{deployment.host}/geoip/v2.1/country/me", auth=("1", KEY), timeout=10)
    assert (me.status_code, me.json()["code"]) == (400, "IP_ADDRESS_RESERVED")
    caller = ipinfo_handler(deployment).getDetails()
    assert (caller.ip, caller.bogon) == ("127.0.0.1", True)
    # As `ipmeta serve` runs by default: no keys configured, so any account and key will do
    from ipmeta.api.handler import handler

    tls = tls_context(str(deployment.certificate.certificate), str(deployment.certificate.key))
    open_server = LocalApiServer("127.0.0.1", 0, handler, tls=tls)
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
