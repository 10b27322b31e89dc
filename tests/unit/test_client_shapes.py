"""The pure pieces behind the GeoIP2 and ipinfo routes: keys in any form, nesting, networks, fields."""

from __future__ import annotations

import base64
import ipaddress
import json
from decimal import Decimal

import geoip2.models
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.api.fronts.credentials import client_of, request_key
from ipmeta.schema.ips import parse_ip
from ipmeta.shapes import exact_json, geoip2_document, ipinfo_document


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("route", "headers", "query", "key"),
    [
        ("/v1/{proxy+}", {"x-api-key": "K"}, None, "K"),
        ("/v1/{proxy+}", {"Authorization": basic("1", "K")}, {"token": "K"}, None),  # /v1: x-api-key only
        ("/geoip/{proxy+}", {"Authorization": basic("123456", "K")}, None, "K"),  # GeoIP2: the password
        ("/geoip/{proxy+}", {"X-Api-Key": "K"}, None, None),
        ("/ipinfo/{proxy+}", {"authorization": "Bearer K"}, None, "K"),  # ipinfo
        ("/{proxy+}", {}, {"token": "K"}, "K"),  # ipinfo's query form, at the root (ipinfoAtRoot)
        ("/geoip/{proxy+}", {"authorization": basic("123456", "")}, None, None),
        ("/geoip/{proxy+}", {"authorization": "Basic not-base64!"}, None, None),
        ("/ipinfo/{proxy+}", {"authorization": "Digest K"}, None, None),
        ("/ipinfo/{proxy+}", {"authorization": "K"}, {"token": ""}, None),
        ("/v1/{proxy+}", None, None, None),
    ],
)
def test_the_key_is_read_in_the_form_each_family_s_clients_send(
    route: str, headers: dict[str, str] | None, query: dict[str, str] | None, key: str | None
) -> None:
    assert request_key(route, headers, query) == key


def test_only_a_known_key_names_a_client() -> None:
    keys = {"team": "K" * 20, "broken": 7}
    assert (
        client_of(request_key("/geoip/{proxy+}", {"authorization": basic("1", "K" * 20)}, None), keys)
        == "team"
    )
    assert client_of("K" * 19, keys) is None
    assert client_of("7", keys) is None


def test_dotted_columns_nest_back_into_maxminds_records() -> None:
    flat = {
        "city.names.en": "Zurich",
        "city.names.de": "Zürich",
        "subdivisions.1.iso_code": "X",
        "subdivisions.0.iso_code": "ZH",
        "location.latitude": Decimal("47.3667"),
        "traits.is_anycast": True,
        "postal.code": None,  # an empty cell: left out
    }
    assert geoip2_document.nested(flat) == {
        "city": {"names": {"en": "Zurich", "de": "Zürich"}},
        "subdivisions": [{"iso_code": "ZH"}, {"iso_code": "X"}],
        "location": {"latitude": Decimal("47.3667")},
        "traits": {"is_anycast": True},
    }


@pytest.mark.parametrize(
    ("data", "traits"),
    [
        (
            {"autonomous_system_number": 13335, "autonomous_system_organization": "Cloudflare"},
            {"autonomous_system_number": 13335, "autonomous_system_organization": "Cloudflare"},
        ),
        (
            {"asn": "AS13335", "organization": "Cloudflare"},
            {"autonomous_system_number": 13335, "autonomous_system_organization": "Cloudflare"},
        ),
        ({"cloud_provider": "cloudflare"}, None),
    ],
)
def test_flat_asn_layouts_become_traits(data: dict[str, object], traits: dict[str, object] | None) -> None:
    assert geoip2_document.section_document(data).get("traits") == traits


def test_each_service_answers_its_own_records_and_traits() -> None:
    document = geoip2_document.section_document(
        {
            "country.iso_code": "CH",
            "city.names.en": "Zurich",
            "anonymizer.is_anonymous": True,
            "traits.is_anycast": True,
            "autonomous_system_number": 3303,
        }
    )
    assert geoip2_document.for_service(document, "country") == {
        "country": {"iso_code": "CH"},
        "traits": {"is_anycast": True},
    }
    city = geoip2_document.for_service(document, "city")
    assert set(city) == {"country", "city", "traits"}
    assert city["traits"] == {"is_anycast": True, "autonomous_system_number": 3303}
    assert "anonymizer" in geoip2_document.for_service(document, "insights")


