"""Delta versions against dynalite: a reload written as what changed over a full base answers exactly
as a full load of the same release, in every shape releases take.

The oracle is twofold: a brute-force scan of the release's rows (the last row
holding an address wins) for the data, and a full load of the same release,
in another dataset of the same table, for the range each answer reports.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipmeta.errors import IpAddressNotFound
from ipmeta.ips import Address, format_address
from ipmeta.lookup import lookup_address
from ipmeta.range_cache import RangeCache
from loader.options import DeltaPolicy, LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable

#: The releases live in buckets 1 to 5 (IPv4 /8s): small enough to probe every edge,
#: with room for whole buckets (covers) and for buckets one release leaves empty.
FIRST, LAST = 1 << 24, (6 << 24) - 1
BUCKET = 1 << 24


@dataclass(frozen=True)
class Row:
    start: int
    end: int
    label: str


def write(rows: list[Row], path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["start", "end", "name"])
        for row in rows:
            writer.writerow([format_address(4, row.start), format_address(4, row.end), row.label])
    return path


def brute_force(rows: list[Row], value: int) -> str | None:
    owner = None
    for row in rows:
        if row.start <= value <= row.end:
            owner = row.label
    return owner


@st.composite
def rows(draw: st.DrawFn, count: int = 12) -> list[Row]:
    """Ranges of every shape: small, across a bucket edge, whole buckets (a cover), overlapping."""
    made = []
    for _ in range(draw(st.integers(min_value=1, max_value=count))):
        shape = draw(st.sampled_from(["small", "edge", "buckets", "any"]))
        if shape == "small":
            start = draw(st.integers(min_value=FIRST, max_value=LAST - 300))
            end = start + draw(st.integers(min_value=0, max_value=300))
        elif shape == "edge":
            edge = draw(st.integers(min_value=2, max_value=5)) * BUCKET
            start, end = edge - draw(st.integers(1, 200)), edge + draw(st.integers(0, 200))
        elif shape == "buckets":
            first = draw(st.integers(min_value=1, max_value=5))
            start, end = first * BUCKET, (draw(st.integers(first, 5)) + 1) * BUCKET - 1
        else:
            start = draw(st.integers(min_value=FIRST, max_value=LAST))
            end = draw(st.integers(min_value=start, max_value=min(LAST, start + 3 * BUCKET)))
        made.append(Row(start, end, draw(st.sampled_from(["a", "b", "c", "d"]))))
    return made


@st.composite
def releases(draw: st.DrawFn) -> tuple[list[Row], list[Row]]:
    """Release A, and B made from it as releases are: most rows kept, some changed, dropped, added."""
    first = draw(rows())
    second = []
    for row in first:
        fate = draw(st.sampled_from(["keep", "keep", "keep", "relabel", "shrink", "drop"]))
        if fate == "keep":
            second.append(row)
        elif fate == "relabel":
            second.append(Row(row.start, row.end, row.label + "2"))
        elif fate == "shrink" and row.end > row.start:
            second.append(Row(row.start, row.start + (row.end - row.start) // 2, row.label))
    second.extend(draw(rows(count=3)))
    return first, second


def probes(first: list[Row], second: list[Row]) -> list[int]:
    edges = {
        value
        for row in itertools.chain(first, second)
        for value in (row.start - 1, row.start, row.end, row.end + 1, (row.start + row.end) // 2)
    }
    edges.update(bucket * BUCKET + offset for bucket in range(1, 6) for offset in (0, 1, BUCKET - 1))
    return sorted(value for value in edges if FIRST <= value <= LAST)


def answer(table: LoaderTable, version: int, base: int, value: int, cache: RangeCache | None) -> Any:
    try:
        found = lookup_address(table, version, Address(4, value), cache, base=base)
    except IpAddressNotFound:
        return None
    return found.data["name"], found.start, found.end


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(releases())
def test_a_delta_answers_every_address_as_a_full_load_of_its_release(
    store: LoaderTable, tmp_path_factory: pytest.TempPathFactory, shapes: tuple[list[Row], list[Row]]
) -> None:
    first, second = shapes
    folder = tmp_path_factory.mktemp("delta")
    staging = LocalStaging(folder / "staging")
    # Each example in datasets of its own: the table is the test's, shared by every example
    example = folder.name.replace("_", "-")[-20:].lstrip("0123456789-")
    deltas, fulls = store.for_dataset(f"d{example}"), store.for_dataset(f"f{example}")

    def load(rows: list[Row], table: LoaderTable, name: str, delta: DeltaPolicy) -> driver.LoadResult:
        path = write(rows, folder / name)
        return driver.run_load([path], LoadOptions(dataset=table.dataset, delta=delta), store, staging)

    # Given release A loaded full, then B written as a delta over it, and B loaded full elsewhere
    load(first, deltas, "a.csv", "never")
    delta = load(second, deltas, "b.csv", "always")
    full = load(second, fulls, "b-full.csv", "never")
    meta = deltas.get_version_meta(delta.version)
    assert meta is not None
    # (B the same bytes as A is unchanged: nothing is written at all)
    assert (meta.base != 0) == (delta.status == "activated")
    cache = RangeCache(1 << 20)
    for value in probes(first, second):
        # Then every address answers B's data, with the range a full load of B reports
        expected = answer(fulls, full.version, 0, value, None)
        got = answer(deltas, delta.version, meta.base, value, cache)
        assert (got[0] if got else None) == brute_force(second, value), format_address(4, value)
        assert got == expected, format_address(4, value)
    # And what the cache proved answers the same again
    for value in probes(first, second):
        cached = answer(deltas, delta.version, meta.base, value, cache)
        assert cached == answer(deltas, delta.version, meta.base, value, None)
