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
    assert set(fronts) == {"rest", "http", "url", "rest+edge", "http+edge", "url+edge"}
    assert fronts["url"]["per_million"] < fronts["http"]["per_million"] < fronts["rest"]["per_million"]
    # Issue 27: the function URL at the floor, each line of its bill shown
    assert fronts["url"]["per_million"] <= 0.30
    assert set(fronts["url"]["breakdown"]) >= {"lambda_requests", "lambda_duration", "dynamodb_reads", "logs"}
    assert fronts["url+edge"]["breakdown"]["cloudfront_requests"] > 0


def test_the_lookup_metrics_are_priced_the_same_at_a_million_and_a_billion_lookups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    texts = []
    for lookups in ("1000000", "1000000000"):
        assert main(["plan", "--lookups-per-month", lookups]) == 0
        texts.append([line for line in capsys.readouterr().out.splitlines() if "lookup metrics" in line])
    assert texts[0] == texts[1]
    assert texts[0] == [
        "  and the lookup metrics (lookupMetrics), whatever the lookups: $2.56 a month at most "
        "(8 metrics $2.40, 438,000 lines from 10 containers $0.16)"
    ]
    # More containers, more lines; the same lookups
    assert main(["plan", "--lookups-per-month", "1000000", "--metric-containers", "100"]) == 0
    assert "438,000 lines" not in capsys.readouterr().out


def test_the_text_report_states_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", str(FIXTURE), "--workers", "1", "--index-field", "asn"]
    argv += ["--lookups-per-month", "100000000"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "items 12 in " in text
    assert "no pre-warming needed" in text
    assert "write cost $0.00 ($0.00 replacing a version)" in text  # 12 items cost $0.0000075
    assert "at least 10 shards" in text
    assert "rest      $      386.79  ($3.87 per million)" in text
    assert "http      $      136.79  ($1.37 per million)" in text
    assert "url       $       25.47  ($0.25 per million)" in text
    assert "Lambda requests $20.00, Lambda duration $4.00, DynamoDB reads $0.87, logs $0.60" in text
    assert "{" not in text  # no raw dicts


def test_the_plan_costs_a_load_by_its_measured_item_sizes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given a MaxMind DB with German and English names: the defaults keep English, `all` keeps both
    from loader.export.mmdb_writer import DatabaseMetadata, write_database

    record = {
        "city": {"names": {"en": "Sydney", "de": "Sydney " + "x" * 1200}},
        "country": {"iso_code": "AU"},
    }
    path = tmp_path / "GeoLite2-City.mmdb"
    write_database(
        [(4, index << 8, (index << 8) + 255, record) for index in range(1, 5)],
        path,
        DatabaseMetadata("GeoLite2-City", {}),
    )
    default = run(capsys, str(path), "--workers", "1", "--no-coalesce")["load"]
    every = run(capsys, str(path), "--workers", "1", "--no-coalesce", "--mmdb-fields", "all")["load"]
    # Then the items of every field are larger, by the German name, and each takes two write units
    assert default["items"] == every["items"] == 4  # type: ignore[index]
    assert default["item_bytes"] < 200  # type: ignore[index]
    assert 1200 < every["item_bytes"] < 1400  # type: ignore[index]
    assert default["cost"]["write_units"] == 4  # type: ignore[index]
    assert every["cost"]["write_units"] == 8  # type: ignore[index]
    assert every["cost"]["storage_gb"] >= default["cost"]["storage_gb"]  # type: ignore[index]


def test_stored_sizes_follow_dynamodb_rules() -> None:
    from decimal import Decimal

    from loader.formats import stored_bytes

    assert stored_bytes("Zürich") == 7  # UTF-8 bytes
    assert stored_bytes(b"\x00\x01") == 2
    assert stored_bytes(True) == stored_bytes(None) == 1
    assert stored_bytes(Decimal("-27.4767")) == 4  # 6 significant digits: 3 bytes, plus 1
    assert stored_bytes(13335) == 4
    assert stored_bytes({"a": "xy", "l": [1, True]}) == 3 + (1 + 2 + 1) + (1 + (3 + 2 + 1 + 1 + 1) + 1)


def test_batches_are_priced_per_request_and_per_lookup(capsys: pytest.CaptureFixture[str]) -> None:
    # Given a million lookups one by one, and the same million in batches of 100
    single = run(capsys, "--lookups-per-month", "1000000")["lookups"]
    batched = run(capsys, "--lookups-per-month", "1000000", "--batch-size", "100")["lookups"]
    # Then the batches are 10,000 API requests
    assert single["requests_per_month"] == 1_000_000  # type: ignore[index]
    assert batched["requests_per_month"] == 10_000  # type: ignore[index]
    assert batched["assumptions"]["batch_size"] == 100  # type: ignore[index]
    for front in ("rest", "http"):
        one, many = single["fronts"][front]["breakdown"], batched["fronts"][front]["breakdown"]  # type: ignore[index]
        # And API Gateway, Lambda's requests and the access logs shrink a hundredfold
        for line in ("api_gateway", "lambda_requests", "logs"):
            assert many[line] == pytest.approx(one[line] / 100, abs=1e-4), (front, line)
        # While reads and Lambda's duration still count every lookup
        assert many["dynamodb_reads"] == one["dynamodb_reads"] == 0.0087
        assert many["lambda_duration"] == one["lambda_duration"]
    assert batched["fronts"]["rest"]["per_million"] == pytest.approx(0.09, abs=0.005)  # type: ignore[index]


def test_a_share_of_lookups_in_batches_and_the_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--lookups-per-month", "100000000", "--batch-size", "100", "--batch-share", "0.1"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    # 90 M single lookups and 10 M in 100,000 batches
    assert (
        "A month of 100,000,000 lookups in 90,100,000 API requests (10% of the lookups in batches of 100)"
        in text
    )
    assert "API Gateway $315.35, Lambda requests $18.02, Lambda duration $4.00, DynamoDB reads $0.87" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lookups-per-month", "5", "--batch-share", "0.5"], "--batch-share needs --batch-size"),
        (["--lookups-per-month", "5", "--batch-size", "1001"], "at most 1,000 addresses"),
        (["--reproduce-blog", "--batch-size", "10"], "give --lookups-per-month"),
    ],
)
def test_batch_options_that_cannot_be_priced_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["plan", *argv]) == 2
    assert message in capsys.readouterr().out
