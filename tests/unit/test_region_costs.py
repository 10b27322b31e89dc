"""What several regions cost (``loader.planning.regions``, ``ipmeta plan --regions N``), against the
figures docs/deploy.md ("Several regions") and the README quote."""

from __future__ import annotations

import json

import pytest

from ipmeta_cli.main import main
from loader.planning.costs import (
    count_read_costs,
    load_costs,
    lookup_costs,
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


def test_a_full_reload_in_three_regions_is_each_regions_write_bill() -> None:
    # Given GeoLite2-City written full in home and replicated to two regions
    three = replicated_load_costs(CITY_ITEMS, CITY_ITEM_BYTES, 3)
    one = load_costs(CITY_ITEMS, CITY_ITEM_BYTES)
    # Then the writes and the old version's deletes are billed in every region: about $13
    assert three["write_usd_replacing_a_version"] == pytest.approx(3 * one["write_usd_replacing_a_version"])
    assert three["write_usd_replacing_a_version"] == pytest.approx(13.47, abs=0.01)
    # And home's activation and each replica's arrival check count every item once, consistently:
    # a read unit per 4 KB of the version, about 0.5 M read units
    count = count_read_costs(None, items=CITY_ITEMS, item_bytes=CITY_ITEM_BYTES)
    assert three["arrival_check_read_units_per_region"] == three["count_read_units_per_region"]
    assert three["count_read_units_per_region"] == count["read_units"]
    assert count["read_units"] == -(-CITY_ITEMS * CITY_ITEM_BYTES // 4096)
    assert 510_000 < count["read_units"] < 515_000
    assert three["arrival_check_usd"] == pytest.approx(2 * 0.064, abs=0.001)
    assert three["count_reads_usd"] == pytest.approx(3 * 0.064, abs=0.001)
    # And storage is paid in every region
    assert three["storage_usd_per_month"] == pytest.approx(3 * one["storage_usd_per_month"], abs=1e-3)


def test_following_every_release_in_three_regions_triples_the_writes_not_the_diff() -> None:
    three = replicated_reload_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, 3, max_chain=8, threshold=0.25)
    one = replicated_reload_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, 1, max_chain=8, threshold=0.25)
    home = reload_month_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, max_chain=8, threshold=0.25)
    # One region is the model of one region, and its count of each new version
    assert one["usd_per_month"] == pytest.approx(
        home["delta_usd_per_month"] + one["breakdown"]["counts"], abs=0.02
    )
    assert one["breakdown"]["replication_transfer"] == 0
    assert three["breakdown"]["counts"] == pytest.approx(3 * one["breakdown"]["counts"], abs=0.02)
    # Three: the writes three times, the diff's reads of the base once (in home)
    assert three["breakdown"]["writes"] == pytest.approx(3 * one["breakdown"]["writes"], abs=0.02)
    assert three["breakdown"]["diff_reads"] == one["breakdown"]["diff_reads"]
    assert three["usd_per_month"] == pytest.approx(19.23, abs=0.01)


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
    reloads = replicated_reload_costs(CITY_ITEMS, CITY_ITEM_BYTES, 0.012, 3, max_chain=8, threshold=0.25)
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