def test_the_network_is_the_largest_cidr_inside_every_contributing_range() -> None:
    address = parse_ip("81.2.70.200")
    city = (
        {"country.iso_code": "CH"},
        int(ipaddress.ip_address("81.2.70.0")),
        int(ipaddress.ip_address("81.2.70.255")),
    )
    asn = ({"asn": 1}, int(ipaddress.ip_address("81.2.64.0")), int(ipaddress.ip_address("81.2.127.255")))
    cloud = ({"cloud_provider": "x"}, address.value, address.value)  # gives City nothing: not counted
    answer = geoip2_document.document("city", address, [city, asn, cloud])
    assert answer is not None
    assert answer["traits"]["network"] == "81.2.70.0/24"
    assert answer["traits"]["ip_address"] == "81.2.70.200"
    assert geoip2_document.document("country", address, [cloud]) is None


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_largest_cidr_is_inside_the_range_and_cannot_grow(a: int, b: int, c: int) -> None:
    start, value, end = sorted((a, b, c))
    network = ipaddress.ip_network(geoip2_document.largest_cidr(4, value, start, end))
    assert start <= int(network.network_address) <= value <= int(network.broadcast_address) <= end
    if network.prefixlen:
        wider = network.supernet()
        assert int(wider.network_address) < start or int(wider.broadcast_address) > end


def test_documents_merge_in_precedence_order_arrays_whole() -> None:
    first = {"subdivisions": [{"iso_code": "A"}], "country": {"iso_code": "CH"}}
    second = {
        "subdivisions": [{"iso_code": "B"}, {"iso_code": "C"}],
        "country": {"iso_code": "DE", "geoname_id": 1},
    }
    assert geoip2_document.merged([first, second]) == {
        "subdivisions": [{"iso_code": "A"}],
        "country": {"iso_code": "CH", "geoname_id": 1},
    }


def test_ipinfo_fields_come_from_each_layouts_columns() -> None:
    fields = ipinfo_document.field_map({})
    geolite = {
        "city.names.en": "London",
        "subdivisions.0.names.en": "England",
        "country.iso_code": "GB",
        "location.latitude": Decimal("51.5142"),
        "location.longitude": Decimal("-0.0931"),
        "postal.code": "EC1A",
        "location.time_zone": "Europe/London",
        "autonomous_system_number": 20712,
        "autonomous_system_organization": "Andrews & Arnold Ltd",
    }
    assert ipinfo_document.details("81.2.69.160", geolite, False, fields) == {
        "ip": "81.2.69.160",
        "city": "London",
        "region": "England",
        "country": "GB",
        "loc": "51.5142,-0.0931",
        "org": "AS20712 Andrews & Arnold Ltd",
        "postal": "EC1A",
        "timezone": "Europe/London",
    }
    dbip = {
        "city": "Sydney",
        "region": "New South Wales",
        "country": "AU",
        "lat": Decimal("1E-5"),
        "lon": 151,
    }
    assert ipinfo_document.details("1.1.1.1", dbip, False, fields)["loc"] == "0.00001,151"
    location_db = {
        "state1": "Bavaria",
        "country_code": "DE",
        "asn": 3320,
        "organization": "Deutsche Telekom AG",
    }
    answer = ipinfo_document.details("2.2.2.2", location_db, False, fields)
    assert (answer["region"], answer["country"], answer["org"]) == (
        "Bavaria",
        "DE",
        "AS3320 Deutsche Telekom AG",
    )
    assert ipinfo_document.details("10.0.0.1", None, True, fields) == {"ip": "10.0.0.1", "bogon": True}


