"""Real database formats through the whole loader, on dynalite, answered over HTTP; and back out again.

- A hand-made GeoIP2 City CSV (Blocks IPv4 and IPv6 joined with Locations)
  loads, and the API answers places, typed numbers and text postcodes.
- A MaxMind DB (IPv4 and IPv6 in one tree) loads with ``ipmeta load`` and
  answers as ``maxminddb`` does; ``ipmeta export --format mmdb`` gives a file
  that answers the same again.
- Bad input is refused with a clear, located message, and the active dataset
  keeps serving: a truncated or corrupt .mmdb, a Locations file missing a
  referenced ``geoname_id``, a number column holding ``NaN``.
"""

from __future__ import annotations

import ipaddress
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import maxminddb
import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli import main as cli
from ipmeta_cli.server import LocalApiServer
from loader.errors import LoadError
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.integration.conftest import get_json as get

GEOIP2 = Path(__file__).parents[1] / "fixtures" / "geoip2"
LOCATIONS = GEOIP2 / "GeoLite2-City-Locations-en.csv"
BLOCKS = [GEOIP2 / "GeoLite2-City-Blocks-IPv4.csv", GEOIP2 / "GeoLite2-City-Blocks-IPv6.csv"]
GEOIP2_OPTIONS = LoadOptions(format="geoip2-csv", locations=str(LOCATIONS))
#: IPv4 at ::/96 of an IPv6 tree with MaxMind's aliases; doubles, booleans, an integer, an array, a
#: field some records lack. Its database type is no known layout, so every field becomes a column.
NETWORKS: list[tuple[str, dict[str, Any]]] = [
    ("1.0.0.0/24", {"country_code": "AU", "latitude": -27.4767, "longitude": 153.017, "anycast": False}),
    ("1.0.4.0/22", {"country_code": "AU", "latitude": -37.814, "longitude": 144.96332, "postcode": "3000"}),
    ("8.8.8.0/24", {"country_code": "US", "latitude": 37.4056, "longitude": -122.0775, "anycast": True}),
    ("2001:200::/32", {"country_code": "JP", "latitude": 35.69, "longitude": 139.69, "asn": 2500}),
    ("2a00:1450::/29", {"country_code": "IE", "latitude": 53.0, "longitude": -8.0, "tags": ["a", "b"]}),
]
PROBES = [
    "1.0.0.1",
    "1.0.0.255",
    "1.0.5.9",
    "1.0.3.1",
    "8.8.8.8",
    "9.9.9.9",
    "2001:200::1",
    "2a00:1457::1",
    "2c0f::1",
]


def data_at(server: LocalApiServer, ip: str) -> dict[str, Any]:
    status, body = get(server, f"/v1/ip/{ip}")
    assert status == 200, body
    data: dict[str, Any] = body["data"]
    return data


def write_mmdb_fixture(path: Path) -> Path:
    ranges = []
    for text, record in NETWORKS:
        network = ipaddress.ip_network(text)
        ranges.append((network.version, int(network.network_address), int(network.broadcast_address), record))
    metadata = DatabaseMetadata("ipmeta-test", {"en": "test"})
    write_database(sorted(ranges, key=lambda item: item[:2]), path, metadata, ipv4_aliases=True)
    return path


def same_answer(answered: Any, expected: Any) -> bool:
    """The reader's record, field by field; doubles as JSON numbers within 1e-6."""
    if not isinstance(answered, dict) or not isinstance(expected, dict):
        return answered is expected
    if set(answered) != set(expected):
        return False
    for field, value in expected.items():
        mine = answered[field]
        if isinstance(value, float):
            if isinstance(mine, bool) or not isinstance(mine, int | float) or abs(mine - value) > 1e-6:
                return False
        elif type(mine) is not type(value) or mine != value:
            return False
    return True


# -- GeoIP2 CSV ----------------------------------------------------------------------------------


