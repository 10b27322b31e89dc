"""Exporting to CSV: ``start,end,<columns>`` in order, exact numbers; it loads back to the same answers."""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from loader.export.files import ExportRange, write_csv
from loader.formats import ColumnEvidence, FormatOptions, SourceRow, open_rows, typed_value

RANGES = [
    ExportRange(
        4, 0x01000000, 0x010000FF, {"asn": 13335, "lat": Decimal("-27.4767"), "name": "Cloudflare, Inc."}
    ),
    ExportRange(
        4,
        0x01000100,
        0x01000100,
        {"asn": None, "lat": Decimal("0.1000000000000000055511151231257827"), "name": ""},
    ),
    ExportRange(
        6, 0x2001_0200 << 96, (0x2001_0200 << 96) + 9, {"asn": 2500, "lat": Decimal("1E+5"), "name": "WIDE"}
    ),
]
COLUMNS = ["asn", "lat", "name"]
TYPES = {"asn": "N", "lat": "N", "name": "S"}


def reload(path: Path, declared: dict[str, str] | None = None) -> list[tuple[int, int, int, dict[str, Any]]]:
    """What loading ``path`` again would store: bounds and typed data of every row."""
    rows = [
        row
        for row in open_rows(path, path.name, FormatOptions(declared_types=declared or {}))
        if isinstance(row, SourceRow)
    ]
    evidence = ColumnEvidence()
    for row in rows:
        evidence.observe(row.values, row.origin)
    types = evidence.column_types(declared or {})
    return [
        (
            row.family,
            row.start,
            row.end,
            {column: typed_value(value, types[column]) for column, value in row.values.items()},
        )
        for row in rows
    ]


def test_the_csv_has_a_header_sorted_rows_and_exact_numbers(tmp_path: Path) -> None:
    out = tmp_path / "v3.csv"
    stats = write_csv(RANGES, out, COLUMNS, TYPES)
    assert out.read_text().splitlines() == [
        "start,end,asn,lat,name",
        '1.0.0.0,1.0.0.255,13335,-27.4767,"Cloudflare, Inc."',
        "1.0.1.0,1.0.1.0,,0.1000000000000000055511151231257827,",
        "2001:200::,2001:200::9,2500,100000,WIDE",
    ]
    assert (stats.ranges, stats.details["reload_types"]) == (3, {})


def test_it_loads_back_to_the_same_answers(tmp_path: Path) -> None:
    out = tmp_path / "v3.csv.gz"
    write_csv(RANGES, out, COLUMNS, TYPES)
    assert gzip.decompress(out.read_bytes()).startswith(b"start,end,asn,lat,name\n")
    assert reload(out) == [(item.family, item.start, item.end, dict(item.data)) for item in RANGES]


def test_a_text_column_of_digits_tells_how_to_reload_it_as_text(tmp_path: Path) -> None:
    # Given a version whose postcode column was declared text, and holds only digits
    ranges = [ExportRange(4, 1, 1, {"postcode": "4101"}), ExportRange(4, 2, 2, {"postcode": "2000"})]
    out = tmp_path / "v4.csv"
    stats = write_csv(ranges, out, ["postcode"], {"postcode": "S"})
    # Then the export says which --types keep it text, and with them it loads back the same
    assert stats.details["reload_types"] == {"postcode": "str"}
    assert [data for *_, data in reload(out, stats.details["reload_types"])] == [
        {"postcode": "4101"},
        {"postcode": "2000"},
    ]
    assert [data for *_, data in reload(out)] == [{"postcode": 4101}, {"postcode": 2000}]


def test_database_types_are_written_as_text(tmp_path: Path) -> None:
    out = tmp_path / "native.csv"
    write_csv(
        [ExportRange(4, 1, 1, {"anycast": True, "tags": ["a", Decimal("1.5")], "blob": b"\x01"})],
        out,
        ["anycast", "tags", "blob"],
    )
    assert out.read_text().splitlines()[1] == '0.0.0.1,0.0.0.1,true,"[""a"",1.5]",01'


def test_unsorted_ranges_are_refused_and_no_file_is_left(tmp_path: Path) -> None:
    out = tmp_path / "bad.csv"
    with pytest.raises(ValueError, match="ranges must be sorted"):
        write_csv([RANGES[1], RANGES[0]], out, COLUMNS)
    assert list(tmp_path.iterdir()) == []


def test_arrays_are_json_text_with_exact_numbers(tmp_path: Path) -> None:
    # A Decimal of 38 digits inside an array keeps them all; bytes inside JSON are base64, as answered
    digits = Decimal("0.12345678901234567890123456789012345678")
    out = tmp_path / "arrays.csv"
    write_csv([ExportRange(4, 1, 1, {"tags": [digits, 2**128 - 1, b"\x01"]})], out, ["tags"])
    assert out.read_text().splitlines()[1] == (
        '0.0.0.1,0.0.0.1,"[0.12345678901234567890123456789012345678,340282366920938463463374607431768211455,""AQ==""]"'
    )