def test_a_deployment_names_its_own_columns() -> None:
    fields = ipinfo_document.field_map({"city": "town", "loc": ["y", "x"]})
    answer = ipinfo_document.details(
        "1.1.1.1", {"town": "Bern", "y": 1, "x": 2, "city.names.en": "no"}, False, fields
    )
    assert (answer["city"], answer["loc"]) == ("Bern", "1,2")
    with pytest.raises(ValueError, match="ipinfo has no field"):
        ipinfo_document.field_map({"hostname": "h"})
    with pytest.raises(ValueError, match="reads 2 column"):
        ipinfo_document.field_map({"loc": "latlon"})


# -- issue 26: columns named like records, flat layouts, org without a name, Lite and Core -----


@pytest.mark.parametrize(
    "data",
    [
        {"traits": "gold customer"},
        {"traits": Decimal(7), "location": "51.5,-0.1", "postal": True},
        {"city.names": "London", "subdivisions.0": "England", "registered_country": ["DE"]},
        {"subdivisions.x.iso_code": "ENG", "anonymizer.residential": "yes", "city.locales": "en"},
    ],
    ids=["text-traits", "scalars-as-records", "scalars-inside-records", "maps-and-lists-misplaced"],
)
def test_a_column_named_like_a_record_never_makes_a_record_a_non_object(data: dict[str, object]) -> None:
    # Given a dataset whose columns share names with MaxMind's records, beside a real one
    real = {"country.iso_code": "GB", "traits.is_anycast": True}
    # When its section becomes a document
    document = geoip2_document.section_document({**data, **real})
    # Then every record is an object (subdivisions a list of objects), the real fields kept
    for name, record in document.items():
        assert isinstance(record, list if name == "subdivisions" else dict), name
        assert all(isinstance(item, dict) for item in record) if isinstance(record, list) else True
    assert document["country"] == {"iso_code": "GB"}
    assert document["traits"]["is_anycast"] is True
    assert "locales" not in document.get("city", {})  # geoip2's City(locales, **city) would refuse it


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (  # DB-IP City Lite CSV (loader.formats.dbip_csv)
            {
                "continent": "EU",
                "country": "GB",
                "region": "England",
                "city": "London",
                "lat": Decimal("51.5142"),
                "lon": Decimal("-0.0931"),
            },
            {
                "continent": {"code": "EU"},
                "country": {"iso_code": "GB"},
                "subdivisions": [{"names": {"en": "England"}}],
                "city": {"names": {"en": "London"}},
                "location": {"latitude": Decimal("51.5142"), "longitude": Decimal("-0.0931")},
            },
        ),
        (  # GeoLite2 City CSV, Blocks joined with Locations (loader.formats.geoip2_csv)
            {
                "continent_code": "OC",
                "continent_name": "Oceania",
                "country_iso_code": "AU",
                "country_name": "Australia",
                "subdivision_1_iso_code": "QLD",
                "subdivision_1_name": "Queensland",
                "city_name": "Brisbane",
                "time_zone": "Australia/Brisbane",
                "is_in_european_union": Decimal(0),
                "postal_code": "4101",
                "latitude": Decimal("-27.4767"),
                "longitude": Decimal("153.017"),
                "accuracy_radius": Decimal(100),
                "registered_country_iso_code": "AU",
                "is_anycast": Decimal(1),
                "geoname_id": Decimal(2174003),
            },
            {
                "continent": {"code": "OC", "names": {"en": "Oceania"}},
                "country": {"iso_code": "AU", "names": {"en": "Australia"}, "is_in_european_union": False},
                "registered_country": {"iso_code": "AU"},
                "subdivisions": [{"iso_code": "QLD", "names": {"en": "Queensland"}}],
                "city": {"names": {"en": "Brisbane"}},
                "location": {
                    "time_zone": "Australia/Brisbane",
                    "latitude": Decimal("-27.4767"),
                    "longitude": Decimal("153.017"),
                    "accuracy_radius": 100,
                },
                "postal": {"code": "4101"},
                "traits": {"is_anycast": True},
            },
        ),
        (  # ip-location-db city (FLAT_CITY) and its postcode typed a number
            {"country_code": "DE", "state1": "Bavaria", "city": "Munich", "postcode": Decimal(80331)},
            {
                "country": {"iso_code": "DE"},
                "subdivisions": [{"names": {"en": "Bavaria"}}],
                "city": {"names": {"en": "Munich"}},
                "postal": {"code": "80331"},
            },
        ),
        (  # IPinfo Lite: country and continent are names there, beside their codes
            {
                "country": "United States",
                "country_code": "US",
                "continent": "North America",
                "continent_code": "NA",
                "asn": "AS15169",
                "as_name": "Google LLC",
            },
            {
                "country": {"iso_code": "US", "names": {"en": "United States"}},
                "continent": {"code": "NA", "names": {"en": "North America"}},
                "traits": {"autonomous_system_number": 15169, "autonomous_system_organization": "Google LLC"},
            },
        ),
    ],
    ids=["dbip-city-lite-csv", "geoip2-city-csv", "ip-location-db-city", "ipinfo-lite"],
)
def test_known_flat_layouts_become_maxminds_records(
    data: dict[str, object], expected: dict[str, object]
) -> None:
    assert geoip2_document.section_document(data) == expected


