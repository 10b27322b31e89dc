"""Vendor CSV layouts: MaxMind's GeoIP2 Blocks joined with Locations, and DB-IP Lite without a header."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest

from loader.errors import SourceError
from loader.formats import (
    ColumnEvidence,
    FormatOptions,
    Header,
    RowError,
    SourceRow,
    declared_types_for,
    open_rows,
    typed_value,
)

GEOIP2 = Path(__file__).parent.parent / "fixtures" / "geoip2"
LOCATIONS = GEOIP2 / "GeoLite2-City-Locations-en.csv"
BLOCKS = [GEOIP2 / "GeoLite2-City-Blocks-IPv4.csv", GEOIP2 / "GeoLite2-City-Blocks-IPv6.csv"]


def read(path: Path, options: FormatOptions) -> tuple[list[str], list[SourceRow], list[str]]:
    entries = list(open_rows(path, path.name, options))
    header = entries[0]
    assert isinstance(header, Header)
    rows = [entry for entry in entries if isinstance(entry, SourceRow)]
    return header.columns, rows, [entry.message for entry in entries if isinstance(entry, RowError)]


def answers(paths: list[Path], options: FormatOptions) -> dict[str, dict[str, Any]]:
    """What a load of ``paths`` would answer for each range's first address: typed data by network."""
    read_files = [read(path, options) for path in paths]
    evidence = ColumnEvidence()
    for _, rows, _ in read_files:
        for row in rows:
            evidence.observe(row.values, row.origin)
    types = evidence.column_types(declared_types_for(paths[0].name, options))
    return {
        row.origin: {column: typed_value(value, types[column]) for column, value in row.values.items()}
        for _, rows, _ in read_files
        for row in rows
    }


def test_the_geoip2_city_fixture_loads_both_families_joined_with_locations() -> None:
    # Given the hand-made GeoLite2-City blocks and locations, through --format geoip2-csv --locations
    options = FormatOptions(format="geoip2-csv", locations=LOCATIONS)
    columns, _, errors = read(BLOCKS[0], options)
    assert errors == []
    assert columns[:3] == ["geoname_id", "registered_country_geoname_id", "represented_country_geoname_id"]
    assert columns[-4:] == [
        "registered_country_iso_code",
        "registered_country_name",
        "represented_country_iso_code",
        "represented_country_name",
    ]
    # When a load types them
    answer = answers(BLOCKS, options)
    # Then a city block answers with its place, its country, typed numbers and text postcodes
    brisbane = answer["GeoLite2-City-Blocks-IPv4.csv: line 2"]
    assert brisbane["city_name"] == "South Brisbane"
    assert brisbane["subdivision_1_name"] == "Queensland"
    assert brisbane["country_iso_code"] == "AU"
    assert brisbane["registered_country_iso_code"] == "AU"
    assert str(brisbane["latitude"]) == "-27.4767"
    assert brisbane["geoname_id"] == 9000002
    assert brisbane["postal_code"] == "4101"  # declared text by the format: postcodes are not numbers
    assert brisbane["represented_country_iso_code"] == ""


def test_a_block_without_a_geoname_id_keeps_its_registered_country() -> None:
    options = FormatOptions(format="geoip2-csv", locations=LOCATIONS)
    proxy = answers(BLOCKS, options)["GeoLite2-City-Blocks-IPv4.csv: line 3"]
    assert proxy["geoname_id"] is None
    assert (proxy["country_iso_code"], proxy["city_name"], proxy["latitude"]) == ("", "", None)
    assert (proxy["registered_country_iso_code"], proxy["registered_country_name"]) == ("AU", "Australia")


def test_a_represented_country_is_joined_beside_the_place() -> None:
    options = FormatOptions(format="geoip2-csv", locations=LOCATIONS)
    _, rows, _ = read(BLOCKS[0], options)
    base = rows[2].values
    assert rows[2].origin == "GeoLite2-City-Blocks-IPv4.csv: line 4"
    assert (base["city_name"], base["country_iso_code"]) == ("Kassel", "DE")
    assert (base["represented_country_iso_code"], base["represented_country_name"]) == ("US", "United States")


def test_ipv6_blocks_join_the_same_locations() -> None:
    options = FormatOptions(locations=LOCATIONS)  # auto: --locations means geoip2-csv
    _, rows, errors = read(BLOCKS[1], options)
    assert errors == []
    assert [(row.family, row.values["city_name"], row.values["postal_code"]) for row in rows] == [
        (6, "Chiyoda", "100-0001"),
        (6, "", ""),
    ]
    assert rows[0].start == 0x20010200 << 96


