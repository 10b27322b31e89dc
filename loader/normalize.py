"""From source rows to the items a dataset version is made of. Pure functions.

1. ``resolve_last_wins``: overlapping rows become non-overlapping segments; a
   later row wins the addresses it shares with earlier ones, as if rows were
   writes applied in file order (MaxMind's DB writers behave the same way).
2. ``infer_column_types``: a column whose every value is an integer is stored
   as a Number; anything else stays a String.
3. ``build_items``: each segment is cut at bucket boundaries into items keyed by
   ``ipmeta.keys``.
4. ``shuffle_items``/``chunk``: sorted input would heat one partition at a time,
   so items are shuffled (deterministically, seeded by the source's checksum,
   so a re-run produces the very same chunks) and cut into chunks.
"""

from __future__ import annotations

import heapq
import itertools
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ipmeta import keys
from ipmeta.ips import Address, Family, format_address
from loader.source import SourceRow

_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")


@dataclass(frozen=True, slots=True)
class Segment:
    """Addresses ``start..end`` answer with the metadata of ``rows[row]``."""

    family: Family
    start: int
    end: int
    row: int


def resolve_last_wins(rows: Sequence[SourceRow]) -> tuple[list[Segment], int]:
    """Non-overlapping segments where the latest covering row wins.

    A sweep over every start and end+1 keeps the covering rows in a heap keyed
    by file position; expired rows are dropped lazily when they reach the top.
    Returns the segments (sorted by family, start) and the number of rows that
    overlapped an earlier or later row.
    """
    segments: list[Segment] = []
    overlapping_rows = 0
    families: tuple[Family, Family] = (4, 6)
    for family in families:
        indexes = sorted(
            (i for i, row in enumerate(rows) if row.family == family), key=lambda i: rows[i].start
        )
        family_segments, overlaps = _sweep(rows, indexes, family)
        segments.extend(family_segments)
        overlapping_rows += overlaps
    return segments, overlapping_rows


def _sweep(rows: Sequence[SourceRow], by_start: list[int], family: Family) -> tuple[list[Segment], int]:
    points = sorted({rows[i].start for i in by_start} | {rows[i].end + 1 for i in by_start})
    active: list[tuple[int, int]] = []  # (-row index, row index): the latest row on top
    segments: list[Segment] = []
    overlapping: set[int] = set()
    next_row = 0
    for here, after in itertools.pairwise(points):
        while next_row < len(by_start) and rows[by_start[next_row]].start == here:
            index = by_start[next_row]
            heapq.heappush(active, (-index, index))
            next_row += 1
        while active and rows[active[0][1]].end < here:
            heapq.heappop(active)
        if not active:
            continue
        owner = active[0][1]
        if len(active) > 1:
            # Lazily-deleted rows may linger under the top; only live ones overlap.
            live = [index for _, index in active if rows[index].end >= here]
            if len(live) > 1:
                overlapping.update(live)
        last = after - 1
        previous = segments[-1] if segments else None
        if previous is not None and previous.row == owner and previous.end + 1 == here:
            segments[-1] = Segment(family, previous.start, last, owner)
        else:
            segments.append(Segment(family, here, last, owner))
    return segments, len(overlapping)


def infer_column_types(rows: Sequence[SourceRow]) -> dict[str, str]:
    """``{"column": "N" | "S"}``: Number only if every non-empty value is a plain integer.

    Leading zeros keep a column a String: ``007`` is an identifier, not 7.
    """
    columns = list(rows[0].values) if rows else []
    types = dict.fromkeys(columns, "N")
    for row in rows:
        for column in columns:
            if types[column] == "N":
                value = row.values[column]
                if value and not _INTEGER.fullmatch(value):
                    types[column] = "S"
    return types


def typed_values(values: dict[str, str], column_types: dict[str, str]) -> dict[str, Any]:
    return {
        column: (int(value) if column_types.get(column) == "N" and value else value)
        for column, value in values.items()
    }


def build_items(
    version: int, rows: Sequence[SourceRow], segments: Sequence[Segment], column_types: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """Items of one version: each segment cut at bucket edges, keeping the segment's bounds."""
    for segment in segments:
        data = typed_values(rows[segment.row].values, column_types)
        start_text = format_address(segment.family, segment.start)
        end_text = format_address(segment.family, segment.end)
        for piece in keys.split_at_buckets(segment.family, segment.start, segment.end):
            yield {
                keys.PARTITION_KEY: keys.partition_key(version, piece.family, piece.bucket),
                keys.SORT_KEY: keys.encode_sort_key(Address(piece.family, piece.first)),
                keys.ATTR_START: start_text,
                keys.ATTR_END: end_text,
                keys.ATTR_DATA: data,
            }


def count_splits(segments: Sequence[Segment]) -> int:
    """Segments that cross at least one bucket boundary."""
    return sum(
        1
        for segment in segments
        if keys.bucket_of(Address(segment.family, segment.start))
        != keys.bucket_of(Address(segment.family, segment.end))
    )


def items_per_partition(items: Sequence[dict[str, Any]]) -> Counter[str]:
    return Counter(item[keys.PARTITION_KEY] for item in items)


def shuffle_items(items: list[dict[str, Any]], seed: str) -> None:
    random.Random(seed).shuffle(items)


def chunk(items: Sequence[dict[str, Any]], size: int) -> list[Sequence[dict[str, Any]]]:
    return [items[offset : offset + size] for offset in range(0, len(items), size)]
