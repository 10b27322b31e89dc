"""A replica region serves a version only once it has wholly arrived there, and loses none to cleanup.

Two local DynamoDBs stand in for two regions of a global table, with the
replicator of the simulation between them (``testing.replication``): each write
in home reaches the replica item by item, after its own delay. The replica
region's lookups go through the real handler reading that region's own pointer,
which only its arrival check moves (``loader.pipeline.arrival``). The replicator
can hold items back, so a version can be stopped half-arrived on purpose.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_POINTER_REGION, ENV_TABLE_NAME, Settings
from ipmeta.store.dynamodb import Store, make_client
from ipmeta_cli.dynalite import Dynalite
from loader.errors import VerificationPending
from loader.options import LoadOptions
from loader.pipeline import activate, arrival, driver, retention
from loader.records import Pointer
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.in_process_api import get, list_all
from testing.replicas import (
    AnswerTally,
    Follower,
    Hammer,
    Release,
    ServedDeletes,
    asn_subset,
    changed_edges,
    changed_release,
    probe_addresses,
    wait_until_following,
)
from testing.replication import Delays, GlobalTable, ItemVersion
from tests.killing import kill_when
from tests.loader_context import loader_context

pytestmark = pytest.mark.integration

HOME = "us-east-1"
REPLICA = "eu-west-1"
#: A second replica region in the same local DynamoDB, whose pointer is copied without the check.
UNCHECKED = "ap-southeast-1"
DATASET = "asn"
SPACE = keys.key_space(DATASET)
_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def replica_endpoint() -> Iterator[str]:
    with Dynalite() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def releases() -> tuple[Release, Release]:
    first = asn_subset(400, seed=11)
    return first, changed_release(first, "b", 0.1, seed=11)


@dataclass
class Regions:
    """The global table of one test: its replicator, home's loader table and the replica's."""

    name: str
    replicas: GlobalTable
    home: LoaderTable
    replica: LoaderTable
    deletes: ServedDeletes
    replica_endpoint: str
    staging: LocalStaging

    def load(self, release: Release, folder: Path) -> int:
        path = release.write_csv(folder / f"{release.name}.csv")
        return driver.run_load([path], LoadOptions(dataset=DATASET), self.home, self.staging).version

    def serve(self, release: Release, folder: Path) -> None:
        """``release`` loaded in home, wholly arrived in the replica, and served there."""
        version = self.load(release, folder)
        self.replicas.settle()
        assert self.follow().serving == f"v{version}"

    def follow(self, region: str = REPLICA, *, check: bool = True) -> arrival.Following:
        table = self.replica if region == REPLICA else LoaderTable(self.replicas.plain(REPLICA), self.name)
        (outcome,) = arrival.follow_home(table.for_dataset(DATASET), region, check=check)
        return outcome

    def region_pointer(self, region: str = REPLICA) -> Pointer | None:
        return LoaderTable(self.replicas.plain(REPLICA), self.name).for_dataset(DATASET).regions.of(region)

    def load_indexed(self, release: Release, folder: Path) -> int:
        """``release`` loaded with both reverse-lookup indexes: ``asn`` by value, every range flagged."""
        path = release.write_csv(folder / f"{release.name}-indexed.csv")
        options = LoadOptions(dataset=DATASET, index_field="asn", flag_column="organization")
        return driver.run_load([path], options, self.home, self.staging).version

    def look_up_in_home(self) -> None:
        store = Store(self.replicas.plain(HOME), self.name)
        dependencies.install(
            dependencies.Dependencies(store=store, pointer_cache_seconds=0.0, ranges=RangeCache(0))
        )

    def look_up_in(self, region: str) -> None:
        """Requests to the handler answer from ``region``'s replica, reading that region's pointer."""
        store = Store(self.replicas.plain(REPLICA), self.name, pointer_region=region)
        dependencies.install(
            dependencies.Dependencies(store=store, pointer_cache_seconds=0.0, ranges=RangeCache(0))
        )


@pytest.fixture
def regions(dynalite_endpoint: str, replica_endpoint: str, tmp_path: Path) -> Iterator[Regions]:
    name = f"ipmeta-replicas-{next(_numbers)}"
    endpoints = {HOME: dynalite_endpoint, REPLICA: replica_endpoint}
    clients = {region: make_client(Settings(name, endpoint, 0.0)) for region, endpoint in endpoints.items()}
    for client in clients.values():
        create_table_if_missing(client, name)
    deletes = ServedDeletes(clients, name, DATASET, HOME)
    replicas = GlobalTable(name, endpoints, delays=Delays(0.005, 0.0), seed=3, on_delete=deletes)
    home = LoaderTable(replicas.client(HOME), name).for_dataset(DATASET)
    replica = LoaderTable(replicas.client(REPLICA), name).for_dataset(DATASET)
    yield Regions(
        name, replicas, home, replica, deletes, replica_endpoint, LocalStaging(tmp_path / "staging")
    )
    replicas.close()
    dependencies.install(None)


def of_version(version: int, *families: int, covers: bool = False) -> Callable[[str, ItemVersion], bool]:
    """A hold on the range items of ``version`` (of ``families``, else all) bound for the replica,
    and on its cover list with ``covers``."""
    prefixes = tuple(f"{SPACE.version_key(version)}#{family}#" for family in families or (4, 6))
    prefixes += (SPACE.covers_partition_key(version),) if covers else ()

    def held(region: str, item: ItemVersion) -> bool:
        return region == REPLICA and item.key[0].startswith(prefixes)

    return held


def lookups(tally: AnswerTally, addresses: list[str]) -> dict[str, int]:
    verdicts = [tally.check(address, *get(f"/v1/ip/{address}")) for address in addresses]
    return {verdict: verdicts.count(verdict) for verdict in set(verdicts)}


def test_a_version_half_arrived_is_not_served_and_without_the_check_it_answers_wrong(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, b = releases
    tally = AnswerTally(DATASET, {"v1": a, "v2": b})
    probes = probe_addresses(a, changed_edges(a, b), 400, seed=5)
    # Given release A in home, its IPv6 items held back on the way to the replica
    regions.replicas.hold(of_version(1, 6))
    assert regions.load(a, tmp_path) == 1
    regions.replicas.settle()
    # When the replica's check runs, it waits, and the region serves nothing yet
    waiting = regions.follow()
    assert (waiting.status, waiting.serving) == ("waiting", None)
    assert waiting.missing > 0
    regions.look_up_in(REPLICA)
    assert lookups(tally, probes[:50]) == {"unanswered": 50}
    # Then, once the held items arrive, the region follows and answers as A
    regions.replicas.release()
    regions.replicas.settle()
    assert regions.follow().status == "moved"
    assert lookups(tally, probes) == {"right": len(probes)}

    # Given the delta B in home, its items held back: the checked region keeps serving A, rightly
    regions.replicas.hold(of_version(2))
    assert regions.load(b, tmp_path) == 2
    regions.replicas.settle()
    assert regions.follow().status == "waiting"
    assert regions.region_pointer() == Pointer(1, 0, 1, regions.region_pointer().at)  # type: ignore[union-attr]
    assert lookups(tally, probes) == {"right": len(probes)}
    # And a region that copies home's pointer unchecked answers from B's base where B changed
    assert regions.follow(UNCHECKED, check=False).status == "moved"
    regions.look_up_in(UNCHECKED)
    unchecked = lookups(tally, probes)
    assert unchecked.get("mixed", 0) > 0
    # When B arrives, the checked region follows and answers as B
    regions.replicas.release()
    regions.replicas.settle()
    assert regions.follow().status == "moved"
    regions.look_up_in(REPLICA)
    assert lookups(tally, probes) == {"right": len(probes)}


def test_no_path_reads_a_version_that_has_not_wholly_arrived_in_the_region(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, b = releases
    tally = AnswerTally(DATASET, {"v1": a, "v2": b})
    probes = probe_addresses(a, changed_edges(a, b), 300, seed=21)
    # Given A served in both regions, then B loaded in home with its items held back from the replica
    regions.serve(a, tmp_path)
    regions.replicas.hold(of_version(2, covers=True))
    assert regions.load(b, tmp_path) == 2
    regions.replicas.settle()
    assert regions.follow().status == "waiting"
    regions.look_up_in(REPLICA)
    # When a client pins B (as a page token minted in home would), then the region refuses it
    pinned = [get(f"/v1/ip/{address}?version=v2") for address in probes]
    assert {(status, body.get("code")) for status, body in pinned} == {(404, "VERSION_NOT_FOUND")}
    # And /v1/datasets lists what the region may read, and calls active what it serves
    _, listing = get("/v1/datasets")
    (dataset,) = listing["datasets"]
    assert (dataset["active"], [(v["id"], v["status"]) for v in dataset["versions"]]) == (
        "v1",
        [("v1", "active")],
    )
    # When B arrives and the region follows, then B answers rightly, pinned and plain
    regions.replicas.release()
    regions.replicas.settle()
    assert regions.follow().status == "moved"
    assert lookups(tally, probes) == {"right": len(probes)}
    pinned_b = [tally.check(address, *get(f"/v1/ip/{address}?version=v2")) for address in probes]
    pinned_a = [tally.check(address, *get(f"/v1/ip/{address}?version=v1")) for address in probes]
    assert set(pinned_b) == set(pinned_a) == {"right"}


def test_the_check_counts_consistently_and_trusts_no_record_of_another_version_of_that_number(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, b = releases
    regions.serve(a, tmp_path)
    # Given an arrival record of a v2 in the region, left from before a point-in-time restore
    LoaderTable(regions.replicas.plain(REPLICA), regions.name).for_dataset(DATASET).regions.mark_arrived(
        REPLICA, 2, "a-version-2-from-before-the-restore", items=1, at=0
    )
    # And a new v2 loaded in home, its items held back from the replica
    regions.replicas.hold(of_version(2))
    assert regions.load(b, tmp_path) == 2
    regions.replicas.settle()
    counts: list[dict[str, object]] = []
    client = regions.replica.client
    client.meta.events.register(
        "provide-client-params.dynamodb.Query",
        lambda params, **_: counts.append(dict(params)) if params.get("Select") == "COUNT" else None,
    )
    # When the region's check runs, then it counts the new v2 (consistently) and waits for it
    waiting = regions.follow()
    assert (waiting.status, waiting.serving) == ("waiting", "v1")
    assert counts
    assert {count.get("ConsistentRead") for count in counts} == {True}
    # And once its items arrive, it follows
    regions.replicas.release()
    regions.replicas.settle()
    assert regions.follow().serving == "v2"


def _ranges(body: dict[str, object]) -> list[tuple[int, int]]:
    entries = body["ranges"]
    assert isinstance(entries, list)
    return [(int(ipaddress.ip_address(e["start"])), int(ipaddress.ip_address(e["end"]))) for e in entries]


def test_reverse_lookups_in_a_region_wait_for_its_own_index_entries(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, _ = releases
    hot = Counter(row[2] for row in a.rows).most_common(1)[0][0]
    truth = sorted(
        (int(ipaddress.ip_address(start)), int(ipaddress.ip_address(end)))
        for start, end, asn, _ in a.rows
        if asn == hot
    )
    assert len(truth) > 2
    # Given A loaded in home with both indexes, every item arrived in the replica, but the
    # replica's GSIs (eventually consistent) not yet holding the entries of what arrived
    regions.replicas.hold_indexes()
    assert regions.load_indexed(a, tmp_path) == 1
    regions.replicas.settle()
    # And a page walk started in home: its first page, and the token to the next
    regions.look_up_in_home()
    status, first = get(f"/v1/ranges?field=asn&value={hot}&limit=2")
    assert (status, len(first["ranges"])) == (200, 2)
    # When the region's check runs, the items are whole: plain lookups serve A there
    arrived = regions.follow()
    assert arrived.serving == "v1"
    assert arrived.index_entries_missing == 2 * len(a.rows)  # each range: by value, and flagged
    regions.look_up_in(REPLICA)
    tally = AnswerTally(DATASET, {"v1": a})
    assert lookups(tally, probe_addresses(a, [], 50, seed=3)) == {"right": 50}
    # Then reverse lookups, a listing begun there or a page token minted in home, are refused
    # with a stable code until the region's index entries of v1 are all there
    for path in (
        f"/v1/ranges?field=asn&value={hot}",
        f"/v1/ranges?field=asn&value={hot}&limit=2&next={first['next']}",
        "/v1/flagged",
        "/v1/flagged?version=v1",
    ):
        status, body = get(path)
        assert (status, body.get("code")) == (503, "INDEX_NOT_ARRIVED"), (path, body)
    # When the entries propagate and the check runs again, it counts them and opens the listings
    regions.replicas.release_indexes()
    assert regions.follow().status == "current"
    found, pages = list_all(str(hot), 2)
    assert sorted(_ranges({"ranges": [{"start": s, "end": e} for s, e in found]})) == truth
    assert pages > 1
    # And the walk begun in home continues in the region to exactly the value's ranges
    walked = _ranges(first)
    token = first["next"]
    while token:
        status, body = get(f"/v1/ranges?field=asn&value={hot}&limit=2&next={token}")
        assert status == 200, body
        walked += _ranges(body)
        token = body["next"]
    assert sorted(walked) == truth
    status, flagged = get(f"/v1/flagged?limit={keys.MAX_PAGE_LIMIT}")
    assert status == 200
    assert len(flagged["ranges"]) == min(len(a.rows), keys.MAX_PAGE_LIMIT)


def _truth_of_hot_value(release: Release) -> tuple[int, list[tuple[int, int]]]:
    """The release's most common ASN, and its ranges as integers."""
    hot = Counter(row[2] for row in release.rows).most_common(1)[0][0]
    truth = sorted(
        (int(ipaddress.ip_address(start)), int(ipaddress.ip_address(end)))
        for start, end, asn, _ in release.rows
        if asn == hot
    )
    return int(hot), truth


