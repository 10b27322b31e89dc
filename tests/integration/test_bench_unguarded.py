"""``bench.unguarded`` removes the very guard each replication scenario exercises, and only there.

The simulation's ``--no-check`` run is evidence only if the guard it removes is the one that
kept the scenario right. Each test runs the same race with the guard (it holds) and without
it (it breaks), on a real dynalite, through the loader's own cleanup and rollback.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from bench import unguarded
from ipmeta.schema.records import VersionStatus
from loader.errors import VersionNotRestorable
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.records import load_id_of
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from testing.replicas import Killed, kill_after_the_switch

pytestmark = pytest.mark.integration

FULL = LoadOptions(chunk_size=2, delta="never")


def load(store: LoaderTable, tmp_path: Path, label: str) -> int:
    lines = ["start,end,name"] + [f"{n}.1.0.0,{n}.1.0.255,{label}" for n in range(1, 7)]
    path = tmp_path / f"{label}.csv"
    path.write_text("\n".join(lines) + "\n")
    return driver.run_load([path], FULL, store, LocalStaging(tmp_path)).version


def kill_cleanup_after_two_partitions(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup (retention 1: v1 doomed) killed at its third partition delete."""
    delete = store.partitions.delete
    calls = itertools.count()

    def delete_or_die(partition: str) -> int:
        if next(calls) == 2:
            raise Killed
        return delete(partition)

    monkeypatch.setattr(store.partitions, "delete", delete_or_die)
    with pytest.raises(Killed):
        retention.cleanup(store, LocalStaging(tmp_path), retention=1, grace_seconds=0)
    monkeypatch.setattr(store.partitions, "delete", delete)


@pytest.mark.parametrize("guarded", [True, False])
def test_without_the_deleting_mark_a_rollback_takes_a_half_deleted_version(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guarded: bool
) -> None:
    # Given v1, v2, v3 (v3 active), and a cleanup of v1 killed after two of its partitions
    for label in ("a", "b", "c"):
        load(store, tmp_path, label)
    if guarded:
        kill_cleanup_after_two_partitions(store, tmp_path, monkeypatch)
        # Then, guarded, the rollback to it is refused
        with pytest.raises(VersionNotRestorable, match="deleting"):
            retention.rollback(store, 1)
        return
    with unguarded.without(unguarded.DELETING_MARK, store):
        kill_cleanup_after_two_partitions(store, tmp_path, monkeypatch)
        # When the mark is removed, the rollback to the half-deleted v1 is accepted
        retention.rollback(store, 1)
    assert store.lookup.read_active_version(consistent=True) == 1
    manifest = store.manifests.get(1)
    assert manifest is not None
    assert sum(store.partitions.count(partition) for partition in manifest.partitions) < 6


@pytest.mark.parametrize("guarded", [True, False])
def test_without_the_ever_activated_rule_a_served_version_is_an_abandoned_load(
    store: LoaderTable, tmp_path: Path, guarded: bool
) -> None:
    load(store, tmp_path, "a")
    # Given v2's activation killed right after the switch, and v3 loaded after it
    kill_after_the_switch(store, lambda: load(store, tmp_path, "b"))
    store.lock.release(load_id_of(2, store.dataset))  # its lease ran out
    load(store, tmp_path, "c")

    def clean_up() -> dict[str, Any]:
        return retention.cleanup(store, LocalStaging(tmp_path), retention=2, grace_seconds=0, lease_seconds=0)

    if guarded:
        # Then, guarded, the retired v2 is kept
        assert clean_up()["deleted"] == []
        return
    with unguarded.without(unguarded.EVER_ACTIVATED, store):
        outcome = clean_up()
    # When the rule is removed, v2 goes as an abandoned load, retention notwithstanding
    assert outcome["deleted"] == [{"version": "v2", "reason": "abandoned load", "items_deleted": 6}]
    meta = store.lookup.get_version_meta(2)
    assert meta is not None
    assert meta.status == VersionStatus.DELETED


@pytest.mark.parametrize("guarded", [True, False])
def test_without_the_tables_replicas_cleanup_deletes_what_a_region_may_serve(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guarded: bool
) -> None:
    # Given v1 retired by v2, and a table with a replica region that has no pointer yet
    load(store, tmp_path, "a")
    load(store, tmp_path, "b")
    monkeypatch.setattr(store.regions, "replicas", lambda: ("eu-west-1",))

    def clean_up() -> dict[str, Any]:
        return retention.cleanup(store, LocalStaging(tmp_path), retention=0, grace_seconds=0)

    if guarded:
        # Then, guarded, the region holds v1
        outcome = clean_up()
        assert outcome["deleted"] == []
        assert outcome["held_by_regions"] == {"v1": "eu-west-1"}
        return
    with unguarded.without(unguarded.TABLE_REGIONS, store):
        outcome = clean_up()
    # When cleanup sees no region, v1 goes
    assert [entry["version"] for entry in outcome["deleted"]] == ["v1"]
