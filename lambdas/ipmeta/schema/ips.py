"""IP address parsing: the one place that turns text or integers into addresses."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Final, Literal

from ipmeta.schema.errors import InvalidIpAddress

__all__ = [
    "Address",
    "Family",
    "InvalidIpAddress",
    "address_value",
    "format_address",
    "parse_address_field",
    "parse_ip",
    "parse_network",
]

Family = Literal[4, 6]

MAX_BY_FAMILY: dict[int, int] = {4: 2**32 - 1, 6: 2**128 - 1}


@dataclass(frozen=True, slots=True)
class Address:
    """An address as its family and integer value; the form the key schema works on."""

    family: Family
    value: int

    def __str__(self) -> str:
        return format_address(self.family, self.value)


#: The longest address text there is: ``ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255``.
MAX_IP_TEXT_LENGTH = 45


def _shown(text: str) -> str:
    """The input as echoed in an error message: quoted, and cut so a huge input stays small."""
    return repr(text if len(text) <= MAX_IP_TEXT_LENGTH else text[:MAX_IP_TEXT_LENGTH] + "...")


def _has_leading_zero_octet(text: str) -> bool:
    octets = text.rsplit(":", 1)[-1].split(".")
    return len(octets) > 1 and any(len(o) > 1 and o.startswith("0") and o.isdigit() for o in octets)


def parse_ip(text: str) -> Address:
    """Parse an address as typed by a user; every refusal is ``InvalidIpAddress``.

    Decisions, each documented in docs/api.md and tested:

    - IPv4-mapped IPv6 (``::ffff:a.b.c.d``) answers as the IPv4 address it maps,
      because datasets describe those hosts by their IPv4 ranges.
    - IPv4 octets with leading zeros are refused: ``010`` is 8 to inet_aton
      (octal) and 10 to most people, so any answer would be wrong for someone.
    - Zone ids (``fe80::1%eth0``) are refused: they name an interface of the
      asking host, not an address.
    - Surrounding whitespace is refused rather than stripped, so one address has
      one spelling in URLs, cache keys and batch keys.
    - Non-ASCII characters (``١.١.١.١``, fullwidth digits) are refused.
    - Anything longer than the longest address text is refused before parsing.
    """
    if len(text) > MAX_IP_TEXT_LENGTH:
        raise InvalidIpAddress(
            f"{_shown(text)} is longer than any IP address ({MAX_IP_TEXT_LENGTH} characters)"
        )
    if not text.isascii():
        raise InvalidIpAddress(f"{_shown(text)} has non-ASCII characters; IP addresses are ASCII")
    if text != text.strip():
        raise InvalidIpAddress(f"{_shown(text)} has surrounding whitespace")
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError as error:
        if "%" in text:
            raise InvalidIpAddress(f"{_shown(text)} has a zone id; give the address without %zone") from error
        if _has_leading_zero_octet(text):
            raise InvalidIpAddress(
                f"{_shown(text)} has an IPv4 octet with a leading zero (octal or decimal?); drop the zeros"
            ) from error
        raise InvalidIpAddress(f"{_shown(text)} is not a valid IPv4 or IPv6 address") from error
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.scope_id is not None:
            raise InvalidIpAddress(f"{_shown(text)} has a zone id; give the address without %zone")
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


_SOCKET_FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}
#: An IPv4 octet with a leading zero, which inet_pton may read where ``ipaddress`` refuses it.
_LEADING_ZERO_OCTET = re.compile(r"(?:^|\.)0[0-9]")


def address_value(family: int, text: str) -> int:
    """The integer of canonical address text of a known family, such as a stored range bound.

    inet_pton reads it several times faster than ``ipaddress``; lookups and
    listings parse stored bounds on every answer.
    """
    return int.from_bytes(socket.inet_pton(_SOCKET_FAMILIES[family], text), "big")


def parse_network(text: str) -> tuple[Family, int, int]:
    """A CIDR block's family and inclusive bounds; ``InvalidIpAddress`` unless it is one, host bits clear.

    The common form (``a.b.c.d/n``, ``x:y::/n``) is read with inet_pton, several
    times faster than ``ipaddress``, which a 14 M-row database notices. Anything
    else, valid or not, goes through ``ipaddress``: it decides, and words the
    error, so both paths accept exactly the same text.
    """
    address, slash, prefix = text.partition("/")
    if slash and prefix.isascii() and prefix.isdigit() and prefix == str(int(prefix)) and address.isascii():
        family: Family = 6 if ":" in address else 4
        bits = 128 if family == 6 else 32
        length = int(prefix)
        usual = "%" not in address and not (family == 4 and _LEADING_ZERO_OCTET.search(address))
        if usual and length <= bits:
            try:
                value = int.from_bytes(socket.inet_pton(_SOCKET_FAMILIES[family], address), "big")
            except OSError:
                pass
            else:
                host = (1 << (bits - length)) - 1
                if not value & host:
                    return family, value, value | host
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as error:
        raise InvalidIpAddress(f"{text!r} is not a valid network: {error}") from None
    family = 4 if network.version == 4 else 6
    return family, int(network.network_address), int(network.broadcast_address)


#: ``::ffff:0:0/96``: IPv4-mapped IPv6 addresses, which lookups answer as the IPv4 address.
IPV4_MAPPED_FIRST: Final = 0xFFFF << 32
IPV4_MAPPED_LAST: Final = IPV4_MAPPED_FIRST | MAX_BY_FAMILY[4]


def ipv4_of_mapped(family: int, start: int, end: int) -> tuple[int, int] | None:
    """An IPv6 range inside ``::ffff:0:0/96`` as the IPv4 range it maps, else None.

    Lookups answer those addresses as IPv4 (``parse_ip``), so a range kept as
    IPv6 there could never answer. A range that only partly lies there (``::/0``)
    stays IPv6: the mapped part of it is simply never asked for.
    """
    if family == 6 and start >= IPV4_MAPPED_FIRST and end <= IPV4_MAPPED_LAST:
        return start - IPV4_MAPPED_FIRST, end - IPV4_MAPPED_FIRST
    return None


def format_address(family: int, value: int) -> str:
    if family == 4:
        # Same text as ipaddress, several times faster: every answer formats three.
        return socket.inet_ntop(socket.AF_INET, value.to_bytes(4, "big"))
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
