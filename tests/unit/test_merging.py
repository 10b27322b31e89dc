"""The merge rule gives the same record for one address (the API) and for a column of them (enrich)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.lookup import merging
from loader.enrich.merge import BOUNDS, COLUMNS

#: One dataset's answer for one address: None (a gap), or (has the field, value, start, end).
answers = st.one_of(
    st.none(),
    st.tuples(
        st.booleans(), st.one_of(st.none(), st.integers(-5, 5)), st.integers(0, 50), st.integers(50, 99)
    ),
)


def first_that_has(row: list[Any]) -> Any:
    return next((answer[1] for answer in row if answer is not None and answer[0]), None)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(answers, min_size=3, max_size=3), min_size=1, max_size=40))
def test_one_address_and_a_column_merge_alike(rows: list[list[Any]]) -> None:
    # Given three datasets' answers for each of a chunk's addresses
    datasets = range(3)

    def holds(row: list[Any], at: int) -> bool:
        return row[at] is not None

    # When the rule runs once per address on Python values, and once over the columns
    one = [
        merging.merged_field(
            [(holds(row, at) and row[at][0], row[at] and row[at][1]) for at in datasets], merging.ONE, None
        )
        for row in rows
    ]
    columns = [
        (
            np.array([holds(row, at) and row[at][0] for row in rows]),
            pa.array([row[at][1] if holds(row, at) else None for row in rows], pa.int64()),
        )
        for at in datasets
    ]
    column = merging.merged_field(columns, COLUMNS, pa.nulls(len(rows), pa.int64()))
    # Then both are the first dataset's value that has the field
    assert one == column.to_pylist() == [first_that_has(row) for row in rows]

    spans = [
        merging.span(
            [(True, row[at][2], row[at][3]) for at in datasets if holds(row, at)], merging.ONE, (-1, 100)
        )
        for row in rows
    ]
    bounds = []
    for at in datasets:
        hit = np.array([holds(row, at) for row in rows])
        starts = np.array([row[at][2] if holds(row, at) else 0 for row in rows], dtype=np.int64)
        ends = np.array([row[at][3] if holds(row, at) else 0 for row in rows], dtype=np.int64)
        bounds.append((hit, starts, ends))
    edges = [np.full(len(rows), edge, np.int64) for edge in (-1, 100)]
    start, end = merging.span(bounds, BOUNDS, (edges[0], edges[1]))
    # And the range is the intersection of the answering datasets' ranges, alike both ways
    assert spans == list(zip(start.tolist(), end.tolist(), strict=True))
    for row, (low, high) in zip(rows, spans, strict=True):
        held = [answer for answer in row if answer is not None]
        if held:
            assert (low, high) == (max(a[2] for a in held), min(a[3] for a in held))
