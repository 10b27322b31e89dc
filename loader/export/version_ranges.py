"""A loaded version's ranges, read back from the table in address order.

``iter_version_ranges`` reads a version's range items partition by partition
(``(family, bucket)`` order, one ascending Query each), so ranges arrive sorted
by (family, start) and memory holds one page. A range is stored once per bucket
it touches, each piece carrying the whole range's ``start`` and ``end``; it is
yielded once, with ``data`` as stored, Numbers exact (``Decimal``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ipmeta import keys
from ipmeta.ips import Family, address_value
from ipmeta.records import Cover
from loader.errors import LoadNotFound
from loader.export.files import ExportRange

if TYPE_CHECKING:
    from loader.store.table import LoaderTable


def iter_version_ranges(
    table: LoaderTable, version: int, covers: Sequence[ExportRange] = ()
) -> Iterator[ExportRange]:
    """Every range of ``version`` in (family, start) order, each once; ``covers`` merged in."""
    manifest = table.get_manifest(version)
    if manifest is None:
        raise LoadNotFound(f"{keys.format_version(version)} has no manifest: it is not a loaded version")
    partitions = sorted(
        (*parsed, partition)
        for partition in manifest.partitions
        if (parsed := table.space.parse_partition_key(partition)) is not None and parsed[0] == version
    )
    stored = (
        _range_of(family, item)
        for _, family, _, partition in partitions
        for item in table.iter_partition(partition)
    )
    ordered = sorted(covers, key=lambda cover: (cover.family, cover.start))
    last: tuple[int, int] | None = None
    for item in heapq.merge(stored, ordered, key=lambda each: (each.family, each.start)):
        # A range across bucket edges is an item in each bucket (and a cover's head item): once.
        if (item.family, item.start) != last:
            last = (item.family, item.start)
            yield item


def covers_as_ranges(covers: Iterable[Cover]) -> list[ExportRange]:
    """A version's cover list (``Store.read_covers``) as ranges to merge."""
    return [
        ExportRange(4 if cover.family == 4 else 6, cover.start, cover.end, cover.data) for cover in covers
    ]


def _range_of(family: Family, item: Mapping[str, Any]) -> ExportRange:
    return ExportRange(
        family,
        address_value(family, str(item[keys.ATTR_START])),
        address_value(family, str(item[keys.ATTR_END])),
        item.get(keys.ATTR_DATA) or {},
    )