def test_a_geoname_id_missing_from_locations_names_the_line_and_the_id(tmp_path: Path) -> None:
    # Given a Locations file that lacks Kassel (9000006)
    locations = tmp_path / "GeoLite2-City-Locations-en.csv"
    lines = LOCATIONS.read_text().splitlines(keepends=True)
    locations.write_text("".join(line for line in lines if not line.startswith("9000006,")))
    # Then the block that names it fails, and only that one
    _, rows, errors = read(BLOCKS[0], FormatOptions(format="geoip2-csv", locations=locations))
    assert errors == [
        "GeoLite2-City-Blocks-IPv4.csv: line 4: geoname_id 9000006 is not in GeoLite2-City-Locations-en.csv"
    ]
    assert len(rows) == 2


def test_a_registered_country_missing_from_locations_is_named_too(tmp_path: Path) -> None:
    blocks = tmp_path / "Blocks.csv"
    header = BLOCKS[0].read_text().splitlines()[0]
    blocks.write_text(f"{header}\n1.0.0.0/24,9000002,9999999,,0,0,4101,-27.4767,153.0170,100,0\n")
    _, _, errors = read(blocks, FormatOptions(format="geoip2-csv", locations=LOCATIONS))
    assert errors == [
        "Blocks.csv: line 2: registered_country_geoname_id 9999999 is not in GeoLite2-City-Locations-en.csv"
    ]


def test_blocks_naming_places_need_a_locations_file() -> None:
    with pytest.raises(SourceError, match=r"GeoLite2-City-Blocks-IPv4.csv: line 1: .* --locations"):
        read(BLOCKS[0], FormatOptions(format="geoip2-csv"))


def test_the_asn_edition_needs_no_locations(tmp_path: Path) -> None:
    blocks = tmp_path / "GeoLite2-ASN-Blocks-IPv4.csv"
    blocks.write_text(
        "network,autonomous_system_number,autonomous_system_organization\n"
        '1.0.0.0/24,13335,"Cloudflare, Inc."\n'
    )
    columns, rows, _ = read(blocks, FormatOptions(format="geoip2-csv"))
    assert columns == ["autonomous_system_number", "autonomous_system_organization"]
    assert rows[0].values["autonomous_system_organization"] == "Cloudflare, Inc."


def test_a_locations_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "Locations.csv"
    bad.write_text("id,name\n1,x\n")
    with pytest.raises(SourceError, match=r"Locations.csv: line 1: no geoname_id column"):
        read(BLOCKS[0], FormatOptions(format="geoip2-csv", locations=bad))


@pytest.mark.parametrize(
    ("line", "columns"),
    [
        ("1.0.0.0,1.0.0.255,AU", ["country"]),
        ('1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."', ["asn", "organization"]),
        (
            "1.0.0.0,1.0.0.255,OC,AU,Queensland,South Brisbane,-27.4767,153.017",
            DBIP_CITY := ["continent", "country", "region", "city", "lat", "lon"],
        ),
    ],
)
def test_dbip_lite_editions_are_told_apart_by_their_field_count(
    tmp_path: Path, line: str, columns: list[str]
) -> None:
    path = tmp_path / "dbip-lite.csv.gz"
    path.write_bytes(
        gzip.compress(
            f"{line}\n2001:200::,2001:200:ffff:ffff:ffff:ffff:ffff:ffff,{line.split(',', 2)[2]}\n".encode()
        )
    )
    found, rows, errors = read(path, FormatOptions(format="dbip-csv"))
    assert (found, errors) == (columns, [])
    assert [(row.family, row.origin) for row in rows] == [
        (4, "dbip-lite.csv.gz: line 1"),
        (6, "dbip-lite.csv.gz: line 2"),
    ]


def test_dbip_city_lite_coordinates_are_exact_numbers(tmp_path: Path) -> None:
    path = tmp_path / "dbip-city-lite.csv"
    path.write_text("1.0.0.0,1.0.0.255,OC,AU,Queensland,South Brisbane,-27.4767,153.017\n")
    answer = answers([path], FormatOptions(format="dbip-csv"))["dbip-city-lite.csv: line 1"]
    assert (str(answer["lat"]), str(answer["lon"]), answer["city"]) == (
        "-27.4767",
        "153.017",
        "South Brisbane",
    )


def test_an_unknown_dbip_layout_asks_for_columns(tmp_path: Path) -> None:
    path = tmp_path / "dbip.csv"
    path.write_text("1.0.0.0,1.0.0.255,a,b,c\n")
    with pytest.raises(SourceError, match=r"dbip.csv: line 1: 5 fields, but DB-IP Lite CSVs have 3"):
        read(path, FormatOptions(format="dbip-csv"))
    columns, _, _ = read(path, FormatOptions(format="dbip-csv", columns=["start", "end", "a", "b", "c"]))
    assert columns == ["a", "b", "c"]


def test_locations_are_read_once_for_both_block_files(tmp_path: Path) -> None:
    from loader.formats import geoip2_csv

    copy = tmp_path / "Locations.csv"
    shutil.copy(LOCATIONS, copy)
    geoip2_csv._load_locations.cache_clear()
    for blocks in BLOCKS:
        read(blocks, FormatOptions(format="geoip2-csv", locations=copy))
    assert geoip2_csv._load_locations.cache_info().misses == 1
