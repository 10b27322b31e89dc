"""``diff_partition``: what a delta version writes for one partition, against its base.

A reload of a real database changes 1-3% of its ranges, spread over almost
every bucket (the issue's measurements on GeoLite2-City), so a reload that
writes only what changed must tell changes apart range by range. Resolve
(``loader.pipeline.resolve``) has the new release's items of one partition in
hand; this reads the base version's items of the same buckets and keeps, per
bucket:

- every new item that is not identical to the base's item at the same
  address (same first address, start, end and data), and every item of a
  segment that touches its run's edge (its true bounds are joined later, in
  ``plan_writes``; writing one that turns out equal is harmless);
- a *gap item* over every stretch the base holds and the new release does not;
- ``next`` on each, the first address of the next one in the bucket, and a
  *marker* at the bucket's offset 0 naming the first, so a lookup knows how far
  the base's answer reaches (``ipmeta.lookup.runs``, "Delta versions").

The base is read with one Query per bucket, eventually consistent (the base
never changes), rather than from a snapshot staged when the base was loaded: a
Query reads each item once, at half a read unit per 4 KB (about $0.05 for all
3.6 M items of GeoLite2-City), needs nothing kept beside the table, and can
never disagree with what the lookups read. Memory holds one partition's items
and its base's, both bounded by ``--partition-rows``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ipmeta.lookup.covers import CoverIndex
from ipmeta.schema import keys
from ipmeta.schema.ips import Family, address_value
from ipmeta.schema.records import Cover
from ipmeta.store.dynamodb import deserialize_item
from loader.formats import stored_data
from loader.store.partition_items import canonical_data
from loader.store.table import LoaderTable

#: A delta line's ``next`` when its item is the bucket's last, and a marker's start and end.
NONE: int = -1


class BaseReader(Protocol):
    """The base version's items of one bucket (exact values, sort-key order), and its cover there."""

    def items_of(self, family: Family, bucket: int) -> Iterator[dict[str, Any]]: ...

    def cover_of(self, family: Family, bucket: int) -> Cover | None: ...


@dataclass(frozen=True)
class TableBase:
    """A base version read from the table (what resolve uses in AWS and locally)."""

    table: LoaderTable
    version: int

    def items_of(self, family: Family, bucket: int) -> Iterator[dict[str, Any]]:
        partition = self.table.space.partition_key(self.version, family, bucket)
        return self.table.partitions.read(partition, consistent=False)

    def cover_of(self, family: Family, bucket: int) -> Cover | None:
        return self.table.lookup.find_cover(self.version, family, bucket)


@dataclass
class DiffCounts:
    """What a partition's diff found, for the load's report."""

    base_items: int = 0  #: the base's items (and cover-only buckets) in these buckets
    unchanged: int = 0  #: new items identical to the base's, not written
    replaced: int = 0  #: new items where the base has an item at the same address, but another
    added: int = 0  #: new items where the base has none at that address
    gaps: int = 0  #: stretches the base holds and the new release does not
    markers: int = 0
    items_per_bucket: dict[str, int] = field(default_factory=dict)  #: bucket (hex) -> delta items

    @property
    def items(self) -> int:
        return self.replaced + self.added + self.gaps + self.markers


@dataclass(frozen=True, slots=True)
class _Piece:
    """An item of the new release, as resolve staged it: ``[run,flags,bucket,first,start,end,values]``."""

    run: int
    flags: int
    first: int
    start: int
    end: int
    text: str  #: the values' JSON text

    @classmethod
    def parse(cls, line: str) -> _Piece:
        run, flags, _, first, start, end, rest = line.split(",", 6)
        return cls(int(run[1:]), int(flags), int(first), int(start), int(end), rest[:-1])


@dataclass(frozen=True, slots=True)
class _Held:
    """A base item's stretch inside the bucket, and what it holds."""

    first: int
    start: int
    end: int
    data: Any


def diff_partition(
    family: Family,
    lines: Sequence[tuple[int, str]],
    buckets: Sequence[int],
    base: BaseReader,
    *,
    columns: Sequence[str],
    column_types: Mapping[str, str],
) -> tuple[list[tuple[int, str]], DiffCounts]:
    """The delta lines of one partition (``(bucket, line)``, as resolve deals items) and their counts.

    A delta line is ``[run,flags,bucket,first,start,end,next,values]``: ``values``
    ``null`` for a gap; a marker has ``start`` and ``end`` -1.
    """
    by_bucket: dict[int, list[_Piece]] = {}
    for bucket, line in lines:
        by_bucket.setdefault(bucket, []).append(_Piece.parse(line))
    typed = _Typed(columns, [column_types[column] for column in columns])
    counts = DiffCounts()
    delta: list[tuple[int, str]] = []
    for bucket in buckets:
        pieces = sorted(by_bucket.get(bucket, []), key=lambda piece: piece.first)
        held = _base_of_bucket(base, family, bucket)
        counts.base_items += len(held)
        kept = _changed(pieces, held, typed, counts)
        bucket_lines = _with_next(family, bucket, kept + _gaps(family, bucket, pieces, held), counts)
        if bucket_lines:
            counts.items_per_bucket[format(bucket, "x")] = len(bucket_lines)
        delta.extend((bucket, line) for line in bucket_lines)
    return delta, counts


