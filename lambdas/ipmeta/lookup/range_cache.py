"""The lookup's range cache: answers a container already holds, kept by range and version.

One Query proves something about a whole run of addresses, not just the one
asked: the range it finds holds every address from its ``start`` to its
``end``, and an address past that end lies in a gap that runs back to the end
of that range (``ipmeta.lookup.runs`` states the gap rule). The cache keeps
these runs (``runs.Run``), so a later lookup of any address inside one needs no Query.

- **By version.** A run is true of one dataset version only; entries of
  another version are never consulted, so once the pointer moves the old
  version's entries are unreachable, and LRU eviction reclaims their bytes.
  A version is named by its key (``KeySpace.version_key``: ``v7``, ``ds#city#v7``),
  so the datasets of a table share one cache and one byte bound, never an entry.
- **Agnostic of the source.** Callers put runs that are true of the version
  (an item's range, a gap, a cover); the cache never derives one itself.
- **Bounded in bytes**, least recently used out first. Each entry's size is
  estimated when it is admitted (``entry_bytes``).

Structure and cost, with n entries of one (version, family):

- ``find``: a bisection over the sorted run starts (in C), one bound check,
  and a move to the LRU end of an ``OrderedDict``: O(log n), about a
  microsecond, under one lock.
- ``put`` and each eviction: a bisection plus an insertion into (deletion
  from) two Python lists, O(n) pointer moves: about 10 µs at 50,000 entries
  (``python -m bench.cache`` reports the totals). Only a miss pays them, and a
  miss also pays a Query, which costs far more.

Thread-safe: a batch looks addresses up from a thread pool.
"""

from __future__ import annotations

import sys
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Final

from ipmeta.lookup.runs import Run

#: What an entry costs beyond its bounds and its data: the run (a 4-tuple), the
#: entry holding it (3 slots), its node in the LRU ``OrderedDict`` and its slots
#: in the two sorted lists. tracemalloc measures about 230 to 300 bytes on
#: CPython 3.11, depending on how full the dict's table happens to be; the upper
#: end keeps the bound a bound (``tests/unit/test_range_cache.py`` checks the
#: estimate against tracemalloc).
ENTRY_OVERHEAD_BYTES: Final = 304


class _Shelf:
    """The runs of one version and family, ordered by their first address."""

    __slots__ = ("entries", "key", "starts")

    def __init__(self, key: tuple[Hashable, int]) -> None:
        self.key = key
        self.starts: list[int] = []
        self.entries: list[_Entry] = []


class _Entry:
    """One cached run, with what eviction needs: its size and its shelf (hashed by identity)."""

    __slots__ = ("nbytes", "run", "shelf")

    def __init__(self, run: Run, nbytes: int, shelf: _Shelf) -> None:
        self.run = run
        self.nbytes = nbytes
        self.shelf = shelf


def _value_bytes(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 0  # singletons, shared by every entry
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_value_bytes(k) + _value_bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return sys.getsizeof(value) + sum(_value_bytes(inner) for inner in value)
    return sys.getsizeof(value)


def entry_bytes(start: int, end: int, data: dict[str, Any] | None) -> int:
    """The estimated bytes an entry holds, from the sizes of the objects it keeps alive.

    The data's top-level names are interned (``RangeCache.put``): a dataset has
    a few columns, and each name is held once per container, not per entry.
    Every value is counted as the entry's own, which overestimates values that
    happen to be shared (small integers), never underestimates.
    """
    held = ENTRY_OVERHEAD_BYTES + sys.getsizeof(start) + sys.getsizeof(end)
    if data is not None:
        held += sys.getsizeof(data) + sum(_value_bytes(value) for value in data.values())
    return held


class RangeCache:
    """Runs of addresses per (version, family), least recently used evicted first.

    ``max_bytes`` <= 0 disables it: nothing is admitted, every lookup queries.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.hits = 0
        self.misses = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self._shelves: dict[tuple[Hashable, int], _Shelf] = {}
        #: Keys are the entries themselves (hashed by identity); values are unused.
        self._lru: OrderedDict[_Entry, None] = OrderedDict()

    @property
    def bytes(self) -> int:
        """The estimated bytes held now: at most ``max_bytes``."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._lru)

    def find(self, version: Hashable, family: int, value: int, *, count: bool = True) -> Run | None:
        """The cached run of ``version`` that holds address ``value``, if any.

        ``count`` False leaves ``hits`` and ``misses`` alone: a look that is not a lookup's answer.
        """
        with self._lock:
            shelf = self._shelves.get((version, family))
            if shelf is not None:
                at = bisect_right(shelf.starts, value) - 1
                if at >= 0:
                    entry = shelf.entries[at]
                    if value <= entry.run.end:
                        self._lru.move_to_end(entry)
                        self.hits += count
                        return entry.run
            self.misses += count
            return None

    def put(self, version: Hashable, family: int, run: Run) -> None:
        """Remember that ``run`` is true of ``version``: its addresses answer ``run.data`` (None: a gap).

        A run with the start of a cached one replaces it only if it reaches
        further: a gap is found again, longer, when an address past the first
        one asked is looked up.
        """
        if not self.max_bytes:
            return
        if run.data is not None:
            run = run._replace(data={sys.intern(name): value for name, value in run.data.items()})
        nbytes = entry_bytes(run.start, run.end, run.data) + (sys.getsizeof(run.whole) if run.whole else 0)
        if nbytes > self.max_bytes:
            return
        with self._lock:
            key = (version, family)
            shelf = self._shelves.get(key)
            if shelf is None:
                shelf = self._shelves[key] = _Shelf(key)
            at = bisect_left(shelf.starts, run.start)
            entry = _Entry(run, nbytes, shelf)
            if at < len(shelf.starts) and shelf.starts[at] == run.start:
                held = shelf.entries[at]
                if held.run.end >= run.end:
                    return
                del self._lru[held]
                self._bytes -= held.nbytes
                shelf.entries[at] = entry
            else:
                shelf.starts.insert(at, run.start)
                shelf.entries.insert(at, entry)
            self._lru[entry] = None
            self._bytes += nbytes
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.max_bytes:
            entry, _ = self._lru.popitem(last=False)
            shelf = entry.shelf
            at = bisect_left(shelf.starts, entry.run.start)
            del shelf.starts[at]
            del shelf.entries[at]
            self._bytes -= entry.nbytes
            if not shelf.starts:
                del self._shelves[shelf.key]

    def clear(self) -> None:
        with self._lock:
            self._shelves.clear()
            self._lru.clear()
            self._bytes = 0
