"""Replica regions' pointers: their keys, what a region's lookup reads, and when cleanup may delete.

``held_by_regions`` is the rule that keeps a version's items while any replica
region may still serve it (docs/decisions.md, "Replicas"); here on plain pointers,
with no table.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from ipmeta.schema import keys
from ipmeta.schema.records import VersionMeta, VersionStatus
from ipmeta.store.dynamodb import Store
from loader.pipeline.retention import BEYOND_RETENTION, held_by_regions
from loader.records import Pointer, PointerMove
from loader.store.table import LoaderTable

REGION = "eu-west-1"


def test_a_region_pointer_is_its_datasets_own_key_beside_homes() -> None:
    assert keys.key_space().region_pointer(REGION) == "meta#pointer#eu-west-1"
    city = keys.key_space("city")
    assert city.region_pointer(REGION) == "ds#city#meta#pointer#eu-west-1"
    # Home's lookups read the pointer they always read; a region's read its own
    assert city.pointer_of(None) == city.pointer == "ds#city#meta#pointer"
    assert city.pointer_of(REGION) == city.region_pointer(REGION)


@pytest.mark.parametrize("name", ["europe", "eu-west", "EU-WEST-1", "eu-west-1#x", ""])
def test_a_region_that_is_no_aws_region_name_is_refused(name: str) -> None:
    with pytest.raises(keys.RegionNameInvalid):
        keys.key_space().region_pointer(name)


class _Pointers:
    """A client that answers one BatchGetItem and remembers which keys it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        (request,) = RequestItems.values()
        self.asked = [key[keys.PARTITION_KEY]["S"] for key in request["Keys"]]
        items = [{keys.PARTITION_KEY: {"S": pk}, "version": {"N": "7"}} for pk in self.asked]
        return {"Responses": {"t": items}}


@pytest.mark.parametrize(("region", "suffix"), [(None, ""), (REGION, "#eu-west-1")])
def test_a_lookup_reads_the_pointers_of_its_own_region(region: str | None, suffix: str) -> None:
    client = _Pointers()
    store = Store(cast(Any, client), "t", pointer_region=region)
    found = store.for_dataset("city").read_active_versions(["city", "default"])
    assert client.asked == [f"ds#city#meta#pointer{suffix}", f"meta#pointer{suffix}"]
    assert {name: pointer.version if pointer else None for name, pointer in found.items()} == {
        "city": 7,
        "default": 7,
    }


def test_a_pointer_write_releases_what_it_stops_reading() -> None:
    delta = Pointer(version=5, base=3, generation=4)
    assert PointerMove(delta, Pointer(6, 3, 5)).released == {5}
    assert PointerMove(delta, Pointer(7, 0, 5)).released == {5, 3}
    assert PointerMove(None, Pointer(1, 0, 1)).released == frozenset()


def _table(home: Pointer | None, pointers: dict[str, Pointer | None]) -> LoaderTable:
    regions = SimpleNamespace(home=lambda: home, of=lambda region: pointers[region])
    return cast(LoaderTable, SimpleNamespace(regions=regions))


def _meta(version: int, released: int | None) -> VersionMeta:
    return VersionMeta(version=version, status=VersionStatus.RETIRED, released_generation=released)


NOW = 10_000.0
HOME = Pointer(version=4, generation=6, at=9_000)


@pytest.mark.parametrize(
    ("region_pointer", "held"),
    [
        (None, True),  # a region with no pointer yet may copy any generation of home's
        (Pointer(2, 0, 4, at=5_000), True),  # it follows a generation from before v2 was released
        (Pointer(3, 2, 5, at=5_000), True),  # it serves v3, a delta over v2
        (Pointer(4, 0, 6, at=int(NOW) - 10), True),  # it moved past v2 seconds ago: its containers' grace
        (Pointer(4, 0, 6, at=5_000), False),  # it moved past v2 long ago
    ],
)
def test_a_retired_version_is_held_while_a_region_may_still_serve_it(
    region_pointer: Pointer | None, held: bool
) -> None:
    # Given v2, released by home's generation 5, beyond retention
    table = _table(HOME, {REGION: region_pointer})
    doomed = {2: BEYOND_RETENTION}
    found = held_by_regions(table, doomed, [_meta(2, 5)], [REGION], at=NOW, grace_seconds=60)
    assert found == ({2: REGION} if held else {})


def test_a_version_never_stamped_waits_for_homes_present_generation() -> None:
    # A pointer write that died before stamping what it released: home's present generation is the bar
    behind = _table(HOME, {REGION: Pointer(4, 0, 5, at=5_000)})
    current = _table(HOME, {REGION: Pointer(4, 0, 6, at=5_000)})
    doomed = {2: BEYOND_RETENTION}
    assert held_by_regions(behind, doomed, [_meta(2, None)], [REGION], at=NOW, grace_seconds=60) == {
        2: REGION
    }
    assert held_by_regions(current, doomed, [_meta(2, None)], [REGION], at=NOW, grace_seconds=60) == {}


def test_a_failed_load_is_never_held_no_region_ever_served_it() -> None:
    table = _table(HOME, {REGION: None, "ap-southeast-1": None})
    doomed = {8: "failed load", 9: "abandoned load"}
    assert held_by_regions(table, doomed, [], [REGION, "ap-southeast-1"], at=NOW, grace_seconds=60) == {}


def test_every_region_must_have_moved_past_it() -> None:
    moved = Pointer(4, 0, 6, at=5_000)
    table = _table(HOME, {REGION: moved, "ap-southeast-1": Pointer(2, 0, 4, at=5_000)})
    found = held_by_regions(
        table, {2: BEYOND_RETENTION}, [_meta(2, 5)], [REGION, "ap-southeast-1"], at=NOW, grace_seconds=60
    )
    assert found == {2: "ap-southeast-1"}
