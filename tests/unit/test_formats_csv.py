"""The CSV reader of ``loader.formats``: every layout and every line-numbered reason of the reader before it.

The same cases as ``test_source_formats.py`` and ``tests/fixtures/bad/``, run
through ``open_rows``: a whole-file problem raises ``SourceError``, a bad row
is a ``RowError`` (the pipeline counts them against ``--max-errors``).
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

import pytest

from loader.errors import SourceError
from loader.formats import ColumnEvidence, FormatOptions, Header, RowError, SourceRow, open_rows
from tests.bad_inputs import EXPECTED_REASONS as LOADER_REASONS

BAD = Path(__file__).parent.parent / "fixtures" / "bad"


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def read(path: Path, **options: object) -> tuple[list[str], list[SourceRow], list[str]]:
    """The header's columns, the good rows and the messages of the bad ones."""
    entries = list(open_rows(path, path.name, FormatOptions(**options)))  # type: ignore[arg-type]
    header = entries[0]
    assert isinstance(header, Header)
    rows = [entry for entry in entries if isinstance(entry, SourceRow)]
    errors = [entry.message for entry in entries if isinstance(entry, RowError)]
    return header.columns, rows, errors


def bounds(rows: list[SourceRow]) -> list[tuple[int, int, int]]:
    return [(row.family, row.start, row.end) for row in rows]


def column_types(rows: list[SourceRow], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    evidence = ColumnEvidence()
    for row in rows:
        evidence.observe(row.values, row.origin)
    return evidence.column_types(declared or {})


ONE_ROW = [(4, 0x01000000, 0x010000FF)]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("header.csv", b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("integers.csv", b"start,end,asn\n16777216,16777471,13335\n"),
        ("network.csv", b"network,asn\n1.0.0.0/24,13335\n"),
        ("netblock.csv", b"netblock,asn\n1.0.0.0/24,13335\n"),
        ("cidr.csv", b"CIDR,asn\n1.0.0.0/24,13335\n"),
        ("padded.csv", b"Netblock , start , end , asn\n1.0.0.0/24 , 1.0.0.0 , 1.0.0.255 , 13335\n"),
        ("bom.csv", b"\xef\xbb\xbfstart,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("crlf.csv", b"start,end,asn\r\n1.0.0.0,1.0.0.255,13335\r\n"),
        ("zipped.csv.gz", b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("mixed.csv", b"start,end,asn\n16777216,1.0.0.255,13335\n"),
        ("blank-lines.csv", b"start,end,asn\n\n1.0.0.0,1.0.0.255,13335\n\n"),
    ],
)
def test_every_layout_reads_the_same_row(tmp_path: Path, name: str, data: bytes) -> None:
    columns, rows, errors = read(write(tmp_path, name, data))
    assert (bounds(rows), columns, errors) == (ONE_ROW, ["asn"], [])
    assert rows[0].values == {"asn": "13335"}
    assert rows[0].origin == f"{name}: line {3 if name == 'blank-lines.csv' else 2}"


def test_columns_option_reads_a_headerless_file(tmp_path: Path) -> None:
    path = write(tmp_path, "plain.csv", b'1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n')
    _, rows, _ = read(path, columns=["start", "end", "asn", "organization"])
    assert bounds(rows) == ONE_ROW
    assert rows[0].values == {"asn": "13335", "organization": "Cloudflare, Inc."}


def test_quoted_commas_padding_and_both_families_in_one_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "both.csv",
        b'start , end , name\r\n1.0.0.0 , 1.0.0.255 , "Cloudflare, Inc." \r\n'
        b'2001:200:: , 2001:200::ff , "WIDE, JP"\r\n',
    )
    _, rows, _ = read(path)
    assert [row.family for row in rows] == [4, 6]
    assert [row.values["name"] for row in rows] == ["Cloudflare, Inc.", "WIDE, JP"]


def test_values_stay_verbatim_unless_the_layout_is_padded(tmp_path: Path) -> None:
    plain = write(tmp_path, "plain.csv", b'1.0.0.0,1.0.0.255,1,"PhotoShelter, Inc. "\n')
    padded = write(
        tmp_path, "padded.csv", b"Netblock , start , end , org\n1.0.0.0/24 , 1.0.0.0 , 1.0.0.255 , Ex \n"
    )
    assert read(plain, columns=["start", "end", "asn", "org"])[1][0].values["org"] == "PhotoShelter, Inc. "
    assert read(padded)[1][0].values["org"] == "Ex"


def test_integer_bounds_take_their_family_from_the_other_field_or_the_larger(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "integers.csv",
        b"start,end,name\n16777216,::100:ffff,a\n0,340282366920938463463374607431768211455,b\n16777216,16777471,c\n",
    )
    assert bounds(read(path)[1]) == [(6, 16777216, 0x100FFFF), (6, 0, 2**128 - 1), (4, 16777216, 16777471)]


def test_types_are_inferred_conservatively_or_declared(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "typed.csv",
        b"start,end,asn,code,name,lat\n1.0.0.0,1.0.0.1,13335,007,x,-27.4767\n1.0.0.2,1.0.0.3,,12,y,153.017\n",
    )
    _, rows, _ = read(path)
    assert column_types(rows) == {"asn": "N", "code": "S", "name": "S", "lat": "N"}
    _, rows, _ = read(path, declared_types={"asn": "str"})
    assert column_types(rows, {"asn": "str"})["asn"] == "S"


def test_a_declared_int_column_rejects_text_on_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "typed.csv", b"start,end,asn\n1.0.0.0,1.0.0.1,AS13335\n")
    assert read(path, declared_types={"asn": "int"})[2] == [
        "typed.csv: line 2: column 'asn' is declared int but holds 'AS13335': not a whole number"
    ]


