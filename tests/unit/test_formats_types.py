"""Column types: plain decimals become exact Numbers, everything DynamoDB cannot hold is named by its line."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from loader.formats import (
    ColumnEvidence,
    FormatOptions,
    NativeValues,
    RowError,
    SourceRow,
    open_rows,
    parse_declared_types,
    parse_field_map,
    stored_bytes,
    typed_value,
)
from loader.formats.column_types import PLAIN_NUMBER, decimal_problem


def evidence_of(*rows: dict[str, str], origin: str = "f.csv") -> ColumnEvidence:
    evidence = ColumnEvidence()
    for line, values in enumerate(rows, start=2):
        evidence.observe(values, f"{origin}: line {line}")
    return evidence


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["13335", "-27.4767", "0", "0.5", "-0.25", ""], "N"),
        (["153.017", "007"], "S"),  # a leading zero means text, as it always did
        (["1", "00.5"], "S"),
        (["1", "1e5", "1E+3", "9.999999747378752e-05", "-2.5E-7"], "N"),  # exponents are numbers too
        (["1", "1e"], "S"),
        (["1", "1e+"], "S"),
        (["1", "e5"], "S"),
        (["1", "+5"], "S"),
        (["1", ".5"], "S"),
        (["1", "5."], "S"),
        (["1", " 5"], "S"),
        (["1", "AS13335"], "S"),
        (["", ""], "S"),  # nothing to go on: text
    ],
)
def test_a_column_is_a_number_only_when_every_value_is_a_decimal_number(
    values: list[str], expected: str
) -> None:
    evidence = evidence_of(*({"c": value} for value in values))
    assert evidence.column_types({}) == {"c": expected}
    assert evidence.problems({}) == []


def test_declared_types_win_and_accept_aliases() -> None:
    evidence = evidence_of({"a": "1", "b": "x", "c": "2"})
    assert evidence.column_types({"a": "str", "b": "string", "c": "decimal"}) == {
        "a": "S",
        "b": "S",
        "c": "N",
    }
    assert evidence.column_types({"a": "float", "c": "number"}) == {"a": "N", "b": "S", "c": "N"}


def test_numbers_are_stored_exactly_from_their_text_never_through_a_float() -> None:
    latitude = typed_value("-27.4767", "N")
    assert latitude == Decimal("-27.4767")
    assert isinstance(latitude, Decimal)
    assert TypeSerializer().serialize(latitude) == {"N": "-27.4767"}
    assert TypeSerializer().serialize(typed_value("0.1000000000000000055511151231257827", "N")) == {
        "N": "0.1000000000000000055511151231257827"
    }
    assert typed_value("13335", "N") == 13335
    assert isinstance(typed_value("13335", "N"), int)
    assert typed_value("", "N") is None
    assert typed_value("007", "N") == 7  # a declared int
    assert typed_value("1e5", "N") == Decimal("1E+5")  # a declared float
    assert typed_value("007", "S") == "007"


def test_a_number_with_trailing_zeros_past_38_digits_is_stored_without_them() -> None:
    big = "1" + "0" * 45
    assert decimal_problem(Decimal(big)) is None
    assert TypeSerializer().serialize(typed_value(big, "N")) == {"N": "1E+45"}


@given(st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1), st.integers(min_value=0, max_value=30))
def test_an_integer_takes_the_size_of_its_significant_digits_as_its_decimal_does(
    number: int, zeros: int
) -> None:
    # Given an integer of at most 38 significant digits, perhaps with trailing zeros past them
    value = number * 10**zeros if len(str(abs(number)).rstrip("0")) + zeros <= 38 else number
    # Then it counts what the same number as a Decimal counts (normalized, trailing zeros dropped)
    assert stored_bytes(value) == stored_bytes(Decimal(value))
    assert stored_bytes(value * 10**40) == stored_bytes(value)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("NaN", "cannot be NaN or Infinity"),
        ("-Infinity", "cannot be NaN or Infinity"),
        ("inf", "cannot be NaN or Infinity"),
        ("1" * 39, "at most 38 significant digits"),
        ("0." + "0" * 130 + "1", "magnitude 1E-130"),
        ("1" + "0" * 126, "magnitude 1E-130"),
    ],
)
def test_a_numeric_column_holding_what_dynamodb_cannot_store_names_the_line(value: str, reason: str) -> None:
    # Given a column of numbers with one value DynamoDB cannot hold on line 7
    rows = [{"lat": str(line)} for line in range(5)] + [{"lat": value}, {"lat": "1.5"}]
    evidence = evidence_of(*rows, origin="cities.csv")
    # Then it is still a Number column, and the problem names the file, the line and the column
    assert evidence.column_types({}) == {"lat": "N"}
    [problem] = evidence.problems({})
    assert problem.startswith("cities.csv: line 7: column 'lat' holds numbers, but also ")
    assert reason in problem
    assert "--types lat=str" in problem
    # And declaring the column text keeps the value as text, without a problem
    assert evidence.problems({"lat": "str"}) == []


def test_nan_in_a_text_column_is_just_text() -> None:
    evidence = evidence_of({"name": "Nancy"}, {"name": "NaN"}, {"name": "12"})
    assert evidence.column_types({}) == {"name": "S"}
    assert evidence.problems({}) == []


def test_a_declared_number_column_rejects_nan_on_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cities.csv"
    path.write_text("start,end,lat\n1.0.0.0,1.0.0.9,-27.4767\n1.0.1.0,1.0.1.9,NaN\n1.0.2.0,1.0.2.9,1e999\n")
    entries = list(open_rows(path, path.name, FormatOptions(declared_types={"lat": "float"})))
    assert [entry.message for entry in entries if isinstance(entry, RowError)] == [
        "cities.csv: line 3: column 'lat' is declared float but holds 'NaN': "
        "DynamoDB numbers cannot be NaN or Infinity",
        "cities.csv: line 4: column 'lat' is declared float but holds '1e999': "
        "a DynamoDB number lies within 38 significant digits, magnitude 1E-130 to 9.99E+125",
    ]
    [good] = [entry for entry in entries if isinstance(entry, SourceRow)]
    assert typed_value(good.values["lat"], "N") == Decimal("-27.4767")


def test_evidence_merges_across_files_and_travels_as_json() -> None:
    # Given two tasks: one saw only numbers (and a NaN), the other saw text in "code"
    first = evidence_of({"lat": "1.5", "code": "12"}, {"lat": "NaN", "code": "13"}, origin="a.csv")
    second = evidence_of({"lat": "2.5", "code": "X1"}, origin="b.csv")
    # When their evidence crosses a task boundary as JSON and is merged
    merged = ColumnEvidence.from_json(json.loads(json.dumps(first.to_json())))
    merged.merge(ColumnEvidence.from_json(json.loads(json.dumps(second.to_json()))))
    # Then text anywhere makes a String, and the NaN is still named where it was
    assert merged.column_types({}) == {"lat": "N", "code": "S"}
    assert merged.problems({}) == [
        "a.csv: line 3: column 'lat' holds numbers, but also 'NaN': DynamoDB numbers cannot be NaN "
        "or Infinity; fix the row, or load the column as text with --types lat=str"
    ]


def test_mmdb_values_keep_their_own_types_even_when_they_look_like_numbers() -> None:
    evidence = ColumnEvidence()
    evidence.observe(NativeValues(postcode="4101", lat=-27.476699829101562, anycast=True, tags=["a"]), "x")
    evidence.observe(NativeValues(postcode="", lat=None, anycast=None, tags=None), "y")
    types = evidence.column_types({})
    assert types == {"postcode": "native", "lat": "native", "anycast": "native", "tags": "native"}
    assert typed_value("4101", types["postcode"]) == "4101"
    assert typed_value(-27.476699829101562, "native") == Decimal("-27.476699829101562")
    assert typed_value([1.5, True, "a"], "native") == [Decimal("1.5"), True, "a"]
    assert typed_value(None, "native") is None
    assert typed_value(True, "S") == "true"
    assert typed_value(-27.5, "S") == "-27.5"


def test_a_nan_double_in_a_database_names_its_network() -> None:
    evidence = ColumnEvidence()
    evidence.observe(NativeValues(lat=1.5), "geo.mmdb: network 1.0.0.0/24")
    evidence.observe(NativeValues(lat=math.nan), "geo.mmdb: network 1.0.1.0/24")
    evidence.observe(NativeValues(lat=math.inf), "geo.mmdb: network 1.0.2.0/24")
    assert evidence.problems({}) == [
        "geo.mmdb: network 1.0.1.0/24: column 'lat' holds nan: DynamoDB numbers cannot be NaN or Infinity"
    ]


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-(10**20), max_value=10**20))
def test_every_plain_decimal_text_round_trips_exactly(number: Decimal) -> None:
    text = format(number, "f")
    if not PLAIN_NUMBER.fullmatch(text):  # "-0.000000" and friends
        return
    stored = typed_value(text, "N")
    assert Decimal(stored) == Decimal(text)
    assert evidence_of({"n": text}).column_types({}) == {"n": "N"}


def test_the_types_and_fields_options_parse_or_say_why_not() -> None:
    assert parse_declared_types("lat=float, postcode=str,asn=INT") == {
        "lat": "float",
        "postcode": "str",
        "asn": "int",
    }
    with pytest.raises(ValueError, match="unknown type 'bool'"):
        parse_declared_types("flag=bool")
    with pytest.raises(ValueError, match="column=int"):
        parse_declared_types("lat")
    assert parse_field_map("country=country.iso_code,city=city.names.en,location.latitude") == {
        "country": "country.iso_code",
        "city": "city.names.en",
        "location.latitude": "location.latitude",
    }
    with pytest.raises(ValueError, match="names column 'a' twice"):
        parse_field_map("a=x,a=y")
    with pytest.raises(ValueError, match=r"column=dotted\.path"):
        parse_field_map("a=")


def test_exponent_notation_is_stored_as_the_exact_number_it_spells() -> None:
    # Given a longitude column as Python writes floats (repr), and a count written 1E+3
    evidence = evidence_of(
        {"lon": "-0.7617999911308289", "n": "7"}, {"lon": "9.999999747378752e-05", "n": "1E+3"}
    )
    assert evidence.column_types({}) == {"lon": "N", "n": "N"}
    # Then each value is the exact number its text spells, stored as a DynamoDB Number
    assert typed_value("9.999999747378752e-05", "N") == Decimal("0.00009999999747378752")
    assert TypeSerializer().serialize(typed_value("9.999999747378752e-05", "N")) == {
        "N": "0.00009999999747378752"
    }
    assert typed_value("1E+3", "N") == 1000
    assert typed_value("-0.7617999911308289", "N") == Decimal("-0.7617999911308289")


def test_an_exponent_dynamodb_cannot_hold_names_its_line_however_short() -> None:
    evidence = evidence_of({"x": "1.5"}, {"x": "1e200"}, origin="e.csv")
    [problem] = evidence.problems({})
    assert problem.startswith("e.csv: line 3: column 'x' holds numbers, but also '1e200': ")


def test_a_column_of_numbers_and_words_is_text_and_named_with_the_row_that_decided_it() -> None:
    # Given numbers on lines 2 and 3 and a word on line 4 in "lat"; text first, then a number, in "code"
    evidence = evidence_of(
        {"lat": "1.5", "code": "AB", "name": "x"},
        {"lat": "2.5", "code": "12", "name": "y"},
        {"lat": "north", "code": "CD", "name": "z"},
        origin="geo.csv",
    )
    # Then both are text, and each is reported with its first text row and first number row
    assert evidence.column_types({}) == {"lat": "S", "code": "S", "name": "S"}
    mixed = evidence.mixed({})
    assert set(mixed) == {"lat", "code"}  # "name" holds words only: not mixed
    assert mixed["lat"].startswith(
        "geo.csv: line 4: column 'lat' holds numbers (the first at geo.csv: line 2) and text ('north')"
    )
    assert mixed["code"].startswith(
        "geo.csv: line 2: column 'code' holds numbers (the first at geo.csv: line 3)"
    )
    # A declared type is no surprise: not reported
    assert "lat" not in evidence.mixed({"lat": "str"})


def test_the_first_text_across_files_decides_and_travels_as_json() -> None:
    first = evidence_of({"lat": "1.5"}, {"lat": "2.5"}, origin="a.csv")
    second = evidence_of({"lat": "x"}, {"lat": "y"}, origin="b.csv")
    merged = ColumnEvidence.from_json(json.loads(json.dumps(first.to_json())))
    merged.merge(ColumnEvidence.from_json(json.loads(json.dumps(second.to_json()))))
    assert merged.mixed({})["lat"].startswith(
        "b.csv: line 2: column 'lat' holds numbers (the first at a.csv: line 2) and text ('x')"
    )
