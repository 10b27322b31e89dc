"""ipmeta's own answer: the merged, flat view of every dataset, and each dataset's own section.

``{"ip", "bogon", "range", "data", "datasets": {name: {"version", "range", "data"}}, "inactive"}``:
the merged ``data`` takes each field from the first dataset in precedence order
that has it (``CombinedResult.merged_data``), and ``range`` is where every
answering dataset agrees. A dataset that holds no range for the address has a
section with ``range`` and ``data`` null, so the shape never changes.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import Any

from ipmeta.lookup.answers import CombinedResult, LookupResult
from ipmeta.schema import keys
from ipmeta.schema.ips import format_address, range_cidrs


@lru_cache(maxsize=4096)
def cidrs_of(family: int, start: int, end: int) -> tuple[str, ...]:
    """Popular ranges answer again and again; summarizing one costs more than the lookup."""
    return tuple(range_cidrs(family, start, end))


def document(result: CombinedResult, fields: Collection[str] | None = None) -> dict[str, Any]:
    """The API body; ``fields`` keeps only those data attributes (None keeps all)."""
    family = result.address.family
    start, end = result.span()
    return {
        "ip": str(result.address),
        "bogon": result.bogon,
        "range": _range(family, start, end),
        "data": result.merged_data(fields),
        "datasets": {name: _section(version, found, fields) for name, version, found in result.sections},
        # Empty when every dataset answered: one shape always.
        "inactive": list(result.inactive),
    }


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
