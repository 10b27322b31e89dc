"""The range cache: what it may answer, for which version, and what it costs in bytes.

The reader is an in-memory table with the Query semantics of the lookup
(``sk <= offset`` in one partition, the last such item), holding the pieces of
non-overlapping ranges cut at bucket edges as the loader stores them, and
counting the Queries it answers.
"""

from __future__ import annotations

import bisect
import itertools
import random
import sys
import tempfile
import threading
import tracemalloc
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.lookup.answers import CombinedResult, lookup_addresses
from ipmeta.lookup.catalog import Target, Targets
from ipmeta.lookup.range_cache import RangeCache, entry_bytes
from ipmeta.lookup.runs import Run
from ipmeta.schema import keys
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved, IpmetaError
from ipmeta.schema.ips import Address, Family, format_address
from ipmeta.schema.records import Cover
from loader.formats import SourceRow
from tests.one_version import lookup_one_version, lookup_version
from tests.pipeline import stage

Range = tuple[int, int, dict[str, Any]]
DEFAULT = keys.DEFAULT_DATASET
#: How the lookup names version 1 of the default dataset in the cache.
V1 = keys.key_space().version_key(1)


class CountingTable:
    """Versions of ranges, stored as bucket pieces; ``queries`` counts Queries."""

    def __init__(self, versions: dict[int, list[Range]], family: Family = 4) -> None:
        self.space = keys.key_space()
        self.queries = 0
        self._lock = threading.Lock()
        partitions: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for version, ranges in versions.items():
            for start, end, data in ranges:
                for piece in keys.split_at_buckets(family, start, end):
                    item = {
                        keys.ATTR_START: format_address(family, start),
                        keys.ATTR_END: format_address(family, end),
                        keys.ATTR_DATA: data,
                    }
                    sort_key = keys.encode_sort_key_value(family, piece.first)
                    partitions[keys.key_space().partition_key(version, family, piece.bucket)].append(
                        (sort_key, item)
                    )
        self._partitions = {
            pk: sorted(entries, key=lambda entry: entry[0]) for pk, entries in partitions.items()
        }

    def read_active_version(self, *, consistent: bool = False) -> int | None:
        return 1

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        with self._lock:
            self.queries += 1
        entries = self._partitions.get(partition_key, [])
        position = bisect.bisect_right([entry[0] for entry in entries], sort_key)
        return entries[position - 1][1] if position else None

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None:
        return None  # no covers: every bucket here has its items


def answer(
    table: CountingTable, version: int, value: int, cache: RangeCache | None, family: Family = 4
) -> CombinedResult | IpmetaError:
    try:
        return lookup_one_version(table, version, Address(family, value), cache)
    except (IpAddressNotFound, IpAddressReserved) as error:
        return error


def same(left: CombinedResult | IpmetaError, right: CombinedResult | IpmetaError) -> bool:
    if isinstance(left, IpmetaError) or isinstance(right, IpmetaError):
        return type(left) is type(right)
    return left == right


B5 = 5 << 24  # the first address of bucket 5 (5.0.0.0)
BIG = 1 << 30  # a bound no test reaches


# -- versions -----------------------------------------------------------------------------------


def test_a_cached_range_never_answers_for_another_version() -> None:
    # Given v1 and v2 hold different data for the same range, and v1's answer is cached
    table = CountingTable({1: [(B5, B5 + 255, {"asn": 1})], 2: [(B5, B5 + 255, {"asn": 2})]})
    cache = RangeCache(BIG)
    assert lookup_version(table, 1, Address(4, B5 + 1), cache).data == {"asn": 1}
    assert lookup_version(table, 1, Address(4, B5 + 2), cache).data == {"asn": 1}
    assert table.queries == 1
    # When the same range is asked of v2
    result = lookup_version(table, 2, Address(4, B5 + 2), cache)
    # Then v2 is queried and answers its own data, and each version keeps its own entry
    assert (result.data, result.version, table.queries) == ({"asn": 2}, 2, 2)
    assert lookup_version(table, 1, Address(4, B5 + 3), cache).data == {"asn": 1}
    assert lookup_version(table, 2, Address(4, B5 + 4), cache).data == {"asn": 2}
    assert table.queries == 2


