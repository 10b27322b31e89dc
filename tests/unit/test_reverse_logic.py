"""Reverse lookups without AWS: the shard-count rule, the k-way merge, the page tokens."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta import keys, reverse
from ipmeta.errors import InvalidToken, ValueInvalid
from loader.reverse_index import (
    DEFAULT_MAX_SHARDS,
    KEYS_PER_PARTITION,
    LOAD_WRITES_PER_SECOND,
    PARTITION_WRITES_PER_SECOND,
    plan_index,
    plan_shard_counts,
)

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
    plan = plan_shard_counts(counts, budget=100, max_shards=64)
    assert sum(count - 1 for count in plan.shards.values()) <= 100
    assert plan.shards["hot"] > plan.shards["warm"] > 1
    assert all(plan.shards[f"rare{n}"] == 1 for n in range(1000))
    assert plan.shards["hot"] == min(64, -(-3500 // plan.target))
    # The cap bounds the fan-out even with a generous budget
    assert plan_shard_counts({"hot": 10**6}, budget=10**6, max_shards=64).shards["hot"] == 64


def shard_sizes(counts: dict[str, int], shards: dict[str, int]) -> list[int]:
    """Entries per index key when each value's ranges are hashed as the loader hashes them."""
    sizes: Counter[tuple[str, int]] = Counter()
    start = 0
    for value, count in counts.items():
        for _ in range(count):
            start += 4096  # distinct range starts, spaced like /20s
            sizes[value, keys.shard_of(4, start, shards[value])] += 1
    return list(sizes.values())


def test_a_low_cardinality_field_meets_the_spread_goal_over_every_key() -> None:
    # A country-like column: 250 values, Zipf-distributed, the commonest with ~30% of the ranges
    weights = [1 / (rank + 1) ** 1.3 for rank in range(250)]
    counts = {
        f"C{rank}": max(1, round(200_000 * weight / sum(weights))) for rank, weight in enumerate(weights)
    }
    plan = plan_shard_counts(counts)
    assert plan.rule == "spread"
    sizes = shard_sizes(counts, plan.shards)
    mean = sum(sizes) / len(sizes)
    assert max(sizes) <= 2.0 * mean
    # Unsharded, the commonest value alone is far beyond the goal
    assert max(counts.values()) > 50 * (sum(counts.values()) / len(counts))
    assert 1 < max(plan.shards.values()) <= DEFAULT_MAX_SHARDS


def test_hot_values_get_ten_keys_per_partition_their_load_writes_need() -> None:
    counts = {"hot": 144_200, **{f"other{n}": 14_000 for n in range(19)}}
    plan = plan_shard_counts(counts)
    total = sum(counts.values())
    for value, count in counts.items():
        partitions = count / total * LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND
        assert plan.shards[value] >= KEYS_PER_PARTITION * partitions
    assert plan.shards["hot"] > plan.shards["other0"]


def test_a_field_of_rare_values_spends_the_budget_on_the_hot_ones() -> None:
    # asn-like: the mean key holds a few entries whatever the rule, so the goal is out of reach
    counts = {f"AS{n}": 1 + n % 8 for n in range(20_000)}
    counts |= {"hot1": 4800, "hot2": 4500, "hot3": 3000}
    plan = plan_shard_counts(counts, budget=500)
    assert plan.rule == "budget"
    assert plan.predicted_spread > 2
    assert 400 < sum(count - 1 for count in plan.shards.values()) <= 500
    assert plan.shards["hot1"] > plan.shards["hot3"] > 1
    assert all(plan.shards[f"AS{n}"] == 1 for n in range(20_000))


def test_a_token_for_the_widest_fan_out_fits_the_length_limit() -> None:
    rng = random.Random(7)
    positions = {shard: keys.index_sort_key(6, rng.getrandbits(128)) for shard in range(DEFAULT_MAX_SHARDS)}
    token = reverse.encode_token(listing(DEFAULT_MAX_SHARDS), reverse.Cursor(positions, frozenset()), KEY)
    assert len(token) <= reverse.MAX_TOKEN_LENGTH
    assert reverse.decode_token(token, KEY).cursor.positions == positions


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


def test_flagged_ranges_get_shards_only_for_the_heat_of_their_writes() -> None:
    # Flag-only loads used to take T = 1 from an empty value plan: a shard per flagged range
    rows = [{"rule": "block" if n % 100 == 0 else " "} for n in range(400_000)]
    plan = plan_index(rows, value_field=None, flag_column="rule")
    assert (plan.flagged, plan.flag_shards) == (4000, 1)
    hot = [{"rule": "block" if n % 2 else ""} for n in range(400_000)]
    shards = plan_index(hot, value_field=None, flag_column="rule").flag_shards
    total_writes_share = 0.5 * LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND
    assert shards >= KEYS_PER_PARTITION * total_writes_share


@pytest.mark.parametrize(
    ("spelling", "label"), [("13335", "13335"), (" 013335 ", "13335"), ("AS13335", "13335"), ("-5", "-5")]
)
def test_a_number_column_reads_the_usual_spellings(spelling: str, label: str) -> None:
    assert reverse.ValueIndex("asn", "N", {}).label(spelling) == label


@pytest.mark.parametrize("spelling", ["cloudflare", "13335.0", "AS", "--5", "1" * 39, "AS-"])
def test_a_number_column_refuses_what_it_cannot_hold(spelling: str) -> None:
    with pytest.raises(ValueInvalid):
        reverse.ValueIndex("asn", "N", {}).label(spelling)
