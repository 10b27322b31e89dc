"""Forward lookup: which range holds an address, in the active dataset version."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ipmeta import keys
from ipmeta.errors import IpAddressNotFound, NoDataset
from ipmeta.ips import Address, format_address, range_cidrs


class RangeReader(Protocol):
    """What a lookup needs from the data layer (``ipmeta.store.Store`` provides it)."""

    def read_active_version(self, *, consistent: bool = False) -> int | None: ...

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class LookupResult:
    address: Address
    start: int
    end: int
    data: dict[str, Any]
    version: int

    def to_response(self) -> dict[str, Any]:
        family = self.address.family
        return {
            "ip": str(self.address),
            "range": {
                "start": format_address(family, self.start),
                "end": format_address(family, self.end),
                "cidrs": range_cidrs(family, self.start, self.end),
            },
            "data": self.data,
            "dataset": {"version": keys.format_version(self.version)},
        }


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


def lookup_address(reader: RangeReader, version: int, address: Address) -> LookupResult:
    """One Query: the piece starting at or before the address, then its ``end`` decides.

    An address after the end of the piece found lies in a gap, so it is not
    found; it must not answer with the previous range.
    """
    partition_key, sort_key = keys.lookup_key(version, address)
    item = reader.find_range_piece(partition_key, sort_key)
    if item is not None:
        end = int(ipaddress.ip_address(item[keys.ATTR_END]))
        if address.value <= end:
            start = int(ipaddress.ip_address(item[keys.ATTR_START]))
            return LookupResult(address, start, end, item.get(keys.ATTR_DATA, {}), version)
    raise IpAddressNotFound(f"{address} is not in any range of dataset {keys.format_version(version)}")


def lookup_active(reader: RangeReader, cache: ActiveVersionCache, address: Address) -> LookupResult:
    version = cache.get(reader)
    if version is None:
        raise NoDataset("no dataset is loaded yet; load one with `ipmeta load`")
    return lookup_address(reader, version, address)
