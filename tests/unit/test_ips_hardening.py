"""Input hardening of ``parse_ip``: one decision per case, and the round-trip property."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import MAX_IP_TEXT_LENGTH, Address, parse_ip


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("010.0.0.1", "leading zero"),  # octal to inet_aton, decimal to people
        ("1.2.3.04", "leading zero"),
        ("::ffff:1.2.3.04", "leading zero"),
        ("fe80::1%eth0", "zone id"),
        ("fe80::1%1", "zone id"),
        (" 1.1.1.1", "whitespace"),
        ("1.1.1.1\n", "whitespace"),
        ("\t::1", "whitespace"),
        ("١.١.١.١", "non-ASCII"),  # Arabic-Indic digits
        ("１.１.１.１", "non-ASCII"),  # fullwidth digits
        ("1" * 46, "longer than any IP address"),
        ("1.1.1.1" + " " * 10_000, "longer than any IP address"),
    ],
)
def test_each_hardening_decision_refuses_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidIpAddress) as raised:
        parse_ip(text)
    assert raised.value.code == "IP_ADDRESS_INVALID"
    assert reason in raised.value.message


def test_a_huge_input_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidIpAddress) as raised:
        parse_ip("9" * 1_000_000)
    assert len(raised.value.message) < 200


def test_the_longest_address_text_is_accepted() -> None:
    text = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"
    assert len(text) == MAX_IP_TEXT_LENGTH
    assert parse_ip(text) == Address(6, int(ipaddress.IPv6Address(text)))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_valid_addresses_round_trip_with_ipaddress(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    for text in {str(address), address.exploded, address.compressed.upper()}:
        parsed = parse_ip(text)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            assert parsed == Address(4, int(address.ipv4_mapped))
        else:
            assert parsed == Address(4 if address.version == 4 else 6, int(address))
        assert int(ipaddress.ip_address(str(parsed))) == parsed.value


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
@example("")
@example("1.2.3")
@example("256.0.0.1")
@example("::1::")
def test_any_text_parses_as_ipaddress_does_or_is_invalid(text: str) -> None:
    """Arbitrary text: accepted exactly when a strict reading accepts it, else IP_ADDRESS_INVALID."""
    strict_ok = text.isascii() and text == text.strip() and "%" not in text
    try:
        expected = ipaddress.ip_address(text) if strict_ok else None
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(InvalidIpAddress) as raised:
            parse_ip(text)
        assert raised.value.code == "IP_ADDRESS_INVALID"
    else:
        mapped = expected.ipv4_mapped if isinstance(expected, ipaddress.IPv6Address) else None
        assert parse_ip(text) == (
            Address(4, int(mapped)) if mapped is not None else Address(expected.version, int(expected))
        )


@settings(max_examples=200, deadline=None)
@given(st.ip_addresses(v=4), st.integers(0, 3))
def test_any_zero_padded_octet_is_refused(address: ipaddress.IPv4Address, position: int) -> None:
    octets = str(address).split(".")
    octets[position] = "0" + octets[position]
    with pytest.raises(InvalidIpAddress):
        parse_ip(".".join(octets))
