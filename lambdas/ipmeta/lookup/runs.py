"""Forward lookup in one dataset version: which range holds an address."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved
from ipmeta.schema.ips import Address, address_value, range_cidrs
from ipmeta.schema.records import Cover


class RangeReader(Protocol):
    """What a lookup needs from the data layer (``ipmeta.store``), in one dataset."""

    @property
    def space(self) -> keys.KeySpace: ...

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None: ...

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None: ...


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The range of one dataset version that holds an address (``answers`` combines datasets)."""

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
    proved (a range or a gap) answers with no Query at all, and an address of a
    delta version inside a stretch known to hold no delta item queries only the base.
    """
    if cache is not None:
        span = cache.find(reader.space.version_key(version), address.family, address.value)
        if span is not None:
            return answer_span(address, version, *span.bounds, span.data)
    return query_and_answer(reader, version, address, cache, base)


def query_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None, base: int = 0
) -> LookupResult:
    """The Queries one after the other (``ipmeta.lookup.answers`` sends them together)."""
    if not base:
        item = reader.find_range_piece(*reader.space.lookup_key(version, address))
        return remember_and_answer(reader, version, address, cache, span_of(reader, version, address, item))
    stretch = known_stretch(reader, version, address, cache)
    # In a stretch the delta's Query already proved empty, only the base is asked.
    own_key = reader.space.lookup_key(version, address)
    item = None if stretch is not None else reader.find_range_piece(*own_key)
    base_item = reader.find_range_piece(*reader.space.lookup_key(base, address))
    run = delta_span(
        reader, version, address, item, base=base, base_item=base_item, cache=cache, stretch=stretch
    )
    return remember_and_answer(reader, version, address, cache, run)


def remember_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None, run: Run
) -> LookupResult:
    """Put the run a lookup proved in the cache (under its version), and answer from it."""
    if cache is not None:
        cache.put(
            reader.space.version_key(version), address.family, run.start, run.end, run.data, whole=run.whole
        )
    return answer_span(address, version, *run.bounds, run.data)


def span_of(reader: RangeReader, version: int, address: Address, item: dict[str, Any] | None) -> Run:
    """The run a full version's Query proves: ``(start, end, data)``, ``data`` None for a gap.

    The Query returns the piece that starts last at or before the address. If
    the address is within the range's ``end``, the run is the whole range as the
    dataset defines it (it may cross buckets; every address of it answers the
    same for this version). If the address is past it, no piece starts between
    that piece and the address and pieces never overlap, so ``end + 1`` up to
    the address is a gap. If the Query finds nothing, the bucket may lie in one
    of the version's covers (whole buckets a range owns with no item,
    ``ipmeta.lookup.covers``): the run is then the cover's whole range. Otherwise
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


class Stretch(NamedTuple):
    """Addresses of one bucket where a delta version holds no item: its base answers them."""

    start: int
    end: int


def delta_span(
    reader: RangeReader,
    version: int,
    address: Address,
    item: dict[str, Any] | None,
    *,
    base: int,
    base_item: dict[str, Any] | None,
    cache: RangeCache | None = None,
    stretch: Stretch | None = None,
) -> Run:
    """The run a delta version's two Queries prove: its own item where it holds one, else its base's.

    **Delta versions.** A delta holds only what changed from its base (a full
    version): the new release's ranges that are not identical to one of the
    base, *gap items* where the base has ranges and the release has none, and
    a cover list of its own (its ranges' covers, and *gap covers* over buckets
    the base has ranges in and the release has nothing in). An address is
    answered by the delta where a delta item (or cover) holds it, and by the
    base everywhere else, so the answer is the new release's exactly.

    ``item`` is the delta's own Query's answer, unneeded (None) when the cache
    already knew the ``stretch`` the address falls through in; a stretch newly
    proved goes into the ``cache``.
    """
    if stretch is None:
        own = delta_own(reader, version, address, item)
        if isinstance(own, Run):
            return own
        stretch = remember_stretch(reader, version, address, cache, own)
    return base_within(reader, base, address, base_item, stretch)


def delta_own(
    reader: RangeReader, version: int, address: Address, item: dict[str, Any] | None
) -> Run | Stretch:
    """What the delta's own Query proves: the delta's answer, or the stretch its base answers.

    The delta item before the address names in ``next`` where the following one
    starts, and a *marker* at the bucket's offset 0 names the first; a bucket
    with neither has no delta item, so the whole bucket falls through. The
    stretch never leaves the bucket: the next bucket may hold changes.
    """
    family, bucket = address.family, keys.bucket_of(address)
    first, last = keys.bucket_bounds(family, bucket)
    if item is not None and keys.ATTR_START in item:
        start = address_value(family, item[keys.ATTR_START])
        end = address_value(family, item[keys.ATTR_END])
        if address.value <= end:  # held by the delta: a range, or a gap
            return Run(start, end, None if item.get(keys.ATTR_GAP) else item.get(keys.ATTR_DATA, {}))
        return Stretch(max(end + 1, first), _before_next(item, last))
    if item is not None:  # the marker: no delta item from the bucket's start to the first one
        return Stretch(first, _before_next(item, last))
    cover = reader.find_cover(version, family, bucket)
    if cover is not None:
        return Run(cover.start, cover.end, cover.data)
    return Stretch(first, last)


def base_within(
    reader: RangeReader, base: int, address: Address, base_item: dict[str, Any] | None, stretch: Stretch
) -> Run:
    """The base's answer, true of the delta version up to the ends of the stretch it falls through in.

    Its range is the new release's too (a range only the base has, or only the
    new release has, is a delta item or a gap), so the answer names the whole
    range while the run the cache may keep is cut to the stretch.
    """
    start, end, data = span_of(reader, base, address, base_item)[:3]
    run = Run(max(start, stretch.start), min(end, stretch.end), data)
    return run if data is None or (run.start, run.end) == (start, end) else run._replace(whole=(start, end))


def stretch_key(reader: RangeReader, version: int) -> tuple[str, str]:
    """Where the cache keeps a delta version's stretches: beside its runs, never mistaken for one."""
    return (reader.space.version_key(version), "falls-through")


def known_stretch(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None
) -> Stretch | None:
    """A stretch of the delta an earlier Query proved holds the address: the base's Query alone answers it.

    A delta is small beside its base, so one stretch spans many of the base's
    ranges: without this, every one of them would cost the delta's Query again.
    """
    if cache is None:
        return None
    span = cache.find(stretch_key(reader, version), address.family, address.value, count=False)
    return Stretch(span.start, span.end) if span is not None else None


def remember_stretch(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None, stretch: Stretch
) -> Stretch:
    if cache is not None:
        cache.put(stretch_key(reader, version), address.family, stretch.start, stretch.end, None)
    return stretch


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