def test_types_must_name_a_metadata_column_and_a_known_type(tmp_path: Path) -> None:
    path = write(tmp_path, "typed.csv", b"start,end,asn\n1.0.0.0,1.0.0.1,1\n")
    with pytest.raises(SourceError, match=r"typed.csv: line 1: --types names 'org'"):
        read(path, declared_types={"org": "str"})
    with pytest.raises(SourceError, match=r"unknown type 'bool' .* for 'asn'"):
        read(path, declared_types={"asn": "bool"})


BAD_ROWS = [
    (b"999.0.0.1,1.0.0.1,a", "line 3: '999.0.0.1' is not a valid IP address"),
    (b"1.0.0.9,1.0.0.1,a", "line 3: start 1.0.0.9 is after end 1.0.0.1"),
    (b"1.0.0.1,2001::1,a", "line 3: start is IPv4 but end is IPv6"),
    (b"1.0.0.1,1.0.0.2", "line 3: expected 3 columns, found 2"),
    (b"1.0.0.1,1.0.0.2,a,b", "line 3: expected 3 columns, found 4"),
    (b"1.0.0.1,1.0.0.2," + b"x" * 410_000, "line 3: the item would take"),
]


@pytest.mark.parametrize(("row", "reason"), BAD_ROWS)
def test_a_bad_row_is_an_error_naming_its_line(tmp_path: Path, row: bytes, reason: str) -> None:
    path = write(tmp_path, "bad.csv", b"start,end,name\n1.0.0.0,1.0.0.0,ok\n" + row + b"\n")
    _, rows, errors = read(path)
    assert len(rows) == 1
    assert len(errors) == 1
    assert errors[0].startswith("bad.csv: line 3: ")
    assert reason in errors[0]


def test_every_bad_row_is_listed_and_the_good_ones_still_read(tmp_path: Path) -> None:
    body = b"start,end,name\n1.0.0.0,1.0.0.0,ok\n" + b"\n".join(row for row, _ in BAD_ROWS[:3]) + b"\n"
    _, rows, errors = read(write(tmp_path, "bad.csv", body))
    assert len(rows) == 1
    assert [reason.split(": ")[1] for reason in errors] == ["line 3", "line 4", "line 5"]


def test_a_quoted_newline_counts_in_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "multi.csv", b'start,end,name\n1.0.0.0,1.0.0.0,"two\nlines"\n1.0.0.9,1.0.0.1,x\n')
    assert read(path)[2] == ["multi.csv: line 4: start 1.0.0.9 is after end 1.0.0.1"]


#: What each file says, as the loader always said it; a header-only file is no error
#: to the reader (the pipeline then finds no ranges to load).
EXPECTED_REASONS = {**LOADER_REASONS, "17-header-only.csv": "no rows"}


def first_complaint(path: Path) -> str:
    try:
        _, rows, errors = read(path)
    except SourceError as error:
        return error.message
    return errors[0] if errors else ("no rows" if not rows else "accepted")


@pytest.mark.parametrize("name", sorted(EXPECTED_REASONS))
def test_every_bad_fixture_is_refused_with_its_reason(name: str) -> None:
    complaint = first_complaint(BAD / name)
    assert EXPECTED_REASONS[name] in complaint
    assert complaint.startswith(name) or complaint == "no rows"


def test_the_bad_corpus_has_one_expectation_per_file() -> None:
    assert sorted(path.name for path in BAD.iterdir()) == sorted(EXPECTED_REASONS)


def test_ipv4_mapped_rows_become_ipv4(tmp_path: Path) -> None:
    # Lookups answer ::ffff:a.b.c.d as a.b.c.d: a row kept as IPv6 there could never answer.
    path = write(
        tmp_path,
        "mapped.csv",
        b"start,end,country\n"
        b"::ffff:1.0.0.0,::ffff:1.0.0.255,AU\n"
        b"281470698520832,281470698521087,JP\n"
        b"::fffe:ffff:ffff,::ffff:0.0.0.5,XX\n",
    )
    assert bounds(read(path)[1]) == [
        (4, 0x01000000, 0x010000FF),
        (4, 0x01000100, 0x010001FF),
        (6, 0xFFFEFFFFFFFF, 0xFFFF00000005),  # only partly there: stays IPv6
    ]


def test_a_non_ascii_digit_is_a_row_error_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, "digits.csv", "start,end,name\n1,²,x\n1.0.0.0,1.0.0.255,ok\n".encode())
    _, rows, errors = read(path)
    assert [row.values["name"] for row in rows] == ["ok"]
    assert len(errors) == 1
    assert "line 2" in errors[0]
