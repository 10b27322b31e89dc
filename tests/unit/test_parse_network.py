"""``ips.parse_network`` reads CIDR text with inet_pton and must accept exactly what ``ipaddress`` accepts."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import parse_network


def reference(text: str) -> tuple[int, int, int] | None:
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError:
        return None
    return network.version, int(network.network_address), int(network.broadcast_address)


def ours(text: str) -> tuple[int, int, int] | None:
    try:
        return parse_network(text)
    except InvalidIpAddress:
        return None


@pytest.mark.parametrize(
    "text",
    [
        "1.2.3.0/24",
        "1.2.3.4/24",  # host bits set
        "01.2.3.0/24",  # a leading zero: ipaddress refuses, inet_pton might not
        "10.0.0.0/8",
        "1.2.3.0/024",
        "1.2.3.0/33",
        "1.2.3.0/+24",
        "1.2.3.0/ 24",
        " 1.2.3.0/24",
        "1.2.3.0/٢٤",
        "256.1.1.0/24",
        "1.2.3.0",
        "0.0.0.0/0",
        "::/0",
        "::ffff:1.2.3.0/120",
        "::1.2.3.4/128",
        "2001:db8::/32",
        "2001:db8::1/32",
        "fe80::%eth0/64",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128",
    ],
)
def test_edge_cases_agree_with_ipaddress(text: str) -> None:
    assert ours(text) == reference(text)


ipv4_cidrs = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 33)).map(
    lambda pair: f"{ipaddress.IPv4Address(pair[0])}/{pair[1]}"
)
ipv6_cidrs = st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 129)).map(
    lambda pair: f"{ipaddress.IPv6Address(pair[0])}/{pair[1]}"
)
valid_ipv4 = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)).map(
    lambda pair: str(ipaddress.IPv4Network((pair[0], pair[1]), strict=False))
)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(ipv4_cidrs, ipv6_cidrs, valid_ipv4, st.text(alphabet="0123456789abcdef.:/%", max_size=24)))
def test_any_text_agrees_with_ipaddress(text: str) -> None:
    assert ours(text) == reference(text)
