"""From rows to non-overlapping segments, by an overlap policy. Pure functions.

1. ``resolve``: overlapping rows become non-overlapping segments by a policy:
   - ``last-wins``: a later row wins the addresses it shares with earlier ones,
     as if rows were writes applied in file order (MaxMind's DB writers agree);
   - ``most-specific``: each row is cut into its CIDR blocks and the longest
     prefix covering an address wins; among equal prefixes, the later row;
   - ``reject``: any overlap fails, naming the lines of both rows;
   - ``merge``: where rows overlap, the piece carries the fields of every
     covering row (``merge_fields``): lists are joined without repeats, and of
     two values of one field the later row's wins. Lists of different kinds
     (a cloud range that is also a Tor exit) answer with both.
2. ``coalesce``: adjacent segments whose rows carry the same data become one.

**Complexity.** ``resolve`` sorts the claims (O(n log n)) and walks them once
in *clusters*: maximal runs of claims that chain-overlap in start order. A
claim alone in its cluster is its own segment (real data is mostly that:
gap-free or gapped runs of disjoint ranges). Only a cluster with overlaps goes
through the sweep: every start and end+1 of the cluster in order, with the
covering claims in a heap keyed by priority. A claim enters the heap once and
leaves it once (lazily, when it surfaces after it ended), so a cluster of k
claims costs O(k log k) whatever its shape: contiguous, nested chains, one
huge range over millions of small ones, or k identical rows. Every claim of a
multi-claim cluster overlaps another (it starts before the cluster's reach so
far), so the overlapping rows are counted without looking inside the heap.
``merge`` sweeps a cluster keeping every covering claim: O(k log k + s * d)
for s stretches at most d deep, and network lists overlap a few deep at most.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ipmeta.schema import keys
from ipmeta.schema.ips import Family
from loader.errors import OverlapRejected
from loader.options import OVERLAP_POLICIES, OverlapPolicy

__all__ = ["OVERLAP_POLICIES", "OverlapPolicy", "OverlapRejected"]


class Ranged(Protocol):
    """What resolution needs of a row: its family and inclusive bounds."""

    @property
    def family(self) -> Family: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Segment:
    """Addresses ``start..end`` answer with the metadata of ``rows[row]``."""

    family: Family
    start: int
    end: int
    row: int


@dataclass(frozen=True, slots=True)
class Resolution:
    segments: list[Segment]
    overlapping_rows: int  #: rows that shared addresses with another row
    #: ``merge``: a segment's ``row`` past the last input row names the rows it merges, in order.
    merged: dict[int, tuple[int, ...]] = field(default_factory=dict)


#: A claim on addresses: (start, end, priority, row). Higher priority wins.
Claim = tuple[int, int, int, int]
#: Priorities of ``most-specific``: the prefix length above any file position.
PREFIX_WEIGHT = 1 << 64


def resolve(
    rows: Sequence[Ranged],
    policy: OverlapPolicy = "last-wins",
    *,
    order: Sequence[int] | None = None,
    describe: Callable[[int], str] | None = None,
) -> Resolution:
    """Non-overlapping segments, sorted by family then start.

    ``order[i]`` is row i's position in the sources (default: its index), which
    ``last-wins`` and the tie-break of ``most-specific`` follow. ``describe(i)``
    names a row in the message of ``reject`` (default: ``row i``).
    """
    if policy not in OVERLAP_POLICIES:
        raise ValueError(f"unknown overlap policy {policy!r}; use one of {', '.join(OVERLAP_POLICIES)}")
    position = order if order is not None else range(len(rows))
    segments: list[Segment] = []
    overlapping: set[int] = set()
    merged: dict[tuple[int, ...], int] = {}
    for family in (4, 6):
        indexes = [index for index, row in enumerate(rows) if row.family == family]
        if not indexes:
            continue
        claims = list(_claims(rows, indexes, position, policy, keys.ADDRESS_BITS[family]))
        if policy == "merge":
            covered, overlapped = sweep_merged(claims)
            for start, end, covering in covered:
                row = (
                    covering[0]
                    if len(covering) == 1
                    else merged.setdefault(covering, len(rows) + len(merged))
                )
                segments.append(Segment(family, start, end, row))
            overlapping |= overlapped
            continue
        spans, overlapped = sweep(claims)
        if policy == "reject" and overlapped:
            raise_first_overlap(claims, position, describe or (lambda index: _origin(rows[index], index)))
        segments.extend(Segment(family, start, end, row) for start, end, row in spans)
        overlapping |= overlapped
    return Resolution(segments, len(overlapping), {row: covering for covering, row in merged.items()})


def _origin(row: Ranged, index: int) -> str:
    origin = getattr(row, "origin", None)
    return str(origin) if origin else f"row {index}"


def _claims(
    rows: Sequence[Ranged], indexes: Sequence[int], position: Sequence[int], policy: OverlapPolicy, bits: int
) -> Iterator[Claim]:
    if policy != "most-specific":
        for index in indexes:
            yield rows[index].start, rows[index].end, position[index], index
        return
    for index in indexes:
        for first, last, prefix in cidr_blocks(rows[index].start, rows[index].end, bits):
            yield first, last, prefix * PREFIX_WEIGHT + position[index], index


def sweep(claims: list[Claim]) -> tuple[list[tuple[int, int, int]], set[int]]:
    """``(start, end, row)`` spans in address order, and the rows of claims that overlapped another.

    Sorts ``claims`` in place. Adjacent spans of the same row are merged.
    """
    spans: list[tuple[int, int, int]] = []
    overlapping: set[int] = set()
    for cluster in _clusters(claims):
        if len(cluster) == 1:
            start, end, _, row = cluster[0]
            _append(spans, start, end, row)
        else:
            overlapping.update(claim[3] for claim in cluster)
            _sweep_cluster(cluster, spans)
    return spans, overlapping


def sweep_merged(claims: list[Claim]) -> tuple[list[tuple[int, int, tuple[int, ...]]], set[int]]:
    """``(start, end, rows)`` spans in address order, each with every row covering it by priority.

    Sorts ``claims`` in place. Adjacent spans of the same rows are merged.
    """
    spans: list[tuple[int, int, tuple[int, ...]]] = []
    overlapping: set[int] = set()
    for cluster in _clusters(claims):
        if len(cluster) > 1:
            overlapping.update(claim[3] for claim in cluster)
        points = sorted({claim[0] for claim in cluster} | {claim[1] + 1 for claim in cluster})
        covering: dict[int, tuple[int, int]] = {}  # row -> (priority, end)
        next_claim = 0
        for here, following in itertools.pairwise(points):
            while next_claim < len(cluster) and cluster[next_claim][0] == here:
                _, end, priority, row = cluster[next_claim]
                covering[row] = max(covering.get(row, (priority, end)), (priority, end))
                next_claim += 1
            for row in [row for row, (_, end) in covering.items() if end < here]:
                del covering[row]
            if covering:
                rows = tuple(sorted(covering, key=lambda row: covering[row][0]))
                if spans and spans[-1][2] == rows and spans[-1][1] + 1 == here:
                    spans[-1] = (spans[-1][0], following - 1, rows)
                else:
                    spans.append((here, following - 1, rows))
    return spans, overlapping


def _clusters(claims: list[Claim]) -> Iterator[list[Claim]]:
    """Maximal runs of claims that chain-overlap in start order (sorts ``claims`` in place)."""
    claims.sort()
    count, first = len(claims), 0
    while first < count:
        reach = claims[first][1]
        after = first + 1
        while after < count and claims[after][0] <= reach:
            reach = max(reach, claims[after][1])
            after += 1
        yield claims[first:after]
        first = after


def merge_fields(values: Sequence[Sequence[Any]]) -> list[Any]:
    """The fields of several rows, in order, as one: lists joined without repeats, else the last set value."""
    merged = list(values[0])
    for later in values[1:]:
        for column, value in enumerate(later):
            held = merged[column]
            if isinstance(held, list) and isinstance(value, list):
                merged[column] = held + [item for item in value if item not in held]
            elif value is not None and value != "":
                merged[column] = value
    return merged


def _sweep_cluster(cluster: list[Claim], spans: list[tuple[int, int, int]]) -> None:
    """The highest-priority covering claim owns each stretch between consecutive boundaries."""
    points = sorted({claim[0] for claim in cluster} | {claim[1] + 1 for claim in cluster})
    covering: list[tuple[int, int, int]] = []  # (-priority, end, row)
    next_claim = 0
    for here, following in itertools.pairwise(points):
        while next_claim < len(cluster) and cluster[next_claim][0] == here:
            _, end, priority, row = cluster[next_claim]
            heapq.heappush(covering, (-priority, end, row))
            next_claim += 1
        # Claims that ended are dropped only when they surface: each leaves once.
        while covering and covering[0][1] < here:
            heapq.heappop(covering)
        if covering:
            _append(spans, here, following - 1, covering[0][2])


def _append(spans: list[tuple[int, int, int]], start: int, end: int, row: int) -> None:
    if spans and spans[-1][2] == row and spans[-1][1] + 1 == start:
        spans[-1] = (spans[-1][0], end, row)
    else:
        spans.append((start, end, row))


def raise_first_overlap(
    claims: Sequence[Claim], position: Sequence[int], describe: Callable[[int], str]
) -> None:
    """``OverlapRejected`` naming two rows that share an address (the later in file order first)."""
    ordered = sorted(claims)
    reach_end, reach_row = ordered[0][1], ordered[0][3]
    for start, end, _, row in ordered[1:]:
        if start <= reach_end:
            first, second = sorted((reach_row, row), key=lambda index: position[index])
            message = f"{describe(second)}: overlaps {describe(first)} (--overlaps reject)"
            raise OverlapRejected(message, [message])
        if end > reach_end:
            reach_end, reach_row = end, row


def coalesce(segments: Sequence[Segment], data_key: Callable[[int], Hashable]) -> list[Segment]:
    """Adjacent segments whose rows carry equal data (``data_key``) become one.

    The merged segment keeps its first row: the data is the same.
    """
    merged: list[Segment] = []
    previous_key: Hashable = None
    for segment in segments:
        key = data_key(segment.row)
        if (
            merged
            and merged[-1].family == segment.family
            and merged[-1].end + 1 == segment.start
            and key == previous_key
        ):
            last = merged[-1]
            merged[-1] = Segment(last.family, last.start, segment.end, last.row)
        else:
            merged.append(segment)
            previous_key = key
    return merged


def cidr_blocks(start: int, end: int, bits: int) -> Iterator[tuple[int, int, int]]:
    """The fewest CIDR blocks covering ``start..end``: (first, last, prefix length)."""
    while start <= end:
        # The largest block aligned at ``start`` that does not pass ``end``.
        size_bits = (start & -start).bit_length() - 1 if start else bits
        while start + (1 << size_bits) - 1 > end:
            size_bits -= 1
        yield start, start + (1 << size_bits) - 1, bits - size_bits
        start += 1 << size_bits