def test_a_geoip2_city_csv_loads_and_answers_places_numbers_and_postcodes(
    store: LoaderTable, api_server: LocalApiServer, tmp_path: Path
) -> None:
    # Given the hand-made GeoLite2 City blocks of both families and their Locations file
    result = driver.run_load(BLOCKS, GEOIP2_OPTIONS, store, LocalStaging(tmp_path))
    assert result.status == "activated"
    assert result.report.rows_read == 5
    # Then a city block answers its place, its registered country, and exact JSON numbers
    brisbane = data_at(api_server, "1.0.0.1")
    assert brisbane["city_name"] == "South Brisbane"
    assert brisbane["subdivision_1_name"] == "Queensland"
    assert (brisbane["country_iso_code"], brisbane["registered_country_iso_code"]) == ("AU", "AU")
    assert brisbane["latitude"] == -27.4767
    assert isinstance(brisbane["latitude"], float)
    assert brisbane["longitude"] == 153.017
    assert brisbane["geoname_id"] == 9000002
    assert brisbane["postal_code"] == "4101"  # a postcode is text, even all digits
    # A block without a geoname_id is known by its registered country only
    proxy = data_at(api_server, "1.0.5.9")
    assert (proxy["geoname_id"], proxy["city_name"], proxy["country_iso_code"]) == (None, "", "")
    assert proxy["registered_country_name"] == "Australia"
    assert proxy["latitude"] is None
    # A represented country (a US base in Germany) is named beside the country
    base = data_at(api_server, "5.8.0.200")
    assert (base["country_iso_code"], base["represented_country_iso_code"]) == ("DE", "US")
    assert base["represented_country_name"] == "United States"
    # IPv6 blocks join the same Locations
    tokyo = data_at(api_server, "2001:200:ffff::1")
    assert (tokyo["city_name"], tokyo["postal_code"], tokyo["time_zone"]) == (
        "Chiyoda",
        "100-0001",
        "Asia/Tokyo",
    )
    assert data_at(api_server, "2a00:1457::1")["is_anycast"] == 1
    # And an address no block holds is not found
    assert get(api_server, "/v1/ip/1.0.3.1")[0] == 404


# -- MaxMind DB in and out -----------------------------------------------------------------------


