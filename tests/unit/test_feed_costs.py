"""``ipmeta plan --feed network:...``: a month of a set's scheduled checks, against one schedule per list."""

from __future__ import annotations

import pytest

from loader.planning.feed_costs import ALARM_METRIC_PER_MONTH, ListPace, feed_check_costs

HOUR, WEEK = 3600, 7 * 86400


def test_the_set_runs_at_its_fastest_lists_pace_and_asks_every_file_each_run() -> None:
    costs = feed_check_costs(
        [ListPace("tor", HOUR), ListPace("azure", WEEK), ListPace("cloudflare", WEEK, 2)]
    )
    one, each = costs["set"], costs["per_list"]
    # 730 hours a month: 730 runs of four files each
    assert (one["every_seconds"], one["runs"], one["requests"]) == (HOUR, 730, 730 * 4)
    # One schedule per list: Tor hourly, the weekly lists about four times a month each
    assert each["runs"] == 730 + 4 + 4
    assert each["requests"] == 730 + 4 + 9
    # The set pays two alarms; a schedule per list would pay two per list
    assert one["breakdown"]["alarms"] == pytest.approx(2 * ALARM_METRIC_PER_MONTH)
    assert one["usd_per_month"] < each["usd_per_month"]
    assert one["usd_per_month"] == pytest.approx(sum(one["breakdown"].values()), abs=1e-3)


def test_a_slower_set_costs_less() -> None:
    hourly = feed_check_costs([ListPace("tor", HOUR)])["set"]
    daily = feed_check_costs([ListPace("gcp", 24 * HOUR)])["set"]
    assert daily["runs"] * 24 == pytest.approx(hourly["runs"], abs=24)
    assert daily["usd_per_month"] < hourly["usd_per_month"]
    with pytest.raises(ValueError, match="at least one"):
        feed_check_costs([])
