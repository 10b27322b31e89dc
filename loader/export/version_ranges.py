"""A loaded version's ranges, read back from the table in address order.

``iter_version_ranges`` reads a version's range items partition by partition
(``(family, bucket)`` order, one ascending Query each), so ranges arrive sorted
by (family, start) and memory holds one page. A range is stored once per bucket
it touches, each piece carrying the whole range's ``start`` and ``end``; it is
yielded once, with ``data`` as stored, Numbers exact (``Decimal``).

A delta version answers with its own entries where it has them (ranges, and
gaps where its base has ranges and it has none) and with its base everywhere
else (``ipmeta.lookup.runs``, "Delta versions"). Its ranges are that view: ``overlay``
walks the delta's entries and the base's ranges in one pass, both sorted, each
base range cut where delta entries lie over it. The delta is read twice (once
to cut, once for its own ranges) rather than held in memory.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ipmeta.schema import keys
from ipmeta.schema.ips import Family, address_value
from ipmeta.schema.records import Cover, VersionMeta
from loader.errors import LoadNotFound
from loader.export.files import ExportRange

if TYPE_CHECKING:
    from loader.store.table import LoaderTable


#: A delta's entry: (family, start, end, data), ``data`` None for a gap.
Entry = tuple[Family, int, int, Mapping[str, Any] | None]


def ranges_of_version(table: LoaderTable, meta: VersionMeta) -> Iterator[ExportRange]:
    """Every range a retained version answers with, its covers and (a delta's) base included."""
    covers = table.lookup.read_covers(meta.version) if meta.covers else []
    return iter_version_ranges(table, meta.version, covers, base=meta.base)


def iter_version_ranges(
    table: LoaderTable, version: int, covers: Sequence[Cover] = (), *, base: int = 0
) -> Iterator[ExportRange]:
    """Every range of ``version`` in (family, start) order, each once; its ``covers`` merged in.

    With ``base``, ``version`` is a delta over it: the ranges are the combined view.
    """
    if not base:
        for family, start, end, data in _entries(table, version, covers):
            if data is not None:
                yield ExportRange(family, start, end, data)
        return
    base_covers = table.lookup.read_covers(base)
    yield from overlay(
        (
            ExportRange(family, start, end, data)
            for family, start, end, data in _entries(table, base, base_covers)
            if data is not None
        ),
        _entries(table, version, covers),
        _entries(table, version, covers),
    )


def overlay(
    base: Iterable[ExportRange], cutting: Iterable[Entry], delta: Iterable[Entry]
) -> Iterator[ExportRange]:
    """The base's ranges where no delta entry lies, and the delta's ranges, in (family, start) order.

    ``cutting`` and ``delta`` are the same entries, read twice: one stream cuts the
    base, the other is merged in. Entries are disjoint and sorted, as are base ranges.
    """
    uncovered = _cut(base, iter(cutting))
    ranges = (ExportRange(family, start, end, data) for family, start, end, data in delta if data is not None)
    yield from heapq.merge(uncovered, ranges, key=lambda each: (each.family, each.start))


def _cut(base: Iterable[ExportRange], entries: Iterator[Entry]) -> Iterator[ExportRange]:
    """Each base range without the stretches delta entries hold."""
    pending = next(entries, None)
    for each in base:
        cursor = each.start
        # Entries wholly before this range cut nothing more (the base's ranges are sorted too).
        while pending is not None and (pending[0], pending[2]) < (each.family, cursor):
            pending = next(entries, None)
        while pending is not None and pending[0] == each.family and pending[1] <= each.end:
            if pending[1] > cursor:
                yield ExportRange(each.family, cursor, pending[1] - 1, each.data)
            cursor = max(cursor, pending[2] + 1)
            if pending[2] > each.end:
                break  # it reaches into the next base range: keep it
            pending = next(entries, None)
        if cursor <= each.end:
            yield ExportRange(each.family, cursor, each.end, each.data)


def _entries(table: LoaderTable, version: int, covers: Sequence[Cover]) -> Iterator[Entry]:
    """A version's items (a delta's gaps included, its markers not) and covers, each once, in order."""
    manifest = table.manifests.get(version)
    if manifest is None:
        raise LoadNotFound(f"{keys.format_version(version)} has no manifest: it is not a loaded version")
    partitions = sorted(
        (*parsed, partition)
        for partition in manifest.partitions
        if (parsed := table.space.parse_partition_key(partition)) is not None and parsed[0] == version
    )
    stored = (
        _entry_of(family, item)
        for _, family, _, partition in partitions
        for item in table.partitions.read(partition)
        if keys.ATTR_START in item  # a delta's markers hold no range
    )
    ordered = sorted(
        ((_family(cover.family), cover.start, cover.end, cover.data) for cover in covers),
        key=lambda entry: (entry[0], entry[1]),
    )
    last: tuple[int, int] | None = None
    for entry in heapq.merge(stored, ordered, key=lambda each: (each[0], each[1])):
        # A range across bucket edges is an item in each bucket (and a cover's head item): once.
        if (entry[0], entry[1]) != last:
            last = (entry[0], entry[1])
            yield entry


def _family(family: int) -> Family:
    return 4 if family == 4 else 6


def _entry_of(family: Family, item: Mapping[str, Any]) -> Entry:
    return (
        family,
        address_value(family, str(item[keys.ATTR_START])),
        address_value(family, str(item[keys.ATTR_END])),
        None if item.get(keys.ATTR_GAP) else item.get(keys.ATTR_DATA) or {},
    )
