"""Reading MaxMind DB files: flattened columns, native types, IPv4 inside IPv6 trees, damaged files.

The databases are written here by ``loader.export.mmdb_writer`` and checked against
``maxminddb``'s own answers, so the reader is tested against the library, not
against the writer.
"""

from __future__ import annotations

import gzip
import ipaddress
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import maxminddb
import pytest

from loader.errors import SourceError
from loader.export.mmdb_writer import METADATA_MARKER, DatabaseMetadata, write_database
from loader.formats import (
    ColumnEvidence,
    FormatOptions,
    Header,
    RowError,
    SourceRow,
    open_rows,
    parse_field_map,
)
from loader.formats.mmdb_fields import MAX_DISCOVERED_COLUMNS, pick, split_path
from tests.unit.test_formats_real_mmdb import flatten

V4 = 4
V6 = 6


@pytest.fixture(autouse=True, params=["C extension", "pure Python"])
def reader_implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with both readers: the loader Lambda ships the pure-Python one."""
    if request.param == "pure Python":
        monkeypatch.setattr(maxminddb, "open_database", maxminddb.Reader)


def net(text: str) -> tuple[int, int, int]:
    network = ipaddress.ip_network(text)
    return network.version, int(network.network_address), int(network.broadcast_address)


def make_db(
    path: Path,
    networks: Sequence[tuple[str, Any]],
    database_type: str,
    *,
    aliases: bool = False,
) -> Path:
    ranges = sorted((*net(text), record) for text, record in networks)
    write_database(ranges, path, DatabaseMetadata(database_type, {"en": "test"}), ipv4_aliases=aliases)
    return path


def read(path: Path, **options: Any) -> tuple[list[str], list[SourceRow], list[str]]:
    entries = list(open_rows(path, path.name, FormatOptions(**options)))
    header = entries[0]
    assert isinstance(header, Header)
    rows = [entry for entry in entries if isinstance(entry, SourceRow)]
    return header.columns, rows, [entry.message for entry in entries if isinstance(entry, RowError)]


def city(code: str, geoname: int, latitude: float, **extra: Any) -> dict[str, Any]:
    return {
        "city": {"geoname_id": geoname, "names": {"en": f"{code} city", "de": f"{code} Stadt"}},
        "country": {"iso_code": code, "geoname_id": geoname + 1, "is_in_european_union": code == "DE"},
        "location": {"latitude": latitude, "longitude": 153.017, "accuracy_radius": 100},
        "subdivisions": [{"iso_code": "QLD", "names": {"en": "Queensland"}}],
        **extra,
    }


CITY_NETWORKS = [
    ("1.0.0.0/24", city("AU", 2174003, -27.4767)),
    ("1.0.4.0/22", city("AU", 2147714, -33.8688, traits={"is_anycast": True})),
    ("2001:200::/32", city("JP", 1850147, 35.6895)),
    ("2a00:1450::/29", city("DE", 2950159, 52.52)),
]


def test_a_geoip2_city_database_flattens_to_its_default_columns_and_answers_like_the_reader(
    tmp_path: Path,
) -> None:
    # Given a GeoLite2-City-shaped database with IPv4 and IPv6 networks
    path = make_db(tmp_path / "GeoLite2-City.mmdb", CITY_NETWORKS, "GeoLite2-City")
    # When it is read with the defaults of its database type
    columns, rows, errors = read(path)
    # Then nested fields are dotted columns, arrays of maps indexed, English names only
    assert {"country.iso_code", "location.latitude", "subdivisions.0.names.en", "city.names.en"} <= set(
        columns
    )
    assert not any(".de" in column for column in columns)
    assert errors == []
    # And every value is exactly what maxminddb answers for that network, with its own type
    with maxminddb.open_database(str(path)) as reader:
        for row in rows:
            address = (
                ipaddress.ip_address(row.start) if row.family == V6 else ipaddress.IPv4Address(row.start)
            )
            record = reader.get(address)
            for column in columns:
                assert row.values[column] == pick(record, split_path(column)), (row.origin, column)
    first = rows[0].values
    assert (rows[0].family, rows[0].start, rows[0].end) == net("1.0.0.0/24")
    assert rows[0].origin == "GeoLite2-City.mmdb: network 1.0.0.0/24"
    assert first["location.latitude"] == -27.4767
    assert isinstance(first["city.geoname_id"], int)
    assert first["country.is_in_european_union"] is False
    assert first["traits.is_anycast"] is None  # absent from the record
    assert rows[1].values["traits.is_anycast"] is True
    assert [row.family for row in rows] == [V4, V4, V6, V6]


def test_mmdb_fields_pick_and_rename_columns(tmp_path: Path) -> None:
    path = make_db(tmp_path / "GeoLite2-City.mmdb", CITY_NETWORKS, "GeoLite2-City")
    fields = {"country": "country.iso_code", "city": "city.names.en", "lat": "location.latitude"}
    columns, rows, _ = read(path, mmdb_fields=fields)
    assert columns == ["country", "city", "lat"]
    assert rows[2].values == {"country": "JP", "city": "JP city", "lat": 35.6895}


def test_a_field_that_holds_a_map_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = make_db(tmp_path / "c.mmdb", CITY_NETWORKS[:1], "GeoLite2-City")
    _, _, errors = read(path, mmdb_fields={"country": "country"})
    assert errors == [
        "c.mmdb: network 1.0.0.0/24: column 'country' (country) holds a map; name one of its fields"
    ]


def test_ipv4_in_an_ipv6_tree_comes_out_once_as_ipv4_even_with_aliases(tmp_path: Path) -> None:
    # Given an IPv6 database with IPv4 networks and the ::ffff:0:0/96 and 2002::/16 aliases to them
    networks = [("1.0.0.0/24", {"c": "AU"}), ("8.8.8.0/24", {"c": "US"}), ("2001:200::/32", {"c": "JP"})]
    path = make_db(tmp_path / "aliased.mmdb", networks, "Test-Country", aliases=True)
    with maxminddb.open_database(str(path)) as reader:
        assert reader.get("::ffff:8.8.8.8") == {"c": "US"}  # the aliases answer
        assert reader.get("2002:808:808::1") == {"c": "US"}
    # When it is read
    _, rows, _ = read(path)
    # Then each IPv4 network is one IPv4 row, and no alias became an IPv6 row
    assert [(row.family, row.start, row.end, row.values["c"]) for row in rows] == [
        (*net("1.0.0.0/24"), "AU"),
        (*net("8.8.8.0/24"), "US"),
        (*net("2001:200::/32"), "JP"),
    ]


def test_ipv4_mapped_networks_become_ipv4_unless_they_copy_the_ipv4_tree(tmp_path: Path) -> None:
    # Given a database that stores a copy of 1.0.0.0/24 under ::ffff:0:0/96, and 5.6.7.0/24 only there
    networks = [
        ("1.0.0.0/24", {"c": "AU"}),
        ("::ffff:1.0.0.0/120", {"c": "AU"}),
        ("::ffff:5.6.7.0/120", {"c": "FR"}),
        ("2001:200::/32", {"c": "JP"}),
    ]
    path = make_db(tmp_path / "mapped.mmdb", networks, "Test-Country")
    _, rows, _ = read(path)
    # Then the copy is skipped, the mapped-only network is an IPv4 range, and IPv6 stays IPv6
    assert [(row.family, row.start, row.end, row.values["c"]) for row in rows] == [
        (*net("1.0.0.0/24"), "AU"),
        (*net("5.6.7.0/24"), "FR"),
        (*net("2001:200::/32"), "JP"),
    ]
    assert rows[1].origin == "mapped.mmdb: network ::ffff:506:700/120"


def test_an_unknown_database_type_has_its_fields_discovered(tmp_path: Path) -> None:
    networks = [
        ("1.0.0.0/24", {"asn": 13335, "org": {"name": "Cloudflare"}, "tags": ["cdn", "anycast"]}),
        ("1.0.1.0/24", {"asn": 64512, "score": 0.25}),
    ]
    columns, rows, _ = read(make_db(tmp_path / "custom.mmdb", networks, "Acme-Risk"))
    assert columns == ["asn", "org.name", "tags", "score"]
    assert rows[0].values == {
        "asn": 13335,
        "org.name": "Cloudflare",
        "tags": ["cdn", "anycast"],
        "score": None,
    }


def test_a_known_type_with_another_layout_is_discovered_too(tmp_path: Path) -> None:
    networks = [("1.0.0.0/24", {"country_code": "AU", "flag": True})]
    columns, _, _ = read(make_db(tmp_path / "c.mmdb", networks, "GeoLite2-Country"))
    assert columns == ["country_code", "flag"]


def test_ip_location_db_layouts_have_defaults(tmp_path: Path) -> None:
    networks = [("1.0.0.0/24", {"country_code": "AU", "extra": 1})]
    columns, _, _ = read(make_db(tmp_path / "geolite2-country.mmdb", networks, "country ipvAll"))
    assert columns == ["country_code"]


def test_declared_types_apply_to_database_values(tmp_path: Path) -> None:
    networks = [("1.0.0.0/24", {"code": "12", "lat": -27.5}), ("1.0.1.0/24", {"code": "X", "lat": 1.5})]
    path = make_db(tmp_path / "d.mmdb", networks, "Test")
    _, rows, errors = read(path, declared_types={"code": "int", "lat": "str"})
    assert errors == [
        "d.mmdb: network 1.0.1.0/24: column 'code' is declared int but holds 'X': not a whole number"
    ]
    evidence = ColumnEvidence()
    evidence.observe(rows[0].values, rows[0].origin)
    assert evidence.column_types({"code": "int", "lat": "str"}) == {"code": "N", "lat": "S"}
    with pytest.raises(SourceError, match=r"d.mmdb: --types: --types names 'nope'"):
        read(path, declared_types={"nope": "int"})


def test_a_nan_double_is_a_bad_row_naming_its_network(tmp_path: Path) -> None:
    # A network DynamoDB cannot hold is skipped by --max-errors like a CSV's bad line, not the whole file
    networks = [
        ("1.0.0.0/24", {"lat": 1.5}),
        ("1.0.1.0/24", {"lat": math.nan}),
        ("1.0.2.0/24", {"lat": [2.0, -math.inf]}),
    ]
    _, rows, errors = read(make_db(tmp_path / "nan.mmdb", networks, "Test"))
    assert [row.origin for row in rows] == ["nan.mmdb: network 1.0.0.0/24"]
    assert errors == [
        "nan.mmdb: network 1.0.1.0/24: column 'lat' holds nan: DynamoDB numbers cannot be NaN or Infinity",
        "nan.mmdb: network 1.0.2.0/24: column 'lat' holds [2.0, -inf]: "
        "DynamoDB numbers cannot be NaN or Infinity",
    ]
    # Unless the column is declared text, which holds any value
    _, as_text, none = read(tmp_path / "nan.mmdb", declared_types={"lat": "str"})
    assert (len(as_text), none) == (3, [])


def test_a_gzipped_database_reads_the_same(tmp_path: Path) -> None:
    plain = make_db(tmp_path / "c.mmdb", CITY_NETWORKS, "GeoLite2-City")
    packed = tmp_path / "c.mmdb.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read(packed)[1] == [
        SourceRow(row.origin.replace("c.mmdb", "c.mmdb.gz"), row.family, row.start, row.end, row.values)
        for row in read(plain)[1]
    ]


def test_a_truncated_database_is_refused(tmp_path: Path) -> None:
    whole = make_db(tmp_path / "whole.mmdb", CITY_NETWORKS, "GeoLite2-City").read_bytes()
    cut = tmp_path / "cut.mmdb"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(SourceError, match=r"^cut.mmdb: not a MaxMind DB file, or a damaged one: "):
        read(cut)


def test_a_truncated_gzip_is_refused(tmp_path: Path) -> None:
    whole = gzip.compress(make_db(tmp_path / "w.mmdb", CITY_NETWORKS, "GeoLite2-City").read_bytes())
    cut = tmp_path / "cut.mmdb.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(SourceError, match=r"^cut.mmdb.gz: cannot read: Compressed file ended"):
        read(cut)


def test_a_corrupt_data_section_is_refused_after_the_last_good_network(tmp_path: Path) -> None:
    # Given a database whose records after the first ({"c": "AU"}: 6 bytes) are overwritten with garbage
    networks = [("1.0.0.0/24", {"c": "AU"}), ("1.0.1.0/24", {"c": "NZ", "n": 1}), ("1.0.2.0/24", {"c": "US"})]
    raw = bytearray(make_db(tmp_path / "w.mmdb", networks, "Test").read_bytes())
    with maxminddb.open_database(str(tmp_path / "w.mmdb")) as reader:
        data_start = reader.metadata().node_count * reader.metadata().record_size // 4 + 16
    metadata_start = raw.rindex(METADATA_MARKER)
    raw[data_start + 6 : metadata_start] = b"\xff" * (metadata_start - data_start - 6)
    bad = tmp_path / "bad.mmdb"
    bad.write_bytes(bytes(raw))
    # Then reading it fails naming the file and the last network that read well
    with pytest.raises(SourceError, match=r"^bad.mmdb: after network 1.0.0.0/24: cannot read the database: "):
        read(bad, mmdb_fields={"c": "c"})


def test_not_a_database_at_all(tmp_path: Path) -> None:
    path = tmp_path / "text.mmdb"
    path.write_text("start,end\n1.0.0.0,1.0.0.1\n")
    with pytest.raises(SourceError, match=r"^text.mmdb: not a MaxMind DB file"):
        read(path)


def test_a_record_too_big_for_one_item_is_a_row_error_lists_included(tmp_path: Path) -> None:
    # 500 strings of 1,000 characters: 500 KB, over DynamoDB's 400 KB item limit.
    networks = [("1.0.0.0/24", {"tags": ["x" * 1000] * 500}), ("1.0.1.0/24", {"tags": ["small"]})]
    path = make_db(tmp_path / "tags.mmdb", networks, "ipmeta")
    _, rows, errors = read(path, mmdb_fields={"tags": "tags"})
    assert [row.values["tags"] for row in rows] == [["small"]]
    assert len(errors) == 1
    assert "400 KB" in errors[0]


def test_all_fields_keep_every_locale_and_trait_of_every_record(tmp_path: Path) -> None:
    # Given a GeoIP2 City database with names in two languages and traits in one record
    path = make_db(tmp_path / "GeoLite2-City.mmdb", CITY_NETWORKS, "GeoLite2-City")
    # When it is read with --mmdb-fields all
    columns, rows, errors = read(path, mmdb_fields=parse_field_map("all"))
    # Then every leaf path of every record is a column, German names and the anycast trait included
    assert {"city.names.de", "city.names.en", "traits.is_anycast", "subdivisions.0.names.en"} <= set(columns)
    assert errors == []
    # And each row holds exactly the reader's record, flattened; a field it lacks is None
    with maxminddb.open_database(str(path)) as reader:
        for row in rows:
            address = (
                ipaddress.ip_address(row.start) if row.family == V6 else ipaddress.IPv4Address(row.start)
            )
            record = flatten(reader.get(address))
            assert {key: value for key, value in row.values.items() if value is not None} == record
    assert rows[0].values["city.names.de"] == "AU Stadt"


def test_all_fields_have_no_column_limit_but_the_item_limit_holds(tmp_path: Path) -> None:
    wide = {f"field{index}": index for index in range(MAX_DISCOVERED_COLUMNS + 50)}
    path = make_db(tmp_path / "wide.mmdb", [("1.0.0.0/24", wide)], "Acme-Wide")
    with pytest.raises(SourceError, match="--mmdb-fields all"):
        read(path)
    columns, rows, _ = read(path, mmdb_fields=parse_field_map("*"))
    assert len(columns) == MAX_DISCOVERED_COLUMNS + 50
    assert rows[0].values["field249"] == 249
    # A record of Japanese names past 400 KB in UTF-8 (not in characters) is a row error
    huge = {"names": {f"n{index}": "東" * 1000 for index in range(150)}}
    _, rows, errors = read(
        make_db(tmp_path / "huge.mmdb", [("1.0.0.0/24", huge)], "Acme"), mmdb_fields={"*": "*"}
    )
    assert rows == []
    assert errors[0].startswith("huge.mmdb: network 1.0.0.0/24: the item would take about 4")


ENTERPRISE_RECORD = {
    "city": {"confidence": 50, "geoname_id": 2655045, "names": {"en": "Boxford"}},
    "country": {
        "confidence": 95,
        "iso_code": "GB",
        "names": {"en": "United Kingdom", "de": "Großbritannien"},
    },
    "location": {"latitude": 51.75, "longitude": -1.25},
    "traits": {"static_ip_score": 0.27, "user_type": "residential", "is_legitimate_proxy": True, "isp": "B"},
}


@pytest.mark.parametrize("database_type", ["GeoIP2-Enterprise", "GeoIP2-Precision-Enterprise"])
def test_enterprise_and_precision_defaults_keep_their_confidences_and_traits(
    tmp_path: Path, database_type: str
) -> None:
    path = make_db(tmp_path / "e.mmdb", [("2.125.160.216/29", ENTERPRISE_RECORD)], database_type)
    columns, rows, _ = read(path)
    assert {
        "traits.user_type",
        "traits.static_ip_score",
        "traits.is_legitimate_proxy",
        "country.confidence",
    } <= set(columns)
    values = rows[0].values
    assert (values["traits.user_type"], values["traits.static_ip_score"]) == ("residential", 0.27)
    assert (values["city.confidence"], values["traits.isp"], values["city.names.en"]) == (50, "B", "Boxford")
    assert "country.names.de" not in columns  # the defaults keep English names; `all` keeps every one