def test_a_cached_gap_never_answers_for_another_version() -> None:
    # Given v1 has nothing at B5+100 (a cached gap) and v2 has a range there
    table = CountingTable({1: [(B5, B5 + 9, {"asn": 1})], 2: [(B5, B5 + 255, {"asn": 2})]})
    cache = RangeCache(BIG)
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 100), cache)
    # Then v2 still finds its range
    assert lookup_version(table, 2, Address(4, B5 + 100), cache).data == {"asn": 2}
    assert table.queries == 2


# -- gaps ----------------------------------------------------------------------------------------


def test_a_cached_range_never_answers_across_a_gap() -> None:
    # Given two ranges with a gap between them: B5+10..B5+19, gap, B5+30..B5+39
    table = CountingTable({1: [(B5 + 10, B5 + 19, {"n": "a"}), (B5 + 30, B5 + 39, {"n": "b"})]})
    cache = RangeCache(BIG)
    assert lookup_version(table, 1, Address(4, B5 + 19), cache).data == {"n": "a"}
    # When the address right after the cached range is asked
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 20), cache)
    # Then it was queried (the range's entry stops at its end) and is not found
    assert table.queries == 2
    # And the gap learnt stops at the address asked: past it, the cache does not claim to know
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 20), cache)
    assert table.queries == 2
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 29), cache)
    assert table.queries == 3
    assert lookup_version(table, 1, Address(4, B5 + 30), cache).data == {"n": "b"}
    assert table.queries == 4
    # And every address of the learnt gap answers "not found" without a Query
    for value in range(B5 + 20, B5 + 30):
        with pytest.raises(IpAddressNotFound):
            lookup_version(table, 1, Address(4, value), cache)
    assert table.queries == 4


def test_a_gap_found_by_an_empty_query_stays_in_its_bucket() -> None:
    # Given bucket 5 has one range near its top, and bucket 6 starts with a range
    top_of_5 = (6 << 24) - 1
    table = CountingTable({1: [(top_of_5 - 9, top_of_5, {"n": "a"}), (6 << 24, (6 << 24) + 9, {"n": "b"})]})
    cache = RangeCache(BIG)
    # When an address early in bucket 5 finds nothing (the Query returns no item)
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 1000), cache)
    # Then the gap runs from the bucket's first address to the address asked, and no further
    span = cache.find(V1, 4, B5)
    assert span is not None
    assert (span.start, span.end, span.data) == (B5, B5 + 1000, None)
    assert cache.find(V1, 4, B5 + 1001) is None
    assert lookup_version(table, 1, Address(4, top_of_5), cache).data == {"n": "a"}
    assert lookup_version(table, 1, Address(4, 6 << 24), cache).data == {"n": "b"}


def test_a_longer_gap_replaces_the_shorter_one_with_the_same_start() -> None:
    table = CountingTable({1: [(B5, B5 + 9, {"n": "a"})]})
    cache = RangeCache(BIG)
    for value in (B5 + 20, B5 + 50, B5 + 30):
        with pytest.raises(IpAddressNotFound):
            lookup_version(table, 1, Address(4, value), cache)
    span = cache.find(V1, 4, B5 + 10)
    assert span is not None
    assert (span.start, span.end) == (B5 + 10, B5 + 50)
    assert len(cache) == 1
    assert table.queries == 2


# -- ranges across buckets, bogons -----------------------------------------------------------------


def test_a_range_across_buckets_answers_in_every_bucket_with_each_address_own_bogon_flag() -> None:
    # Given a range from 10.255.255.0 (bogon, 10/8) to 11.0.0.255 (not a bogon)
    start, end = (11 << 24) - 256, (11 << 24) + 255
    table = CountingTable({1: [(start, end, {"n": "x"})]})
    cache = RangeCache(BIG)
    # When a bogon address of it is looked up, then one in the next bucket
    first = lookup_one_version(table, 1, Address(4, start + 1), cache)
    second = lookup_one_version(table, 1, Address(4, end - 1), cache)
    # Then one Query answered both, and the bogon flag is each address's own
    assert table.queries == 1
    assert (first.bogon, second.bogon) == (True, False)
    ((_, found),) = second.found
    assert (found.start, found.end, found.data) == (start, end, {"n": "x"})


