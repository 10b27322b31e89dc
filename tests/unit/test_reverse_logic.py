"""Reverse lookups without AWS: the shard-count rule, the k-way merge, the page tokens."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta import keys, reverse
from ipmeta.errors import InvalidToken
from loader.reverse_index import plan_shard_counts

KEY = b"test-key"


class FakeIndex:
    """Index partitions as sorted lists; answers like Query with ``sk > after`` and Limit."""

    def __init__(self, partitions: dict[str, list[str]]) -> None:
        self.partitions = {pk: sorted(sks) for pk, sks in partitions.items()}
        self.queries = 0

    def query_index(
        self, index: keys.IndexSchema, partition_key: str, *, after: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        self.queries += 1
        rest = [sk for sk in self.partitions.get(partition_key, []) if after is None or sk > after]
        return [{index.sort_key: sk} for sk in rest[:limit]], len(rest) > limit


def listing(shards: int) -> reverse.Listing:
    return reverse.Listing(
        keys.RANGES_BY_VALUE, 1, "value:asn=1", tuple(f"v1#asn#1#{shard}" for shard in range(shards))
    )


@settings(max_examples=60, deadline=None)
@given(
    starts=st.sets(st.tuples(st.sampled_from([4, 6]), st.integers(0, 2**32)), max_size=300),
    shards=st.integers(1, 9),
    limit=st.integers(1, 40),
)
def test_pages_return_every_entry_once_in_order(
    starts: set[tuple[int, int]], shards: int, limit: int
) -> None:
    # Given entries spread over shards by the real shard function
    sort_keys = [keys.index_sort_key(family, start) for family, start in starts]
    partitions: dict[str, list[str]] = {pk: [] for pk in listing(shards).partition_keys}
    for (family, start), sort_key in zip(starts, sort_keys, strict=True):
        partitions[listing(shards).partition_keys[keys.shard_of(family, start, shards)]].append(sort_key)
    reader = FakeIndex(partitions)
    # When every page is read, each through an encoded token
    seen: list[str] = []
    token: str | None = None
    with ThreadPoolExecutor(4) as pool:
        while True:
            cursor = reverse.decode_token(token, KEY).cursor if token else None
            page = reverse.list_page(reader, listing(shards), limit, cursor, pool)
            assert len(page.items) <= limit
            assert page.cursor is None or len(page.items) == limit
            seen.extend(item[keys.GSI1_SORT_KEY] for item in page.items)
            if page.cursor is None:
                break
            token = reverse.encode_token(listing(shards), page.cursor, KEY)
    # Then the entries are all there, once, sorted by (family, start)
    assert seen == sorted(sort_keys)
    assert [keys.decode_index_sort_key(sk) for sk in seen] == sorted(starts)


def test_shard_counts_follow_frequency_within_the_budget() -> None:
    counts = {"hot": 3500, "warm": 100, **{f"rare{n}": 1 + n % 3 for n in range(1000)}}
    shards, target = plan_shard_counts(counts, budget=100, max_shards=64)
    assert sum(count - 1 for count in shards.values()) <= 100
    assert shards["hot"] > shards["warm"] > 1
    assert all(shards[f"rare{n}"] == 1 for n in range(1000))
    assert shards["hot"] == min(64, -(-3500 // target))
    # The cap bounds the fan-out even with a generous budget
    assert plan_shard_counts({"hot": 10**6}, budget=10**6, max_shards=64)[0]["hot"] == 64


def test_tokens_refuse_alteration_and_other_keys() -> None:
    cursor = reverse.Cursor({0: keys.index_sort_key(6, 2**127), 3: keys.index_sort_key(4, 7)}, frozenset({1}))
    token = reverse.encode_token(listing(4), cursor, KEY)
    decoded = reverse.decode_token(token, KEY)
    assert (decoded.version, decoded.scope, decoded.cursor) == (1, "value:asn=1", cursor)
    with pytest.raises(InvalidToken):
        reverse.decode_token(token, b"another-key")
    payload, signature = token.split(".")
    with pytest.raises(InvalidToken):
        reverse.decode_token(payload[::-1] + "." + signature, KEY)
    for garbage in ("", ".", "x" * 9000, "a.b.c", "!!.??"):
        with pytest.raises(InvalidToken):
            reverse.decode_token(garbage, KEY)


def test_index_sort_key_orders_like_family_then_start() -> None:
    points = [(4, 0), (4, 2**32 - 1), (6, 0), (6, 1), (6, 2**128 - 1)]
    assert sorted(points, key=lambda p: keys.index_sort_key(*p)) == points
    assert all(keys.decode_index_sort_key(keys.index_sort_key(*p)) == p for p in points)