def test_an_mmdb_loads_answers_as_the_reader_and_exports_back(
    table_environment: Settings,
    store: LoaderTable,
    api_server: LocalApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a MaxMind DB with IPv4 and IPv6 networks in one tree
    source = write_mmdb_fixture(tmp_path / "country.mmdb")
    common = ["--data-dir", str(tmp_path)]
    # When `ipmeta load` reads it as it is
    assert cli.main(["load", *common, str(source)]) == 0
    assert "load v1: activated" in capsys.readouterr().out
    # Then every probe answers as maxminddb does, doubles as JSON numbers, a missing field missing
    with maxminddb.open_database(str(source)) as reader:
        for ip in PROBES:
            status, body = get(api_server, f"/v1/ip/{ip}")
            assert same_answer(body.get("data"), reader.get(ip)), (ip, status, body)
    assert "postcode" not in data_at(api_server, "1.0.0.1")
    # When the version is exported with `ipmeta export`
    out = tmp_path / "v1.mmdb"
    assert cli.main(["export", *common, "--format", "mmdb", str(out)]) == 0
    assert "exported v1" in capsys.readouterr().out
    # Then the file answers the same probes as the original, IPv4 and IPv6, and names its version
    with maxminddb.open_database(str(out)) as exported, maxminddb.open_database(str(source)) as original:
        for ip in PROBES:
            assert same_answer(exported.get(ip), original.get(ip)), ip
        description = exported.metadata().description["en"]
    meta = store.lookup.get_version_meta(1)
    assert meta is not None
    assert "v1" in description
    assert meta.sha256 in description


# -- bad input -----------------------------------------------------------------------------------


def truncated_mmdb(tmp_path: Path) -> Path:
    whole = write_mmdb_fixture(tmp_path / "whole.mmdb").read_bytes()
    path = tmp_path / "truncated.mmdb"
    path.write_bytes(whole[: len(whole) // 2])
    return path


def corrupt_mmdb(tmp_path: Path) -> Path:
    data = bytearray(write_mmdb_fixture(tmp_path / "whole.mmdb").read_bytes())
    data[: len(data) // 3] = b"\xff" * (len(data) // 3)  # the search tree overwritten
    path = tmp_path / "corrupt.mmdb"
    path.write_bytes(bytes(data))
    return path


def locations_missing_a_place(tmp_path: Path) -> tuple[list[Path], LoadOptions]:
    lines = LOCATIONS.read_text().splitlines(keepends=True)
    partial = tmp_path / "Locations-en.csv"
    partial.write_text("".join(line for line in lines if not line.startswith("9000004,")))
    return [BLOCKS[1]], LoadOptions(format="geoip2-csv", locations=str(partial))


def nan_in_a_number_column(tmp_path: Path) -> Path:
    path = tmp_path / "cities.csv"
    path.write_text("start,end,lat\n1.0.0.0,1.0.0.255,-27.4767\n1.0.1.0,1.0.1.255,NaN\n")
    return path


MakeSources = Callable[[Path], tuple[list[Path], LoadOptions]]
BAD_INPUTS: dict[str, tuple[MakeSources, str]] = {
    "truncated mmdb": (
        lambda tmp: ([truncated_mmdb(tmp)], LoadOptions()),
        r"truncated\.mmdb: (not a MaxMind DB file, or a damaged one|after .*: cannot read the database)",
    ),
    "corrupt mmdb": (
        lambda tmp: ([corrupt_mmdb(tmp)], LoadOptions()),
        r"corrupt\.mmdb: (not a MaxMind DB file, or a damaged one|after .*: cannot read the database)",
    ),
    "locations missing a geoname_id": (
        locations_missing_a_place,
        r"GeoLite2-City-Blocks-IPv6\.csv: line 2: geoname_id 9000004 is not in Locations-en\.csv",
    ),
    "NaN in a number column": (
        lambda tmp: ([nan_in_a_number_column(tmp)], LoadOptions()),
        r"cities\.csv: line 3: column 'lat' holds numbers, but also 'NaN': DynamoDB numbers cannot be NaN",
    ),
    "NaN in a declared float column": (
        lambda tmp: ([nan_in_a_number_column(tmp)], LoadOptions(types={"lat": "float"})),
        r"cities\.csv: line 3: column 'lat' is declared float but holds 'NaN'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_refused_and_the_active_dataset_keeps_serving(
    case: str, store: LoaderTable, api_server: LocalApiServer, tmp_path: Path
) -> None:
    # Given an active dataset
    driver.run_load(BLOCKS, GEOIP2_OPTIONS, store, LocalStaging(tmp_path / "first"))
    before = data_at(api_server, "1.0.0.1")
    make_sources, message = BAD_INPUTS[case]
    sources, options = make_sources(tmp_path)
    # When a load of bad input runs
    with pytest.raises(LoadError, match=message):
        driver.run_load(sources, options, store, LocalStaging(tmp_path / "bad"))
    # Then it leaves no trace, and the active version answers as before
    assert store.lookup.read_active_version(consistent=True) == 1
    assert [load.version for load in store.loads.list_all()] == [1]
    assert data_at(api_server, "1.0.0.1") == before


def test_the_cli_names_the_reason_in_one_line(
    table_environment: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = truncated_mmdb(tmp_path)
    assert cli.main(["load", "--data-dir", str(tmp_path), str(broken)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("ipmeta load: truncated.mmdb: ")
    assert "\n" not in error
    shutil.rmtree(tmp_path / "staging", ignore_errors=True)


def test_a_new_locations_file_is_a_new_version_and_the_same_one_is_unchanged(
    store: LoaderTable, api_server: LocalApiServer, tmp_path: Path
) -> None:
    # Given the GeoIP2 fixture loaded with its Locations file
    locations = tmp_path / "Locations-en.csv"
    shutil.copy(LOCATIONS, locations)
    options = LoadOptions(format="geoip2-csv", locations=str(locations))
    assert driver.run_load(BLOCKS, options, store, LocalStaging(tmp_path)).status == "activated"
    # When it is loaded again unchanged, nothing happens
    assert driver.run_load(BLOCKS, options, store, LocalStaging(tmp_path)).status == "unchanged"
    # But when only the Locations file changes (a city renamed), the same blocks make a new version
    locations.write_text(LOCATIONS.read_text().replace('"South Brisbane"', "Woolloongabba"))
    again = driver.run_load(BLOCKS, options, store, LocalStaging(tmp_path))
    assert (again.status, again.version) == ("activated", 2)
    assert data_at(api_server, "1.0.0.1")["city_name"] == "Woolloongabba"
