"""What several regions cost (``loader.planning.regions``, ``ipmeta plan --regions N``), against the
figures docs/deploy.md ("Several regions") and the README quote."""

from __future__ import annotations

import json

import pytest

from ipmeta_cli.main import main
from loader.planning.costs import (
    TWICE_A_WEEK_PER_MONTH,
    count_read_costs,
    load_costs,
    lookup_costs,
    reload_cycle,
    reload_month_costs,
)
from loader.planning.regions import (
    region_fixed_costs,
    regional_lookup_costs,
    replicated_load_costs,
    replicated_reload_costs,
)

#: GeoLite2-City with its default fields (docs/loader.md, "Full records"): items and mean bytes.
CITY_ITEMS = 3_591_359
CITY_ITEM_BYTES = 584
#: Its releases drifting 1.2% apart, followed as deltas (`--delta auto`, a chain of 8 at most).
CITY_CYCLE = reload_cycle(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)


def test_a_full_reload_in_three_regions_is_each_regions_write_bill() -> None:
    # Given GeoLite2-City written full in home and replicated to two regions
    three = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 3)
    one = load_costs(CITY_ITEMS, CITY_ITEM_BYTES)
    # Then the writes and the old version's deletes are billed in every region: about $13
    assert three["write_usd_replacing_a_version"] == pytest.approx(3 * one["write_usd_replacing_a_version"])
    assert three["write_usd_replacing_a_version"] == pytest.approx(13.47, abs=0.01)
    # And home's activation counts every item once, consistently: a read unit per 4 KB of the
    # version, about 0.5 M read units; each replica's arrival check as many at each of its 7
    # passes while the items arrive (by default up to 30 s after the pointer)
    count = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)
    assert three["arrival_check_passes"] == 7
    assert three["arrival_check_read_units_per_region"] == 7 * three["count_read_units_per_region"]
    assert three["count_read_units_per_region"] == count["read_units"]
    assert count["read_units"] == -(-CITY_ITEMS * CITY_ITEM_BYTES // 4096)
    assert 510_000 < count["read_units"] < 515_000
    assert three["arrival_check_usd"] == pytest.approx(2 * 7 * 0.064, abs=0.01)
    assert three["count_reads_usd"] == pytest.approx((1 + 2 * 7) * 0.064, abs=0.01)
    # And storage is paid in every region
    assert three["storage_usd_per_month"] == pytest.approx(3 * one["storage_usd_per_month"], abs=1e-3)


def test_following_every_release_in_three_regions_triples_the_writes_not_the_diff() -> None:
    three = replicated_reload_costs(CITY_CYCLE, 3)
    one = replicated_reload_costs(CITY_CYCLE, 1)
    home = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    # One region is the model of one region, its count of each new version included
    assert one["usd_per_month"] == home["delta_usd_per_month"]
    assert one["breakdown"]["replication_transfer"] == 0
    # Three: home's count once, and each replica's at each of its check's 7 passes
    per_month = CITY_CYCLE.lines()["counts"] * TWICE_A_WEEK_PER_MONTH / CITY_CYCLE.versions
    assert three["breakdown"]["counts"] == round((1 + 2 * 7) * per_month, 2)
    # Three: the writes three times, the diff's reads of the base once (in home)
    assert three["breakdown"]["writes"] == pytest.approx(3 * one["breakdown"]["writes"], abs=0.02)
    assert three["breakdown"]["diff_reads"] == one["breakdown"]["diff_reads"]
    assert three["usd_per_month"] == pytest.approx(20.29, abs=0.01)


def test_lookups_spread_over_regions_cost_what_they_cost_in_one_but_for_the_tiers() -> None:
    # Below the first tier a region's share costs its share
    assert regional_lookup_costs(100_000_000, 3)["fronts"]["rest"]["total"] == pytest.approx(
        lookup_costs(100_000_000)["fronts"]["rest"]["total"], abs=0.05
    )
    # At a billion, each region pays API Gateway's first tier on its own third, and the free
    # 100 GB of transfer out counts once for the account
    billion = regional_lookup_costs(1_000_000_000, 3)["fronts"]["rest"]
    assert billion["total"] > lookup_costs(1_000_000_000)["fronts"]["rest"]["total"]
    whole = lookup_costs(1_000_000_000)["fronts"]["rest"]["breakdown"]["data_transfer"]
    assert billion["data_transfer"] == pytest.approx(whole, abs=0.01)


def test_a_replica_region_costs_under_three_dollars_a_month_before_any_traffic() -> None:
    # Six alarm metrics since issue 34 (eleven before: $2.98)
    fixed = region_fixed_costs()
    assert fixed["usd_per_month"] == pytest.approx(2.48, abs=0.01)
    assert fixed["breakdown"]["alarms"] == pytest.approx(0.60)
    assert fixed["breakdown"]["arrival_check_runs"] < 0.1


def test_plan_prices_a_month_of_lookups_from_three_regions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--lookups-per-month", "100000000", "--regions", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    regions = report["regions"]
    assert regions["regions"] == 3
    assert regions["lookups"]["fronts"]["http"]["total"] == pytest.approx(136.79, abs=0.05)
    assert regions["fixed_usd_per_month"] == pytest.approx(2 * 2.48, abs=0.02)
    # And one region prints no regions at all
    assert main(["plan", "--lookups-per-month", "100000000", "--json"]) == 0
    assert "regions" not in json.loads(capsys.readouterr().out)


def test_the_readmes_three_region_row_is_the_model() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    lookups = regional_lookup_costs(100_000_000, 3)["fronts"]
    reloads = replicated_reload_costs(CITY_CYCLE, 3)
    load = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 3)
    stored = load["storage_usd_per_month"] + load["pitr_usd_per_month"]
    fixed = 2 * region_fixed_costs()["usd_per_month"]
    one = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 1)
    home = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    for front in ("url", "http", "rest"):
        three = lookups[front]["total"] + reloads["usd_per_month"] + stored + fixed
        single = lookup_costs(100_000_000)["fronts"][front]["total"] + home["delta_usd_per_month"]
        single += one["storage_usd_per_month"] + one["pitr_usd_per_month"]
        assert f"${three:,.2f}" in readme, front
        assert f"${single:,.2f}" in readme, front
    # And the one-region reload row, each new version's count included
    assert f"**${home['delta_usd_per_month']:,.2f}** as deltas" in readme
    assert f"${home['full_usd_per_month']:,.2f} written full" in readme


