"""The lookup against a brute-force scan, on generated overlapping ranges.

The reader is an in-memory table with DynamoDB's Query semantics for
``pk = :pk AND sk <= :sk``, descending, Limit 1, fed by the items the loader's
own pipeline stages (``tests.pipeline``), so this checks the key design and the
gap rule end to end without AWS.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.lookup.catalog import DatasetCatalog, VersionMetaReader, select_targets
from ipmeta.schema.errors import IpAddressNotFound, NoDataset
from ipmeta.schema.ips import Address, Family
from loader.formats import SourceRow
from testing.row_scan import brute_force
from tests.memory_table import InMemoryTable
from tests.one_version import lookup_version
from tests.pipeline import stage

# Small v4 addresses near a bucket edge, so ranges overlap, nest, and cross buckets.
EDGE = 5 << 24
address_values = st.integers(EDGE - 64, EDGE + 64)


@st.composite
def source_rows(draw: st.DrawFn) -> list[SourceRow]:
    count = draw(st.integers(1, 12))
    rows = []
    for line in range(count):
        start = draw(address_values)
        end = draw(st.integers(start, min(start + 40, EDGE + 64)))
        rows.append(SourceRow(f"t.csv:{line + 2}", 4, start, end, {"label": str(line)}))
    return rows


@settings(max_examples=200, deadline=None)
@given(source_rows(), st.lists(address_values, min_size=1, max_size=30))
def test_lookup_matches_brute_force(rows: list[SourceRow], probes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        staged = stage(rows, Path(folder))
        table = InMemoryTable(staged.items, active=0, covers=staged.covers)
    for value in probes:
        address = Address(4, value)
        expected = brute_force(rows, address.family, address.value)
        if expected is None:
            with pytest.raises(IpAddressNotFound):
                lookup_version(table, 0, address)
        else:
            result = lookup_version(table, 0, address)
            assert result.data == {"label": int(expected.values["label"])}
            assert result.start <= value <= result.end


def test_ipv6_top_address_is_found(tmp_path: Path) -> None:
    family: Family = 6
    top = 2**128 - 1
    rows = [SourceRow("t.csv:2", family, top - 255, top, {"name": "top"})]
    table = InMemoryTable(stage(rows, tmp_path).items, active=0)
    assert lookup_version(table, 0, Address(6, top)).data == {"name": "top"}
    with pytest.raises(IpAddressNotFound):
        lookup_version(table, 0, Address(6, top - 256))


def test_the_pointers_are_read_once_per_ttl() -> None:
    now = [0.0]
    table = InMemoryTable([])
    catalog = DatasetCatalog(table, 5.0, clock=lambda: now[0])
    for _ in range(10):
        catalog.get()
    assert table.pointer_reads == 1
    now[0] = 5.1
    assert catalog.get().versions == {"default": 1}
    assert table.pointer_reads == 2


def test_no_active_version_is_no_dataset() -> None:
    table = InMemoryTable([], active=None)
    with pytest.raises(NoDataset):
        select_targets(DatasetCatalog(table, 5.0).get(), lambda name: cast(VersionMetaReader, table))
