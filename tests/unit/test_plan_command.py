"""`ipmeta plan`: the model on the load's real write order, the blog's experiments, lookup costs, charts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipmeta_cli.main import main

FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["plan", *argv, "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_the_blog_scenarios_come_out_within_fifteen_percent(capsys: pytest.CaptureFixture[str]) -> None:
    report = run(capsys, "--reproduce-blog")
    scenarios = report["blog"]["scenarios"]  # type: ignore[index]
    assert len(scenarios) == 4
    for scenario in scenarios:
        assert abs(scenario["model"] / scenario["blog"] - 1) <= 0.15, scenario


def test_a_file_is_planned_from_its_dry_run_and_charted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = run(capsys, str(FIXTURE), "--workers", "1", "--chart", str(tmp_path / "charts"))
    plan = report["load"]
    assert plan["items"] == 12  # type: ignore[index]
    assert plan["rows"] == 10  # type: ignore[index]
    assert set(plan["loads"]) == {"on_demand_cold", "on_demand_warm", "provisioned"}  # type: ignore[index]
    for chart in report["charts"]:  # type: ignore[attr-defined]
        assert Path(chart).read_bytes().startswith(PNG_SIGNATURE)
        assert Path(chart).stat().st_size > 10_000


def test_lookup_costs_per_front_at_a_hundred_million(capsys: pytest.CaptureFixture[str]) -> None:
    report = run(capsys, "--lookups-per-month", "100000000")
    fronts = report["lookups"]["fronts"]  # type: ignore[index]
    assert set(fronts) >= {"rest", "http"}
    assert fronts["http"]["per_million"] < fronts["rest"]["per_million"]


def test_the_text_report_states_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", str(FIXTURE), "--workers", "1", "--index-field", "asn"]
    argv += ["--lookups-per-month", "100000000"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "items 12 in " in text
    assert "no pre-warming needed" in text
    assert "write cost $0.00 ($0.00 replacing a version)" in text  # 12 items cost $0.0000075
    assert "at least 10 shards" in text
    assert "rest   $      392.17  ($3.92 per million)" in text
    assert "http   $      142.17  ($1.42 per million)" in text
    assert "{" not in text  # no raw dicts