def test_a_cached_gap_of_a_bogon_is_reserved_and_of_a_public_address_not_found() -> None:
    # 0.0.0.0/8 is a bogon; bucket 0 holds nothing
    table = CountingTable({1: [(B5, B5 + 9, {"n": "a"})]})
    cache = RangeCache(BIG)
    with pytest.raises(IpAddressReserved):
        lookup_version(table, 1, Address(4, 1000), cache)
    with pytest.raises(IpAddressReserved):
        lookup_version(table, 1, Address(4, 999), cache)
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 100), cache)
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 1, Address(4, B5 + 99), cache)
    assert table.queries == 2


# -- the invariant -------------------------------------------------------------------------------

# Addresses around the 10/11 edge: ranges cross buckets, bogons meet public addresses.
EDGE = 11 << 24
edge_values = st.integers(EDGE - 32, EDGE + 32)


@st.composite
def versions_of_ranges(draw: st.DrawFn) -> dict[int, list[Range]]:
    versions: dict[int, list[Range]] = {}
    for version in (1, 2):
        cuts = sorted(draw(st.sets(edge_values, max_size=20)))
        ranges: list[Range] = []
        for first, after in itertools.pairwise(cuts):
            if draw(st.booleans()):  # else a gap
                ranges.append((first, after - 1, {"label": f"{version}:{first}"}))
        versions[version] = ranges
    return versions


@settings(max_examples=200, deadline=None)
@given(versions_of_ranges(), st.randoms(use_true_random=False), st.integers(1, 8) | st.just(1000))
def test_cached_answers_equal_uncached_ones(
    versions: dict[int, list[Range]], rng: random.Random, room: int
) -> None:
    """Whatever was cached before and whatever was evicted, the cache answers as a Query does.

    Every address of both versions is asked three times, in a random order: the
    order decides which ranges and gaps are cached, and how long the gaps are.
    """
    table = CountingTable(versions)
    cache = RangeCache(room * entry_bytes(EDGE, EDGE, {"label": "1:123456789"}))
    probes = [(version, value) for version in (1, 2) for value in range(EDGE - 32, EDGE + 33)] * 3
    rng.shuffle(probes)
    for version, value in probes:
        cached = answer(table, version, value, cache)
        assert same(cached, answer(table, version, value, None))
        if isinstance(cached, CombinedResult):
            assert cached.bogon == is_bogon(Address(4, value))
        assert cache.bytes <= cache.max_bytes


