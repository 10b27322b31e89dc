"""The JSON of answers: as `json.dumps` writes plain values; numbers exact and bytes in base64 besides."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from ipmeta.shapes import exact_json
from ipmeta.store.dynamodb import BIG_INTEGER, deserialize_item, dynamo_value

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(PLAIN)
def test_plain_values_are_written_as_json_dumps_writes_them(value: Any) -> None:
    assert exact_json.dumps(value) == json.dumps(value, separators=(",", ":"))
    assert exact_json.dumps(value, indent=2) == json.dumps(value, indent=2)


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_a_decimal_is_the_json_number_of_its_own_digits(number: Decimal) -> None:
    text = exact_json.dumps({"n": number})
    assert json.loads(text, parse_float=Decimal, parse_int=Decimal) == {"n": number}
    assert '"' not in text.removeprefix('{"n"')  # a number, not a string


def test_numbers_bytes_and_big_integers_keep_their_exact_value() -> None:
    value = {
        "lat": Decimal("0.12345678901234567890123456789012345678"),  # 38 digits: a float keeps 17
        "tiny": Decimal("9.999999747378752E-5"),
        "uint128": 2**128 - 1,
        "raw": b"\x00\xff",
        "list": [Decimal("-27.4767"), b"", True, None],
    }
    assert exact_json.dumps(value) == (
        '{"lat":0.12345678901234567890123456789012345678,"tiny":0.00009999999747378752,'
        '"uint128":340282366920938463463374607431768211455,"raw":"AP8=","list":[-27.4767,"",true,null]}'
    )
    assert exact_json.plain_text(Decimal("1.5E-7")) == "1.5E-7"
    assert exact_json.plain_text(b"\x00\xff") == "AP8="
    assert exact_json.plain_text([1, "a"]) == '[1,"a"]'
    with pytest.raises(ValueError, match="JSON has no NaN"):
        exact_json.dumps(Decimal("NaN"))


@pytest.mark.parametrize("number", [BIG_INTEGER, 2**128 - 1, -(10**40), BIG_INTEGER - 1, 0])
def test_an_integer_past_38_digits_is_stored_in_a_form_dynamodb_holds_and_read_back_whole(
    number: int,
) -> None:
    serialized = TypeSerializer().serialize(dynamo_value({"n": number, "in": [number]}))
    # A Number holds 38 digits: a bigger integer is a String Set of its one decimal text
    expected = {"SS": [str(number)]} if abs(number) >= BIG_INTEGER else {"N": str(number)}
    assert serialized["M"]["n"] == expected
    assert deserialize_item({"data": serialized})["data"] == {"n": number, "in": [number]}
    assert TypeDeserializer().deserialize(serialized)["n"] in (number, {str(number)})


def test_numbers_read_as_dynamodb_answers_them_whatever_their_length() -> None:
    # DynamoDB answers 1E+100 with all its 101 digits: boto3's deserializer raises decimal.Rounded
    item = {
        "whole": {"N": "1" + "0" * 100},
        "tiny": {"N": "0.000000000000000000000000000000000000000000015"},
        "lat": {"N": "-27.4767"},
        "done": {"NS": ["1", "2"]},
        "raw": {"B": b"\x00"},
        "gone": {"NULL": True},
        "data": {"M": {"tags": {"L": [{"S": "a"}, {"BOOL": False}, {"SS": [str(2**128 - 1)]}]}}},
    }
    assert deserialize_item(item) == {
        "whole": 10**100,
        "tiny": Decimal("1.5E-44"),
        "lat": Decimal("-27.4767"),
        "done": [1, 2],
        "raw": b"\x00",
        "gone": None,
        "data": {"tags": ["a", False, 2**128 - 1]},
    }
    assert exact_json.dumps(deserialize_item(item)["lat"]) == "-27.4767"
