"""Forward lookup in one dataset version: which range holds an address (``ipmeta.answers`` fans out)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from ipmeta import keys
from ipmeta.bogons import is_bogon
from ipmeta.errors import IpAddressNotFound, IpAddressReserved
from ipmeta.ips import Address, address_value, range_cidrs
from ipmeta.range_cache import RangeCache
from ipmeta.records import Cover


class RangeReader(Protocol):
    """What a lookup needs from the data layer (``ipmeta.store.Store`` provides it), in one dataset."""

    @property
    def space(self) -> keys.KeySpace: ...

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None: ...

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None: ...


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The range of one dataset version that holds an address (``ipmeta.answers`` combines datasets)."""

    address: Address
    start: int
    end: int
    data: dict[str, Any]
    version: int
    bogon: bool


@lru_cache(maxsize=4096)
def cidrs_of(family: int, start: int, end: int) -> tuple[str, ...]:
    """Popular ranges answer again and again; summarizing one costs more than the lookup."""
    return tuple(range_cidrs(family, start, end))


class Run(NamedTuple):
    """A run of addresses one lookup proves: ``data`` None for a gap; ``whole`` the answering
    range's bounds where they reach past the run (a delta's base, cut at the next delta item)."""

    start: int
    end: int
    data: dict[str, Any] | None
    whole: tuple[int, int] | None = None

    @property
    def bounds(self) -> tuple[int, int]:
        return self.whole or (self.start, self.end)


def lookup_address(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None = None, base: int = 0
) -> LookupResult:
    """One Query (two for a delta version): the piece at or before the address, then its ``end`` decides.

    An address after the end of the piece found lies in a gap, so it is not
    found; it must not answer with the previous range.

    A bogon answers from the data when the dataset has a range for it (internal
    datasets do); otherwise it is reserved, which says more than "not found".

    With a ``cache``, an address inside a run an earlier Query of this version
    proved (a range or a gap) answers with no Query at all.
    """
    if cache is not None:
        span = cache.find(reader.space.version_key(version), address.family, address.value)
        if span is not None:
            return answer_span(address, version, *span.bounds, span.data)
    return query_and_answer(reader, version, address, cache, base)


def query_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None, base: int = 0
) -> LookupResult:
    return remember_and_answer(reader, version, address, cache, query_span(reader, version, address, base))


def remember_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None, run: Run
) -> LookupResult:
    """Put the run a lookup proved in the cache (under its version), and answer from it."""
    if cache is not None:
        cache.put(
            reader.space.version_key(version), address.family, run.start, run.end, run.data, whole=run.whole
        )
    return answer_span(address, version, *run.bounds, run.data)


def query_span(reader: RangeReader, version: int, address: Address, base: int = 0) -> Run:
    """The run one lookup proves, the Queries one after the other (``ipmeta.answers`` sends them together)."""
    item = reader.find_range_piece(*reader.space.lookup_key(version, address))
    if not base:
        return span_of(reader, version, address, item)
    base_item = reader.find_range_piece(*reader.space.lookup_key(base, address))
    return delta_span(reader, version, address, item, base=base, base_item=base_item)


def span_of(reader: RangeReader, version: int, address: Address, item: dict[str, Any] | None) -> Run:
    """The run a full version's Query proves: ``(start, end, data)``, ``data`` None for a gap.

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
    bucket = keys.bucket_of(address)
    if item is None:
        cover = reader.find_cover(version, address.family, bucket)
        if cover is not None:
            return Run(cover.start, cover.end, cover.data)
        return Run(keys.bucket_bounds(address.family, bucket)[0], address.value, None)
    end = address_value(address.family, item[keys.ATTR_END])
    if address.value > end:
        # The piece may be a range's tail from the bucket before: the gap starts in this one.
        return Run(max(end + 1, keys.bucket_bounds(address.family, bucket)[0]), address.value, None)
    start = address_value(address.family, item[keys.ATTR_START])
    return Run(start, end, item.get(keys.ATTR_DATA, {}))


def delta_span(
    reader: RangeReader,
    version: int,
    address: Address,
    item: dict[str, Any] | None,
    *,
    base: int,
    base_item: dict[str, Any] | None,
) -> Run:
    """The run a delta version's two Queries prove: its own item where it holds one, else its base's.

    **Delta versions.** A delta holds only what changed from its base (a full
    version): the new release's ranges that are not identical to one of the
    base, *gap items* where the base has ranges and the release has none, and
    a cover list of its own (its ranges' covers, and *gap covers* over buckets
    the base has ranges in and the release has nothing in). An address is
    answered by the delta where a delta item (or cover) holds it, and by the
    base everywhere else, so the answer is the new release's exactly.

    Where the base answers, the run it proves is cut to the stretch between
    delta items: the delta item before the address names in ``next`` where the
    following one starts, and a *marker* at the bucket's offset 0 names the
    first; a bucket with neither has no delta item, so the whole bucket falls
    through. The run never leaves the bucket: the next bucket may hold changes.
    """
    family, bucket = address.family, keys.bucket_of(address)
    first, last = keys.bucket_bounds(family, bucket)
    if item is not None and keys.ATTR_START in item:
        start = address_value(family, item[keys.ATTR_START])
        end = address_value(family, item[keys.ATTR_END])
        if address.value <= end:  # held by the delta: a range, or a gap
            return Run(start, end, None if item.get(keys.ATTR_GAP) else item.get(keys.ATTR_DATA, {}))
        free = max(end + 1, first), _before_next(item, last)
    elif item is not None:  # the marker: no delta item from the bucket's start to the first one
        free = first, _before_next(item, last)
    else:
        cover = reader.find_cover(version, family, bucket)
        if cover is not None:
            return Run(cover.start, cover.end, cover.data)
        free = first, last
    # The base's answer holds up to the next delta item; its range is the new release's too
    # (a range only the base has, or only the new release has, is a delta item or a gap).
    start, end, data = span_of(reader, base, address, base_item)[:3]
    run = Run(max(start, free[0]), min(end, free[1]), data)
    return run if data is None or (run.start, run.end) == (start, end) else run._replace(whole=(start, end))


def _before_next(item: dict[str, Any], last: int) -> int:
    """The last address before the next delta item of the bucket (its last address if none)."""
    following = item.get(keys.ATTR_NEXT)
    return int(following) - 1 if following is not None else last


def answer_span(
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
