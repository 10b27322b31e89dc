"""One answer from several datasets: each dataset's own range and data, and a merged, flat view.

A lookup reads every target dataset (``ipmeta.lookup.catalog.Targets``) with one
Query each, concurrently, so the answer costs one round trip however many
datasets there are; the range cache answers what an earlier Query proved, per
dataset version. Each dataset's section keeps its own range, version and
data, because the ranges of two databases differ (a city database's /24 sits
inside an ASN's /16). The merged ``data`` takes each field from the first
dataset, in precedence order, that holds the address and has the field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ParamSpec

from ipmeta.lookup.catalog import Target, Targets
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.lookup.runs import (
    LookupResult,
    RangeReader,
    Stretch,
    answer_span,
    cidrs_of,
    delta_span,
    known_stretch,
    remember_and_answer,
    span_of,
)
from ipmeta.schema import keys
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved, IpmetaError
from ipmeta.schema.ips import Address, format_address

_P = ParamSpec("_P")
#: One dataset's outcome for one address: its range, or the miss (a gap) it answered with.
Outcome = LookupResult | IpAddressNotFound


@dataclass(frozen=True, slots=True)
class CombinedResult:
    """What every target dataset answered for one address, in precedence order."""

    address: Address
    #: (dataset, version, outcome): the range found, or None where the address is in a gap.
    sections: tuple[tuple[str, int, LookupResult | None], ...]
    inactive: tuple[str, ...] = ()

    @property
    def bogon(self) -> bool:
        return is_bogon(self.address)

    @property
    def found(self) -> list[tuple[str, LookupResult]]:
        return [(name, result) for name, _, result in self.sections if result is not None]

    def merged_data(self, fields: Collection[str] | None = None) -> dict[str, Any]:
        """Each field from the first dataset, in precedence order, that has it."""
        merged: dict[str, Any] = {}
        for _, result in self.found:
            for name, value in result.data.items():
                merged.setdefault(name, value)
        return merged if fields is None else {name: merged[name] for name in merged if name in fields}

    def span(self) -> tuple[int, int]:
        """The addresses every dataset that answered answers with the same range: their intersection."""
        found = [result for _, result in self.found]
        return max(result.start for result in found), min(result.end for result in found)

    def field(self, name: str) -> Any:
        """``/v1/ip/{ip}/{field}``: ``ip``, ``bogon``, or a field of the merged view (KeyError if none)."""
        if name == "ip":
            return str(self.address)
        if name == "bogon":
            return self.bogon
        return self.merged_data()[name]

    def to_response(self, fields: Collection[str] | None = None) -> dict[str, Any]:
        """The API body; ``fields`` keeps only those data attributes (None keeps all)."""
        family = self.address.family
        start, end = self.span()
        body: dict[str, Any] = {
            "ip": str(self.address),
            "bogon": self.bogon,
            "range": _range(family, start, end),
            "data": self.merged_data(fields),
            "datasets": {name: _section(version, result, fields) for name, version, result in self.sections},
            # Empty when every dataset answered: one shape always.
            "inactive": list(self.inactive),
        }
        return body

    def etag(self, variant: str = "") -> str:
        """Strong validator of one representation: a version's data never changes, so the
        versions and ranges of every section identify the data, and ``variant`` the shape."""
        parts = [
            f"{name}:{version}:{result.start:x}-{result.end:x}" if result else f"{name}:{version}:-"
            for name, version, result in self.sections
        ]
        digest = hashlib.blake2s("|".join([*parts, variant]).encode(), digest_size=12).hexdigest()
        return f'"{digest}"'


def _range(family: int, start: int, end: int) -> dict[str, Any]:
    return {
        "start": format_address(family, start),
        "end": format_address(family, end),
        "cidrs": list(cidrs_of(family, start, end)),
    }


def _section(version: int, result: LookupResult | None, fields: Collection[str] | None) -> dict[str, Any]:
    if result is None:
        return {"version": keys.format_version(version), "range": None, "data": None}
    data = result.data if fields is None else {k: v for k, v in result.data.items() if k in fields}
    return {
        "version": keys.format_version(version),
        "range": _range(result.address.family, result.start, result.end),
        "data": data,
    }


def combine(address: Address, targets: Targets, outcomes: Mapping[str, Outcome]) -> CombinedResult:
    """The answer from each dataset's outcome; raises the address's 404 if no dataset holds it."""
    sections = tuple(
        (target.dataset, target.version, outcome if isinstance(outcome, LookupResult) else None)
        for target in targets.versions
        for outcome in (outcomes[target.dataset],)
    )
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


def lookup_datasets(
    readers: Callable[[str], RangeReader],
    targets: Targets,
    address: Address,
    executor: Executor,
    cache: RangeCache | None = None,
) -> CombinedResult:
    """One address in every target dataset: the cache first, then one Query per dataset left."""
    answers = lookup_datasets_many(readers, targets, [address], executor, cache)
    answer = answers[address]
    if isinstance(answer, IpmetaError):
        raise answer
    return answer


def lookup_datasets_many(
    readers: Callable[[str], RangeReader],
    targets: Targets,
    addresses: Iterable[Address],
    executor: Executor,
    cache: RangeCache | None = None,
) -> dict[Address, CombinedResult | IpmetaError]:
    """Each distinct address in every target dataset, each (dataset, address) queried once.

    What the cache proves is answered in the caller's thread: handing it to
    the pool would cost more than answering it. The Queries left (one per
    dataset, two for a delta version: its own and its base's) run on the
    executor together, the first of them in the caller's thread, so a single
    Query never waits for a pool thread.
    """
    distinct = list(dict.fromkeys(addresses))
    outcomes: dict[tuple[str, Address], Outcome] = {}
    misses: list[tuple[Target, Address]] = []
    for target in targets.versions:
        version_key = readers(target.dataset).space.version_key(target.version)
        for address in distinct:
            span = cache.find(version_key, address.family, address.value) if cache is not None else None
            if span is None:
                misses.append((target, address))
            else:
                start, end = span.bounds
                outcomes[target.dataset, address] = _caught(
                    answer_span, address, target.version, start, end, span.data
                )
    outcomes.update(_answer_misses(readers, misses, executor, cache))
    answers: dict[Address, CombinedResult | IpmetaError] = {}
    for address in distinct:
        try:
            answers[address] = combine(
                address, targets, {name: outcomes[name, address] for name in targets.names}
            )
        except IpAddressNotFound as error:
            answers[address] = error
    return answers


#: One Query: the reader of its dataset, and its key (pk, sk).
_Probe = tuple[RangeReader, tuple[str, int]]


def _answer_misses(
    readers: Callable[[str], RangeReader],
    misses: Sequence[tuple[Target, Address]],
    executor: Executor,
    cache: RangeCache | None,
) -> dict[tuple[str, Address], Outcome]:
    """Every Query the misses need, sent together; then each miss's run, cached, and its outcome.

    A delta version's miss needs its own Query and its base's, unless the cache
    knows the stretch of the delta the address falls through in: then the base's alone.
    """
    probes: list[_Probe] = []
    stretches: list[Stretch | None] = []
    for target, address in misses:
        reader = readers(target.dataset)
        stretch = known_stretch(reader, target.version, address, cache) if target.base else None
        stretches.append(stretch)
        if stretch is None:
            probes.append((reader, reader.space.lookup_key(target.version, address)))
        if target.base:
            probes.append((reader, reader.space.lookup_key(target.base, address)))
    found = iter(_run_probes(probes, executor))
    outcomes: dict[tuple[str, Address], Outcome] = {}
    for (target, address), stretch in zip(misses, stretches, strict=True):
        reader = readers(target.dataset)
        item = None if stretch is not None else next(found)
        if target.base:
            span = delta_span(
                reader,
                target.version,
                address,
                item,
                base=target.base,
                base_item=next(found),
                cache=cache,
                stretch=stretch,
            )
        else:
            span = span_of(reader, target.version, address, item)
        outcomes[target.dataset, address] = _caught(
            remember_and_answer, reader, target.version, address, cache, span
        )
    return outcomes


def _run_probes(probes: Sequence[_Probe], executor: Executor) -> list[dict[str, Any] | None]:
    def one(probe: _Probe) -> dict[str, Any] | None:
        reader, (partition_key, sort_key) = probe
        return reader.find_range_piece(partition_key, sort_key)

    if not probes:
        return []
    pending: list[Future[dict[str, Any] | None]] = [executor.submit(one, probe) for probe in probes[1:]]
    return [one(probes[0]), *(future.result() for future in pending)]


def _caught(answer: Callable[_P, LookupResult], *args: _P.args, **kwargs: _P.kwargs) -> Outcome:
    """Each dataset answers each address on its own: a gap is that pair's miss, not the request's."""
    try:
        return answer(*args, **kwargs)
    except IpAddressNotFound as error:  # IpAddressReserved included
        return error