class _Typed:
    """A new item's values as the base's item holds them, worked out once per distinct text."""

    def __init__(self, columns: Sequence[str], types: Sequence[str]) -> None:
        self.columns, self.types = columns, types
        self._known: dict[str, Any] = {}

    def __call__(self, text: str) -> Any:
        found = self._known.get(text)
        if found is None:
            found = self._known[text] = canonical_data(
                stored_data(self.columns, json.loads(text), self.types)
            )
        return found


def _base_of_bucket(base: BaseReader, family: Family, bucket: int) -> list[_Held]:
    """The base's items in the bucket, or its cover as one stretch over the whole bucket."""
    first_address = keys.bucket_bounds(family, bucket)[0]
    held = [
        _Held(
            keys.decode_sort_key(family, bucket, int(item[keys.SORT_KEY])),
            address_value(family, str(item[keys.ATTR_START])),
            address_value(family, str(item[keys.ATTR_END])),
            item.get(keys.ATTR_DATA) or {},
        )
        for item in base.items_of(family, bucket)
    ]
    if not held:
        cover = base.cover_of(family, bucket)
        if cover is not None and cover.data is not None:
            held.append(_Held(first_address, cover.start, cover.end, cover.data))
    return held


#: A delta item before ``next`` is known: (first, line without next and values, values text or null).
_Kept = tuple[int, str, str]


def _changed(
    pieces: Sequence[_Piece], held: Sequence[_Held], typed: _Typed, counts: DiffCounts
) -> list[_Kept]:
    at = {item.first: item for item in held}
    kept: list[_Kept] = []
    for piece in pieces:
        same = at.get(piece.first)
        if (
            same is not None
            and piece.flags == 0
            and (same.start, same.end) == (piece.start, piece.end)
            and same.data == typed(piece.text)
        ):
            counts.unchanged += 1
            continue
        if same is not None:
            counts.replaced += 1
        else:
            counts.added += 1
        head = f"[{piece.run},{piece.flags},{{bucket}},{piece.first},{piece.start},{piece.end}"
        kept.append((piece.first, head, piece.text))
    return kept


def _gaps(family: Family, bucket: int, pieces: Sequence[_Piece], held: Sequence[_Held]) -> list[_Kept]:
    """Stretches of the bucket the base holds and the new release does not."""
    last_address = keys.bucket_bounds(family, bucket)[1]
    covered = [(piece.first, min(piece.end, last_address)) for piece in pieces]
    gaps: list[_Kept] = []
    at = 0
    for item in sorted(held, key=lambda each: each.first):
        low, high = item.first, min(item.end, last_address)
        while at < len(covered) and covered[at][1] < low:
            at += 1
        cursor, scan = low, at
        while cursor <= high:
            if scan < len(covered) and covered[scan][0] <= cursor:
                cursor = covered[scan][1] + 1
                scan += 1
                continue
            stop = min(high, covered[scan][0] - 1) if scan < len(covered) else high
            gaps.append((cursor, f"[0,0,{{bucket}},{cursor},{cursor},{stop}", "null"))
            cursor = stop + 1
    return gaps


def _with_next(family: Family, bucket: int, kept: list[_Kept], counts: DiffCounts) -> list[str]:
    """The bucket's delta lines in address order, each naming the next one's first address."""
    if not kept:
        return []
    kept.sort(key=lambda entry: entry[0])
    first_address = keys.bucket_bounds(family, bucket)[0]
    lines = []
    if kept[0][0] != first_address:
        counts.markers += 1
        lines.append(f"[0,0,{bucket},{first_address},{NONE},{NONE},{kept[0][0]},null]")
    counts.gaps += sum(1 for _, _, text in kept if text == "null")
    for position, (_, head, text) in enumerate(kept):
        following = kept[position + 1][0] if position + 1 < len(kept) else NONE
        lines.append(f"{head.format(bucket=bucket)},{following},{text}]")
    return lines


# -- against a release that was never loaded: ``ipmeta plan --previous`` -----------------------------


class StagedBase:
    """A dry run's items held in memory by bucket, standing in for a loaded base.

    ``ipmeta plan --previous`` diffs a release against the one before it without
    a table: the same ``diff_partition`` a load runs, so its estimate counts what
    a delta load would write. It holds the previous release whole (a plan is a
    one-off on a workstation, not a pipeline task).
    """

    def __init__(self, items: Iterable[Mapping[str, Any]], covers: Sequence[Cover]) -> None:
        self._by_bucket: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for raw in items:
            item = deserialize_item(raw)
            partition = str(item[keys.PARTITION_KEY])
            family, label = partition.rsplit("#", 2)[-2:]
            bucket = (int(family), int(label, 10 if family == "4" else 16))
            self._by_bucket.setdefault(bucket, []).append(item)
        for held in self._by_bucket.values():
            held.sort(key=lambda item: int(item[keys.SORT_KEY]))
        self._covers = CoverIndex(covers)
        self.buckets = set(self._by_bucket) | {
            (cover.family, bucket)
            for cover in covers
            for bucket in range(cover.first_bucket, cover.last_bucket + 1)
        }

    def items_of(self, family: Family, bucket: int) -> Iterator[dict[str, Any]]:
        return iter(self._by_bucket.get((family, bucket), []))

    def cover_of(self, family: Family, bucket: int) -> Cover | None:
        return self._covers.find(family, bucket)
