"""Rows that span whole buckets by the million become a few items and one cover, whatever their size.

``::/0`` once became 16.7 M items. Through the loader's pipeline (``tests.pipeline``)
it is now a cover and a head item; smaller ranges inside a huge one still win by
the overlap policy, and every address answers as a brute-force scan of the rows
says (the lookup consults the covers when its bucket's Query finds nothing).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import cast

import pytest

from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved
from ipmeta.schema.ips import Address, Family
from loader.options import LoadOptions
from testing.row_scan import Row, brute_force
from tests.memory_table import InMemoryTable
from tests.one_version import lookup_version
from tests.pipeline import Staged, stage

Found = tuple[str, int, int] | None


def network(text: str, label: str) -> Row:
    parsed = ipaddress.ip_network(text)
    return Row(parsed.version, int(parsed.network_address), int(parsed.broadcast_address), {"label": label})


def answer(staged: Staged, family: int, value: int, cache: RangeCache | None = None) -> Found:
    """What the real lookup answers over the staged items and covers: (label, start, end), or None."""
    table = InMemoryTable(staged.items, active=0, covers=staged.covers)
    try:
        result = lookup_version(table, 0, Address(cast(Family, family), value), cache)
    except (IpAddressNotFound, IpAddressReserved):
        return None
    return str(result.data["label"]), result.start, result.end


HUGE = ["::/0", "0.0.0.0/0", "2000::/3", "fc00::/7"]


@pytest.mark.parametrize("huge", HUGE)
def test_a_huge_row_is_a_cover_and_a_head_item_and_answers_everywhere(huge: str, tmp_path: Path) -> None:
    row = network(huge, "huge")
    staged = stage([row], tmp_path)
    assert len(staged.items) <= 3
    assert len(staged.covers) == 1
    bits = keys.ADDRESS_BITS[row.family]
    for value in (row.start, row.end, (row.start + row.end) // 2, row.start + (1 << (bits - 9)) + 12345):
        assert answer(staged, row.family, value) == ("huge", row.start, row.end)


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
    for row in rows:
        for value in (row.start - 1, row.start, row.end, row.end + 1, (row.start + row.end) // 2):
            limit = (1 << keys.ADDRESS_BITS[row.family]) - 1
            if 0 <= value <= limit:
                found = answer(staged, row.family, value)
                owner = brute_force(rows, row.family, value)
                assert (found[0] if found else None) == (owner.values["label"] if owner else None), hex(value)
    # The merged range of an address in a gap between smaller ranges is the huge one's piece around it.
    inside = int(ipaddress.ip_address("2001:db8:2::1"))
    assert answer(staged, 6, inside) == (
        "documentation",
        int(ipaddress.ip_address("2001:db8:2::")),
        int(ipaddress.ip_address("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")),
    )
    # Addresses of 2000::/3 outside 2001:db8::/32 join into one range across buckets and covers.
    below = int(ipaddress.ip_address("2000::1"))
    assert answer(staged, 6, below) == (
        "global unicast",
        int(ipaddress.ip_address("2000::")),
        int(ipaddress.ip_address("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")),
    )


def test_most_specific_lets_the_longer_prefix_win_under_a_later_huge_row(tmp_path: Path) -> None:
    rows = [network("2001:db8::/32", "documentation"), network("::/0", "everything")]
    staged = stage(rows, tmp_path, LoadOptions(overlaps="most-specific"))
    value = int(ipaddress.ip_address("2001:db8::5"))
    assert (answer(staged, 6, value) or ("",))[0] == "documentation"
    assert (answer(staged, 6, int(ipaddress.ip_address("2002::"))) or ("",))[0] == "everything"


def test_a_cover_answer_costs_one_query_and_is_cached_as_the_whole_range(tmp_path: Path) -> None:
    rows = [network("0.0.0.0/0", "all v4"), network("10.1.2.0/24", "a lab")]
    staged = stage(rows, tmp_path)
    table = InMemoryTable(staged.items, active=0, covers=staged.covers)
    cache = RangeCache(1 << 20)
    covered = int(ipaddress.ip_address("99.1.2.3"))  # a bucket with no item: the cover answers
    first = lookup_version(table, 0, Address(4, covered), cache)
    assert (first.data["label"], table.queries) == ("all v4", 1)
    assert (first.start, first.end) == (int(ipaddress.ip_address("10.1.3.0")), 2**32 - 1)
    # Another covered bucket, far away: the cached run answers, no Query.
    again = lookup_version(table, 0, Address(4, int(ipaddress.ip_address("200.0.0.1"))), cache)
    assert (again.data["label"], table.queries) == ("all v4", 1)
    # The lab inside 10/8 is not in that run: it is queried, and wins.
    inside = lookup_version(table, 0, Address(4, int(ipaddress.ip_address("10.1.2.9"))), cache)
    assert (inside.data["label"], table.queries) == ("a lab", 2)
