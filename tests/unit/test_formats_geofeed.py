"""RFC 8805 geofeeds (``--format geofeed``): the RFC's own example, comments, blank lines, bad entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.formats import FormatOptions, Header, RowError, SourceRow, open_rows

EXAMPLE = Path(__file__).parent.parent / "fixtures" / "network" / "rfc8805.csv"
GEOFEED = FormatOptions(format="geofeed")


def read(path: Path) -> tuple[list[str], list[SourceRow], list[str]]:
    entries = list(open_rows(path, path.name, GEOFEED))
    assert isinstance(entries[0], Header)
    rows = [entry for entry in entries if isinstance(entry, SourceRow)]
    return entries[0].columns, rows, [entry.message for entry in entries if isinstance(entry, RowError)]


def test_the_rfc_example_reads_every_entry_with_country_region_and_city() -> None:
    # Given RFC 8805's example feed, with a comment line and a blank line
    columns, rows, errors = read(EXAMPLE)
    # Then each entry is one row, its empty fields absent, a single address its own /32
    assert columns == ["country", "region", "city", "postal"]
    assert errors == []
    by_origin = {row.origin: (row.family, row.start, row.end, row.values) for row in rows}
    assert by_origin["rfc8805.csv: line 3"] == (
        4,
        0xC0000205,
        0xC0000205,
        {"country": "US", "region": "US-AL", "city": "Alabaster", "postal": None},
    )
    assert by_origin["rfc8805.csv: line 5"][3] == {
        "country": "PL",
        "region": "PL-MZ",
        "city": None,
        "postal": "02-784",
    }
    assert by_origin["rfc8805.csv: line 6"][:3] == (6, 0x20010DB8 << 96, (0x20010DB8 << 96) | ((1 << 96) - 1))
    assert len(rows) == 5


def test_a_postcode_of_digits_stays_text(tmp_path: Path) -> None:
    path = tmp_path / "feed.csv"
    path.write_text("192.0.2.5,us,us-al,Alabaster,35007\n2001:db8::/32,PL\n")
    _, rows, errors = read(path)
    assert errors == []
    assert rows[0].values == {"country": "US", "region": "US-AL", "city": "Alabaster", "postal": "35007"}
    assert rows[1].values == {"country": "PL", "region": None, "city": None, "postal": None}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("192.0.2.0/24,USA,,,", "country 'USA' is not an ISO 3166-1 alpha-2 code"),
        ("192.0.2.0/24,U1,,,", "country 'U1' is not an ISO 3166-1 alpha-2 code"),
        ("192.0.2.0/24,US,CA-ON,,", "region CA-ON is not in country US"),
        ("192.0.2.0/24,US,US-TOOLONG,,", "is not an ISO 3166-2 code"),
        ("192.0.2.1/24,US,,,", "host bits set"),
        ("not-a-prefix,US,,,", "is not an address or a CIDR prefix"),
        ("192.0.2.0/24,US,,,,extra", "a geofeed entry has at most 5"),
    ],
)
def test_an_entry_the_rfc_does_not_allow_fails_by_line(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "feed.csv"
    path.write_text(f"# a comment\n198.51.100.0/24,SE,SE-AB,Stockholm,\n{line}\n")
    _, rows, errors = read(path)
    assert len(rows) == 1
    assert len(errors) == 1
    assert errors[0].startswith("feed.csv: line 3: ")
    assert reason in errors[0]
