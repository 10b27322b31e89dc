"""IP address parsing: the one place that turns text or integers into addresses."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from ipmeta.errors import InvalidIpAddress

__all__ = ["Address", "Family", "InvalidIpAddress", "format_address", "parse_address_field", "parse_ip"]

Family = Literal[4, 6]

MAX_BY_FAMILY: dict[int, int] = {4: 2**32 - 1, 6: 2**128 - 1}


@dataclass(frozen=True, slots=True)
class Address:
    """An address as its family and integer value; the form the key schema works on."""

    family: Family
    value: int

    def __str__(self) -> str:
        return format_address(self.family, self.value)


def parse_ip(text: str) -> Address:
    """Parse an address as typed by a user.

    IPv4-mapped IPv6 (``::ffff:a.b.c.d``) answers as the IPv4 address it maps,
    because datasets describe those hosts by their IPv4 ranges. IPv4 octets with
    leading zeros are rejected by ``ipaddress`` (they are ambiguous: octal or
    decimal?), and so are zone ids, which name an interface, not an address.
    """
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError as error:
        raise InvalidIpAddress(f"{text!r} is not a valid IPv4 or IPv6 address") from error
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.scope_id is not None:
            raise InvalidIpAddress(f"{text!r} has a zone id; give the address without %zone")
        if parsed.ipv4_mapped is not None:
            return Address(4, int(parsed.ipv4_mapped))
        return Address(6, int(parsed))
    return Address(4, int(parsed))


def parse_address_field(text: str, family_hint: Family | None = None) -> Address:
    """Parse a CSV start/end field: IP text, or a decimal integer.

    Integers are ambiguous for small values (is ``16777216`` v4 or v6?), so the
    other field of the row (``family_hint``) decides; without one, an integer up
    to 2**32-1 is IPv4. Mapped v4 is *not* folded here: a v6 file keeps v6 rows.
    """
    text = text.strip()
    if text.isdigit() and text.isascii():
        value = int(text)
        if family_hint is None:
            family_hint = 4 if value <= MAX_BY_FAMILY[4] else 6
        if value > MAX_BY_FAMILY[family_hint]:
            raise InvalidIpAddress(f"{text!r} is too large for an IPv{family_hint} address")
        return Address(family_hint, value)
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError as error:
        raise InvalidIpAddress(f"{text!r} is not a valid IP address or integer") from error
    return Address(4 if parsed.version == 4 else 6, int(parsed))


def format_address(family: int, value: int) -> str:
    if family == 4:
        return str(ipaddress.IPv4Address(value))
    return str(ipaddress.IPv6Address(value))


def range_cidrs(family: int, start: int, end: int) -> list[str]:
    """The smallest list of CIDR blocks that covers start..end exactly."""
    first: ipaddress.IPv4Address | ipaddress.IPv6Address
    last: ipaddress.IPv4Address | ipaddress.IPv6Address
    if family == 4:
        first, last = ipaddress.IPv4Address(start), ipaddress.IPv4Address(end)
    else:
        first, last = ipaddress.IPv6Address(start), ipaddress.IPv6Address(end)
    return [str(network) for network in ipaddress.summarize_address_range(first, last)]
