"""IP parsing as the lookup sees it: text in, (family, integer) out, or IP_ADDRESS_INVALID."""

from __future__ import annotations

import pytest

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import Address, parse_address_field, parse_ip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.2.3.4", Address(4, 0x01020304)),
        ("::ffff:1.2.3.4", Address(4, 0x01020304)),  # IPv4-mapped answers as IPv4
        ("::1", Address(6, 1)),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Address(6, 2**128 - 1)),
        ("2001:DB8::1", Address(6, 0x20010DB8 << 96 | 1)),
    ],
)
def test_valid_addresses(text: str, expected: Address) -> None:
    assert parse_ip(text) == expected


@pytest.mark.parametrize("text", ["", "1.2.3", "256.1.1.1", "01.2.3.4", "fe80::1%eth0", "1.2.3.4/24", "x"])
def test_invalid_addresses_raise_with_the_api_code(text: str) -> None:
    with pytest.raises(InvalidIpAddress) as raised:
        parse_ip(text)
    assert raised.value.code == "IP_ADDRESS_INVALID"


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("16777216", "16777471", (Address(4, 16777216), Address(4, 16777471))),
        ("1.0.0.0", "16777471", (Address(4, 16777216), Address(4, 16777471))),
        ("2001:200::", str(2**128 - 1), (Address(6, 0x20010200 << 96), Address(6, 2**128 - 1))),
    ],
)
def test_csv_fields_take_text_or_integers(start: str, end: str, expected: tuple[Address, Address]) -> None:
    first = parse_address_field(start)
    assert (first, parse_address_field(end, family_hint=first.family)) == expected


def test_an_integer_too_large_for_its_family_is_rejected() -> None:
    with pytest.raises(InvalidIpAddress):
        parse_address_field(str(2**32), family_hint=4)
