"""Every value reaches the JSON answer with its type and exact value, and an export gives it back.

- A CSV as Python writes floats (``9.999999747378752e-05``) and ``1E+3``: Number
  columns, answered as the exact numbers they spell; a column of numbers and a
  word is text, and ``ipmeta load`` says which row made it so.
- A MaxMind DB holding every type of the spec, written by our writer: each
  value answers in its JSON form (bytes in base64, a uint128 whole, a double's
  shortest decimal), and ``ipmeta export`` writes it back for both readers.
- Hypothesis: any value of any MaxMind DB type survives load → HTTP JSON → export → reader.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import struct
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import maxminddb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipmeta.schema.settings import Settings
from ipmeta_cli import main as cli
from ipmeta_cli.server import LocalApiServer
from loader.export.mmdb_writer import DatabaseMetadata, Typed, write_database
from tests.mmdb_readers import READERS, as_read


def answer(server: LocalApiServer, path: str) -> Any:
    """The JSON body of a 200, decimals read exactly."""
    with urllib.request.urlopen(server.url + path, timeout=10) as response:
        return json.loads(response.read(), parse_float=Decimal)


def field_text(server: LocalApiServer, path: str) -> str:
    with urllib.request.urlopen(server.url + path, timeout=10) as response:
        return str(response.read().decode())


def load(tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["load", "--data-dir", str(tmp_path), str(source)]) == 0
    return capsys.readouterr().out


def export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "exported.mmdb"
    assert cli.main(["export", "--data-dir", str(tmp_path), "--format", "mmdb", str(out)]) == 0
    capsys.readouterr()
    return out


def write_db(path: Path, records: list[tuple[str, dict[str, Any]]]) -> Path:
    ranges = []
    for text, record in records:
        network = ipaddress.ip_network(text)
        ranges.append((network.version, int(network.network_address), int(network.broadcast_address), record))
    write_database(sorted(ranges, key=lambda item: item[:2]), path, DatabaseMetadata("exact-test", {}))
    return path


# -- CSV: exponent notation, mixed columns --------------------------------------------------------

CITIES = """start,end,lon,n,lat
1.0.0.0,1.0.0.255,-0.7617999911308289,7,1.5
1.0.1.0,1.0.1.255,9.999999747378752e-05,1E+3,north
1.0.2.0,1.0.2.255,0.12345678901234567890123456789012345678,18446744073709551615,2.5
"""


def test_exponent_notation_loads_as_exact_numbers_and_a_mixed_column_is_named(
    table_environment: Settings,
    api_server: LocalApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a CSV with floats as Python writes them, 1E+3, and a word among latitudes on line 3
    source = tmp_path / "cities.csv"
    source.write_text(CITIES)
    # When it is loaded
    printed = load(tmp_path, source, capsys)
    # Then the load says the latitude column is text, and which row made it so
    assert (
        "  mixed: cities.csv: line 3: column 'lat' holds numbers (the first at cities.csv: line 2) "
        "and text ('north'): stored as text"
    ) in printed
    [report_path] = (tmp_path / "reports").glob("*.json")
    report = json.loads(report_path.read_text())
    assert report["column_types"] == {"lon": "N", "n": "N", "lat": "S"}
    assert set(report["mixed_columns"]) == {"lat"}
    # And every number answers as the exact number its text spells, with its JSON type
    first, second, third = (answer(api_server, f"/v1/ip/1.0.{n}.1")["data"] for n in range(3))
    assert first == {"lon": Decimal("-0.7617999911308289"), "n": 7, "lat": "1.5"}
    assert second == {"lon": Decimal("0.00009999999747378752"), "n": 1000, "lat": "north"}
    assert third["lon"] == Decimal("0.12345678901234567890123456789012345678")  # 38 digits, no float
    assert third["n"] == 2**64 - 1
    assert type(second["n"]) is int
    assert field_text(api_server, "/v1/ip/1.0.2.1/lon") == "0.12345678901234567890123456789012345678\n"


# -- MaxMind DB: every type of the spec ------------------------------------------------------------

EVERY_TYPE: dict[str, Any] = {
    "utf8_string": "Zürich 東京",
    "double": 9.999999747378752e-05,
    "bytes": b"\x00\x01\xfe\xff",
    "uint16": Typed("uint16", 443),
    "uint32": Typed("uint32", 2**32 - 1),
    "map": {"utf8_string": "Zürich 東京", "nested": {"int32": -(2**31)}},
    "uint64": Typed("uint64", 2**64 - 1),
    "uint128": Typed("uint128", 2**128 - 1),
    "array": [1, "Zürich 東京", b"\x00", True, 0.5],
    "boolean": True,
    "float": Typed("float", 0.1),
}
FLOAT32 = struct.unpack(">f", struct.pack(">f", 0.1))[0]
#: The columns and their JSON answers: maps flatten to dotted columns; bytes are base64.
EXPECTED_JSON: dict[str, Any] = {
    "utf8_string": "Zürich 東京",
    "double": Decimal("0.00009999999747378752"),
    "bytes": "AAH+/w==",
    "uint16": 443,
    "uint32": 2**32 - 1,
    "map.utf8_string": "Zürich 東京",
    "map.nested.int32": -(2**31),
    "uint64": 2**64 - 1,
    "uint128": 2**128 - 1,
    "array": [1, "Zürich 東京", "AA==", True, Decimal("0.5")],
    "boolean": True,
    "float": Decimal(repr(FLOAT32)),
}


def test_a_database_of_every_type_answers_exactly_and_exports_back(
    table_environment: Settings,
    api_server: LocalApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a MaxMind DB whose record holds every type of the spec (a uint128 has 39 digits)
    source = write_db(tmp_path / "every.mmdb", [("1.0.0.0/24", EVERY_TYPE), ("2001:db8::/32", EVERY_TYPE)])
    # When it is loaded
    load(tmp_path, source, capsys)
    # Then each value answers in its JSON form, exactly
    for ip in ("1.0.0.1", "2001:db8::1"):
        data = answer(api_server, f"/v1/ip/{ip}")["data"]
        assert data == EXPECTED_JSON
        assert {name: type(value) for name, value in data.items()} == {
            name: type(value) for name, value in EXPECTED_JSON.items()
        }
    assert field_text(api_server, "/v1/ip/1.0.0.1/bytes") == "AAH+/w==\n"
    assert field_text(api_server, "/v1/ip/1.0.0.1/uint128") == f"{2**128 - 1}\n"
    # When the version is exported, the file gives every value back to both readers:
    # bytes as bytes, integers whole; the 32-bit float comes back as a double of the same value
    out = export(tmp_path, capsys)
    for open_reader in READERS.values():
        with open_reader(str(out)) as reader:
            record = as_read(reader.get("1.0.0.1"))
            assert record["bytes"] == b"\x00\x01\xfe\xff"
            assert record["array"] == [
                1,
                "Zürich 東京",
                b"\x00",
                True,
                0.5,
            ]
            assert record["uint128"] == 2**128 - 1
            assert record["uint64"] == 2**64 - 1
            assert record["double"] == 9.999999747378752e-05
            assert record["float"] == FLOAT32
            assert record["map.nested.int32"] == -(2**31)


# -- any value of any type -------------------------------------------------------------------------

#: Doubles DynamoDB can hold (a Number's magnitude is 1E-130 to 9.99E+125; beyond, a load is refused).
DOUBLES = st.floats(min_value=-1e125, max_value=1e125, allow_nan=False).filter(
    lambda value: value == 0 or abs(value) > 1e-129
)


def scalars() -> st.SearchStrategy[Any]:
    """One value of each scalar type of the spec, as the writer writes exactly that type."""
    return st.one_of(
        st.text(max_size=12),
        st.binary(max_size=12),
        st.booleans(),
        DOUBLES,
        st.floats(width=32, allow_nan=False, allow_infinity=False).map(lambda value: Typed("float", value)),
        st.integers(-(2**31), 2**31 - 1).map(lambda value: Typed("int32", value)),
        st.integers(0, 2**16 - 1).map(lambda value: Typed("uint16", value)),
        st.integers(0, 2**32 - 1).map(lambda value: Typed("uint32", value)),
        st.integers(0, 2**64 - 1).map(lambda value: Typed("uint64", value)),
        st.integers(0, 2**128 - 1).map(lambda value: Typed("uint128", value)),
    )


def shortest(value: float) -> int | Decimal:
    """A double as stored: its shortest decimal, an int when that is whole."""
    number = Decimal(repr(value))
    return int(number) if number == number.to_integral_value() else number


def json_form(value: Any) -> Any:
    """The documented JSON answer of a value the reader read: bytes base64, a double its shortest decimal."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float):
        return shortest(value)
    if isinstance(value, list):
        return [json_form(inner) for inner in value]
    return value


