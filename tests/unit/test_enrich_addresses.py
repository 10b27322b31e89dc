"""A chunk's address text parsed and written a column at a time gives what the API gives one by one."""

from __future__ import annotations

import ipaddress

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import format_address, parse_ip
from loader.enrich.addresses import V6_DTYPE, parse_addresses, v4_texts, v6_texts

#: IPv6 values with long and short zero runs, ties between runs, and the ``::/80`` corner.
hextets = st.one_of(st.just(0), st.just(0xFFFF), st.integers(0, 0xF), st.integers(0, 0xFFFF))
v6_values = st.one_of(
    st.lists(hextets, min_size=8, max_size=8).map(
        lambda h: sum(v << (16 * (7 - i)) for i, v in enumerate(h))
    ),
    st.integers(0, 2**128 - 1),
    st.integers(0, 2**48),
    st.integers(0xFFFF << 32, (0xFFFF << 32) + 2**32 - 1),
)


def spelled(value: int, style: int) -> str:
    address = ipaddress.IPv6Address(value)
    return [str(address), address.exploded, str(address).upper()][style]


texts = st.one_of(
    st.integers(0, 2**32 - 1).map(lambda v: str(ipaddress.IPv4Address(v))),
    st.tuples(v6_values, st.integers(0, 2)).map(lambda pair: spelled(*pair)),
    st.text(alphabet="0123456789abcdefABCDEF:.%x ", max_size=42),
    st.lists(st.sampled_from(["0", "00", "01", "1", "255", "256", "99", ""]), min_size=3, max_size=5).map(
        ".".join
    ),
    st.sampled_from(["::", "1::", "::ffff:1.2.3.4", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8::", ":1::", "1:::2"]),
    st.none(),
)


def api_answer(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        address = parse_ip(text)
    except InvalidIpAddress:
        return None
    return address.family, address.value


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=300))
def test_each_row_parses_as_parse_ip_parses_it(picked: list[str | None]) -> None:
    parsed = parse_addresses(pa.array(picked, type=pa.string()))
    for at, text in enumerate(picked):
        family = int(parsed.family[at])
        if family == 0:
            got = None
        elif family == 4:
            got = (4, int(parsed.v4[at]))
        else:
            got = (6, int.from_bytes(bytes(parsed.v6[at]).ljust(16, b"\0"), "big"))
        assert got == api_answer(text), text
    assert len(parsed.problems) == min(5, int(parsed.invalid.sum()))


@settings(max_examples=60, deadline=None)
@given(st.lists(v6_values, min_size=1, max_size=300))
def test_ipv6_text_is_what_the_api_writes(values: list[int]) -> None:
    packed = np.array([value.to_bytes(16, "big") for value in values], dtype=V6_DTYPE)
    assert v6_texts(packed).to_pylist() == [format_address(6, value) for value in values]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=300))
def test_ipv4_text_is_what_the_api_writes(values: list[int]) -> None:
    written = v4_texts(np.array(values, dtype=np.int64)).to_pylist()
    assert written == [format_address(4, value) for value in values]
