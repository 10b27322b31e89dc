"""Forward lookup: which range holds an address, in the active dataset version."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ParamSpec, Protocol

from ipmeta import keys
from ipmeta.bogons import is_bogon
from ipmeta.errors import (
    IpAddressNotFound,
    IpAddressReserved,
    IpmetaError,
    NoDataset,
    VersionInvalid,
    VersionNotFound,
)
from ipmeta.ips import Address, address_value, format_address, range_cidrs
from ipmeta.range_cache import RangeCache
from ipmeta.records import Cover, VersionMeta

_P = ParamSpec("_P")


class RangeReader(Protocol):
    """What a lookup needs from the data layer (``ipmeta.store.Store`` provides it)."""

    def read_active_version(self, *, consistent: bool = False) -> int | None: ...

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None: ...

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None: ...


class VersionedReader(RangeReader, Protocol):
    """A reader that also knows which versions are retained (for ``?version=``)."""

    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None: ...


@dataclass(frozen=True, slots=True)
class LookupResult:
    address: Address
    start: int
    end: int
    data: dict[str, Any]
    version: int
    bogon: bool

    def to_response(self, fields: Collection[str] | None = None) -> dict[str, Any]:
        """The API body; ``fields`` keeps only those data attributes (None keeps all)."""
        family = self.address.family
        data = self.data if fields is None else {k: v for k, v in self.data.items() if k in fields}
        return {
            "ip": str(self.address),
            "bogon": self.bogon,
            "range": {
                "start": format_address(family, self.start),
                "end": format_address(family, self.end),
                "cidrs": list(_cidrs(family, self.start, self.end)),
            },
            "data": data,
            "dataset": {"version": keys.format_version(self.version)},
        }

    def etag(self, variant: str = "") -> str:
        """Strong validator of one representation: the version's data never changes,
        so version and range identify the data, and ``variant`` the shape (fields)."""
        tag = f"{keys.format_version(self.version)}-{self.address.family}-{self.start:x}-{self.end:x}"
        if variant:
            tag += "-" + hashlib.blake2s(variant.encode(), digest_size=6).hexdigest()
        return f'"{tag}"'


@lru_cache(maxsize=4096)
def _cidrs(family: int, start: int, end: int) -> tuple[str, ...]:
    """Popular ranges answer again and again; summarizing one costs more than the lookup."""
    return tuple(range_cidrs(family, start, end))


class ActiveVersionCache:
    """The active version, re-read at most once per ``ttl_seconds`` per container.

    A pointer read per request would double the reads of every lookup; a few
    seconds of staleness after an activation is harmless because old versions
    are kept for a grace period longer than this TTL.
    """

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._version: int | None = None
        self._read_at = float("-inf")

    def get(self, reader: RangeReader) -> int | None:
        now = self._clock()
        if now - self._read_at < self.ttl_seconds:
            return self._version
        with self._lock:
            # Another thread may have refreshed while this one waited for the lock.
            if self._clock() - self._read_at >= self.ttl_seconds:
                self._version = reader.read_active_version()
                self._read_at = self._clock()
            return self._version

    def invalidate(self) -> None:
        with self._lock:
            self._read_at = float("-inf")


def lookup_address(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None = None
) -> LookupResult:
    """One Query: the piece starting at or before the address, then its ``end`` decides.

    An address after the end of the piece found lies in a gap, so it is not
    found; it must not answer with the previous range.

    A bogon answers from the data when the dataset has a range for it (internal
    datasets do); otherwise it is reserved, which says more than "not found".

    With a ``cache``, an address inside a run an earlier Query of this version
    proved (a range or a gap) answers with no Query at all.
    """
    if cache is not None:
        span = cache.find(version, address.family, address.value)
        if span is not None:
            return _answer(address, version, span.start, span.end, span.data)
    return _query_and_answer(reader, version, address, cache)


def _query_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None
) -> LookupResult:
    start, end, data = query_span(reader, version, address)
    if cache is not None:
        cache.put(version, address.family, start, end, data)
    return _answer(address, version, start, end, data)


def query_span(reader: RangeReader, version: int, address: Address) -> tuple[int, int, dict[str, Any] | None]:
    """The run of addresses one Query proves: ``(start, end, data)``, ``data`` None for a gap.

    The Query returns the piece that starts last at or before the address. If
    the address is within the range's ``end``, the run is the whole range as the
    dataset defines it (it may cross buckets; every address of it answers the
    same for this version). If the address is past it, no piece starts between
    that piece and the address and pieces never overlap, so ``end + 1`` up to
    the address is a gap. If the Query finds nothing, the bucket may lie in one
    of the version's covers (whole buckets a range owns with no item,
    ``ipmeta.covers``): the run is then the cover's whole range. Otherwise
    everything from the bucket's first address is a gap. A gap never reaches
    past the address asked (a range may start right after it) nor out of the
    bucket queried (another bucket may hold anything).
    """
    partition_key, sort_key = keys.lookup_key(version, address)
    item = reader.find_range_piece(partition_key, sort_key)
    bucket = keys.bucket_of(address)
    if item is None:
        cover = reader.find_cover(version, address.family, bucket)
        if cover is not None:
            return cover.start, cover.end, cover.data
        return keys.bucket_bounds(address.family, bucket)[0], address.value, None
    end = address_value(address.family, item[keys.ATTR_END])
    if address.value > end:
        # The piece may be a range's tail from the bucket before: the gap starts in this one.
        return max(end + 1, keys.bucket_bounds(address.family, bucket)[0]), address.value, None
    start = address_value(address.family, item[keys.ATTR_START])
    return start, end, item.get(keys.ATTR_DATA, {})


def _answer(
    address: Address, version: int, start: int, end: int, data: dict[str, Any] | None
) -> LookupResult:
    """The result for ``address`` in a run; a gap raises. Bogon is of the address, never cached."""
    bogon = is_bogon(address)
    if data is not None:
        return LookupResult(address, start, end, data, version, bogon)
    if bogon:
        raise IpAddressReserved(
            f"{address} is a special-purpose (bogon) address and dataset "
            f"{keys.format_version(version)} has no range for it"
        )
    raise IpAddressNotFound(f"{address} is not in any range of dataset {keys.format_version(version)}")


def lookup_active(
    reader: RangeReader, cache: ActiveVersionCache, address: Address, ranges: RangeCache | None = None
) -> LookupResult:
    version = cache.get(reader)
    if version is None:
        raise NoDataset("no dataset is loaded yet; load one with `ipmeta load`")
    return lookup_address(reader, version, address, ranges)


def parse_version(text: str) -> int:
    """``v3`` or ``3``, as the API prints versions and as people type them."""
    digits = text[1:] if text[:1] in ("v", "V") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:
        raise VersionInvalid(f"{text[:40]!r} is not a dataset version; versions look like v3")
    return int(digits)


def resolve_version(reader: VersionedReader, cache: ActiveVersionCache, requested: str | None) -> int:
    """The version a request reads: the active one, or a retained one it names.

    Naming a version costs one GetItem for its metadata; the default path costs
    nothing beyond the cached pointer.
    """
    if requested is None:
        version = cache.get(reader)
        if version is None:
            raise NoDataset("no dataset is loaded yet; load one with `ipmeta load`")
        return version
    version = parse_version(requested)
    meta = reader.get_version_meta(version, consistent=False)
    if meta is None or not meta.retained:
        raise VersionNotFound(
            f"dataset {keys.format_version(version)} is not retained; GET /v1/datasets lists those that are"
        )
    return version


def lookup_many(
    reader: RangeReader,
    version: int,
    addresses: Iterable[Address],
    executor: Executor,
    cache: RangeCache | None = None,
) -> dict[Address, LookupResult | IpmetaError]:
    """Each distinct address queried once, concurrently as far as ``executor`` allows.

    Addresses the cache answers are answered here, in the caller's thread:
    handing them to the pool would cost more than answering them.
    """
    distinct = list(dict.fromkeys(addresses))
    answers: dict[Address, LookupResult | IpmetaError] = {}
    if cache is not None:
        for address in distinct:
            span = cache.find(version, address.family, address.value)
            if span is not None:
                answers[address] = _caught(_answer, address, version, span.start, span.end, span.data)
    misses = [address for address in distinct if address not in answers]

    def one(address: Address) -> LookupResult | IpmetaError:
        return _caught(_query_and_answer, reader, version, address, cache)

    answers.update(zip(misses, executor.map(one, misses), strict=True))
    return {address: answers[address] for address in distinct}


def _caught(
    answer: Callable[_P, LookupResult], *args: _P.args, **kwargs: _P.kwargs
) -> LookupResult | IpmetaError:
    """A batch answers each address on its own: a gap is that address's error, not the batch's."""
    try:
        return answer(*args, **kwargs)
    except (IpAddressNotFound, IpAddressReserved) as error:
        return error
