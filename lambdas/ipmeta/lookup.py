"""Forward lookup in one dataset version: which range holds an address (``ipmeta.answers`` fans out)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

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
        span = cache.find(reader.space.version_key(version), address.family, address.value)
        if span is not None:
            return answer_span(address, version, span.start, span.end, span.data)
    return query_and_answer(reader, version, address, cache)


def query_and_answer(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None
) -> LookupResult:
    start, end, data = query_span(reader, version, address)
    if cache is not None:
        cache.put(reader.space.version_key(version), address.family, start, end, data)
    return answer_span(address, version, start, end, data)


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
    partition_key, sort_key = reader.space.lookup_key(version, address)
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