def test_a_dataset_s_own_dotted_column_wins_over_a_flat_one() -> None:
    document = geoip2_document.section_document({"country": "FR", "country.iso_code": "GB", "location": "x"})
    assert document == {"country": {"iso_code": "GB"}}


def test_an_as_number_without_a_name_is_the_org_alone() -> None:
    fields = ipinfo_document.field_map({})
    for data in (
        {"autonomous_system_number": 7018},
        {"asn": Decimal(7018)},
        {"traits.autonomous_system_number": 7018},
    ):
        assert ipinfo_document.details("12.0.0.1", data, False, fields)["org"] == "AS7018", data
    named = {"autonomous_system_number": 7018, "autonomous_system_organization": "AT&T Services, Inc."}
    assert ipinfo_document.details("12.0.0.1", named, False, fields)["org"] == "AS7018 AT&T Services, Inc."


GEOLITE_CITY_AND_ASN = {
    "city.names.en": "London",
    "subdivisions.0.names.en": "England",
    "subdivisions.0.iso_code": "ENG",
    "country.iso_code": "GB",
    "country.names.en": "United Kingdom",
    "continent.code": "EU",
    "location.latitude": Decimal("51.5142"),
    "location.longitude": Decimal("-0.0931"),
    "postal.code": "EC1A",
    "location.time_zone": "Europe/London",
    "traits.is_anycast": False,
    "autonomous_system_number": Decimal(20712),
    "autonomous_system_organization": "Andrews & Arnold Ltd",
}


def test_ipinfo_lite_answers_its_fields_from_the_datasets_columns() -> None:
    fields = ipinfo_document.field_map({})
    assert ipinfo_document.lite("81.2.69.160", GEOLITE_CITY_AND_ASN, False, fields) == {
        "ip": "81.2.69.160",
        "asn": "AS20712",
        "as_name": "Andrews & Arnold Ltd",
        "country_code": "GB",
        "country": "United Kingdom",
        "continent_code": "EU",
        "continent": "Europe",  # from the code: the dataset has no continent name
    }
    assert ipinfo_document.lite("10.0.0.1", None, True, fields) == {"ip": "10.0.0.1", "bogon": True}


def test_ipinfo_core_answers_nested_geo_and_as() -> None:
    fields = ipinfo_document.field_map({"as_domain": "domain"})
    answer = ipinfo_document.core(
        "81.2.69.160", {**GEOLITE_CITY_AND_ASN, "domain": "aa.net.uk"}, False, fields
    )
    assert answer == {
        "ip": "81.2.69.160",
        "geo": {
            "city": "London",
            "region": "England",
            "region_code": "ENG",
            "country": "United Kingdom",
            "country_code": "GB",
            "continent": "Europe",
            "continent_code": "EU",
            "latitude": Decimal("51.5142"),
            "longitude": Decimal("-0.0931"),
            "timezone": "Europe/London",
            "postal_code": "EC1A",
        },
        "as": {"asn": "AS20712", "name": "Andrews & Arnold Ltd", "domain": "aa.net.uk"},
        "is_anycast": False,
    }
    # Columns named like ipinfo's own fields are never copied into an answer
    hostile = {"ip": "6.6.6.6", "geo": "Mars", "as": "AS1", "org": "evil", "loc": "x", "bogon": "yes"}
    assert ipinfo_document.core("1.2.3.4", hostile, False, fields) == {"ip": "1.2.3.4"}
    assert ipinfo_document.lite("1.2.3.4", hostile, False, fields) == {"ip": "1.2.3.4"}
    assert ipinfo_document.details("1.2.3.4", hostile, False, fields) == {"ip": "1.2.3.4"}


