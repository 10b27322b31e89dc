"""Cleanup and rollback cannot race: a version never goes while anyone may read it, nor serves half gone.

On a real dynalite, through the loader's own functions. Each race is made to
happen at the worst moment by running the other side from inside a step of the
first: a rollback from inside a cleanup (its ``also_delete`` hook, which runs
before any item goes), a cleanup killed between two partitions, an activation
killed right after its pointer switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ipmeta.api import dependencies
from ipmeta.schema.errors import IpAddressNotFound
from ipmeta.schema.ips import parse_ip
from ipmeta.schema.records import VersionStatus
from ipmeta.store.dynamodb import Store
from loader.errors import VersionNotRestorable
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.records import load_id_of
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from testing.in_process_api import get
from testing.replicas import Killed, kill_after_the_switch
from tests.one_version import lookup_version

pytestmark = pytest.mark.integration

FULL = LoadOptions(chunk_size=2, delta="never")
ROWS = 6
PROBES = [f"{n}.1.0.{host}" for n in range(1, ROWS + 1) for host in (0, 77, 255)]


def csv_of(tmp_path: Path, label: str) -> Path:
    """A source whose every range answers with ``label``: two versions differ in every answer."""
    lines = ["start,end,name"] + [f"{n}.1.0.0,{n}.1.0.255,{label}" for n in range(1, ROWS + 1)]
    path = tmp_path / f"{label}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def load(store: LoaderTable, tmp_path: Path, label: str) -> int:
    return driver.run_load([csv_of(tmp_path, label)], FULL, store, LocalStaging(tmp_path)).version


def wrong_answers(store: LoaderTable, version: int, label: str) -> int:
    """Probes of ``version`` that do not answer ``label`` (a 404 included)."""
    wrong = 0
    for ip in PROBES:
        try:
            wrong += lookup_version(store.lookup, version, parse_ip(ip)).data["name"] != label
        except IpAddressNotFound:
            wrong += 1
    return wrong


@pytest.fixture
def api(store: LoaderTable) -> Iterator[None]:
    dependencies.install(
        dependencies.Dependencies(store=Store(store.client, store.table_name), pointer_cache_seconds=0.0)
    )
    yield
    dependencies.install(None)


def test_a_rollback_during_a_cleanup_is_refused_and_the_dataset_keeps_answering(
    store: LoaderTable, tmp_path: Path, api: None
) -> None:
    # Given v1, v2, v3 (v3 active), and a cleanup keeping one retired version: v1 is doomed
    for label in ("a", "b", "c"):
        load(store, tmp_path, label)
    refused: list[Exception] = []

    def rollback_meanwhile(version: int) -> None:
        # When an operator rolls back to v1 while cleanup is about to delete it
        try:
            retention.rollback(store, version)
        except VersionNotRestorable as error:
            refused.append(error)

    outcome = retention.cleanup(
        store, LocalStaging(tmp_path), retention=1, grace_seconds=0, also_delete=rollback_meanwhile
    )
    # Then the rollback is refused with a clear error, v1 goes, and v3 still answers everywhere
    assert [entry["version"] for entry in outcome["deleted"]] == ["v1"]
    assert len(refused) == 1
    assert "deleting" in str(refused[0])
    assert store.lookup.read_active_version(consistent=True) == 3
    assert wrong_answers(store, 3, "c") == 0
    assert [row["version"] for row in retention.list_versions(store) if row["active"]] == ["v3"]
    assert get("/v1/health")[0] == 200


def test_a_rollback_that_claims_first_keeps_its_version_from_cleanup(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given v1, v2, v3 (v3 active) and a cleanup that dooms v1
    for label in ("a", "b", "c"):
        load(store, tmp_path, label)
    marking = store.versions.mark_deleting

    def rollback_first(version: int, **kwargs: object) -> bool:
        # When the rollback to v1 lands between cleanup's read of the versions and its mark
        retention.rollback(store, version)
        return marking(version, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store.versions, "mark_deleting", rollback_first)
    outcome = retention.cleanup(store, LocalStaging(tmp_path), retention=1, grace_seconds=0)
    # Then cleanup's mark fails, nothing is deleted, and v1 serves whole
    assert outcome["deleted"] == []
    assert outcome["claimed_meanwhile"] == ["v1"]
    assert store.lookup.read_active_version(consistent=True) == 1
    assert wrong_answers(store, 1, "a") == 0


def test_a_killed_cleanup_leaves_a_version_rollback_refuses_and_the_next_cleanup_finishes(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for label in ("a", "b", "c"):
        load(store, tmp_path, label)
    manifest = store.manifests.get(1)
    assert manifest is not None
    assert len(manifest.partitions) > 2
    deleting = store.partitions.delete
    deleted: list[str] = []

    def killed_after_two(partition: str, *args: object) -> int:
        if len(deleted) == 2:
            raise Killed
        deleted.append(partition)
        return deleting(partition)

    # Given a cleanup of v1 killed after two of its partitions went
    monkeypatch.setattr(store.partitions, "delete", killed_after_two)
    with pytest.raises(Killed):
        retention.cleanup(store, LocalStaging(tmp_path), retention=1, grace_seconds=0)
    monkeypatch.setattr(store.partitions, "delete", deleting)
    # When someone rolls back to it, then it is refused, clearly
    with pytest.raises(VersionNotRestorable, match="deleting"):
        retention.rollback(store, 1)
    assert store.lookup.read_active_version(consistent=True) == 3
    # And the next cleanup, with a retention that would keep v1, finishes the deletion
    outcome = retention.cleanup(store, LocalStaging(tmp_path), retention=5, grace_seconds=0)
    assert [(entry["version"], entry["reason"]) for entry in outcome["deleted"]] == [
        ("v1", retention.RESUMED)
    ]
    assert sum(store.partitions.count(partition) for partition in manifest.partitions) == 0
    meta = store.lookup.get_version_meta(1)
    assert meta is not None
    assert meta.status == VersionStatus.DELETED


def test_a_version_whose_activation_died_after_the_switch_is_never_an_abandoned_load(
    store: LoaderTable, tmp_path: Path
) -> None:
    load(store, tmp_path, "a")
    # Given v2's activation killed right after it switched the pointer: its load record stays prepared
    kill_after_the_switch(store, lambda: load(store, tmp_path, "b"))
    assert store.lookup.read_active_version(consistent=True) == 2
    store.lock.release(load_id_of(2, store.dataset))  # its lease ran out
    # When v3 replaces it, and a cleanup runs long after, keeping two retired versions
    load(store, tmp_path, "c")
    outcome = retention.cleanup(store, LocalStaging(tmp_path), retention=2, grace_seconds=0, lease_seconds=0)
    # Then v2 is kept as the retired version it is, and a rollback to it answers whole
    assert outcome["deleted"] == []
    retention.rollback(store, 2)
    assert wrong_answers(store, 2, "b") == 0


def test_health_is_not_ok_while_the_pointer_names_a_version_being_deleted(
    store: LoaderTable, tmp_path: Path, api: None
) -> None:
    # Given v1 active, and healthy
    load(store, tmp_path, "a")
    assert get("/v1/health")[0] == 200
    # When its metadata says it is going (as a rollback racing an old cleanup left it)
    store.versions.set_status(1, VersionStatus.DELETED, 0)
    # Then health is 503, naming no version as serving
    status, body = get("/v1/health")
    assert (status, body["status"]) == (503, "inactive")
