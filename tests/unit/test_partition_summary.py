"""A partition's staged summary, read back by a later release of the loader."""

from __future__ import annotations

import json

from loader.pipeline.resolve import PartitionSummary


def test_a_summary_staged_by_an_older_release_reads_back_without_its_dropped_fields() -> None:
    staged = PartitionSummary(partition=3, items=7, item_bytes=900, max_item_bytes=300)
    older = {**json.loads(staged.to_json()), "write_units": 9}  # a field an older release wrote

    read = PartitionSummary.from_json(json.dumps(older).encode())

    assert read == staged


def test_a_summary_round_trips_through_its_staged_json() -> None:
    summary = PartitionSummary(partition=1, items=2, items_per_bucket={"0a": 2}, offsets=[0, 10])

    assert PartitionSummary.from_json(summary.to_json()) == summary
