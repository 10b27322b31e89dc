"""A version's counts stop when their time is up or their task dies, and the next run counts only the rest.

Home's activation and each replica region's arrival check count every partition of a
version (``loader.store.partition_counts``): one task cannot count 15 M networks, so
each saves the partitions it found complete, and the next run resumes from them. Here a
region's check runs against home's own table (a region of one local DynamoDB), and
what each run counted is seen at ``PartitionItems.count``, where every count is made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ipmeta.schema import keys
from loader.options import LoadOptions
from loader.pipeline import arrival, driver, retention
from loader.store.partition_counts import COUNT_BATCH, IndexCount
from loader.store.partition_items import PartitionItems
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
#: Ranges in as many /8 buckets: a version of that many partitions, more than two batches.
BUCKETS = 2 * COUNT_BATCH + 22


class Killed(BaseException):
    """The task dying midway (as SIGKILL would): nothing after it runs."""


class CountedPartitions:
    """Every partition count any run makes, in order, and whether it read consistently."""

    def __init__(self) -> None:
        self.counted: list[tuple[str, bool]] = []
        self.kill_after: int | None = None
        self._lock = threading.Lock()

    def runs_counts(self) -> list[str]:
        """The partitions counted since the last call (one run's)."""
        with self._lock:
            counted, self.counted = [pk for pk, _ in self.counted], []
        return counted

    def wrap(self, count: Callable[..., int]) -> Callable[..., int]:
        def counting(partitions: PartitionItems, partition_key: str, *, consistent: bool = True) -> int:
            with self._lock:
                if self.kill_after is not None and len(self.counted) >= self.kill_after:
                    raise Killed
                self.counted.append((partition_key, consistent))
            return count(partitions, partition_key, consistent=consistent)

        return counting


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> CountedPartitions:
    counts = CountedPartitions()
    monkeypatch.setattr(PartitionItems, "count", counts.wrap(PartitionItems.count))
    return counts


def spread_release(folder: Path) -> Path:
    """One range in each of ``BUCKETS`` /8s, with an ASN and an organization to index."""
    lines = ["start,end,asn,organization"]
    lines += [
        f"{first}.0.0.0,{first}.0.3.255,{64_500 + first % 7},org-{first % 5}"
        for first in range(1, 1 + BUCKETS)
    ]
    path = folder / "spread.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def load(store: LoaderTable, folder: Path, options: LoadOptions | None = None) -> int:
    staging = LocalStaging(folder / "staging")
    return driver.run_load([spread_release(folder)], options or LoadOptions(), store, staging).version


def follow(store: LoaderTable, count_seconds: float | None = None) -> arrival.Following:
    (outcome,) = arrival.follow_home(store, REGION, count_seconds=count_seconds)
    return outcome


def test_a_regions_count_stops_when_its_time_is_up_and_the_next_run_counts_the_rest(
    store: LoaderTable, counted: CountedPartitions, tmp_path: Path
) -> None:
    # Given a version of more partitions than a batch, loaded and verified in home
    version = load(store, tmp_path)
    partitions = sorted(store.manifests.get(version).items_per_partition)  # type: ignore[union-attr]
    assert len(partitions) == BUCKETS
    assert sorted(counted.runs_counts()) == partitions  # home's verification, every one
    # When the region's check runs with no time to count beyond its first batch, run after run
    runs: list[list[str]] = []
    outcomes: list[arrival.Following] = []
    while not outcomes or outcomes[-1].status == "waiting":
        outcomes.append(follow(store, count_seconds=0.0))
        runs.append(counted.runs_counts())
        assert len(runs) <= 5
    # Then each run counted one batch, none counted twice, and the last one moved the region
    assert [len(run) for run in runs] == [COUNT_BATCH, COUNT_BATCH, BUCKETS - 2 * COUNT_BATCH]
    assert sorted(pk for run in runs for pk in run) == partitions
    assert [o.status for o in outcomes] == ["waiting", "waiting", "moved"]
    assert [o.missing for o in outcomes[:2]] == [BUCKETS - COUNT_BATCH, BUCKETS - 2 * COUNT_BATCH]
    assert (outcomes[-1].serving, outcomes[-1].counted_items) == (f"v{version}", BUCKETS)
    assert store.regions.arrived(REGION, version, store.lookup.get_version_meta(version).uid)  # type: ignore[union-attr]


def test_a_count_killed_midway_resumes_from_what_it_saved_and_ends_on_the_version(
    store: LoaderTable, counted: CountedPartitions, tmp_path: Path
) -> None:
    version = load(store, tmp_path)
    partitions = sorted(store.manifests.get(version).items_per_partition)  # type: ignore[union-attr]
    counted.runs_counts()
    # Given a region's check killed in its second batch of counts
    counted.kill_after = COUNT_BATCH + 10
    with pytest.raises(Killed):
        follow(store)
    first = counted.runs_counts()
    assert len(first) == COUNT_BATCH + 10
    assert store.regions.of(REGION) is None
    # When the check runs again, with all the time it needs
    counted.kill_after = None
    outcome = follow(store)
    again = counted.runs_counts()
    # Then it counted only what the killed run had not saved complete (its first batch), consistently
    assert sorted(again) == sorted(set(partitions) - set(first[:COUNT_BATCH]))
    assert (outcome.status, outcome.serving, outcome.counted_items) == ("moved", f"v{version}", BUCKETS)


def test_home_counts_consistently_and_a_region_never_trusts_progress_of_another_uid(
    store: LoaderTable, counted: CountedPartitions, tmp_path: Path
) -> None:
    version = load(store, tmp_path)
    partitions = sorted(store.manifests.get(version).items_per_partition)  # type: ignore[union-attr]
    assert {consistent for _, consistent in counted.counted} == {True}
    counted.runs_counts()
    # Given progress saved for another version of that number (before a point-in-time restore),
    # claiming every partition complete
    store.counts.items(REGION, version, "an-older-uid", dict.fromkeys(partitions, 0))
    assert len(counted.runs_counts()) == BUCKETS
    # When the region's check counts this version, then it counts every partition of it
    assert follow(store).status == "moved"
    assert sorted(counted.runs_counts()) == partitions


def test_index_entries_are_counted_a_batch_at_a_time_and_a_short_pass_starts_again(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = load(store, tmp_path, LoadOptions(index_field="asn", flag_column="organization"))
    manifest, meta = store.manifests.get(version), store.lookup.get_version_meta(version)
    assert manifest is not None
    assert meta is not None
    census = manifest.indexes
    index_keys = [
        pk for index in keys.INDEXES if index.name in census for pk in census[index.name].partition_keys
    ]
    assert len(index_keys) > 3
    seen: list[str] = []
    lagging = {index_keys[1]}  # its entries not in the GSI yet, in the first pass
    real = PartitionItems.index_count

    def index_count(partitions: PartitionItems, index: keys.IndexSchema, partition_key: str) -> int:
        seen.append(partition_key)
        return 0 if partition_key in lagging else real(partitions, index, partition_key)

    monkeypatch.setattr(PartitionItems, "index_count", index_count)
    store.counts.batch = 2
    # When each call has no time beyond its first batch
    calls: list[IndexCount] = []
    while not calls or calls[-1].uncounted:
        calls.append(store.counts.index_entries(REGION, version, meta.uid, census, until=0.0))
    # Then the pass counted every key once, two at a time, and found one key short
    assert sorted(seen) == sorted(index_keys)
    assert [call.counted for call in calls[:-1]] == [2] * (len(calls) - 1)
    assert not calls[-1].whole
    assert calls[-1].found < calls[-1].wanted == 2 * BUCKETS
    # When the lag is over, the next pass counts every key again and finds them all
    lagging.clear()
    seen.clear()
    while not calls[-1].whole:
        calls.append(store.counts.index_entries(REGION, version, meta.uid, census, until=None))
        assert len(calls) < 100
    assert sorted(seen) == sorted(index_keys)
    assert calls[-1].found == calls[-1].wanted


def test_cleanup_forgets_the_counts_of_the_versions_it_deletes(store: LoaderTable, tmp_path: Path) -> None:
    # Given two versions loaded and counted in home, and the first one counted in a region too
    first = load(store, tmp_path)
    first_uid = store.lookup.get_version_meta(first).uid  # type: ignore[union-attr]
    assert follow(store).serving == f"v{first}"
    (tmp_path / "again").mkdir()
    release = spread_release(tmp_path / "again")
    release.write_text(release.read_text().replace("org-1", "org-one"))
    second = driver.run_load([release], LoadOptions(), store, LocalStaging(tmp_path / "staging")).version
    assert second == first + 1
    assert store.counts.progress.read(None, first, first_uid).complete
    assert store.counts.progress.read(REGION, first, first_uid).complete
    # When the first is deleted (cleanup names the table's replica regions; here, the one named)
    retention.delete_version(first, store, regions=[REGION])
    # Then its counts' progress is gone in home and in the region, and the second's stays
    assert not store.counts.progress.read(None, first, first_uid).complete
    assert not store.counts.progress.read(REGION, first, first_uid).complete
    second_uid = store.lookup.get_version_meta(second).uid  # type: ignore[union-attr]
    assert store.counts.progress.read(None, second, second_uid).complete
