"""The guard's measure of one network list (``loader.pipeline.guard.moved_too_far``): a release that
drops a whole block (a provider's IPv6, one region, a prefix's fields) is change, not only what it adds.

The files are AWS's ``ip-ranges.json`` shape (``prefixes[].ip_prefix``, ``ipv6_prefixes[].ipv6_prefix``,
``region``, ``service``, ``network_border_group``); the limits are the catalogue's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loader.feeds.catalogue import CATALOGUE
from loader.pipeline.guard import list_change, moved_too_far

AWS = CATALOGUE["aws"]


def prefix(network: str, region: str, *, ipv6: bool = False) -> dict[str, str]:
    field = "ipv6_prefix" if ipv6 else "ip_prefix"
    return {field: network, "region": region, "service": "EC2", "network_border_group": region}


def ip_ranges(path: Path, ipv4: list[dict[str, str]], ipv6: list[dict[str, str]]) -> Path:
    document = {
        "syncToken": "1",
        "createDate": "2026-11-20-12-00-00",
        "prefixes": ipv4,
        "ipv6_prefixes": ipv6,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


#: 100 IPv4 /24s in us-east-1, 5 IPv4 /16s in eu-south-1, 5 IPv6 /36s in us-west-2.
EAST = [prefix(f"3.{n // 200}.{n % 200}.0/24", "us-east-1") for n in range(100)]
SOUTH = [prefix(f"15.{160 + n}.0.0/16", "eu-south-1") for n in range(5)]
IPV6 = [prefix(f"2600:1f14:{n:x}000::/36", "us-west-2", ipv6=True) for n in range(5)]


def judged(tmp_path: Path, ipv4: list[dict[str, str]], ipv6: list[dict[str, str]]) -> str:
    before = ip_ranges(tmp_path / "current" / "aws-1.json", EAST + SOUTH, IPV6)
    return moved_too_far(before, ip_ranges(tmp_path / "incoming" / "aws-1.json", ipv4, ipv6), AWS)


def test_a_release_that_drops_every_ipv6_range_is_held_though_few_ranges_went(tmp_path: Path) -> None:
    # 5 of 110 ranges (4.5%, under AWS's 10%), but every IPv6 address
    assert judged(tmp_path, EAST + SOUTH, []) == "aws: changes 100% of its IPv6 addresses, above 10%"


def test_a_release_that_drops_one_region_is_held_though_few_ranges_went(tmp_path: Path) -> None:
    # 5 of 110 ranges, but eu-south-1's five /16s are 93% of the IPv4 addresses
    assert judged(tmp_path, EAST, IPV6) == "aws: changes 93% of its IPv4 addresses, above 10%"


def test_a_release_that_moves_every_range_to_another_region_is_held(tmp_path: Path) -> None:
    moved = [{**row, "region": "us-east-2", "network_border_group": "us-east-2"} for row in EAST + SOUTH]
    reason = judged(tmp_path, moved, IPV6)
    assert reason == "aws: changes 95% of its ranges, above 10% (0 added, 0 removed, 105 modified)"


def test_a_release_within_the_ratio_is_not_held(tmp_path: Path) -> None:
    # 3 /24s gone and 5 new: 5% of the ranges and 0.1% of the IPv4 addresses
    grown = EAST[3:] + [prefix(f"3.9.{n}.0/24", "us-east-1") for n in range(5)] + SOUTH
    assert judged(tmp_path, grown, IPV6) == ""


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ({(4, 0, 9): frozenset({"a"})}, (1, 0, 0, 0, {4: 0.0})),
        ({(4, 0, 9): frozenset({"b"})}, (1, 0, 0, 1, {4: 0.0})),
        ({(4, 0, 4): frozenset({"a"})}, (1, 1, 1, 0, {4: 0.5})),
        ({(4, 0, 9): frozenset({"a"}), (4, 10, 39): frozenset({"a"})}, (1, 1, 0, 0, {4: 3.0})),
        ({}, (1, 0, 1, 0, {4: 1.0})),
    ],
    ids=["same", "modified", "shrunk", "grown", "emptied"],
)
def test_list_change_counts_ranges_and_addresses(
    after: dict[tuple[int, int, int], frozenset[str]], expected: tuple[int, int, int, int, dict[int, float]]
) -> None:
    change = list_change({(4, 0, 9): frozenset({"a"})}, after)
    assert (
        change.ranges,
        change.added,
        change.removed,
        change.modified,
        dict(change.address_shares),
    ) == expected
