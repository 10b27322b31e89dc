"""Bogons: addresses that the public Internet never routes.

Taken from the IANA IPv4 and IPv6 Special-Purpose Address Registries (the
blocks whose "Globally Reachable" is False), plus multicast and the reserved
space. The table is ours, not ``ipaddress.is_global``: that one changed
between Python patch releases, and an API answer must not.

IPv6 space outside 2000::/3 is reserved by the IETF (the IPv6 Address Space
registry), so all of it is a bogon, except the NAT64 well-known prefix
64:ff9b::/96, which IANA lists as globally reachable. IPv4-mapped IPv6 never
reaches this module: ``parse_ip`` folds it into IPv4.
"""

from __future__ import annotations

import ipaddress
from bisect import bisect_right

from ipmeta.schema.ips import Address

#: (network, why): the reason is for people reading this table, and for tests.
BOGONS_V4: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved (includes limited broadcast)"),
)

BOGONS_V6: tuple[tuple[str, str], ...] = (
    ("::/3", "reserved by IETF (includes ::, ::1, 64:ff9b:1::/48, 100::/64)"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("4000::/2", "reserved by IETF (includes 5f00::/16 SRv6 SIDs)"),
    ("8000::/1", "reserved by IETF, unique local fc00::/7, link-local fe80::/10, multicast ff00::/8"),
)

#: Blocks inside the bogon blocks that IANA marks globally reachable.
GLOBAL_EXCEPTIONS_V6: tuple[str, ...] = (
    "64:ff9b::/96",  # NAT64 well-known prefix
    "2001::/32",  # TEREDO (reachable: N/A, addresses route publicly)
    "2001:1::1/128",  # Port Control Protocol anycast
    "2001:1::2/128",  # TURN anycast
    "2001:1::3/128",  # DNS-SD SRP anycast
    "2001:3::/32",  # AMT
    "2001:4:112::/48",  # AS112-v6
    "2001:20::/28",  # ORCHIDv2
    "2001:30::/28",  # drone remote ID
)
GLOBAL_EXCEPTIONS_V4: tuple[str, ...] = (
    "192.0.0.9/32",  # Port Control Protocol anycast
    "192.0.0.10/32",  # TURN anycast
)


def _intervals(blocks: tuple[str, ...]) -> tuple[list[int], list[int]]:
    networks = sorted(ipaddress.ip_network(block) for block in blocks)
    starts = [int(network.network_address) for network in networks]
    ends = [int(network.broadcast_address) for network in networks]
    return starts, ends


def _inside(value: int, intervals: tuple[list[int], list[int]]) -> bool:
    starts, ends = intervals
    index = bisect_right(starts, value) - 1
    return index >= 0 and value <= ends[index]


_BOGONS = {
    4: _intervals(tuple(block for block, _ in BOGONS_V4)),
    6: _intervals(tuple(block for block, _ in BOGONS_V6)),
}
_EXCEPTIONS = {4: _intervals(GLOBAL_EXCEPTIONS_V4), 6: _intervals(GLOBAL_EXCEPTIONS_V6)}


def is_bogon(address: Address) -> bool:
    """True for an address in a special-purpose block that is not globally reachable.

    The blocks of one table never overlap (a unit test checks), so the last block
    starting at or before the address is the only one that can hold it.
    """
    return _inside(address.value, _BOGONS[address.family]) and not _inside(
        address.value, _EXCEPTIONS[address.family]
    )