def same_export(exported: Any, read: Any) -> bool:
    """The export keeps every value; a DynamoDB Number keeps no type, so a whole double comes back an
    integer: the one its shortest decimal spells, which reads back as the same double."""
    if isinstance(read, float):
        stored = shortest(read)
        if isinstance(stored, int) and -(2**31) <= stored < 2**128:
            return type(exported) is int and exported == stored and float(exported) == read
        return type(exported) is float and exported == read
    if isinstance(read, list):
        return (
            isinstance(exported, list)
            and len(exported) == len(read)
            and all(map(same_export, exported, read))
        )
    return type(exported) is type(read) and exported == read


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    records=st.lists(
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]),
            scalars() | st.lists(scalars(), min_size=1, max_size=3),
            min_size=1,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_value_of_any_type_survives_load_json_export_and_the_readers(
    table_environment: Settings,
    api_server: LocalApiServer,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    records: list[dict[str, Any]],
) -> None:
    folder = tmp_path_factory.mktemp("any")
    source = write_db(
        folder / "any.mmdb", [(f"1.0.{index}.0/24", record) for index, record in enumerate(records)]
    )
    load(folder, source, capsys)
    out = export(folder, capsys)
    with maxminddb.open_database(str(source)) as original:
        for index in range(len(records)):
            ip = f"1.0.{index}.9"
            read = as_read(original.get(ip))
            data = answer(api_server, f"/v1/ip/{ip}")["data"]
            assert data == {name: json_form(value) for name, value in read.items()}, ip
            assert {name: type(value) for name, value in data.items()} == {
                name: type(json_form(value)) for name, value in read.items()
            }
            for open_reader in READERS.values():
                with open_reader(str(out)) as exported:
                    again = as_read(exported.get(ip))
                    assert set(again) == set(read), ip
                    assert all(same_export(again[name], value) for name, value in read.items()), (again, read)
