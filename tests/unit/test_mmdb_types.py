"""Every data type of the MaxMind DB spec, as our writer encodes it and both ``maxminddb`` readers read it.

The spec numbers the types: pointer 1, utf8 string 2, double 3, bytes 4,
uint16 5, uint32 6, map 7, int32 8, uint64 9, uint128 10, array 11, boolean 14,
float 15 (12 and 13 are deprecated and never written). A type above 7 is
"extended": a control byte of type 0, then a byte holding the type minus 7.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.export.mmdb_writer import (
    DatabaseMetadata,
    DataSection,
    Typed,
    encode_scalar,
    pointer_bytes,
    write_database,
)
from tests.mmdb_readers import READERS, as_read


def spec_type(encoded: bytes) -> int:
    """The type number of an encoded field, from its control byte(s)."""
    kind = encoded[0] >> 5
    return encoded[1] + 7 if kind == 0 else kind


@pytest.mark.parametrize(
    ("value", "kind", "encoded"),
    [
        ("AU", 2, b"\x42AU"),
        (-27.5, 3, b"\x68" + struct.pack(">d", -27.5)),
        (b"\x00\xff", 4, b"\x82\x00\xff"),
        (13335, 5, b"\xa2\x34\x17"),
        (2**16, 6, b"\xc3\x01\x00\x00"),
        (-1, 8, b"\x04\x01\xff\xff\xff\xff"),
        (2**32, 9, b"\x05\x02\x01\x00\x00\x00\x00"),
        (2**128 - 1, 10, b"\x10\x03" + b"\xff" * 16),
        (True, 14, b"\x01\x07"),
        (False, 14, b"\x00\x07"),
        (Typed("float", 1.5), 15, b"\x04\x08" + struct.pack(">f", 1.5)),
        (Typed("uint64", 1), 9, b"\x01\x02\x01"),
        (Typed("uint128", 0), 10, b"\x00\x03"),
        (Typed("uint32", 7), 6, b"\xc1\x07"),
        (Typed("int32", 5), 8, b"\x01\x01\x05"),  # shorter than 4 bytes: positive
        (Typed("double", 2), 3, b"\x68" + struct.pack(">d", 2.0)),
    ],
)
def test_each_scalar_is_encoded_as_the_spec_says(value: Any, kind: int, encoded: bytes) -> None:
    written = DataSection(io.BytesIO())
    out = bytearray()
    written._encode(value, out)
    assert bytes(out) == encoded
    assert spec_type(encoded) == kind


def test_maps_arrays_and_pointers_are_encoded_as_the_spec_says() -> None:
    # Given a data section that already holds a record with the key "cc"
    sink = io.BytesIO()
    data = DataSection(sink)
    first = data.add({"cc": "AU"})
    second = data.add({"cc": "NZ", "tags": ["a", 1]})
    raw = sink.getvalue()
    # Then a map is type 7 with its pair count, an array type 11 with its length
    assert raw[first] == 0xE1
    assert spec_type(raw[first:]) == 7
    assert raw[second] == 0xE2
    # And the repeated key is a pointer (type 1) to where "cc" was first written
    assert raw[second + 1 : second + 3] == pointer_bytes(first + 1)
    assert spec_type(pointer_bytes(first + 1)) == 1
    assert b"\x02\x04" in raw[second:]  # the array's control bytes: size 2, extended type 11


def test_a_value_a_type_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="uint16"):
        encode_scalar(Typed("uint16", 2**16))
    with pytest.raises(ValueError, match="int32"):
        encode_scalar(Typed("int32", 2**31))
    with pytest.raises(TypeError, match="integers"):
        encode_scalar(Typed("uint32", 1.5))
    with pytest.raises(ValueError, match="unknown MaxMind DB number type"):
        Typed("int64", 1)


#: A record holding every type of the spec; pointers come from the repeated keys and strings.
EVERY_TYPE: dict[str, Any] = {
    "utf8_string": "Zürich 東京",
    "double": 9.999999747378752e-05,
    "bytes": b"\x00\x01\xfe\xff",
    "uint16": 65535,
    "uint32": 2**32 - 1,
    "map": {"utf8_string": "Zürich 東京", "nested": {"uint16": 1}},
    "int32": -(2**31),
    "uint64": 2**64 - 1,
    "uint128": 2**128 - 1,
    "array": [1, "Zürich 東京", b"\x00", [True], {"k": False}],
    "boolean": True,
    "float": Typed("float", 0.1),
}


def read_back(value: Any) -> Any:
    """What a reader answers for a value written by us: float32 widened, bytes as bytes."""
    if isinstance(value, Typed):
        if value.kind == "float":
            return struct.unpack(">f", struct.pack(">f", value.value))[0]
        return value.value
    if isinstance(value, dict):
        return {key: read_back(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [read_back(inner) for inner in value]
    return value


@pytest.mark.parametrize("reader_name", READERS)
def test_a_database_of_every_type_reads_back_in_both_readers(tmp_path: Path, reader_name: str) -> None:
    path = tmp_path / "every.mmdb"
    ranges = [(4, 0x01000000, 0x010000FF, EVERY_TYPE), (6, 0x2001 << 112, (0x2001 << 112) + 255, EVERY_TYPE)]
    write_database(ranges, path, DatabaseMetadata("every-type", {"en": "every type"}))
    with READERS[reader_name](str(path)) as reader:
        for probe in ("1.0.0.7", "2001::7"):
            answer = as_read(reader.get(probe))
            assert answer == read_back(EVERY_TYPE)
            assert type(answer["float"]) is float
            assert answer["float"] != 0.1  # binary32, widened to a double
            assert type(answer["bytes"]) is bytes
            assert type(answer["boolean"]) is bool


def unsigned(bits: int) -> st.SearchStrategy[Typed]:
    return st.builds(Typed, st.just(f"uint{bits}"), st.integers(0, 2**bits - 1))


def typed_values() -> st.SearchStrategy[Any]:
    """Any value of any scalar type of the spec, named so the writer uses exactly that type."""
    return st.one_of(
        st.text(max_size=40),
        st.binary(max_size=40),
        st.booleans(),
        st.builds(Typed, st.just("double"), st.floats(allow_nan=False)),
        st.builds(Typed, st.just("float"), st.floats(width=32, allow_nan=False)),
        st.builds(Typed, st.just("int32"), st.integers(-(2**31), 2**31 - 1)),
        *(unsigned(bits) for bits in (16, 32, 64, 128)),
    )


def nested_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        typed_values(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(
        st.dictionaries(st.text(max_size=8), nested_values(), max_size=5), min_size=1, max_size=20
    )
)
def test_any_value_of_any_type_survives_the_writer_and_both_readers(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    path = tmp_path / "any.mmdb"
    ranges = [(4, index << 8, (index << 8) + 255, record) for index, record in enumerate(records)]
    write_database(ranges, path, DatabaseMetadata("any", {}))
    for open_reader in READERS.values():
        with open_reader(str(path)) as reader:
            for index, record in enumerate(records):
                assert as_read(reader.get(f"0.0.{index}.1")) == read_back(record)


def test_a_whole_number_beyond_the_integer_types_is_the_double_that_spells_it() -> None:
    # A whole double once stored as a Number comes back an integer: past int32 or uint128 it is a double again
    for whole in (-25853563971363170, 10**125):
        assert encode_scalar(whole) == b"\x68" + struct.pack(">d", float(whole))
    # An integer no double spells exactly is refused, not rounded
    with pytest.raises(ValueError, match="int32 to uint128"):
        encode_scalar(-(2**60) - 1)
    with pytest.raises(ValueError, match="int32 to uint128"):
        encode_scalar(2**128 + 1)
