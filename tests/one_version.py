"""The served lookup (``ipmeta.lookup.answers``) asked about one dataset version, as rule tests ask it.

Tests of the gap rule, covers, delta versions and the range cache check one
version at a time; they ask the lookup the API runs, with a target of that
one version, and read its one section. A gap raises the address's 404, as the
API answers it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ipmeta.lookup.answers import CombinedResult, LookupResult, lookup_address
from ipmeta.lookup.catalog import Target, Targets
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.lookup.runs import RangeReader
from ipmeta.schema.ips import Address

#: A delta version's two Queries go out together, as in a container.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="one-version")


def lookup_one_version(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None = None, base: int = 0
) -> CombinedResult:
    """``address`` in ``version`` of the reader's dataset (a delta over ``base`` when given)."""
    targets = Targets((Target(reader.space.dataset, version, base),))
    return lookup_address(lambda _dataset: reader, targets, address, _POOL, cache)


def lookup_version(
    reader: RangeReader, version: int, address: Address, cache: RangeCache | None = None, base: int = 0
) -> LookupResult:
    """The one section of ``lookup_one_version``'s answer."""
    ((_, found),) = lookup_one_version(reader, version, address, cache, base).found
    return found
