"""The guard on any load (``loader.pipeline.guard``): ``ipmeta load --max-change-ratio`` holds a release
that rewrote most of the active version, or shrank under the floor; ``ipmeta activate`` serves it.

The same ``activate`` runs in the Activate state, so scheduled reloads (``sourceUrl``) with a
ratio in their options are held alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli.main import main
from loader.store.table import LoaderTable
from tests.integration.conftest import get_json, running_api_server


def ranges(path: Path, count: int, label: str, *, same: int = 0) -> Path:
    """``count`` /24s from 10.0.0.0, each its own label (so none coalesce); the first ``same`` as the
    first release labels them."""
    labels = [f"first-{n}" if n < same else f"{label}-{n}" for n in range(count)]
    lines = ["network,label"] + [f"10.{(n >> 8) & 255}.{n & 255}.0/24,{labels[n]}" for n in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def load(tmp_path: Path, source: Path, *guard: str) -> int:
    return main(["load", "--data-dir", str(tmp_path), "--dataset", "ranges", *guard, str(source)])


def active(store: LoaderTable) -> int | None:
    return store.for_dataset("ranges").lookup.read_active_version(consistent=True)


GUARD = ("--max-change-ratio", "0.1", "--min-size-ratio", "0.5")


@pytest.mark.parametrize(
    ("count", "label", "reason"),
    [(200, "renamed", "changes"), (60, "first", "items, under 50%")],
    ids=["90-percent-changed", "shrunk-under-the-floor"],
)
def test_a_release_past_the_guard_is_held_then_activated_on_request(  # noqa: PLR0917 - fixtures
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    count: int,
    label: str,
    reason: str,
) -> None:
    # Given 200 ranges active
    assert load(tmp_path, ranges(tmp_path / "first.csv", 200, "first"), *GUARD) == 0
    # When a release relabels 90% of them (or keeps under half)
    second = ranges(tmp_path / "second.csv", count, label, same=20)
    capsys.readouterr()
    assert load(tmp_path, second, *GUARD) == 0
    out = capsys.readouterr().out
    # Then it is written and verified but held: version 1 still serves
    assert "held" in out
    assert active(store) == 1
    assert main(["versions", "--data-dir", str(tmp_path), "--dataset", "ranges", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(row["version"], row["status"]) for row in listed] == [("v2", "held"), ("v1", "active")]
    held = store.for_dataset("ranges").loads.get(2)
    assert held is not None
    assert reason in str(held.error)
    # When `ipmeta activate` accepts it, it serves
    assert main(["activate", "--data-dir", str(tmp_path), "ranges.v2"]) == 0
    assert active(store) == 2


def test_a_release_within_the_ratio_activates(
    store: LoaderTable, table_environment: Settings, tmp_path: Path
) -> None:
    assert load(tmp_path, ranges(tmp_path / "first.csv", 200, "first"), *GUARD) == 0
    second = ranges(tmp_path / "second.csv", 200, "moved", same=190)  # 5% relabelled
    assert load(tmp_path, second, *GUARD) == 0
    assert active(store) == 2


@pytest.mark.parametrize(
    "written_full",
    [("--delta", "never"), ("--index-field", "label"), ("--flag-column", "label")],
    ids=["delta-never", "value-index", "flag-index"],
)
def test_a_release_written_full_is_still_measured_and_held(
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    written_full: tuple[str, str],
) -> None:
    # Given 200 ranges active, loaded by a path that never writes a delta
    assert load(tmp_path, ranges(tmp_path / "first.csv", 200, "first"), *GUARD, *written_full) == 0
    # When a release relabels 90% of them
    second = ranges(tmp_path / "second.csv", 200, "renamed", same=20)
    capsys.readouterr()
    assert load(tmp_path, second, *GUARD, *written_full) == 0
    out = capsys.readouterr().out
    # Then it is written full, its change measured against version 1, and held
    assert "written full, not as a delta over v1" in out
    assert active(store) == 1
    held = store.for_dataset("ranges").loads.get(2)
    assert held is not None
    assert str(held.status) == "held"
    assert "changes 90% of the active version, above 10%" in str(held.error)
    delta = held.report.delta or {}
    # (what a delta over it would write: the 180 relabelled ranges and the bucket's marker)
    assert delta["written_as"] == "full"
    assert 0.9 <= float(delta["share_of_base"]) < 0.91
    # And once it serves, a release that relabels 2% of it, on the same path, activates
    assert main(["activate", "--data-dir", str(tmp_path), "ranges.v2"]) == 0
    third = tmp_path / "third.csv"
    relabelled = second.read_text().replace("renamed-198", "third-198").replace("renamed-199", "third-199")
    third.write_text(relabelled)
    assert load(tmp_path, third, *GUARD, *written_full) == 0
    assert active(store) == 3


def cloud_ranges(path: Path, regions: dict[str, int], *, ipv6: int) -> Path:
    """AWS-shaped ranges (``network,region,service``): ``regions[name]`` /24s of IPv4 each, every
    region in its own /8 (as AWS allocates them), and ``ipv6`` /48s of one region's IPv6 block."""
    lines = ["network,region,service"]
    for number, (region, count) in enumerate(regions.items()):
        # (from x.0.1.0: a range at its bucket run's first address is rewritten whatever changed)
        lines += [f"{3 + number}.0.{n + 1}.0/24,{region},EC2-{n}" for n in range(count)]
    lines += [f"2600:1f14:{n + 1:x}::/48,us-west-2,EC2-{n}" for n in range(ipv6)]
    path.write_text("\n".join(lines) + "\n")
    return path


