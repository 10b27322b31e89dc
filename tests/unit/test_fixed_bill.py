"""``ipmeta plan`` prints the default stack's fixed monthly bill line by line
(``loader.planning.fixed_bill``); tests/infra/test_fixed_bill.py ties its counts to the template."""

from __future__ import annotations

import json

import pytest

from ipmeta_cli.main import main
from loader.planning.fixed_bill import DEFAULT_STACK, FixedResources, fixed_bill

LINES = ("alarms", "custom_metrics", "dashboard", "keys", "secrets", "storage", "backups")


def test_the_bill_has_every_line_and_they_add_up_to_the_total() -> None:
    bill = fixed_bill()
    assert tuple(bill["breakdown"]) == LINES
    assert bill["usd_per_month"] == pytest.approx(sum(bill["breakdown"].values()), abs=0.01)
    # An idle stack's lookup metrics bill nothing; with traffic every hour they are the most that grows
    assert bill["breakdown"]["custom_metrics"] == 0
    assert bill["custom_metrics_with_traffic_usd"] == pytest.approx(8 * 0.30)


def test_each_line_follows_its_count() -> None:
    # Given one more alarm metric, secret and key, and ten times the data
    more = FixedResources(
        alarm_metrics=DEFAULT_STACK.alarm_metrics + 1,
        dashboards=DEFAULT_STACK.dashboards,
        keys=DEFAULT_STACK.keys + 1,
        secrets=DEFAULT_STACK.secrets + 1,
    )
    base, grown = fixed_bill(stored_gb=1.0)["breakdown"], fixed_bill(more, stored_gb=10.0)["breakdown"]
    # Then each line grows by its price, and storage and backups with the data
    assert grown["alarms"] - base["alarms"] == pytest.approx(0.10)
    assert grown["keys"] - base["keys"] == pytest.approx(1.00)
    assert grown["secrets"] - base["secrets"] == pytest.approx(0.40)
    assert (base["storage"], grown["storage"]) == (0.25, 2.5)
    assert (base["backups"], grown["backups"]) == (0.2, 2.0)


def test_the_default_stack_is_within_the_target_and_the_dashboard_is_what_would_pass_it() -> None:
    # Given the default stack (no dashboard) and the same stack with dashboard=true
    lean, drawn = fixed_bill(), fixed_bill(DEFAULT_STACK.with_dashboard())
    # Then the default is within $3 a month, and the dashboard adds its $3 on the one line
    assert lean["breakdown"]["dashboard"] == 0
    assert lean["usd_per_month"] <= lean["target_usd_per_month"] == 3.0
    assert drawn["breakdown"]["dashboard"] == pytest.approx(3.00)
    assert drawn["usd_per_month"] == pytest.approx(lean["usd_per_month"] + 3.00)
    assert drawn["usd_per_month"] > drawn["target_usd_per_month"]


def test_plan_prints_the_fixed_bill_line_by_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    bill = fixed_bill()
    for name in ("alarms (9 alarm metrics)", "custom metrics", "the dashboard", "keys", "secrets", "storage"):
        assert name in out
    assert f"${bill['usd_per_month']:,.2f}" in out
    assert main(["plan", "--json", "--stored-gb", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fixed"]["resources"]["stored_gb"] == 2
    assert report["fixed"]["breakdown"]["backups"] == 0.4
    # And --dashboard prices the stack deployed with -c dashboard=true
    assert main(["plan", "--json", "--dashboard"]) == 0
    drawn = json.loads(capsys.readouterr().out)["fixed"]
    assert (drawn["resources"]["dashboards"], drawn["breakdown"]["dashboard"]) == (1, 3.0)
