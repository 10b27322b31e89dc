"""A version's cover list, as lookups consult it: which cover holds a bucket.

A cover is a run of whole buckets that one range owns with no item of its own
(``loader.pipeline.scan`` explains when a load makes one). A lookup whose Query finds
nothing in its bucket asks the cover list before answering "not found", so a
lookup still costs exactly one Query; the list itself is read once per
container and version (``CoverCatalog``), like the pointer, and only for
versions that have covers at all.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence

from ipmeta.schema.records import Cover


class CoverIndex:
    """Covers by (family, first bucket), found by bisection."""

    def __init__(self, covers: Sequence[Cover]) -> None:
        self._by_family: dict[int, tuple[list[int], list[Cover]]] = {}
        for family in (4, 6):
            ordered = sorted(
                (cover for cover in covers if cover.family == family), key=lambda c: c.first_bucket
            )
            self._by_family[family] = ([cover.first_bucket for cover in ordered], ordered)

    def find(self, family: int, bucket: int) -> Cover | None:
        firsts, covers = self._by_family.get(family, ([], []))
        at = bisect.bisect_right(firsts, bucket) - 1
        if at >= 0 and covers[at].first_bucket <= bucket <= covers[at].last_bucket:
            return covers[at]
        return None


class CoverCatalog:
    """Each version's cover index, read once per container: a version's covers never change."""

    def __init__(self, read_covers: Callable[[int], Sequence[Cover]], size: int = 4) -> None:
        self._read = read_covers
        self._size = size
        self._known: dict[int, CoverIndex] = {}
        self._lock = threading.Lock()

    def get(self, version: int) -> CoverIndex:
        with self._lock:
            known = self._known.get(version)
        if known is not None:
            return known
        index = CoverIndex(self._read(version))
        with self._lock:
            if len(self._known) >= self._size:
                self._known.pop(next(iter(self._known)))
            self._known[version] = index
        return index