class StagedTable(CountingTable):
    """The items the loader's own pipeline stages for overlapping rows (``tests.pipeline``)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__({})
        partitions: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for item in items:
            partitions[item[keys.PARTITION_KEY]].append((item[keys.SORT_KEY], item))
        self._partitions = {
            pk: sorted(entries, key=lambda entry: entry[0]) for pk, entries in partitions.items()
        }


@st.composite
def overlapping_rows(draw: st.DrawFn) -> list[SourceRow]:
    rows = []
    for line in range(draw(st.integers(1, 10))):
        start = draw(edge_values)
        end = draw(st.integers(start, min(start + 30, EDGE + 32)))
        rows.append(SourceRow(f"t.csv:{line + 2}", 4, start, end, {"label": str(line)}))
    return rows


@settings(max_examples=100, deadline=None)
@given(overlapping_rows(), st.randoms(use_true_random=False))
def test_cached_answers_equal_uncached_ones_on_the_loaders_items(
    rows: list[SourceRow], rng: random.Random
) -> None:
    """The cache trusts an item's ``start..end`` to answer alike throughout: true of what the
    loader writes when rows overlap, nest and cross buckets (the later row wins)."""
    with tempfile.TemporaryDirectory() as folder:
        table = StagedTable(stage(rows, Path(folder)).items)
    cache = RangeCache(BIG)
    probes = list(range(EDGE - 32, EDGE + 33)) * 2
    rng.shuffle(probes)
    found = 0
    for value in probes:
        cached = answer(table, 0, value, cache)
        assert same(cached, answer(table, 0, value, None))
        found += isinstance(cached, CombinedResult)
    assert found >= 2  # every row holds at least one probe, asked twice


def test_ipv6_ranges_and_gaps_are_cached_to_the_last_address() -> None:
    top = 2**128 - 1
    table = CountingTable({1: [(top - 255, top, {"n": "top"})]}, family=6)
    cache = RangeCache(BIG)
    assert lookup_version(table, 1, Address(6, top), cache).data == {"n": "top"}
    assert lookup_version(table, 1, Address(6, top - 255), cache).data == {"n": "top"}
    assert isinstance(answer(table, 1, top - 256, cache, 6), IpAddressNotFound)
    assert table.queries == 2
    assert cache.find(V1, 4, top - 1) is None  # families never mix


# -- bytes and eviction ----------------------------------------------------------------------------


def test_the_least_recently_used_entry_goes_first_and_bytes_stay_under_the_bound() -> None:
    ranges = [(B5 + 10 * n, B5 + 10 * n + 9, {"n": str(n)}) for n in range(4)]
    table = CountingTable({1: ranges})
    room = entry_bytes(B5, B5 + 9, {"n": "0"})
    cache = RangeCache(3 * room)
    for n in (0, 1, 2):
        lookup_version(table, 1, Address(4, B5 + 10 * n), cache)
    lookup_version(table, 1, Address(4, B5 + 1), cache)  # range 0 is now the most recent
    lookup_version(table, 1, Address(4, B5 + 30), cache)  # admitting range 3 evicts range 1
    assert len(cache) == 3
    assert cache.bytes <= cache.max_bytes
    assert cache.find(V1, 4, B5 + 15) is None
    assert all(cache.find(V1, 4, B5 + 10 * n + 5) is not None for n in (0, 2, 3))


def test_an_entry_larger_than_the_bound_is_not_admitted_and_zero_disables() -> None:
    table = CountingTable({1: [(B5, B5 + 9, {"organization": "x" * 2000})]})
    small, off = RangeCache(1000), RangeCache(0)
    for cache in (small, off):
        for _ in range(2):
            lookup_version(table, 1, Address(4, B5), cache)
        assert (len(cache), cache.bytes) == (0, 0)
    assert table.queries == 4


@pytest.mark.parametrize("family", [4, 6])
def test_the_byte_estimate_is_close_to_what_the_entries_allocate(family: Family) -> None:
    """tracemalloc sees every allocation the cache makes for its entries; the estimate
    must bound it (it is a memory bound) without overstating it much (it sizes the cache)."""
    rng = random.Random(7)
    bits = keys.ADDRESS_BITS[family]
    starts = sorted({rng.getrandbits(bits - 2) << 8 for _ in range(20_000)})
    rows = [
        (start, start + 255, {"asn": rng.randrange(1000, 400_000), "organization": f"Org {rng.random()}"})
        for start in starts
    ]
    rng.shuffle(rows)
    cache = RangeCache(BIG)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start, end, data in rows:
            cache.put(1, family, Run(start, end, data))
        allocated = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The bounds and the data's values were allocated before (by the reader); the entry keeps them alive.
    kept_alive = sum(
        sys.getsizeof(start) + sys.getsizeof(end) + sum(sys.getsizeof(v) for v in data.values())
        for start, end, data in rows
    )
    held = allocated + kept_alive
    assert held <= cache.bytes <= 1.25 * held


# -- threads and batches ---------------------------------------------------------------------------


def test_concurrent_lookups_keep_the_cache_consistent() -> None:
    ranges = [(B5 + 4 * n, B5 + 4 * n + 2, {"n": str(n)}) for n in range(500)]  # every 4th address a gap
    table = CountingTable({1: ranges, 2: ranges[::2]})
    cache = RangeCache(40 * entry_bytes(B5, B5, {"n": "100"}))

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(2000):
            version, value = rng.choice((1, 2)), B5 + rng.randrange(2000)
            assert same(answer(table, version, value, cache), answer(table, version, value, None))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    assert cache.bytes <= cache.max_bytes
    assert len(cache) > 0


def test_a_batch_answers_cached_addresses_without_a_query() -> None:
    table = CountingTable({1: [(B5, B5 + 255, {"n": "a"})]})
    cache = RangeCache(BIG)
    lookup_version(table, 1, Address(4, B5), cache)
    addresses = [Address(4, B5 + n) for n in range(100)] + [Address(4, B5 + 300)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = lookup_addresses(lambda name: table, Targets((Target(DEFAULT, 1),)), addresses, pool, cache)
    assert list(answers) == addresses
    assert all(isinstance(answers[address], CombinedResult) for address in addresses[:100])
    assert isinstance(answers[addresses[-1]], IpAddressNotFound)
    assert table.queries == 2  # the first lookup, and the one gap
