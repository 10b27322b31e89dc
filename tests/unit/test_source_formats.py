"""Every input layout the loader accepts, and the line-numbered reason of every bad row."""

from __future__ import annotations

import gzip
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from loader.errors import LoadRejected
from loader.evidence import ColumnEvidence
from loader.source import ParsedSource, materialize, read_sources


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def column_types(parsed: ParsedSource, declared: dict[str, str] | None = None) -> dict[str, str]:
    evidence = ColumnEvidence()
    for row in parsed.rows:
        evidence.observe(row.values, row.origin)
    return evidence.column_types(declared or {})


def bounds(parsed: ParsedSource) -> list[tuple[int, int, int]]:
    return [(row.family, row.start, row.end) for row in parsed.rows]


ONE_ROW = [(4, 0x01000000, 0x010000FF)]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("header.csv", b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("integers.csv", b"start,end,asn\n16777216,16777471,13335\n"),
        ("network.csv", b"network,asn\n1.0.0.0/24,13335\n"),
        ("padded.csv", b"Netblock , start , end , asn\n1.0.0.0/24 , 1.0.0.0 , 1.0.0.255 , 13335\n"),
        ("bom.csv", b"\xef\xbb\xbfstart,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("crlf.csv", b"start,end,asn\r\n1.0.0.0,1.0.0.255,13335\r\n"),
        ("zipped.csv.gz", b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
        ("mixed.csv", b"start,end,asn\n16777216,1.0.0.255,13335\n"),
        ("blank-lines.csv", b"start,end,asn\n\n1.0.0.0,1.0.0.255,13335\n\n"),
    ],
)
def test_every_layout_reads_the_same_row(tmp_path: Path, name: str, data: bytes) -> None:
    parsed = read_sources([write(tmp_path, name, data)])
    assert bounds(parsed) == ONE_ROW
    assert parsed.columns == ["asn"]
    assert parsed.rows[0].values == {"asn": "13335"}


def test_columns_flag_reads_a_headerless_file(tmp_path: Path) -> None:
    path = write(tmp_path, "plain.csv", b'1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n')
    parsed = read_sources([path], columns=["start", "end", "asn", "organization"])
    assert bounds(parsed) == ONE_ROW
    assert parsed.rows[0].values == {"asn": "13335", "organization": "Cloudflare, Inc."}


def test_quoted_commas_padding_and_both_families_in_one_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "both.csv",
        b'start , end , name\r\n1.0.0.0 , 1.0.0.255 , "Cloudflare, Inc." \r\n'
        b'2001:200:: , 2001:200::ff , "WIDE, JP"\r\n',
    )
    parsed = read_sources([path])
    assert [row.family for row in parsed.rows] == [4, 6]
    assert [row.values["name"] for row in parsed.rows] == ["Cloudflare, Inc.", "WIDE, JP"]


def test_an_ipv6_integer_takes_its_family_from_the_other_field(tmp_path: Path) -> None:
    path = write(tmp_path, "v6int.csv", b"start,end,x\n16777216,::100:ffff,a\n")
    assert bounds(read_sources([path])) == [(6, 16777216, 0x100FFFF)]


def test_types_are_inferred_conservatively_or_declared(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "typed.csv",
        b"start,end,asn,code,name\n1.0.0.0,1.0.0.1,13335,007,x\n1.0.0.2,1.0.0.3,,12,y\n",
    )
    parsed = read_sources([path])
    assert column_types(parsed) == {"asn": "N", "code": "S", "name": "S"}
    declared = read_sources([path], declared_types={"asn": "str"})
    assert column_types(declared, {"asn": "str"})["asn"] == "S"


def test_a_declared_int_column_rejects_text(tmp_path: Path) -> None:
    path = write(tmp_path, "typed.csv", b"start,end,asn\n1.0.0.0,1.0.0.1,AS13335\n")
    with pytest.raises(LoadRejected, match=r"line 2: column 'asn' is declared int"):
        read_sources([path], declared_types={"asn": "int"})