def test_home_serves_a_version_only_once_its_own_indexes_hold_every_entry(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, _ = releases
    hot, truth = _truth_of_hot_value(a)
    # Given home's own GSIs lagging its writes by seconds, as a GSI may in any region
    regions.replicas.own_index_delays = Delays(0.0, 1.0, (2.0, 3.0))
    # When A is loaded in home with both indexes
    assert regions.load_indexed(a, tmp_path) == 1
    # Then, the moment home serves it, its reverse lookups are whole there
    regions.look_up_in_home()
    found, _ = list_all(str(hot), 2)
    assert sorted(_ranges({"ranges": [{"start": s, "end": e} for s, e in found]})) == truth
    status, flagged = get(f"/v1/flagged?limit={keys.MAX_PAGE_LIMIT}")
    assert status == 200
    assert len(flagged["ranges"]) == min(len(a.rows), keys.MAX_PAGE_LIMIT)


def test_an_activation_whose_index_never_catches_up_waits_and_serves_nothing(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = releases
    # Given home's GSIs holding back every entry home writes, and an activation that waits a moment
    regions.replicas.hold_indexes(own_writes=True)
    monkeypatch.setattr(activate, "INDEX_LAG_WAIT_SECONDS", 0.5)
    # When A is loaded with an index, then its activation stops short of the switch
    with pytest.raises(VerificationPending, match="index"):
        regions.load_indexed(a, tmp_path)
    assert regions.home.lookup.read_active_version(consistent=True) is None
    (load,) = regions.home.loads.list_all()
    # And once the entries are in home's GSIs, the load resumed activates
    regions.replicas.release_indexes()
    path = a.write_csv(tmp_path / "again.csv")
    options = LoadOptions(dataset=DATASET, index_field="asn", flag_column="organization")
    resumed = driver.run_load([path], options, regions.home, regions.staging, resume=load.load_id)
    assert (resumed.status, resumed.version) == ("activated", load.version)
    assert regions.home.lookup.read_active_version(consistent=True) == load.version


def test_cleanup_deletes_only_what_every_region_of_the_table_moved_past(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, b = releases
    # Given A then B (a delta over A) served in home and in the replica
    regions.load(a, tmp_path)
    regions.replicas.settle()
    regions.follow()
    regions.load(b, tmp_path)
    regions.replicas.settle()
    assert regions.follow().serving == "v2"
    # When home rolls back to A, but the replica region has not followed yet
    retention.rollback(regions.home)
    regions.replicas.settle()
    # And a cleanup told nothing of the regions: it learns them from the table's replicas
    clean = {"retention": 0, "grace_seconds": 0.0}
    held = retention.cleanup(regions.home, regions.staging, **clean)  # type: ignore[arg-type]
    # Then B's items stay: the region's pointer still names B
    assert (held["deleted"], held["held_by_regions"]) == ([], {"v2": REPLICA})
    # And without the regions, the same cleanup would have deleted what the region serves
    assert (
        retention.held_by_regions(
            regions.home, {2: retention.BEYOND_RETENTION}, [], [], at=0, grace_seconds=0
        )
        == {}
    )
    # When the region follows the rollback (and its pointer reaches home), B goes
    assert regions.follow().serving == "v1"
    regions.replicas.settle()
    done = retention.cleanup(regions.home, regions.staging, **clean)  # type: ignore[arg-type]
    assert [entry["version"] for entry in done["deleted"]] == ["v2"]
    regions.replicas.settle()
    assert regions.deletes.deleted > 0
    assert regions.deletes.while_served == 0


def test_full_delta_rollback_cleanup_under_random_delays_never_mix(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path
) -> None:
    a, b = releases
    # Given delays of a few milliseconds, and a tenth of the items 0.2 to 1.5 s late
    regions.replicas.delays = Delays(0.005, 0.1, (0.2, 1.5))
    tally = AnswerTally(DATASET, {"v1": a, "v2": b})
    regions.look_up_in(REPLICA)
    hammer = Hammer(probe_addresses(a, changed_edges(a, b), 5_000, seed=9), tally)
    follower = Follower(regions.replica, REPLICA, check=True, interval=0.3, poll_seconds=0.05)
    hammer.start()
    follower.start()
    try:
        # When home loads A, then the delta B, rolls back and cleans up, all while the region is asked
        for step in (
            lambda: regions.load(a, tmp_path),
            lambda: regions.load(b, tmp_path),
            lambda: retention.rollback(regions.home),
        ):
            step()
            home = regions.home.regions.home()
            assert home is not None
            tally.phase = f"generation {home.generation}"
            wait_until_following(
                LoaderTable(regions.replicas.plain(REPLICA), regions.name).for_dataset(DATASET),
                REPLICA,
                home.generation,
                timeout=30,
            )
        deadline = time.monotonic() + 30
        while not retention.cleanup(regions.home, regions.staging, retention=0, grace_seconds=0.5)["deleted"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        regions.replicas.settle()
        while tally.answered() < 1_000:
            time.sleep(0.05)
    finally:
        hammer.stop()
        follower.stop()
    # Then no answer ever differed from the release its version names, and nothing served was deleted
    assert tally.total("mixed") == 0, tally.examples[:3]
    assert tally.answered() >= 1_000
    assert regions.deletes.deleted > 0
    assert regions.deletes.while_served == 0


def _follow_command(regions: Regions) -> tuple[list[str], dict[str, str]]:
    command = [sys.executable, "-m", "ipmeta_cli.main", "follow", "--region", REPLICA]
    command += ["--wait-seconds", "20", "--poll-seconds", "0.05"]
    environment = {
        **os.environ,
        ENV_DYNAMODB_ENDPOINT: regions.replica_endpoint,
        ENV_TABLE_NAME: regions.name,
        "PYTHONPATH": os.pathsep.join(str(Path(__file__).parents[2] / part) for part in ("lambdas", "")),
    }
    return command, environment


@pytest.mark.parametrize("after_seconds", [0.0, 2.5, 5.0])
def test_the_check_killed_at_any_moment_and_run_again_ends_on_the_new_version(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path, after_seconds: float
) -> None:
    a, b = releases
    tally = AnswerTally(DATASET, {"v1": a, "v2": b})
    probes = probe_addresses(a, changed_edges(a, b), 300, seed=13)
    regions.load(a, tmp_path)
    regions.replicas.settle()
    regions.follow()
    regions.look_up_in(REPLICA)
    # Given the delta B in home, its items held back from the replica
    regions.replicas.hold(of_version(2))
    regions.load(b, tmp_path)
    regions.replicas.settle()
    command, environment = _follow_command(regions)
    began = time.monotonic()
    # When the region's check runs as its own process and is SIGKILLed while it counts
    _, status = kill_when(
        command, environment, lambda: True if time.monotonic() - began > after_seconds else None
    )
    assert status == -9
    # Then the region still serves A, and every answer is A's
    assert regions.region_pointer().version == 1  # type: ignore[union-attr]
    assert lookups(tally, probes) == {"right": len(probes)}
    # When B arrives and the check is killed once more, as soon as it recorded B as arrived
    regions.replicas.release()
    regions.replicas.settle()
    uid = regions.replica.lookup.get_version_meta(2).uid  # type: ignore[union-attr]
    kill_when(
        command, environment, lambda: True if regions.replica.regions.arrived(REPLICA, 2, uid) else None
    )
    assert lookups(tally, probes) == {"right": len(probes)}
    # Then a run to its end puts the region on B, answering as B
    (outcome,) = arrival.follow_home(regions.replica, REPLICA)
    assert outcome.serving == "v2"
    assert lookups(tally, probes) == {"right": len(probes)}


def test_the_scheduled_handler_follows_home_in_its_region_and_says_how_far_behind(
    regions: Regions, releases: tuple[Release, Release], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.pipeline import handlers

    a, _ = releases
    # Given the function's environment in eu-west-1: its region's table and its region
    monkeypatch.setenv(ENV_DYNAMODB_ENDPOINT, regions.replica_endpoint)
    monkeypatch.setenv(ENV_TABLE_NAME, regions.name)
    monkeypatch.setenv(ENV_POINTER_REGION, REPLICA)
    handlers.reset()
    # And A in home, a partition of it held back from the region
    regions.replicas.hold(of_version(1, 6))
    regions.load(a, tmp_path)
    regions.replicas.settle()
    try:
        # When the schedule runs the check, the region waits and says it is behind
        # A minute left at each run, and a second to recount in, past the margin
        waiting = handlers.arrive({}, loader_context(61_000))
        regions.replicas.release()
        regions.replicas.settle()
        moved = handlers.arrive({}, loader_context(61_000))
    finally:
        handlers.reset()
    assert [entry["status"] for entry in waiting["datasets"]] == ["waiting"]
    assert waiting["region"] == REPLICA
    # Then, once it arrived, the region follows and is behind no more
    assert [(entry["status"], entry["serving"]) for entry in moved["datasets"]] == [("moved", "v1")]
    assert moved["behind_seconds"] == 0
    assert regions.region_pointer() is not None
