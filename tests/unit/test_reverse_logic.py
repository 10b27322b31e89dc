"""Reverse lookups without AWS: the key plan (shards and packs), the k-way merge, the page tokens."""

from __future__ import annotations

import json
import random
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.lookup import reverse
from ipmeta.schema import keys
from ipmeta.schema.errors import InvalidToken, ValueInvalid
from ipmeta.schema.records import ValueIndexMeta, VersionMeta, VersionStatus
from loader.records import Manifest
from loader.reverse_index import (
    DEFAULT_MAX_SHARDS,
    KEYS_PER_PARTITION,
    LOAD_WRITES_PER_SECOND,
    PARTITION_WRITES_PER_SECOND,
    IndexCensus,
    IndexPlan,
    count_index_values,
    heat_target,
    plan_index,
    plan_keys,
    plan_shard_counts,
)

KEY = b"test-key"


class FakeIndex:
    """Index partitions as sorted lists; answers like Query with ``begins_with``, ``sk > after`` and Limit."""

    def __init__(self, partitions: dict[str, list[str]]) -> None:
        self.partitions = {pk: sorted(sks) for pk, sks in partitions.items()}
        self.queries = 0

    def query_index(
        self, index: keys.IndexSchema, partition_key: str, *, prefix: str, after: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        self.queries += 1
        rest = [
            sk
            for sk in self.partitions.get(partition_key, [])
            if sk.startswith(prefix) and (after is None or sk > after)
        ]
        return [{index.sort_key: sk} for sk in rest[:limit]], len(rest) > limit


def listing(shards: int, prefix: str = "") -> reverse.Listing:
    return reverse.Listing(
        keys.RANGES_BY_VALUE,
        1,
        "value:asn=1",
        tuple(f"v1#asn#1#{shard}" for shard in range(shards)),
        prefix,
    )


@settings(max_examples=60, deadline=None)
@given(
    starts=st.sets(st.tuples(st.sampled_from([4, 6]), st.integers(0, 2**32)), max_size=300),
    shards=st.integers(1, 9),
    limit=st.integers(1, 40),
    packed=st.booleans(),
)
def test_pages_return_every_entry_once_in_order(
    starts: set[tuple[int, int]], shards: int, limit: int, packed: bool
) -> None:
    # Given entries spread over shards by the real shard function, or in one pack
    # whose other values' entries sort before, among and after them
    prefix = keys.value_sort_key_prefix("1") if packed else ""
    shards = 1 if packed else shards
    sort_keys = [keys.index_sort_key(family, start, prefix) for family, start in starts]
    partitions: dict[str, list[str]] = {pk: [] for pk in listing(shards).partition_keys}
    for (family, start), sort_key in zip(starts, sort_keys, strict=True):
        partitions[listing(shards).partition_keys[keys.shard_of(family, start, shards)]].append(sort_key)
        if packed:
            for neighbour in ("0", "7", "13335"):
                partitions[listing(1).partition_keys[0]].append(
                    keys.index_sort_key(family, start, keys.value_sort_key_prefix(neighbour))
                )
    reader = FakeIndex(partitions)
    # When every page is read, each through an encoded token
    seen: list[str] = []
    token: str | None = None
    with ThreadPoolExecutor(4) as pool:
        while True:
            cursor = reverse.decode_token(token, KEY).cursor if token else None
            page = reverse.list_page(reader, listing(shards, prefix), limit, cursor, pool)
            assert len(page.items) <= limit
            assert page.cursor is None or len(page.items) == limit
            seen.extend(item[keys.GSI1_SORT_KEY] for item in page.items)
            if page.cursor is None:
                break
            token = reverse.encode_token(listing(shards, prefix), page.cursor, KEY)
    # Then the entries are all there, once, sorted by (family, start)
    assert seen == sorted(sort_keys)
    assert [keys.decode_index_sort_key(sk) for sk in seen] == sorted(starts)


def index_keys(counts: dict[str, int], **options: Any) -> tuple[IndexPlan, Counter[str], dict[str, set[str]]]:
    """Plan an index as ``prepare`` does, then key one range per entry as the loader does.

    Returns the plan, the entries of every index key, and the keys each value landed in.
    """
    rows = [{"v": value} for value, count in counts.items() for _ in range(count)]
    plan = plan_index(count_index_values(rows, "v", None), value_field="v", flag_column=None, **options)
    sizes: Counter[str] = Counter()
    keys_of: dict[str, set[str]] = {}
    for number, row in enumerate(rows):
        # distinct range starts, spaced like /20s
        attributes = plan.attributes(keys.key_space(), 1, 4, number * 4096, row)
        sizes[attributes[keys.GSI1_PARTITION_KEY]] += 1
        keys_of.setdefault(row["v"], set()).add(attributes[keys.GSI1_PARTITION_KEY])
    return plan, sizes, keys_of


def spread(sizes: Counter[str]) -> float:
    return max(sizes.values()) / (sum(sizes.values()) / len(sizes))


def test_shard_counts_follow_frequency_within_the_budget() -> None:
    counts = {"hot": 3500, "warm": 100, **{f"rare{n}": 1 + n % 3 for n in range(1000)}}
    plan = plan_shard_counts(counts, budget=100, max_shards=64)
    assert plan.key_count <= 100
    assert plan.shards["hot"] > plan.shards["warm"] >= 1
    assert plan.shards["hot"] == min(64, -(-3500 // plan.target))
    # Rare values have no keys of their own: they share packs
    assert not any(f"rare{n}" in plan.shards for n in range(1000))
    assert len(plan.pack_starts) >= 1
    # A tighter budget makes keys larger (the budget step), never more of them
    tight = plan_shard_counts(counts, budget=20, max_shards=64)
    assert (tight.rule, tight.key_count <= 20) == ("budget", True)
    assert tight.target > plan.target
    # The cap bounds the fan-out even with a generous budget
    assert plan_shard_counts({"hot": 10**6}, budget=10**6, max_shards=64).shards["hot"] == 64


def test_a_low_cardinality_field_meets_the_spread_goal_over_every_key() -> None:
    # A country-like column: 250 values, Zipf-distributed, the commonest with ~30% of the ranges
    weights = [1 / (rank + 1) ** 1.3 for rank in range(250)]
    counts = {
        f"C{rank}": max(1, round(200_000 * weight / sum(weights))) for rank, weight in enumerate(weights)
    }
    plan, sizes, keys_of = index_keys(counts)
    assert plan.values is not None
    assert plan.values.rule == "heat"
    assert spread(sizes) <= 2.0
    assert spread(sizes) <= plan.values.predicted_spread + 0.1
    # Unsharded, the commonest value alone is far beyond the goal
    assert max(counts.values()) > 50 * (sum(counts.values()) / len(counts))
    assert 1 < len(keys_of["C0"]) <= DEFAULT_MAX_SHARDS
    assert len(keys_of["C0"]) > len(keys_of["C5"]) >= 1


def test_a_field_of_many_rare_values_meets_the_spread_goal_by_packing_them() -> None:
    # asn-like: 90% of the values have a handful of ranges, a few have thousands
    counts = {f"{n}": 1 + n % 8 for n in range(20_000)}
    counts |= {"hot1": 4800, "hot2": 4500, "hot3": 3000}
    plan, sizes, keys_of = index_keys(counts)
    assert plan.values is not None
    # Every key, packs included, is within 2x of the mean key
    assert spread(sizes) <= 2.0
    # One key per value would put the hottest value hundreds of times over the mean
    assert max(counts.values()) / (sum(counts.values()) / len(counts)) > 500
    # The hot values have keys of their own, shards following frequency; rare ones share packs
    assert len(keys_of["hot1"]) >= len(keys_of["hot3"]) >= 1
    assert all(key.split("#")[2] == "hot1" for key in keys_of["hot1"])
    assert all(len(keys_of[f"{n}"]) == 1 for n in range(20_000))
    packs = {key for n in range(20_000) for key in keys_of[f"{n}"]}
    assert all(key.split("#")[2] == "" for key in packs)
    assert len(packs) == len(plan.values.pack_starts)
    assert max(sizes[key] for key in packs) <= plan.values.target


def test_a_query_finds_a_packed_value_where_the_loader_put_it() -> None:
    counts = {f"AS{n}": 1 + n % 5 for n in range(3000)} | {"hot": 2000}
    plan, _, keys_of = index_keys(counts)
    assert plan.values is not None
    # As a query sees the plan: through the version's metadata, encoded and decoded
    meta = VersionMeta(1, VersionStatus.ACTIVE, value_index=plan.value_index_meta({"v": "S"}))
    index = reverse.ReverseIndexes.from_version_meta(meta).values
    assert index is not None
    for value in ("hot", "AS0", "AS7", "AS2999"):
        where = index.keys_of(keys.key_space(), 1, value)
        assert set(where.partition_keys) == keys_of[value]
        assert bool(where.sort_key_prefix) == (value != "hot")
    # A version loaded before packing: counts by value, only those above one, no pack starts
    legacy_counts = zlib.compress(json.dumps({"hot": 3}).encode())
    legacy_meta = ValueIndexMeta.from_item({"field": "v", "type": "S", "shards": legacy_counts})
    legacy = reverse.ReverseIndexes.from_version_meta(
        VersionMeta(1, VersionStatus.ACTIVE, value_index=legacy_meta)
    ).values
    assert legacy is not None
    assert legacy.keys_of(keys.key_space(), 1, "AS7") == keys.ValueKeys(("v1#v#AS7#0",), "")
    assert legacy.keys_of(keys.key_space(), 1, "hot").partition_keys == (
        "v1#v#hot#0",
        "v1#v#hot#1",
        "v1#v#hot#2",
    )


def test_values_with_the_same_hash_are_never_split_across_packs() -> None:
    # Given three values whose hashes collide, at the point where a pack fills up
    counts = {"a": 20, "b": 20, "c": 20, "d": 20}
    hash_order = [(5, "a"), (9, "b"), (9, "c"), (11, "d")]
    _, starts, _ = plan_keys(counts, hash_order, target=50, max_shards=8)
    # Then b and c share a pack (a query finds its pack by hash alone), though it holds 60 > 50
    assert starts == (0, 11)


def test_hot_values_get_ten_keys_per_partition_their_load_writes_need() -> None:
    counts = {"hot": 144_200, **{f"other{n}": 14_000 for n in range(19)}}
    plan = plan_shard_counts(counts)
    total = sum(counts.values())
    for value, count in counts.items():
        partitions = count / total * LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND
        assert plan.shards[value] >= KEYS_PER_PARTITION * partitions
    assert plan.shards["hot"] > plan.shards["other0"]


def test_a_token_for_the_widest_fan_out_fits_the_length_limit() -> None:
    rng = random.Random(7)
    positions = {shard: keys.index_sort_key(6, rng.getrandbits(128)) for shard in range(DEFAULT_MAX_SHARDS)}
    token = reverse.encode_token(listing(DEFAULT_MAX_SHARDS), reverse.Cursor(positions, frozenset()), KEY)
    assert len(token) <= keys.MAX_PAGE_TOKEN_LENGTH
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
    plan = plan_index(count_index_values(rows, None, "rule"), value_field=None, flag_column="rule")
    assert plan.flagged == 4000
    assert plan.flag_shards == -(-4000 // heat_target(400_000))
    hot = [{"rule": "block" if n % 2 else ""} for n in range(400_000)]
    shards = plan_index(
        count_index_values(hot, None, "rule"), value_field=None, flag_column="rule"
    ).flag_shards
    total_writes_share = 0.5 * LOAD_WRITES_PER_SECOND / PARTITION_WRITES_PER_SECOND
    assert shards >= KEYS_PER_PARTITION * total_writes_share


@pytest.mark.parametrize(
    ("spelling", "label"), [("13335", "13335"), (" 013335 ", "13335"), ("AS13335", "13335"), ("-5", "-5")]
)
def test_a_number_column_reads_the_usual_spellings(spelling: str, label: str) -> None:
    assert reverse.ValueIndex("asn", "N", {}, []).label(spelling) == label


@pytest.mark.parametrize("spelling", ["cloudflare", "13335.0", "AS", "--5", "1" * 39, "AS-"])
def test_a_number_column_refuses_what_it_cannot_hold(spelling: str) -> None:
    with pytest.raises(ValueInvalid):
        reverse.ValueIndex("asn", "N", {}, []).label(spelling)


def test_the_census_names_every_key_an_entry_lands_in_and_counts_them_all() -> None:
    # Given a plan with own-shard values and packs, and ranges keyed as the loader keys them
    counts = {"hot": 3500, "warm": 100, **{f"rare{n}": 1 + n % 3 for n in range(1000)}}
    plan, sizes, _ = index_keys(counts, budget=100, max_shards=64)
    assert plan.values is not None
    assert plan.values.shards
    assert plan.values.pack_starts
    # When its census is taken (what a replica region counts in its GSI)
    census = plan.census(keys.key_space(), 1)[keys.RANGES_BY_VALUE.name]
    # Then every key an entry landed in is named, and the total is every entry
    assert set(sizes) <= set(census.partition_keys)
    assert census.entries == sum(sizes.values()) == sum(counts.values())


def test_the_census_survives_the_manifest_item() -> None:
    census = {keys.FLAGGED.name: IndexCensus(("v1#rule#0", "v1#rule#1"), 7)}
    manifest = Manifest({"v1#4#10": 3}, census)
    assert Manifest.decode(manifest.encode(), manifest.encode_indexes()) == manifest
    assert Manifest({"v1#4#10": 3}).encode_indexes() is None
