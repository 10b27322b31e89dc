"""From source rows to the items a dataset version is made of. Pure functions.

1. ``resolve``: overlapping rows become non-overlapping segments by a policy:
   - ``last-wins``: a later row wins the addresses it shares with earlier ones,
     as if rows were writes applied in file order (MaxMind's DB writers agree);
   - ``most-specific``: each row is cut into its CIDR blocks and the longest
     prefix covering an address wins; among equal prefixes, the later row;
   - ``reject``: any overlap fails, naming the lines of both rows.
2. ``infer_column_types``: a column whose every value is an integer is stored
   as a Number; anything else stays a String (declared types override).
3. ``plan_pieces``: each segment is cut at bucket boundaries into pieces, the
   future items, kept as small tuples so 400k ranges fit a Lambda's memory.
4. ``shuffle_pieces``/``build_items``: sorted input would heat one partition at
   a time, so pieces are shuffled (seeded by the source's checksum, so a re-run
   stages the very same chunks) and turned into items one chunk at a time.
"""

from __future__ import annotations

import heapq
import itertools
import random
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ipmeta import keys
from ipmeta.ips import Address, Family, format_address
from loader.errors import OverlapRejected
from loader.options import OVERLAP_POLICIES, OverlapPolicy
from loader.reverse_index import IndexPlan
from loader.source import SourceRow

__all__ = ["OVERLAP_POLICIES", "OverlapPolicy", "OverlapRejected"]

_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")


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


#: A piece of a claim on addresses: (start, end, priority, row). Higher priority wins.
_Claim = tuple[int, int, int, int]


def resolve(rows: Sequence[SourceRow], policy: OverlapPolicy = "last-wins") -> Resolution:
    """Non-overlapping segments, sorted by family then start."""
    if policy not in OVERLAP_POLICIES:
        raise ValueError(f"unknown overlap policy {policy!r}; use one of {', '.join(OVERLAP_POLICIES)}")
    segments: list[Segment] = []
    overlapping = 0
    families: tuple[Family, Family] = (4, 6)
    for family in families:
        indexes = [index for index, row in enumerate(rows) if row.family == family]
        if policy == "reject":
            _reject_overlaps(rows, indexes)
        claims: list[_Claim]
        if policy == "most-specific":
            bits = keys.ADDRESS_BITS[family]
            # Priority: prefix length first, file position second.
            claims = [
                (first, last, prefix * len(rows) + index, index)
                for index in indexes
                for first, last, prefix in cidr_blocks(rows[index].start, rows[index].end, bits)
            ]
        else:
            claims = [(rows[index].start, rows[index].end, index, index) for index in indexes]
        family_segments, overlaps = _sweep(claims, family)
        segments.extend(family_segments)
        overlapping += overlaps
    return Resolution(segments, overlapping)


def resolve_last_wins(rows: Sequence[SourceRow]) -> tuple[list[Segment], int]:
    resolution = resolve(rows, "last-wins")
    return resolution.segments, resolution.overlapping_rows


def cidr_blocks(start: int, end: int, bits: int) -> Iterator[tuple[int, int, int]]:
    """The fewest CIDR blocks covering ``start..end``: (first, last, prefix length)."""
    while start <= end:
        # The largest block aligned at ``start`` that does not pass ``end``.
        size_bits = (start & -start).bit_length() - 1 if start else bits
        while start + (1 << size_bits) - 1 > end:
            size_bits -= 1
        yield start, start + (1 << size_bits) - 1, bits - size_bits
        start += 1 << size_bits


def _reject_overlaps(rows: Sequence[SourceRow], indexes: list[int]) -> None:
    by_start = sorted(indexes, key=lambda index: (rows[index].start, rows[index].end))
    reach = -1  # the row reaching furthest so far
    for index in by_start:
        if reach >= 0 and rows[index].start <= rows[reach].end:
            first, second = sorted((reach, index))
            message = f"{rows[second].origin}: overlaps {rows[first].origin} (--overlaps reject)"
            raise OverlapRejected(message, [message])
        if reach < 0 or rows[index].end > rows[reach].end:
            reach = index


def _sweep(claims: list[_Claim], family: Family) -> tuple[list[Segment], int]:
    """Sweep every start and end+1; the covering claim with the highest priority owns each gap.

    Covering claims sit in a heap keyed by priority; claims that ended are
    dropped lazily when they reach the top.
    """
    claims.sort(key=lambda claim: claim[0])
    points = sorted({claim[0] for claim in claims} | {claim[1] + 1 for claim in claims})
    active: list[tuple[int, int, int]] = []  # (-priority, end, row)
    segments: list[Segment] = []
    overlapping: set[int] = set()
    next_claim = 0
    for here, after in itertools.pairwise(points):
        while next_claim < len(claims) and claims[next_claim][0] == here:
            _, end, priority, row = claims[next_claim]
            heapq.heappush(active, (-priority, end, row))
            next_claim += 1
        while active and active[0][1] < here:
            heapq.heappop(active)
        if not active:
            continue
        owner = active[0][2]
        if len(active) > 1:
            # Lazily-deleted claims may linger under the top; only live ones overlap.
            live = {row for _, end, row in active if end >= here}
            if len(live) > 1:
                overlapping.update(live)
        previous = segments[-1] if segments else None
        if previous is not None and previous.row == owner and previous.end + 1 == here:
            segments[-1] = Segment(family, previous.start, after - 1, owner)
        else:
            segments.append(Segment(family, here, after - 1, owner))
    return segments, len(overlapping)


