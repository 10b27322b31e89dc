"""The one lookup: addresses answered from dataset versions, each dataset's own range and a merged view.

``lookup_addresses`` is what the API, the CLI, the tests and the benchmarks
call. It reads every target dataset version (``ipmeta.lookup.catalog.Targets``)
with one Query each, concurrently, so an answer costs one round trip however
many datasets there are: a full version's Query, or a delta version's own and
its base's (``ipmeta.lookup.runs``). The range cache answers what an earlier
Query of the same version proved, and keeps what each new Query proves. Each
dataset's section keeps its own range, version and data, because the ranges of
two databases differ (a city database's /24 sits inside an ASN's /16). The
merged ``data`` takes each field from the first dataset, in precedence order,
that holds the address and has the field, and the range is the intersection of
theirs: the rule in ``ipmeta.lookup.merging``, which ``loader.enrich`` applies to
whole columns (``ipmeta.shapes.ipmeta_document`` writes the answer).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from ipmeta.lookup import merging
from ipmeta.lookup.catalog import Target, Targets
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.lookup.runs import RangeReader, Run, Stretch, base_within, delta_own, full_run
from ipmeta.schema import keys
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved, IpmetaError
from ipmeta.schema.ips import Address


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The range of one dataset version that holds an address."""

    address: Address
    start: int
    end: int
    data: dict[str, Any]
    version: int


@dataclass(frozen=True, slots=True)
class CombinedResult:
    """What every target dataset answered for one address, in precedence order."""

    address: Address
    #: (dataset, version, result): the range found, or None where the address is in a gap.
    sections: tuple[tuple[str, int, LookupResult | None], ...]
    inactive: tuple[str, ...] = ()

    @property
    def bogon(self) -> bool:
        return is_bogon(self.address)

    @property
    def found(self) -> list[tuple[str, LookupResult]]:
        return [(name, result) for name, _, result in self.sections if result is not None]

    def merged_data(self, fields: Collection[str] | None = None) -> dict[str, Any]:
        """Each field from the first dataset, in precedence order, that has it (``merging``)."""
        found = [result.data for _, result in self.found]
        names = dict.fromkeys(name for data in found for name in data)
        return {
            name: merging.merged_field([(name in data, data.get(name)) for data in found], merging.ONE, None)
            for name in names
            if fields is None or name in fields
        }

    def span(self) -> tuple[int, int]:
        """The addresses every dataset that answered answers with the same range (``merging``)."""
        bounds = [(True, result.start, result.end) for _, result in self.found]
        start, end = merging.span(bounds, merging.ONE, (-1, 1 << 128))
        return int(start), int(end)

    def field(self, name: str) -> Any:
        """``/v1/ip/{ip}/{field}``: ``ip``, ``bogon``, or a field of the merged view (KeyError if none)."""
        if name == "ip":
            return str(self.address)
        if name == "bogon":
            return self.bogon
        return self.merged_data()[name]

    def etag(self, variant: str = "") -> str:
        """Strong validator of one representation: a version's data never changes, so the
        versions and ranges of every section identify the data, and ``variant`` the shape."""
        parts = [
            f"{name}:{version}:{result.start:x}-{result.end:x}" if result else f"{name}:{version}:-"
            for name, version, result in self.sections
        ]
        digest = hashlib.blake2s("|".join([*parts, variant]).encode(), digest_size=12).hexdigest()
        return f'"{digest}"'


def combine(address: Address, targets: Targets, results: Mapping[str, LookupResult | None]) -> CombinedResult:
    """The answer from each dataset's result; raises the address's 404 if no dataset holds it."""
    sections = tuple((target.dataset, target.version, results[target.dataset]) for target in targets.versions)
    if all(result is None for _, _, result in sections):
        where = ", ".join(
            f"{target.dataset} {keys.format_version(target.version)}" for target in targets.versions
        )
        if is_bogon(address):
            raise IpAddressReserved(
                f"{address} is a special-purpose (bogon) address and no dataset has a range for it ({where})"
            )
        raise IpAddressNotFound(f"{address} is not in any range of {where}")
    return CombinedResult(address, sections, targets.inactive)


def lookup_address(
    readers: Callable[[str], RangeReader],
    targets: Targets,
    address: Address,
    executor: Executor,
    cache: RangeCache | None = None,
) -> CombinedResult:
    """One address in every target dataset (``lookup_addresses``); raises its error."""
    answer = lookup_addresses(readers, targets, [address], executor, cache)[address]
    if isinstance(answer, IpmetaError):
        raise answer
    return answer