BAD_ROWS = [
    (b"999.0.0.1,1.0.0.1,a", "line 3: '999.0.0.1' is not a valid IP address"),
    (b"1.0.0.9,1.0.0.1,a", "line 3: start 1.0.0.9 is after end 1.0.0.1"),
    (b"1.0.0.1,2001::1,a", "line 3: start is IPv4 but end is IPv6"),
    (b"1.0.0.1,1.0.0.2", "line 3: expected 3 columns, found 2"),
    (b"1.0.0.1,1.0.0.2,a,b", "line 3: expected 3 columns, found 4"),
    (b"1.0.0.1,1.0.0.2," + b"x" * 410_000, "line 3: the item would take"),
]


@pytest.mark.parametrize(("row", "reason"), BAD_ROWS)
def test_a_bad_row_aborts_with_its_line(tmp_path: Path, row: bytes, reason: str) -> None:
    path = write(tmp_path, "bad.csv", b"start,end,name\n1.0.0.0,1.0.0.0,ok\n" + row + b"\n")
    with pytest.raises(LoadRejected) as caught:
        read_sources([path])
    assert reason in caught.value.message
    assert caught.value.reasons[0].startswith("bad.csv: line 3: ")


def test_max_errors_skips_bad_rows_and_lists_them(tmp_path: Path) -> None:
    body = b"start,end,name\n1.0.0.0,1.0.0.0,ok\n" + b"\n".join(row for row, _ in BAD_ROWS[:3]) + b"\n"
    path = write(tmp_path, "bad.csv", body)
    parsed = read_sources([path], max_errors=3)
    assert len(parsed.rows) == 1
    assert parsed.rows_read == 4
    assert [reason.split(": ")[1] for reason in parsed.rejected] == ["line 3", "line 4", "line 5"]
    with pytest.raises(LoadRejected, match=r"3 bad rows \(at most 2 allowed\)"):
        read_sources([path], max_errors=2)


def test_a_quoted_newline_counts_in_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "multi.csv", b'start,end,name\n1.0.0.0,1.0.0.0,"two\nlines"\n1.0.0.9,1.0.0.1,x\n')
    with pytest.raises(LoadRejected, match=r"line 4: start 1\.0\.0\.9 is after end"):
        read_sources([path])


@mock_aws
def test_an_s3_uri_is_downloaded_first(tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sources")
    s3.put_object(
        Bucket="sources",
        Key="asn/latest.csv.gz",
        Body=gzip.compress(b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
    )
    path = materialize("s3://sources/asn/latest.csv.gz", tmp_path)
    assert path.name == "latest.csv.gz"
    assert bounds(read_sources([path])) == ONE_ROW


def test_values_stay_verbatim_unless_the_layout_is_padded() -> None:
    """The ASN file has organizations with a trailing space inside quotes: they are data."""
    from loader.source import SourceRow, parse_rows

    plain = [
        row
        for row in parse_rows(
            ['1.0.0.0,1.0.0.255,1,"PhotoShelter, Inc. "\n'], "plain.csv", ["start", "end", "asn", "org"]
        )
        if isinstance(row, SourceRow)
    ]
    padded = [
        row
        for row in parse_rows(
            ["Netblock , start , end , org\n", "1.0.0.0/24 , 1.0.0.0 , 1.0.0.255 , Example Org \n"],
            "padded.csv",
            None,
        )
        if isinstance(row, SourceRow)
    ]
    assert plain[0].values["org"] == "PhotoShelter, Inc. "
    assert padded[0].values["org"] == "Example Org"


def test_integer_rows_take_their_family_from_the_larger_bound() -> None:
    from loader.source import SourceRow, parse_rows

    rows = [
        row
        for row in parse_rows(
            ["0,340282366920938463463374607431768211455,all of v6\n", "16777216,16777471,v4\n"],
            "integers.csv",
            ["start", "end", "name"],
        )
        if isinstance(row, SourceRow)
    ]
    assert [(row.family, row.start, row.end) for row in rows] == [(6, 0, 2**128 - 1), (4, 16777216, 16777471)]