def test_one_regions_month_of_reloads_counts_each_new_version_as_the_region_model_does() -> None:
    # Given GeoLite2-City followed in one region, as deltas and written full
    home = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    one = replicated_reload_costs(CITY_CYCLE, 1)
    # Then home's activation count of each new version is in the month, the region model's very lines
    assert one["breakdown"]["replication_transfer"] == 0
    assert home["breakdown"] == {
        line: usd for line, usd in one["breakdown"].items() if line != "replication_transfer"
    }
    assert home["breakdown"]["counts"] > 0
    assert home["delta_usd_per_month"] == one["usd_per_month"] == one["one_region_usd_per_month"]
    # And a full reload at every release counts the full version each time
    full_count = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)["read_usd"]
    full_write = load_costs(CITY_ITEMS, CITY_ITEM_BYTES)["write_usd_replacing_a_version"]
    assert home["full_usd_per_month"] == pytest.approx((full_write + full_count) * 104 / 12, abs=0.01)


def test_a_measured_count_prices_the_full_version_in_the_month() -> None:
    # Given a dry run that measured the full version's count at ten times the model's
    model = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)
    measured = model | {"read_usd": 10 * model["read_usd"]}
    plain = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    counted = reload_month_costs(
        CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25, count=measured
    )
    # Then the month prices the measured count once per cycle, the deltas' counts as modelled
    extra = 9 * model["read_usd"] * 104 / 12 / 9
    assert counted["breakdown"]["counts"] == pytest.approx(plain["breakdown"]["counts"] + extra, abs=0.01)
    assert counted["full_usd_per_month"] == pytest.approx(
        plain["full_usd_per_month"] + 9 * model["read_usd"] * 104 / 12, abs=0.01
    )