def lookup_addresses(
    readers: Callable[[str], RangeReader],
    targets: Targets,
    addresses: Iterable[Address],
    executor: Executor,
    cache: RangeCache | None = None,
) -> dict[Address, CombinedResult | IpmetaError]:
    """Each distinct address in every target dataset, each (dataset, address) queried at most once.

    What the cache proves is answered in the caller's thread: handing it to
    the pool would cost more than answering it. The Queries left run on the
    executor together, the first of them in the caller's thread, so a single
    Query never waits for a pool thread.
    """
    distinct = list(dict.fromkeys(addresses))
    results: dict[tuple[str, Address], LookupResult | None] = {}
    misses: list[_Miss] = []
    for target in targets.versions:
        reader = readers(target.dataset)
        version_key = reader.space.version_key(target.version)
        for address in distinct:
            run = cache.find(version_key, address.family, address.value) if cache is not None else None
            if run is None:
                misses.append(_Miss(reader, target, address, cache))
            else:
                results[target.dataset, address] = _result(address, target.version, run)
    found = iter(_query_all([query for miss in misses for query in miss.queries], executor))
    for miss in misses:
        results[miss.target.dataset, miss.address] = _result(
            miss.address, miss.target.version, miss.prove(found)
        )
    answers: dict[Address, CombinedResult | IpmetaError] = {}
    for address in distinct:
        try:
            answers[address] = combine(
                address, targets, {name: results[name, address] for name in targets.names}
            )
        except IpAddressNotFound as error:  # IpAddressReserved included
            answers[address] = error
    return answers


#: One Query: the reader of its dataset, and its key (pk, sk).
_Query = tuple[RangeReader, tuple[str, int]]


class _Miss:
    """One (dataset version, address) the cache could not answer: its Queries, then what they prove.

    A full version needs one Query. A delta version needs its own and its
    base's, sent together; where the cache knows the stretch of the delta the
    address falls through in (a delta is small beside its base, so one stretch
    spans many of the base's ranges), the base's alone.
    """

    __slots__ = ("address", "cache", "queries", "reader", "stretch", "target")

    def __init__(
        self, reader: RangeReader, target: Target, address: Address, cache: RangeCache | None
    ) -> None:
        self.reader, self.target, self.address, self.cache = reader, target, address, cache
        self.stretch = self._known_stretch() if target.base else None
        self.queries: list[_Query] = []
        if self.stretch is None:
            self.queries.append((reader, reader.space.lookup_key(target.version, address)))
        if target.base:
            self.queries.append((reader, reader.space.lookup_key(target.base, address)))

    def prove(self, found: Iterator[dict[str, Any] | None]) -> Run:
        """The run this miss's Queries prove (taken from ``found`` in the order of ``queries``), cached."""
        reader, target, address = self.reader, self.target, self.address
        own = None if self.stretch is not None else next(found)
        if not target.base:
            return self._remember(full_run(reader, target.version, address, own))
        base_item = next(found)
        stretch = self.stretch
        if stretch is None:
            proved = delta_own(reader, target.version, address, own)
            if isinstance(proved, Run):
                return self._remember(proved)
            stretch = self._remember_stretch(proved)
        return self._remember(base_within(full_run(reader, target.base, address, base_item), stretch))

    def _remember(self, run: Run) -> Run:
        if self.cache is not None:
            version_key = self.reader.space.version_key(self.target.version)
            self.cache.put(version_key, self.address.family, run)
        return run

    def _stretch_key(self) -> tuple[str, str]:
        """Where the cache keeps a delta version's stretches: beside its runs, never mistaken for one."""
        return (self.reader.space.version_key(self.target.version), "falls-through")

    def _known_stretch(self) -> Stretch | None:
        if self.cache is None:
            return None
        run = self.cache.find(self._stretch_key(), self.address.family, self.address.value, count=False)
        return Stretch(run.start, run.end) if run is not None else None

    def _remember_stretch(self, stretch: Stretch) -> Stretch:
        if self.cache is not None:
            self.cache.put(self._stretch_key(), self.address.family, Run(stretch.start, stretch.end, None))
        return stretch


def _query_all(queries: Sequence[_Query], executor: Executor) -> list[dict[str, Any] | None]:
    def one(query: _Query) -> dict[str, Any] | None:
        reader, (partition_key, sort_key) = query
        return reader.find_range_piece(partition_key, sort_key)

    if not queries:
        return []
    pending: list[Future[dict[str, Any] | None]] = [executor.submit(one, query) for query in queries[1:]]
    return [one(queries[0]), *(future.result() for future in pending)]


def _result(address: Address, version: int, run: Run) -> LookupResult | None:
    """The dataset's result for ``address`` in ``run``: its range, or None in a gap."""
    if run.data is None:
        return None
    start, end = run.bounds
    return LookupResult(address, start, end, run.data, version)