def infer_column_types(
    rows: Sequence[SourceRow], declared: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``{"column": "N" | "S"}``: Number only if every non-empty value is a plain integer.

    Leading zeros keep a column a String: ``007`` is an identifier, not 7.
    Declared types win over inference.
    """
    declared = declared or {}
    columns = list(rows[0].values) if rows else []
    types = {column: declared.get(column, "N") for column in columns}
    undecided = {column for column in columns if column not in declared}
    for row in rows:
        if not undecided:
            break
        for column in list(undecided):
            value = row.values[column]
            if value and not _INTEGER.fullmatch(value):
                types[column] = "S"
                undecided.discard(column)
    return types


def typed_values(values: Mapping[str, str], column_types: Mapping[str, str]) -> dict[str, Any]:
    """Numbers as int; an empty cell of a Number column is null, so a column keeps one type."""
    return {column: _typed(value, column_types.get(column)) for column, value in values.items()}


def _typed(value: str, column_type: str | None) -> int | str | None:
    if column_type != "N":
        return value
    return int(value) if value else None


def build_items(
    version: int, rows: Sequence[SourceRow], segments: Sequence[Segment], column_types: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Every item of a version, in segment order (``build_piece_items`` builds a chunk's)."""
    return build_piece_items(version, plan_pieces(segments), segments, rows, column_types)


#: A future item: (segment index, bucket, first address of the piece).
Piece = tuple[int, int, int]


def plan_pieces(segments: Sequence[Segment]) -> list[Piece]:
    """Every segment cut at bucket boundaries."""
    return [
        (index, piece.bucket, piece.first)
        for index, segment in enumerate(segments)
        for piece in keys.split_at_buckets(segment.family, segment.start, segment.end)
    ]


def count_splits(segments: Sequence[Segment]) -> int:
    """Segments that cross at least one bucket boundary."""
    return sum(
        1
        for segment in segments
        if keys.bucket_of(Address(segment.family, segment.start))
        != keys.bucket_of(Address(segment.family, segment.end))
    )


def items_per_bucket(segments: Sequence[Segment], pieces: Sequence[Piece]) -> Counter[tuple[Family, int]]:
    """Items each (family, bucket) will hold."""
    return Counter((segments[index].family, bucket) for index, bucket, _ in pieces)


def shuffle_pieces(pieces: list[Piece], seed: str, segments: Sequence[Segment]) -> None:
    """Spread every bucket evenly over the write order (a stratified shuffle).

    A plain shuffle leaves random clumps: with 400k items, some window of 1,000
    writes gets 1.6x its bucket's average share. Instead each bucket's items are
    shuffled among themselves and the k-th of n gets position (k + jitter) / n,
    so any window holds about its bucket's file share, give or take one item.
    Seeded by the source's checksum, so a re-run stages the very same chunks.
    """
    rng = random.Random(seed)
    by_bucket: dict[tuple[int, int], list[Piece]] = {}
    for piece in pieces:
        by_bucket.setdefault((segments[piece[0]].family, piece[1]), []).append(piece)
    keyed: list[tuple[float, Piece]] = []
    for group in by_bucket.values():
        rng.shuffle(group)
        count = len(group)
        keyed.extend(((position + rng.random()) / count, piece) for position, piece in enumerate(group))
    keyed.sort(key=lambda entry: entry[0])
    pieces[:] = [piece for _, piece in keyed]


def build_piece_items(
    version: int,
    pieces: Sequence[Piece],
    segments: Sequence[Segment],
    rows: Sequence[SourceRow],
    column_types: Mapping[str, str],
    *,
    index: IndexPlan | None = None,
) -> Iterator[dict[str, Any]]:
    """The items of some pieces; each keeps its whole segment's bounds, not the bucket's.

    Only a segment's first piece gets the reverse-index attributes, so a range
    cut at a bucket edge is listed once by the indexes.
    """
    for segment_index, bucket, first in pieces:
        segment = segments[segment_index]
        data = typed_values(rows[segment.row].values, column_types)
        item = {
            keys.PARTITION_KEY: keys.partition_key(version, segment.family, bucket),
            keys.SORT_KEY: keys.encode_sort_key(Address(segment.family, first)),
            keys.ATTR_START: format_address(segment.family, segment.start),
            keys.ATTR_END: format_address(segment.family, segment.end),
            keys.ATTR_DATA: data,
        }
        if index is not None and first == segment.start:
            item.update(index.attributes(version, segment.family, segment.start, data))
        yield item


def segment_values(
    segments: Sequence[Segment], rows: Sequence[SourceRow], column_types: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """The typed metadata of each segment: what the reverse indexes key on."""
    for segment in segments:
        yield typed_values(rows[segment.row].values, column_types)
