"""The key schema at the edges of both address spaces."""

from __future__ import annotations

import ipaddress
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipmeta.schema import keys
from ipmeta.schema.ips import Address, Family

MAX_DYNAMODB_DIGITS = 38


def address(text: str) -> Address:
    parsed = ipaddress.ip_address(text)
    return Address(4 if parsed.version == 4 else 6, int(parsed))


@pytest.mark.parametrize(
    ("text", "pk", "sk"),
    [
        ("0.0.0.0", "v1#4#0", 0),
        ("255.255.255.255", "v1#4#255", 2**24 - 1),
        ("1.1.1.1", "v1#4#1", 0x010101),
        ("::", "v1#6#000000", 0),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "v1#6#ffffff", 2**104 - 1),
        ("2001:200::1", "v1#6#200102", 1),
    ],
)
def test_lookup_key_at_the_edges(text: str, pk: str, sk: int) -> None:
    assert keys.key_space().lookup_key(1, address(text)) == (pk, sk)


def test_the_largest_sort_key_fits_a_dynamodb_number() -> None:
    largest = keys.encode_sort_key(address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
    assert len(str(largest)) <= MAX_DYNAMODB_DIGITS
    assert len(str(2**128 - 1)) == MAX_DYNAMODB_DIGITS + 1  # why the offset encoding exists


@given(st.sampled_from([4, 6]), st.data())
def test_bucket_and_sort_key_round_trip(family: Family, data: st.DataObject) -> None:
    value = data.draw(st.integers(0, 2 ** keys.ADDRESS_BITS[family] - 1))
    addr = Address(family, value)
    bucket = keys.bucket_of(addr)
    assert keys.decode_sort_key(family, bucket, keys.encode_sort_key(addr)) == value
    first, last = keys.bucket_bounds(family, bucket)
    assert first <= value <= last


@given(st.sampled_from([4, 6]), st.data())
def test_split_at_buckets_covers_the_range_exactly(family: Family, data: st.DataObject) -> None:
    top = 2 ** keys.ADDRESS_BITS[family] - 1
    width = 2 ** (keys.ADDRESS_BITS[family] - keys.BUCKET_PREFIX_BITS[family])
    start = data.draw(st.integers(0, top))
    end = data.draw(st.integers(start, min(top, start + 5 * width)))
    pieces = list(keys.split_at_buckets(family, start, end))
    assert pieces[0].first == start
    assert pieces[-1].last == end
    for before, after in itertools.pairwise(pieces):
        assert after.first == before.last + 1
        assert after.bucket == before.bucket + 1
    for piece in pieces:
        assert keys.bucket_bounds(family, piece.bucket)[0] <= piece.first <= piece.last
        assert piece.last <= keys.bucket_bounds(family, piece.bucket)[1]


def test_a_range_crossing_a_slash_8_splits_in_two() -> None:
    start, end = address("21.0.0.0").value, address("22.255.255.255").value
    pieces = list(keys.split_at_buckets(4, start, end))
    assert [(piece.bucket, piece.first, piece.last) for piece in pieces] == [
        (21, start, address("21.255.255.255").value),
        (22, address("22.0.0.0").value, end),
    ]


def test_versions_live_in_the_partition_key() -> None:
    v1 = keys.key_space().lookup_key(1, address("8.8.8.8"))[0]
    v2 = keys.key_space().lookup_key(2, address("8.8.8.8"))[0]
    assert v1 != v2
    assert v1.startswith("v1#")
    assert v2.startswith("v2#")