def test_the_plans_month_of_reloads_prices_the_count_the_dry_run_measured() -> None:
    import argparse

    from ipmeta_cli.planning import reload_costs

    # Given a plan whose dry run measured the full version's count (here a dollar)
    model = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)
    load = {"items": CITY_ITEMS, "item_bytes": CITY_ITEM_BYTES, "count_reads": model | {"read_usd": 1.0}}
    estimate = {
        "previous_items": CITY_ITEMS,
        "delta_items": round(0.012 * CITY_ITEMS),
        "share_of_previous": 0.012,
    }
    args = argparse.Namespace(releases_per_month=104 / 12, delta_threshold=0.25)
    month = reload_costs(estimate, load, args)["following_every_release"]
    # Then the month counts that version once a cycle, and every release when written full
    modelled = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    extra = (1.0 - model["read_usd"]) * 104 / 12
    assert month["breakdown"]["counts"] == pytest.approx(
        modelled["breakdown"]["counts"] + extra / 9, abs=0.01
    )
    assert month["full_usd_per_month"] == pytest.approx(modelled["full_usd_per_month"] + extra, abs=0.01)


def test_the_arrival_checks_count_passes_follow_its_schedule() -> None:
    from loader.planning.regions import arrival_count_passes
    from loader.settings import ARRIVAL_PERIOD_SECONDS, ARRIVAL_WAIT_SECONDS, DEFAULT_POLL_SECONDS
    from stacks.regions.arrival_check import ARRIVAL_RATE

    # The schedule the plan prices is the one deployed: a run a minute, recounting every 5 s for 40 s
    assert ARRIVAL_RATE.to_seconds() == ARRIVAL_PERIOD_SECONDS == 60
    assert (ARRIVAL_WAIT_SECONDS, DEFAULT_POLL_SECONDS) == (40.0, 5.0)
    # A version whole when its pointer arrives is counted once
    assert arrival_count_passes(0) == 1
    # Items still arriving 30 s later: counts at 0, 5, ..., 25 find them short, the one at 30 whole
    assert arrival_count_passes(30) == 7
    assert arrival_count_passes(2) == 2
    # Past the run's 40 s of recounts, the next run (a minute after) goes on: 9 passes, then 60, 65
    assert arrival_count_passes(40) == 9
    assert arrival_count_passes(41) == 10
    assert arrival_count_passes(62) == 11


def test_the_plan_prices_every_recount_of_a_version_still_arriving() -> None:
    # Given GeoLite2-City in three regions, its items arriving in each replica up to 30 s late
    count = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)
    three = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 3, arriving_seconds=30)
    # Then each replica's check is priced at its 7 passes, each at most a whole count (items
    # arrive in no order, so any partition may be short until the last one arrives)
    assert three["arrival_check_passes"] == 7
    assert three["arrival_check_read_units_per_region"] == 7 * count["read_units"]
    assert three["arrival_check_usd"] == pytest.approx(2 * 7 * count["read_usd"], abs=1e-3)
    # And home's count once, with both replicas' checks
    assert three["count_reads_usd"] == pytest.approx((1 + 2 * 7) * count["read_usd"], abs=1e-3)
    # And a version already whole is one count a region, as before
    whole = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 3, arriving_seconds=0)
    assert whole["arrival_check_read_units_per_region"] == count["read_units"]
    # And a reload cycle's counts the same way: home once, each replica at its passes
    per_month = CITY_CYCLE.lines()["counts"] * TWICE_A_WEEK_PER_MONTH / CITY_CYCLE.versions
    cycle = replicated_reload_costs(CITY_CYCLE, 3, arriving_seconds=30)
    once = replicated_reload_costs(CITY_CYCLE, 3, arriving_seconds=0)
    assert cycle["breakdown"]["counts"] == round((1 + 2 * 7) * per_month, 2)
    assert once["breakdown"]["counts"] == round(3 * per_month, 2)
