"""The loader's bookkeeping on a real dynalite: progress, resume, lock, activation, versions, cleanup."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema import keys
from ipmeta.schema.errors import VersionNotFound
from ipmeta.schema.ips import parse_ip
from ipmeta.schema.settings import DEFAULT_POINTER_CACHE_SECONDS, Settings
from ipmeta_cli import main as cli
from loader.errors import (
    ActivationConflict,
    EdgeInvalidationFailed,
    LoadIncomplete,
    LoadInProgress,
    LoadRejected,
)
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.pipeline.abort import fail
from loader.pipeline.activate import activate
from loader.pipeline.driver import prepare
from loader.pipeline.staged import REPORT
from loader.pipeline.write import chunk_items, write_chunk
from loader.records import LoadStatus
from loader.settings import DEFAULT_CLEANUP_GRACE_SECONDS, DEFAULT_LOCK_LEASE_SECONDS
from loader.store.edge_cache import EdgeCache
from loader.store.loads import Loads
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.integration.conftest import skip_drain
from tests.one_version import lookup_version

FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"
SMALL = LoadOptions(chunk_size=2)


def csv_of(tmp_path: Path, name: str, label: str, rows: int = 6) -> Path:
    """A source whose every range answers with ``label``: two versions differ in every answer."""
    lines = ["start,end,name"] + [f"{n}.1.0.0,{n}.1.0.255,{label}" for n in range(1, rows + 1)]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def label_at(store: LoaderTable, version: int, ip: str) -> str:
    return str(lookup_version(store.lookup, version, parse_ip(ip)).data["name"])


def test_a_load_records_its_progress_and_report(store: LoaderTable, tmp_path: Path) -> None:
    result = driver.run_load([FIXTURE], SMALL, store, LocalStaging(tmp_path))
    load = store.loads.get(result.version)
    assert load is not None
    assert load.status == LoadStatus.ACTIVATED
    assert sorted(load.done) == list(range(load.chunks))
    assert load.chunks > 1
    report = result.report
    # 10 rows; one overlap cuts a range in two (11 segments); one crosses a /8 (12 items)
    assert report.rows_read == 10
    assert report.overlaps_resolved == 2
    assert report.segments == 11
    assert report.splits == 1
    assert report.items_written == report.items == result.items == 12
    assert sum(report.items_per_bucket.values()) == 12
    hottest = max(report.items_per_bucket.values())
    assert report.hottest_bucket_share == pytest.approx(hottest / 12, abs=1e-3)
    for name in ("retries", "throttles", "duration_seconds", "items_per_second", "overlaps_resolved"):
        assert name in report.to_dict()
    saved = json.loads((tmp_path / result.load_id / REPORT).read_text())
    assert saved["items_written"] == 12


def test_dry_run_validates_and_writes_nothing(store: LoaderTable, tmp_path: Path) -> None:
    result = driver.run_load([FIXTURE], LoadOptions(dry_run=True), store, LocalStaging(tmp_path))
    assert result.status == "dry-run"
    assert result.report.rows_read == 10
    assert store.lookup.read_active_version(consistent=True) is None
    assert store.lookup.list_version_metas() == []
    assert store.loads.list_all() == []


def test_a_bad_row_aborts_before_anything_is_written(store: LoaderTable, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("start,end,name\n1.0.0.0,1.0.0.9,a\n1.0.0.9,1.0.0.1,b\n")
    with pytest.raises(LoadRejected, match=r"line 3: start 1\.0\.0\.9 is after end"):
        driver.run_load([bad], SMALL, store, LocalStaging(tmp_path))
    assert store.loads.list_all() == []
    result = driver.run_load([bad], LoadOptions(max_errors=1), store, LocalStaging(tmp_path))
    assert result.report.rows_rejected == 1
    assert list(result.report.rejected) == ["bad.csv: line 3: start 1.0.0.9 is after end 1.0.0.1"]


def test_the_same_source_is_unchanged(store: LoaderTable, tmp_path: Path) -> None:
    first = driver.run_load([FIXTURE], SMALL, store, LocalStaging(tmp_path))
    again = driver.run_load([FIXTURE], SMALL, store, LocalStaging(tmp_path))
    assert again.status == "unchanged"
    assert again.version == first.version
    assert len(store.lookup.list_version_metas()) == 1


def test_a_chunk_written_twice_counts_once(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    prepared = prepare([FIXTURE], SMALL, store, staging)
    in_chunk = len(chunk_items(prepared.load_id, 0, staging))
    first = write_chunk(prepared.load_id, 0, store, staging)
    second = write_chunk(prepared.load_id, 0, store, staging)
    assert first.items == in_chunk > 0
    assert second.items == 0
    load = store.loads.get(prepared.version)
    assert load is not None
    assert sorted(load.done) == [0]
    assert load.items_written == in_chunk


def test_chunks_whose_marks_were_lost_are_written_again_before_activation(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a store that acknowledges the first marks of chunks 1 and 2 but never applies them
    lost: set[int] = set()
    mark = Loads.mark_chunk_done

    def losing_mark(loads: Loads, version: int, chunk: int, stats: dict[str, int], now: float) -> bool:
        if chunk in (1, 2) and chunk not in lost:
            lost.add(chunk)
            return True
        return mark(loads, version, chunk, stats, now)

    monkeypatch.setattr(Loads, "mark_chunk_done", losing_mark)
    # When a load runs
    result = driver.run_load([FIXTURE], SMALL, store, LocalStaging(tmp_path))
    # Then the two unrecorded chunks are written again, said so, and the load activates counting each once
    assert lost == {1, 2}
    assert "2 chunks written but not recorded" in caplog.text
    assert result.status == LoadStatus.ACTIVATED
    load = store.loads.get(result.version)
    assert load is not None
    assert sorted(load.done) == list(range(load.chunks))
    assert result.report.items_written == result.items == 12
    for ip, organization in (("1.0.0.1", "Cloudflare, Inc."), ("2001:200::1", "WIDE Project")):
        assert lookup_version(store.lookup, result.version, parse_ip(ip)).data["organization"] == organization


def test_running_the_same_source_again_resumes_the_unfinished_load(
    store: LoaderTable, tmp_path: Path
) -> None:
    # Given a load that wrote one chunk and stopped
    staging = LocalStaging(tmp_path)
    prepared = prepare([FIXTURE], SMALL, store, staging)
    written = write_chunk(prepared.load_id, 0, store, staging).items
    # When the same source is loaded again
    result = driver.run_load([FIXTURE], SMALL, store, staging)
    # Then the same load finishes, writing only the missing chunks
    assert result.load_id == prepared.load_id
    assert result.write["items"] == prepared.items - written
    assert result.report.items_written == prepared.items
    assert store.lookup.read_active_version(consistent=True) == prepared.version


def test_resume_by_load_id_skips_finished_chunks(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    prepared = prepare([FIXTURE], SMALL, store, staging)
    written = write_chunk(prepared.load_id, 1, store, staging).items
    with pytest.raises(LoadIncomplete, match="chunks not written yet"):
        activate(prepared.load_id, store, staging)
    result = driver.run_load([], SMALL, store, staging, resume=prepared.load_id)
    assert result.status == LoadStatus.ACTIVATED
    assert result.write["items"] == prepared.items - written


def test_the_lock_admits_one_load_until_its_lease_expires(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    first = prepare([csv_of(tmp_path, "a.csv", "a")], SMALL, store, staging, now=1000.0)
    with pytest.raises(LoadInProgress, match=f"load {first.load_id} holds the load lock"):
        prepare([csv_of(tmp_path, "b.csv", "b")], SMALL, store, staging, now=1001.0)
    # A crashed load blocks the next one only for its lease.
    later = 1000.0 + DEFAULT_LOCK_LEASE_SECONDS + 1
    second = prepare([csv_of(tmp_path, "b.csv", "b")], SMALL, store, staging, now=later)
    lock = store.lock.read()
    assert lock is not None
    assert lock.owner == second.load_id


def test_the_load_that_activates_second_gets_a_clear_error(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    driver.run_load([csv_of(tmp_path, "v1.csv", "one")], SMALL, store, staging)
    # Given two loads that both started from v1 (the first one's lease expired meanwhile)
    slow = prepare([csv_of(tmp_path, "a.csv", "a")], SMALL, store, staging, now=1000.0)
    fast = driver.run_load([csv_of(tmp_path, "b.csv", "b")], SMALL, store, staging)
    # When the slow one finishes and activates
    for index in range(slow.chunks):
        write_chunk(slow.load_id, index, store, staging)
    with pytest.raises(ActivationConflict) as caught:
        activate(slow.load_id, store, staging)
    # Then it loses, says why, and the winner keeps serving
    assert f"load {slow.load_id} lost activation" in caught.value.message
    assert f"{fast.load_id} is active now" in caught.value.message
    assert store.lookup.read_active_version(consistent=True) == fast.version
    slow_load = store.loads.get(slow.version)
    assert slow_load is not None
    assert slow_load.status == LoadStatus.FAILED


def test_retention_rollback_and_cleanup(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    versions = [
        driver.run_load([csv_of(tmp_path, f"{label}.csv", label)], SMALL, store, staging).version
        for label in ("one", "two", "three")
    ]
    v1, v2, v3 = versions
    statuses = {row["version"]: row["status"] for row in retention.list_versions(store)}
    assert statuses == {f"v{v1}": "retired", f"v{v2}": "retired", f"v{v3}": "active"}

    # Within the grace period nothing is deleted: a container may still read v1 from its cache.
    assert DEFAULT_CLEANUP_GRACE_SECONDS > DEFAULT_POINTER_CACHE_SECONDS
    assert retention.cleanup(store, staging)["deleted"] == []
    retired = store.lookup.get_version_meta(v2)
    assert retired is not None
    later = (retired.retired_at or 0) + DEFAULT_CLEANUP_GRACE_SECONDS + 1
    outcome = retention.cleanup(store, staging, retention=1, now=later, sleep=skip_drain)
    assert [entry["version"] for entry in outcome["deleted"]] == [f"v{v1}"]
    assert outcome["deleted"][0]["items_deleted"] == 6
    assert store.partitions.count(keys.key_space().partition_key(v1, 4, 1)) == 0
    assert store.partitions.count(keys.key_space().partition_key(v2, 4, 1)) == 1
    assert [row["version"] for row in retention.list_versions(store)] == [f"v{v3}", f"v{v2}"]

    # Rollback switches back to the retained version at once.
    assert label_at(store, v3, "1.1.0.1") == "three"
    assert retention.rollback(store) == {"dataset": "default", "active": f"v{v2}", "previous": f"v{v3}"}
    assert store.lookup.read_active_version(consistent=True) == v2
    assert label_at(store, v2, "1.1.0.1") == "two"
    with pytest.raises(VersionNotFound, match=f"v{v1} is deleted"):
        retention.rollback(store, v1)


def test_cleanup_deletes_a_failed_loads_partial_version(store: LoaderTable, tmp_path: Path) -> None:
    staging = LocalStaging(tmp_path)
    prepared = prepare([FIXTURE], SMALL, store, staging, now=1000.0)
    written = write_chunk(prepared.load_id, 0, store, staging).items
    fail(prepared.load_id, "States.TaskFailed", store, now=1000.0)
    assert store.lock.read() is None
    outcome = retention.cleanup(
        store, staging, now=1000.0 + DEFAULT_CLEANUP_GRACE_SECONDS + 1, sleep=skip_drain
    )
    assert outcome["deleted"] == [
        {"version": prepared.load_id, "reason": "failed load", "items_deleted": written}
    ]
    assert not (tmp_path / prepared.load_id).exists()


def test_activation_announces_the_new_version(
    store: LoaderTable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="loader.store.events"):
        result = driver.run_load([FIXTURE], SMALL, store, LocalStaging(tmp_path))
    events = [record.getMessage() for record in caplog.records if record.name == "loader.store.events"]
    assert len(events) == 1
    detail = json.loads(events[0].removeprefix("event "))["detail"]
    assert detail["version"] == result.load_id
    assert detail["items"] == 12


def test_the_cli_loads_lists_rolls_back_and_cleans_up(
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    common = ["--data-dir", str(tmp_path)]
    assert cli.main(["load", *common, str(csv_of(tmp_path, "one.csv", "one")), "--dry-run"]) == 0
    assert "load (dry run): dry-run" in capsys.readouterr().out
    assert cli.main(["load", *common, str(csv_of(tmp_path, "one.csv", "one"))]) == 0
    assert cli.main(["load", *common, str(csv_of(tmp_path, "two.csv", "two")), "--overlaps", "reject"]) == 0
    output = capsys.readouterr().out
    assert "rows read 6, rejected 0" in output
    assert (tmp_path / "reports" / "v2.json").exists()
    assert cli.main(["versions", *common]) == 0
    listing = capsys.readouterr().out
    assert "* " in listing
    assert "retired" in listing
    assert cli.main(["rollback", *common]) == 0
    assert json.loads(capsys.readouterr().out)["active"] == "v1"
    assert cli.main(["cleanup", *common]) == 0
    assert [cleaned["deleted"] for cleaned in json.loads(capsys.readouterr().out)["datasets"]] == [[]]


def test_an_abort_after_activation_leaves_the_live_version_serving(
    store: LoaderTable, tmp_path: Path
) -> None:
    """A Catch after Activate (e.g. a failed change event) must not fail a version that is live."""
    result = driver.run_load([csv_of(tmp_path, "a.csv", "A")], SMALL, store, LocalStaging(tmp_path))
    fail(result.load_id, "the change event was not delivered", store)
    assert store.lookup.read_active_version(consistent=True) == result.version
    meta = store.lookup.get_version_meta(result.version)
    assert meta is not None
    assert meta.status == "active"
    assert label_at(store, result.version, "1.1.0.1") == "A"


def test_a_retried_activation_after_the_pointer_switched_completes(
    store: LoaderTable, tmp_path: Path
) -> None:
    """Step Functions retries Activate when its Lambda dies after the pointer write."""
    staging = LocalStaging(tmp_path)
    prepared = prepare([csv_of(tmp_path, "a.csv", "A")], SMALL, store, staging)
    for index in range(prepared.chunks):
        write_chunk(prepared.load_id, index, store, staging)
    store.versions.activate(prepared.version, expected_current=None)  # the first attempt's write, then death

    outcome = activate(prepared.load_id, store, staging)

    assert outcome.status == LoadStatus.ACTIVATED
    meta = store.lookup.get_version_meta(prepared.version)
    assert meta is not None
    assert meta.status == "active"
    assert store.lookup.read_active_version(consistent=True) == prepared.version


def test_a_prepare_that_breaks_frees_the_lock_for_the_next_load(store: LoaderTable, tmp_path: Path) -> None:
    """Given staging that fails mid-prepare, the load is failed at once and a rerun proceeds."""

    class BrokenStaging(LocalStaging):
        def put(self, load_id: str, name: str, data: bytes) -> None:
            raise OSError("disk full")

    source = csv_of(tmp_path, "a.csv", "A")
    with pytest.raises(OSError, match="disk full"):
        prepare([source], SMALL, store, BrokenStaging(tmp_path / "broken"))

    result = driver.run_load([source], SMALL, store, LocalStaging(tmp_path / "ok"))
    assert result.status == LoadStatus.ACTIVATED
    assert label_at(store, result.version, "1.1.0.1") == "A"


class RecordingCloudFront:
    """A CloudFront client that keeps each invalidation asked for, as CloudFront does, by reference:
    the same reference again answers with the invalidation already made."""

    def __init__(self, failures: int = 0) -> None:
        self.by_reference: dict[str, list[str]] = {}
        self.failures = failures

    def create_invalidation(self, DistributionId: str, InvalidationBatch: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's names
        if self.failures:
            self.failures -= 1
            raise ConnectionError("CloudFront is not answering")
        reference = InvalidationBatch["CallerReference"]
        self.by_reference.setdefault(reference, InvalidationBatch["Paths"]["Items"])
        return {"Invalidation": {"Id": f"I{sorted(self.by_reference).index(reference)}"}}


def test_an_activation_invalidates_the_edge_cache_once_even_when_retried(
    store: LoaderTable, tmp_path: Path
) -> None:
    staging = LocalStaging(tmp_path)
    cloudfront = RecordingCloudFront(failures=1)
    edge = EdgeCache("E2EXAMPLE", cloudfront)
    prepared = prepare([FIXTURE], SMALL, store, staging)
    for index in range(prepared.chunks):
        write_chunk(prepared.load_id, index, store, staging)
    # Given CloudFront failing the first time, after the version went live
    with pytest.raises(EdgeInvalidationFailed):
        activate(prepared.load_id, store, staging, edge=edge)
    assert store.lookup.read_active_version(consistent=True) == prepared.version
    # When Step Functions retries Activate (twice)
    activate(prepared.load_id, store, staging, edge=edge)
    activate(prepared.load_id, store, staging, edge=edge)
    # Then one /* invalidation stands for the version
    assert cloudfront.by_reference == {f"activate-{prepared.load_id}": ["/*"]}


def test_a_rollback_invalidates_the_edge_cache_too(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = LocalStaging(tmp_path)
    driver.run_load([csv_of(tmp_path, "v1.csv", "one")], SMALL, store, staging)
    driver.run_load([csv_of(tmp_path, "v2.csv", "two")], SMALL, store, staging)
    cloudfront = RecordingCloudFront()
    monkeypatch.setattr(EdgeCache, "from_environment", classmethod(lambda cls: cls("E2EXAMPLE", cloudfront)))
    rolled = retention.rollback(store)
    [reference] = cloudfront.by_reference
    assert reference.startswith(f"rollback-{store.dataset}-{rolled['active']}-")
