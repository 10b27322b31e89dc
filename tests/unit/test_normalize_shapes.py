"""The input shapes real data has at scale, at small sizes, against a brute-force oracle.

Gap-free runs, nested chains, one huge range over many small ones and many
identical rows: the shapes on which the old sweep went quadratic. Each is
checked on every boundary address and on random ones (``bench/resolve.py``
measures them at millions of rows).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from loader.formats import SourceRow
from loader.pipeline import normalize

COUNT = 2000
BASE = 7 << 24


def row(line: int, start: int, end: int) -> SourceRow:
    return SourceRow(f"t.csv: line {line + 2}", 4, start, end, {"n": str(line)})


def contiguous() -> list[SourceRow]:
    return [row(n, BASE + 256 * n, BASE + 256 * n + 255) for n in range(COUNT)]


def nested_chain() -> list[SourceRow]:
    """Each row inside the one before: a chain of COUNT nested ranges."""
    return [row(n, BASE + n, BASE + 4 * COUNT - n) for n in range(COUNT)]


def huge_over_small() -> list[SourceRow]:
    """One huge range first, then many small contiguous ones inside it (they win, coming later)."""
    return [row(0, BASE, BASE + 256 * COUNT + 1000)] + [
        row(n, BASE + 100 + 256 * n, BASE + 100 + 256 * n + 255) for n in range(1, COUNT)
    ]


def small_under_huge() -> list[SourceRow]:
    """The same, with the huge range last: it wins everywhere."""
    rows = huge_over_small()
    return [row(n, entry.start, entry.end) for n, entry in enumerate(rows[1:] + rows[:1])]


def identical() -> list[SourceRow]:
    return [row(n, BASE, BASE + 255) for n in range(COUNT)]


def last_wins(rows: Sequence[SourceRow], address: int) -> int | None:
    winner = None
    for index, candidate in enumerate(rows):
        if candidate.start <= address <= candidate.end:
            winner = index
    return winner


def owner(resolution: normalize.Resolution, address: int) -> int | None:
    found = [segment.row for segment in resolution.segments if segment.start <= address <= segment.end]
    assert len(found) <= 1
    return found[0] if found else None


@pytest.mark.parametrize(
    "shape",
    [contiguous, nested_chain, huge_over_small, small_under_huge, identical],
    ids=lambda f: f.__name__,
)
def test_every_shape_resolves_like_the_oracle(shape: Callable[[], list[SourceRow]]) -> None:
    rows = shape()
    resolution = normalize.resolve(rows, "last-wins")
    boundaries = {
        address for entry in rows for address in (entry.start - 1, entry.start, entry.end, entry.end + 1)
    }
    probes = sorted(boundaries)[:: max(1, len(boundaries) // 600)]
    rng = random.Random(5)
    probes += [rng.randrange(BASE - 10, BASE + 256 * COUNT + 1100) for _ in range(200)]
    for address in probes:
        assert owner(resolution, address) == last_wins(rows, address), address
    for before, after in zip(resolution.segments, resolution.segments[1:], strict=False):
        assert before.end < after.start


def test_overlap_counts_of_the_shapes() -> None:
    assert normalize.resolve(contiguous()).overlapping_rows == 0
    assert normalize.resolve(nested_chain()).overlapping_rows == COUNT
    assert normalize.resolve(huge_over_small()).overlapping_rows == COUNT
    assert normalize.resolve(identical()).overlapping_rows == COUNT
    # Identical rows: the last one owns the whole range, once.
    assert [(s.start, s.end, s.row) for s in normalize.resolve(identical()).segments] == [
        (BASE, BASE + 255, COUNT - 1)
    ]


def test_a_huge_range_under_small_ones_keeps_the_gaps_between_them() -> None:
    rows = huge_over_small()
    segments = normalize.resolve(rows).segments
    # small ranges are contiguous, so the huge one owns only its two ends
    huge_parts = [(s.start, s.end) for s in segments if s.row == 0]
    assert huge_parts == [(BASE, BASE + 355), (BASE + 256 * COUNT + 100, BASE + 256 * COUNT + 1000)]


def test_coalesce_merges_adjacent_equal_data_only() -> None:
    segments = [
        normalize.Segment(4, 0, 9, 0),
        normalize.Segment(4, 10, 19, 1),
        normalize.Segment(4, 21, 30, 2),  # a gap before it
        normalize.Segment(4, 31, 40, 3),
    ]
    data = {0: "a", 1: "a", 2: "a", 3: "b"}
    merged = normalize.coalesce(segments, data.__getitem__)
    assert [(s.start, s.end) for s in merged] == [(0, 19), (21, 30), (31, 40)]
