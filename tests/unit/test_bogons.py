"""Bogons: the IANA special-purpose blocks, and the globally reachable holes in them."""

from __future__ import annotations

import ipaddress
import itertools

import pytest

from ipmeta.schema.bogons import BOGONS_V4, BOGONS_V6, GLOBAL_EXCEPTIONS_V4, GLOBAL_EXCEPTIONS_V6, is_bogon
from ipmeta.schema.ips import parse_ip


@pytest.mark.parametrize(
    "ip",
    [
        "10.1.2.3",  # private
        "172.31.255.255",
        "192.168.0.1",
        "100.64.0.1",  # CGNAT
        "127.0.0.1",  # loopback
        "169.254.1.1",  # link-local
        "192.0.2.1",  # documentation
        "198.51.100.1",
        "203.0.113.255",
        "198.18.0.1",  # benchmarking
        "224.0.0.1",  # multicast
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "0.0.0.0",
        "::",  # unspecified
        "::1",  # loopback
        "::ffff:10.0.0.1",  # mapped private answers as the IPv4 address
        "fc00::1",  # unique local
        "fd12:3456::1",
        "fe80::1",  # link-local
        "ff02::1",  # multicast
        "2001:db8::1",  # documentation
        "3fff::1",
        "2001:2::1",  # benchmarking, inside 2001::/23
        "100::1",  # discard-only
        "4000::1",  # reserved by IETF
    ],
)
def test_special_purpose_addresses_are_bogons(ip: str) -> None:
    assert is_bogon(parse_ip(ip))


@pytest.mark.parametrize(
    "ip",
    [
        "1.1.1.1",
        "8.8.8.8",
        "100.63.255.255",  # just below CGNAT
        "100.128.0.0",  # just above CGNAT
        "172.32.0.0",  # just above 172.16/12
        "223.255.255.255",  # just below multicast
        "192.0.0.9",  # PCP anycast: globally reachable inside 192.0.0.0/24
        "2001:200::1",
        "2606:4700::1111",
        "2001::1",  # Teredo, inside 2001::/23 but reachable
        "64:ff9b::808:808",  # NAT64 well-known prefix, inside ::/3 but reachable
        "2c0f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # top of 2000::/3 allocations
    ],
)
def test_routable_addresses_are_not_bogons(ip: str) -> None:
    assert not is_bogon(parse_ip(ip))


@pytest.mark.parametrize(
    "blocks",
    [
        [block for block, _ in BOGONS_V4],
        [block for block, _ in BOGONS_V6],
        list(GLOBAL_EXCEPTIONS_V4),
        list(GLOBAL_EXCEPTIONS_V6),
    ],
)
def test_blocks_of_one_table_never_overlap(blocks: list[str]) -> None:
    """is_bogon bisects on block starts: an overlap would hide the outer block."""
    networks = [ipaddress.ip_network(block) for block in blocks]
    for first, second in itertools.combinations(networks, 2):
        assert not first.overlaps(second), (first, second)


def test_every_exception_lies_inside_a_bogon_block() -> None:
    for block in GLOBAL_EXCEPTIONS_V4 + GLOBAL_EXCEPTIONS_V6:
        network = ipaddress.ip_network(block)
        table = BOGONS_V4 if network.version == 4 else BOGONS_V6
        assert any(network.subnet_of(ipaddress.ip_network(b)) for b, _ in table), block  # type: ignore[arg-type]