REGIONS = {"us-east-1": 100, "eu-west-1": 40, "ap-south-1": 40}


@pytest.mark.parametrize(
    ("second", "removed"),
    [
        ({"regions": REGIONS, "ipv6": 0}, 60),
        ({"regions": {**REGIONS, "eu-west-1": 0}, "ipv6": 60}, 40),
    ],
    ids=["every-ipv6-range-dropped", "one-region-dropped"],
)
@pytest.mark.parametrize("written_full", [(), ("--delta", "never")], ids=["delta", "full"])
def test_a_release_that_drops_whole_blocks_is_held_though_above_the_floor(  # noqa: PLR0917 - fixtures
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    second: dict[str, Any],
    removed: int,
    written_full: tuple[str, ...],
) -> None:
    # Given 240 ranges active: three regions' IPv4 and 60 IPv6 ranges, each family in its own buckets
    first = cloud_ranges(tmp_path / "first.csv", REGIONS, ipv6=60)
    assert load(tmp_path, first, *GUARD, *written_full) == 0
    # When a release drops every IPv6 range (25%), or one region's (17%): whole buckets left empty,
    # still far above the 50% floor
    capsys.readouterr()
    assert load(tmp_path, cloud_ranges(tmp_path / "second.csv", **second), *GUARD, *written_full) == 0
    # Then the removal is counted as change, and the release is held: version 1 still serves
    assert active(store) == 1
    held = store.for_dataset("ranges").loads.get(2)
    assert held is not None
    assert str(held.status) == "held"
    share = f"{removed / 240:.0%}"
    assert f"changes {share} of the active version ({removed} of its 240 items removed)" in str(held.error)
    delta = held.report.delta or {}
    assert (delta["removed"], delta["vacated"], delta["changed"]) == (removed, removed, removed)
    # And `ipmeta activate` serves it; the dropped ranges answer 404 then
    assert main(["activate", "--data-dir", str(tmp_path), "ranges.v2"]) == 0
    assert active(store) == 2
    gone = "2600:1f14:1::1" if second["ipv6"] == 0 else "4.0.1.1"
    kept = "3.0.1.1"
    with running_api_server(store) as api:
        assert get_json(api, f"/v1/ip/{gone}")[0] == 404
        assert get_json(api, f"/v1/ip/{kept}")[1]["data"]["region"] == "us-east-1"
