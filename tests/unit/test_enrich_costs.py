"""`ipmeta plan --enrich-rows N`: the enrich job's bill on AWS, each assumption a measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipmeta_cli.main import main
from loader.planning.enrich_costs import MEASURED, EnrichMeasurements, api_costs, enrich_costs
from loader.settings import ENRICH_PART_MEMORY_MB

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "enrich_task.json"


def test_the_model_assumes_what_bench_enrich_task_measured() -> None:
    measured = json.loads(RESULTS.read_text())
    assert MEASURED.rows_per_second == measured["rows_per_second"]
    assert MEASURED.input_bytes_per_row == measured["input_bytes_per_row"]
    assert MEASURED.output_bytes_per_row == measured["output_bytes_per_row"]
    snapshot = measured["snapshot"]
    assert MEASURED.snapshot_ranges == snapshot["ranges"]
    assert MEASURED.snapshot_table_bytes == snapshot["table_bytes"]
    assert MEASURED.snapshot_file_bytes == snapshot["file_bytes"]
    assert MEASURED.snapshot_seconds == snapshot["seconds"]
    assert measured["memory_mb"] == ENRICH_PART_MEMORY_MB
    assert measured["summary"]["rows"] == measured["rows"]


def test_a_hundred_million_addresses_cost_at_most_ten_cents_and_far_less_than_the_api() -> None:
    job = enrich_costs(100_000_000, MEASURED)
    assert job["total"] <= 0.10
    assert job["total"] == pytest.approx(sum(job["breakdown"].values()), abs=1e-5)
    for line in ("lambda_duration", "s3_gets", "s3_puts", "step_functions", "snapshot"):
        assert job["breakdown"][line] > 0, line
    api = api_costs(100_000_000)
    cheapest_api = min(usd for fronts in api.values() for usd in fronts.values())
    assert cheapest_api > 10 * job["total"]
    # Batches are cheaper than single lookups through every front, never free.
    for front, single in api["single"].items():
        assert 0 < api["batches of 1,000"][front] < single


def test_the_bill_grows_with_the_rows_the_datasets_and_a_slower_engine() -> None:
    base = enrich_costs(10_000_000, MEASURED)
    assert enrich_costs(20_000_000, MEASURED)["total"] > base["total"]
    assert enrich_costs(10_000_000, MEASURED, datasets=2)["total"] > base["total"]
    slower = EnrichMeasurements(**{**MEASURED.__dict__, "rows_per_second": MEASURED.rows_per_second / 2})
    # At 100 M rows, where the breakdown's rounding to a millionth of a dollar is below 1e-3 of it.
    assert enrich_costs(100_000_000, slower)["breakdown"]["lambda_duration"] == pytest.approx(
        2 * enrich_costs(100_000_000, MEASURED)["breakdown"]["lambda_duration"], rel=1e-3
    )
    # The snapshot is paid by the first job on a version only.
    later = enrich_costs(10_000_000, MEASURED, first_job_on_the_version=False)
    assert later["breakdown"]["snapshot"] == 0
    assert base["breakdown"]["snapshot"] > 0


def test_plan_prints_the_breakdown_next_to_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--enrich-rows", "100000000"]) == 0
    text = capsys.readouterr().out
    for line in ("Lambda", "S3", "transitions", "snapshot", "through the API", "single", "batches of 100"):
        assert line in text
    assert main(["plan", "--enrich-rows", "100000000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["enrich"]["job"]["total"] <= 0.10
    assert set(report["enrich"]["api"]) == {"single", "batches of 100", "batches of 1,000"}
