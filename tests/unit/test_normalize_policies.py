"""Each overlap policy against a brute-force oracle, on generated nested and overlapping ranges.

The oracles never share code with ``loader.pipeline.normalize``: they scan every row for
every address, and ``most-specific`` takes its CIDR blocks from ``ipaddress``.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.formats import SourceRow, typed_value
from loader.pipeline import normalize
from loader.pipeline.write import spread

# Addresses around a /8 edge, so ranges overlap, nest and cross buckets.
EDGE = 5 << 24
LOW, HIGH = EDGE - 40, EDGE + 40


@st.composite
def overlapping_rows(draw: st.DrawFn) -> list[SourceRow]:
    """Rows where many share a start with an earlier row (nested ranges, as in country files)."""
    rows: list[SourceRow] = []
    for line in range(draw(st.integers(1, 10))):
        reuse_a_start: bool = draw(st.booleans())
        if rows and reuse_a_start:
            start = draw(st.sampled_from([row.start for row in rows]))
        else:
            start = draw(st.integers(LOW, HIGH))
        end = draw(st.integers(start, min(start + 40, HIGH)))
        rows.append(SourceRow(f"t.csv: line {line + 2}", 4, start, end, {"label": str(line)}))
    return rows


def owner_of(segments: Sequence[normalize.Segment], address: int) -> int | None:
    owners = [segment.row for segment in segments if segment.start <= address <= segment.end]
    assert len(owners) <= 1, f"segments overlap at {address}"
    return owners[0] if owners else None


def last_wins_oracle(rows: Sequence[SourceRow], address: int) -> int | None:
    winner = None
    for index, row in enumerate(rows):
        if row.start <= address <= row.end:
            winner = index
    return winner


def most_specific_oracle(rows: Sequence[SourceRow], address: int) -> int | None:
    best: tuple[int, int] | None = None
    for index, row in enumerate(rows):
        if not row.start <= address <= row.end:
            continue
        blocks = ipaddress.summarize_address_range(
            ipaddress.IPv4Address(row.start), ipaddress.IPv4Address(row.end)
        )
        prefix = next(block.prefixlen for block in blocks if ipaddress.IPv4Address(address) in block)
        if best is None or (prefix, index) >= best:
            best = (prefix, index)
    return best[1] if best else None


def assert_sorted_and_disjoint(segments: Sequence[normalize.Segment]) -> None:
    for before, after in itertools.pairwise(segments):
        assert before.end < after.start


@settings(max_examples=300, deadline=None)
@given(overlapping_rows())
def test_last_wins_matches_the_oracle(rows: list[SourceRow]) -> None:
    resolution = normalize.resolve(rows, "last-wins")
    assert_sorted_and_disjoint(resolution.segments)
    for address in range(LOW - 1, HIGH + 2):
        assert owner_of(resolution.segments, address) == last_wins_oracle(rows, address)


@settings(max_examples=300, deadline=None)
@given(overlapping_rows())
def test_most_specific_matches_the_oracle(rows: list[SourceRow]) -> None:
    resolution = normalize.resolve(rows, "most-specific")
    assert_sorted_and_disjoint(resolution.segments)
    for address in range(LOW - 1, HIGH + 2):
        assert owner_of(resolution.segments, address) == most_specific_oracle(rows, address)


@settings(max_examples=300, deadline=None)
@given(overlapping_rows())
def test_reject_fails_exactly_when_two_rows_share_an_address(rows: list[SourceRow]) -> None:
    overlapping = [
        (first, second)
        for first in range(len(rows))
        for second in range(first + 1, len(rows))
        if rows[first].start <= rows[second].end and rows[second].start <= rows[first].end
    ]
    if not overlapping:
        resolution = normalize.resolve(rows, "reject")
        for address in range(LOW - 1, HIGH + 2):
            assert owner_of(resolution.segments, address) == last_wins_oracle(rows, address)
        return
    with pytest.raises(normalize.OverlapRejected) as caught:
        normalize.resolve(rows, "reject")
    # Both line numbers are named, and they are a pair that really overlaps.
    lines = [index for index, row in enumerate(rows) if row.origin in caught.value.message]
    assert len(lines) == 2
    first, second = lines
    assert rows[first].start <= rows[second].end
    assert rows[second].start <= rows[first].end


def covering_oracle(rows: Sequence[SourceRow], address: int) -> tuple[int, ...]:
    return tuple(index for index, row in enumerate(rows) if row.start <= address <= row.end)


@settings(max_examples=300, deadline=None)
@given(overlapping_rows())
def test_merge_gives_every_address_all_the_rows_that_cover_it_in_file_order(rows: list[SourceRow]) -> None:
    resolution = normalize.resolve(rows, "merge")
    assert_sorted_and_disjoint(resolution.segments)
    for address in range(LOW - 1, HIGH + 2):
        owner = owner_of(resolution.segments, address)
        expected = covering_oracle(rows, address)
        if not expected:
            assert owner is None
        elif len(expected) == 1:
            assert owner == expected[0]
        else:
            assert owner is not None
            assert resolution.merged[owner] == expected


def test_merge_joins_lists_and_lets_the_later_row_set_a_field() -> None:
    # Given a cloud row and a Tor row, as network lists store them (values in column order)
    cloud = [["cloud"], "aws", ["AMAZON"], None, "x"]
    tor = [["tor"], None, ["AMAZON", "EC2"], True, ""]
    # Then the merged row has both kinds, both services once, and every set value
    assert normalize.merge_fields([cloud, tor]) == [["cloud", "tor"], "aws", ["AMAZON", "EC2"], True, "x"]
    assert normalize.merge_fields([tor, cloud]) == [["tor", "cloud"], "aws", ["AMAZON", "EC2"], True, "x"]


def test_most_specific_prefers_the_nested_block_even_when_it_comes_first() -> None:
    # Given a /24 listed before the /16 that contains it
    small = SourceRow(
        "t.csv: line 2",
        4,
        int(ipaddress.IPv4Address("10.1.2.0")),
        int(ipaddress.IPv4Address("10.1.2.255")),
        {"n": "small"},
    )
    big = SourceRow(
        "t.csv: line 3",
        4,
        int(ipaddress.IPv4Address("10.1.0.0")),
        int(ipaddress.IPv4Address("10.1.255.255")),
        {"n": "big"},
    )
    inside = int(ipaddress.IPv4Address("10.1.2.7"))
    # Then last-wins answers with the /16, most-specific with the /24
    assert owner_of(normalize.resolve([small, big], "last-wins").segments, inside) == 1
    assert owner_of(normalize.resolve([small, big], "most-specific").segments, inside) == 0
    assert normalize.resolve([small, big], "most-specific").overlapping_rows == 2


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**16))
def test_cidr_blocks_equal_ipaddress_summaries(start: int, length: int) -> None:
    end = min(start + length, 2**32 - 1)
    expected = [
        (int(block.network_address), int(block.broadcast_address), block.prefixlen)
        for block in ipaddress.summarize_address_range(
            ipaddress.IPv4Address(start), ipaddress.IPv4Address(end)
        )
    ]
    assert list(normalize.cidr_blocks(start, end, 32)) == expected


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown overlap policy"):
        normalize.resolve([], "first-wins")  # type: ignore[arg-type]


def test_the_stratified_shuffle_spreads_every_bucket_evenly() -> None:
    # Given 20,000 items in three buckets holding 60%, 30% and 10%
    buckets = [1] * 12_000 + [2] * 6_000 + [3] * 2_000
    by_bucket: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for index, bucket in enumerate(buckets):
        by_bucket.setdefault((4, bucket), []).append({"index": index, "bucket": bucket})
    order = spread(by_bucket, random.Random("seed"))
    # Then every window of 1,000 writes holds each bucket's share within 1%
    assert sorted(item["index"] for item in order) == list(range(20_000))
    for start in range(0, len(order) - 1000, 250):
        window = [item["bucket"] for item in order[start : start + 1000]]
        for bucket, share in ((1, 0.6), (2, 0.3), (3, 0.1)):
            assert abs(window.count(bucket) / 1000 - share) <= 0.01
    assert spread(by_bucket, random.Random("seed")) == order  # deterministic: a re-run writes the same order


def test_an_empty_cell_of_an_integer_column_is_null_not_a_string() -> None:
    assert typed_value("", "N") is None
    assert typed_value("", "S") == ""
    assert typed_value("13335", "N") == 13335
    assert typed_value("x", "S") == "x"
