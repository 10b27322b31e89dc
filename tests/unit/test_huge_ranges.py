"""Rows that span whole buckets by the million become a few items and one cover, whatever their size.

``::/0`` once became 16.7 M items. Through the loader's pipeline (``tests.pipeline``)
it is now a cover and a head item; smaller ranges inside a huge one still win by
the overlap policy, and every address answers as a brute-force scan of the rows
says (the lookup consults the covers when its bucket's Query finds nothing).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from ipmeta import keys
from ipmeta.covers import CoverIndex
from ipmeta.ips import Address, Family
from loader.options import LoadOptions
from tests.pipeline import Row, stage


def network(text: str, label: str) -> Row:
    parsed = ipaddress.ip_network(text)
    return Row(parsed.version, int(parsed.network_address), int(parsed.broadcast_address), {"label": label})


def answer(
    items: list[dict[str, object]], covers: CoverIndex, family: Family, value: int
) -> tuple[str, int, int] | None:
    """What a lookup answers: the bucket's piece at or before the address, else the bucket's cover."""
    address = Address(family, value)
    partition, sort_key = keys.lookup_key(0, address)
    pieces = [
        item
        for item in items
        if item[keys.PARTITION_KEY] == partition and int(item[keys.SORT_KEY]) <= sort_key  # type: ignore[call-overload]
    ]
    if pieces:
        piece = max(pieces, key=lambda item: int(item[keys.SORT_KEY]))  # type: ignore[call-overload]
        end = int(ipaddress.ip_address(piece[keys.ATTR_END]))  # type: ignore[arg-type]
        if value <= end:
            start = int(ipaddress.ip_address(piece[keys.ATTR_START]))  # type: ignore[arg-type]
            return str(piece[keys.ATTR_DATA]["label"]), start, end  # type: ignore[index]
        return None
    cover = covers.find(family, keys.bucket_of(address))
    return (str(cover.data["label"]), cover.start, cover.end) if cover else None


def brute_force(rows: list[Row], family: int, value: int) -> str | None:
    winner = None
    for row in rows:
        if row.family == family and row.start <= value <= row.end:
            winner = row.values["label"]
    return winner


HUGE = ["::/0", "0.0.0.0/0", "2000::/3", "fc00::/7"]


@pytest.mark.parametrize("huge", HUGE)
def test_a_huge_row_is_a_cover_and_a_head_item_and_answers_everywhere(huge: str, tmp_path: Path) -> None:
    row = network(huge, "huge")
    staged = stage([row], tmp_path)
    assert len(staged.items) <= 3
    assert len(staged.covers) == 1
    index = CoverIndex(staged.covers)
    bits = keys.ADDRESS_BITS[row.family]
    for value in (row.start, row.end, (row.start + row.end) // 2, row.start + (1 << (bits - 9)) + 12345):
        assert answer(staged.items, index, row.family, value) == ("huge", row.start, row.end)  # type: ignore[arg-type]


def test_smaller_ranges_inside_a_huge_one_win_and_split_it_exactly(tmp_path: Path) -> None:
    rows = [
        network("::/0", "everything"),
        network("2000::/3", "global unicast"),
        network("2001:db8::/32", "documentation"),
        network("2001:db8:1::/48", "one site"),
        network("0.0.0.0/0", "all v4"),
        network("10.0.0.0/8", "private"),
        network("10.1.2.0/24", "a lab"),
    ]
    staged = stage(rows, tmp_path)
    assert len(staged.items) < 40  # not one per bucket of ::/0 (16.7 M) or of 2000::/3 (2.1 M)
    index = CoverIndex(staged.covers)
    for row in rows:
        for value in (row.start - 1, row.start, row.end, row.end + 1, (row.start + row.end) // 2):
            limit = (1 << keys.ADDRESS_BITS[row.family]) - 1
            if 0 <= value <= limit:
                found = answer(staged.items, index, row.family, value)  # type: ignore[arg-type]
                assert (found[0] if found else None) == brute_force(rows, row.family, value), hex(value)
    # The merged range of an address in a gap between smaller ranges is the huge one's piece around it.
    inside = int(ipaddress.ip_address("2001:db8:2::1"))
    assert answer(staged.items, index, 6, inside) == (
        "documentation",
        int(ipaddress.ip_address("2001:db8:2::")),
        int(ipaddress.ip_address("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")),
    )
    # Addresses of 2000::/3 outside 2001:db8::/32 join into one range across buckets and covers.
    below = int(ipaddress.ip_address("2000::1"))
    assert answer(staged.items, index, 6, below) == (
        "global unicast",
        int(ipaddress.ip_address("2000::")),
        int(ipaddress.ip_address("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")),
    )


def test_most_specific_lets_the_longer_prefix_win_under_a_later_huge_row(tmp_path: Path) -> None:
    rows = [network("2001:db8::/32", "documentation"), network("::/0", "everything")]
    staged = stage(rows, tmp_path, LoadOptions(overlaps="most-specific"))
    index = CoverIndex(staged.covers)
    value = int(ipaddress.ip_address("2001:db8::5"))
    assert answer(staged.items, index, 6, value)[0] == "documentation"  # type: ignore[index]
    assert answer(staged.items, index, 6, int(ipaddress.ip_address("2002::")))[0] == "everything"  # type: ignore[index]