#: Column parts that collide with MaxMind's records and fields, ipinfo's fields, and odd ones.
_PARTS = st.sampled_from(
    [
        *geoip2_document.RECORDS["insights"],
        *("names", "en", "iso_code", "code", "latitude", "geoname_id", "is_anycast", "residential"),
        *("network", "ip_address", "locales", "self", "prefix_len", "network_last_seen"),
        *("country_code", "asn", "organization", "as_name", "city_name", "lat", "lon", "region"),
        *("ip", "org", "loc", "bogon", "geo", "as", "hostname", "maxmind", "0", "1", "²", "", "x"),
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["GB", "EU", "AS13335", "2024-01-31", "true", "0", "1"]),
    st.binary(max_size=3),
)
_COLUMNS = st.dictionaries(
    st.lists(_PARTS, min_size=1, max_size=4).map(".".join),
    st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3)),
    max_size=10,
)
_MODELS = {"country": geoip2.models.Country, "city": geoip2.models.City, "insights": geoip2.models.Insights}


@settings(max_examples=300, deadline=None)
@given(_COLUMNS)
def test_any_columns_make_documents_maxminds_client_parses_and_ipinfo_answers_of_its_types(
    data: dict[str, object],
) -> None:
    # Given any columns (a hostile dataset's), When every shape answers from them
    address = parse_ip("81.2.69.160")
    for service, model in _MODELS.items():
        document = geoip2_document.document(service, address, [(data, address.value, address.value)])
        if document is None:
            continue
        # Then MaxMind's client builds its model from the JSON it would read, every record an object
        answer = model(["en"], **json.loads(exact_json.dumps(document)))
        answer.to_dict()
        assert isinstance(answer.country.name, str | None)
    fields = ipinfo_document.field_map({})
    classic = ipinfo_document.details("81.2.69.160", data, False, fields)
    assert all(isinstance(value, str) for value in classic.values())
    lite = ipinfo_document.lite("81.2.69.160", data, False, fields)
    assert all(isinstance(value, str) for value in lite.values())
    core = ipinfo_document.core("81.2.69.160", data, False, fields)
    assert all(isinstance(value, str | int | Decimal) for value in core.get("geo", {}).values())
    assert all(isinstance(value, str) for value in core.get("as", {}).values())
    json.loads(exact_json.dumps(core))


def test_the_openapi_document_describes_ipinfos_lite_and_lookup() -> None:
    from ipmeta.api.app import openapi_document

    paths = openapi_document()["paths"]
    operations = {path: item["get"]["operationId"] for path, item in paths.items() if "get" in item}
    assert operations["/ipinfo/lite/{ip}"] == "ipinfoLite"
    assert operations["/ipinfo/lookup/{ip}"] == "ipinfoLookup"
    assert operations["/ipinfo/lookup"] == "ipinfoLookupCaller"
    assert operations["/ipinfo/lite/{ip}/{field}"] == "ipinfoLiteField"
    schemas = openapi_document()["components"]["schemas"]
    assert set(schemas["IpinfoLite"]["properties"]) >= {"asn", "as_name", "country_code", "continent"}
    assert set(schemas["IpinfoCore"]["properties"]) >= {"ip", "geo", "as", "is_anycast"}  # "as", not "as_"
    # The root's copies (ipinfoAtRoot) are served, not documented twice
    assert not [path for path in paths if path.startswith(("/lite", "/lookup"))]
