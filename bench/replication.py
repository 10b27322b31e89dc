"""Replicas under load: every path by which a version is read, kept whole, or deleted.

No AWS is reachable here, so two local DynamoDBs (dynalite) stand in for two regions of a global
table (``testing.replication``): every write in home is applied in the replica item by item, in
random order, after random delays (most a few milliseconds, ``--long-share`` of them 5-30 s), the
last writer winning; the replica's own writes (its pointer, its arrival records) travel back the
same way. The replica region's arrival check (``loader.pipeline.arrival``) runs every second (a
minute in AWS). Lookups hammer the replica region through the real Lambda handler, and each
answer is checked against the release of the version it names (``testing.replicas``):
``mixed_answers`` counts those that differ. ``deleted_while_served`` counts items deleted in a
region while that region's pointer still named their version.

Each **scenario** has its own table, its own lookups and its own figures, exercises one guard
of issue 33 (``bench.unguarded``), and runs in phases. Every phase where something can go wrong
gets at least ``--lookups`` lookups; the results list, per scenario, the phases that cannot go
wrong and why (``phases_that_cannot_go_wrong``: only ``plain``'s last cleanup, which deletes a
version no region reads). A scenario's first load is such a phase too: a region without the
arrival count serves a version not yet whole there.

- ``plain`` (the arrival count): a full load, a delta, a rollback, a cleanup naming the region:
  plain ``/v1/ip`` lookups, the range cache off (what the simulation measured before issue 33);
- ``pinned`` (the arrival count): the same loads, every lookup pinned to home's newest version
  (``?version=``, what a page token minted in home names): a region must refuse a version that
  has not wholly arrived (each new version's IPv6 items are held back from the region until it
  refused some);
- ``page_tokens`` (the arrival count, of the items and of the index entries): indexed loads
  (``asn`` by value, every range flagged; the replica's GSIs lag its table, ``INDEX_DELAYS``), a
  reload and a rollback; the lookups are ``/v1/ranges`` page walks, each begun in home and
  continued in the region with home's page token, each region page checked against the value's
  ranges in the release its token names;
- ``range_cache`` (the arrival count): the loads and the rollback with the lookup container's
  range cache on;
- ``rollback_during_cleanup`` (the two-phase ``deleting`` mark): three versions; a cleanup
  (retention 0, no grace) deleting the two retired ones, and a rollback to the second while it
  runs;
- ``killed_cleanup`` (the ``deleting`` mark: the rollback refuses a half-deleted version, the next
  cleanup resumes it): a cleanup killed at random DynamoDB calls (``KillSwitch``), a rollback to
  the half-deleted version tried after each kill, and the cleanup resumed until done;
- ``activation_killed`` (a version ever activated is never abandoned): a load whose activation
  is killed right after the pointer switch (its load record stays ``prepared``), then a cleanup;
- ``cleanup_without_regions`` (the regions come from the table's replicas): a full reload, then,
  as soon as home's grace passed, a cleanup as ``ipmeta cleanup`` runs it with no region named
  (retention 0) while the replica region may still serve the version before.

``--no-check`` removes, in each scenario, the guard it exercises and only that one
(``bench.unguarded``: the arrival count through ``follow_home(check=False)``, the others patched
out in this process); every scenario must then report mixed answers or deletes while served.

**Rows.** The default, ``DEFAULT_ROWS`` (5,000 rows of release A), is the run committed: on this
project's 2-core machine, shared (load average 13 to 20), the eight scenarios took 23 minutes
without their guards; 20,000 rows took 30 minutes, with fewer phases held to ``--lookups``. Rows
shorten the loads only: each phase still waits for its ``--lookups`` lookups and for the 5-30 s
stragglers. Fewer rows lose nothing the simulation measures: what goes wrong comes from the share
of items replicated late (``--long-share``) and from half of the lookups aiming at the edges of the
ranges a release changed, neither of which shrinks with the rows.

``python -m bench.replication [--rows 5000] [--lookups 2000] [--scenarios a,b] [--no-check]``
saves bench/results/replication.json and the plain scenario's timeline, replication.png (with
--no-check: replication-no-check.json and .png), with the command and the commit measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from bench import unguarded
from bench.datasets import BENCH_DATA
from ipmeta.api import dependencies
from ipmeta.lookup.catalog import parse_version
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import Store, make_client
from ipmeta_cli.demo import ASN_ATTRIBUTION
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.pipeline.plan_writes import Prepared
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.replicas import (
    AnswerTally,
    Follower,
    Hammer,
    Killed,
    KillSwitch,
    PageWalker,
    Release,
    ServedDeletes,
    asn_subset,
    changed_edges,
    changed_release,
    kill_after_the_switch,
    plain_lookup,
    probe_addresses,
    wait_until_following,
)
from testing.replication import Delays, GlobalTable

RESULTS: Final = PROJECT_ROOT / "bench" / "results"
WORK: Final = BENCH_DATA / "replication"
HOME: Final = "us-east-1"
REPLICA: Final = "eu-west-1"
DATASET: Final = "asn"
#: A lookup container's pointer cache in the simulation, and cleanup's grace beyond it.
POINTER_CACHE_SECONDS: Final = 0.5
GRACE_SECONDS: Final = 2.0
#: The check's schedule (a minute in AWS) and its recounts of the partitions still short.
CHECK_INTERVAL_SECONDS: Final = 1.0
CHECK_POLL_SECONDS: Final = 0.1
#: How late the late items are: long beside a load's last writes and its activation, as a
#: global table's replication is when it falls behind (ReplicationLatency has no upper bound).
LONG_DELAYS: Final = (5.0, 30.0)
#: The range cache of the ``range_cache`` scenario: large enough to hold every range it meets.
RANGE_CACHE_BYTES: Final = 64 << 20
#: How many times ``killed_cleanup`` kills its cleanup before letting it finish.
KILLS: Final = 3
#: How long an item applied in the replica takes to enter its GSIs (DynamoDB: usually under a
#: second; a share of them seconds, as when an index's writes are throttled).
INDEX_DELAYS: Final = Delays(typical_seconds=0.2, long_share=0.05, long_seconds=(2.0, 10.0))
#: Refusals ``pinned`` waits for before it lets a held-back version arrive.
PINNED_REFUSALS: Final = 300
#: Why ``plain``'s last phase cannot go wrong: it only deletes v2, a version no region reads.
PLAIN_CLEANUP_IS_SAFE: Final = (
    "it deletes v2 only, after the region followed the rollback to v1 and waited its grace and "
    "--lookups lookups, and v1 is no delta of v2: no region can read what it deletes"
)
#: Rows of release A by default: the run whose results are committed (module docstring).
DEFAULT_ROWS: Final = 5_000
#: Ranges per page of ``page_tokens``' walks, and how many ASNs they walk.
PAGE_LIMIT: Final = 3
WALKED_VALUES: Final = 400


@dataclass
class Phase:
    """What a phase did and how its lookups fared."""

    name: str
    outcome: Any = None
    seconds: float = 0.0
    #: Why nothing can go wrong in it (no lookups are waited for then), or None.
    safe_because: str | None = None


@dataclass
class Scenario:
    """A table, its replicator, the region's check and the lookups against the region."""

    name: str
    args: argparse.Namespace
    endpoints: dict[str, str]
    releases: dict[str, Release]
    path_of: Callable[[str], str] = plain_lookup
    range_cache_bytes: int = 0
    #: Loads with both reverse-lookup indexes, and page walks instead of ``/v1/ip`` lookups.
    indexed: bool = False
    #: The guard the scenario exercises (``bench.unguarded``), removed when ``args.check`` is off.
    guard: str = unguarded.ARRIVAL
    phases: list[Phase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.table_name = f"ipmeta-{self.name.replace('_', '-')}"
        clients = {
            region: make_client(Settings(self.table_name, endpoint, 0.0))
            for region, endpoint in self.endpoints.items()
        }
        for client in clients.values():
            create_table_if_missing(client, self.table_name)
        self.deletes = ServedDeletes(clients, self.table_name, DATASET, HOME)
        delays = Delays(typical_seconds=0.02, long_share=self.args.long_share, long_seconds=LONG_DELAYS)
        self.replicas = GlobalTable(
            self.table_name,
            self.endpoints,
            delays=delays,
            seed=self.args.seed,
            on_delete=self.deletes,
            index_delays=INDEX_DELAYS if self.indexed else None,
        )
        self.home = self._home_table()
        self.region = LoaderTable(self.replicas.client(REPLICA), self.table_name).for_dataset(DATASET)
        self.watch = LoaderTable(self.replicas.plain(REPLICA), self.table_name).for_dataset(DATASET)
        #: Each version's release, known once the load is prepared (before it can answer).
        self.truths: dict[str, Release] = {}
        self.tally = AnswerTally(DATASET, self.truths)
        self.follower = Follower(
            self.region,
            REPLICA,
            check=self.args.check or self.guard != unguarded.ARRIVAL,
            interval=CHECK_INTERVAL_SECONDS,
            poll_seconds=CHECK_POLL_SECONDS,
        )
        #: Fresh for every run: a load id repeats in every new table, and a staged scan of the
        #: same id would be resumed from an earlier run's files.
        self.staging = LocalStaging(Path(tempfile.mkdtemp(prefix=f"staging-{self.name}-", dir=WORK)))
        self.lags: dict[str, float] = {}
        self.began = time.monotonic()
        self.timeline: list[tuple[float, int, int]] = []
        self.phase_starts: dict[str, float] = {}
        self._sampling = threading.Event()
        self.walker: PageWalker | None = None

    def _home_table(self) -> LoaderTable:
        """Home's table on a client of its own (whose writes replicate): a kill switch stays on it."""
        return LoaderTable(self.replicas.client(HOME), self.table_name).for_dataset(DATASET)

    @contextmanager
    def running(self) -> Iterator[None]:
        """The region's lookup container, its check, the lookups and the timeline, for the scenario."""
        region = dependencies.Dependencies(
            store=Store(self.replicas.plain(REPLICA), self.table_name, pointer_region=REPLICA),
            pointer_cache_seconds=POINTER_CACHE_SECONDS,
            ranges=RangeCache(self.range_cache_bytes),
        )
        dependencies.install(region)
        hammer: Hammer | PageWalker
        if self.indexed:
            home = dependencies.Dependencies(
                store=Store(self.replicas.plain(HOME), self.table_name),
                pointer_cache_seconds=POINTER_CACHE_SECONDS,
                ranges=RangeCache(0),
            )
            hammer = self.walker = PageWalker(
                walked_values(self.releases), self.tally, home, region, limit=PAGE_LIMIT
            )
        else:
            probes = probe_addresses(
                self.releases["a"],
                [
                    edge
                    for other in self.releases.values()
                    for edge in changed_edges(self.releases["a"], other)
                ],
                50_000,
                self.args.seed,
            )
            # Read at each lookup: a scenario sets its paths once the lookups already run.
            hammer = Hammer(probes, self.tally, self._path)
        sampler = threading.Thread(target=self._sample, daemon=True, name="timeline")
        self.follower.start()
        sampler.start()
        hammer.start()
        try:
            if self.args.check:
                yield
            else:
                with unguarded.without(self.guard, self.home):
                    yield
        finally:
            hammer.stop()
            self._sampling.set()
            sampler.join()
            self.follower.stop()
            self.replicas.close()
            dependencies.install(None)
            shutil.rmtree(self.staging.root, ignore_errors=True)

    def _path(self, address: str) -> str:
        return self.path_of(address)

    def _sample(self) -> None:
        home = LoaderTable(self.replicas.plain(HOME), self.table_name).for_dataset(DATASET)
        while not self._sampling.wait(0.05):
            ours, theirs = home.regions.home(), self.watch.regions.of(REPLICA)
            at = time.monotonic() - self.began
            self.timeline.append((at, ours.version if ours else 0, theirs.version if theirs else 0))

    # -- phases ---------------------------------------------------------------------------------

    def phase(
        self, name: str, act: Callable[[], Any], *, safe_because: str | None = None, moves: bool = True
    ) -> Any:
        """Run ``act`` in home while the lookups go on; then wait for the region to follow home's
        pointer and, unless the phase cannot go wrong (``safe_because`` says why), for ``--lookups``
        lookups in the phase."""
        self.tally.phase = name
        began = time.monotonic()
        self.phase_starts[name] = began - self.began
        before = self.home.regions.home()
        over = threading.Event()
        lag = threading.Thread(target=self._watch_lag, args=(name, before.generation if before else 0, over))
        if moves:
            lag.start()
        try:
            outcome = act()
        except Exception as error:  # a refusal the scenario expects (a rollback the cleanup holds)
            outcome = {"refused": f"{type(error).__name__}: {error}"}
        home = self._home_table().regions.home()
        if home is not None:
            try:
                wait_until_following(self.watch, REPLICA, home.generation, timeout=90)
            except TimeoutError as error:
                self.notes.append(f"{name}: {error}")
        over.set()
        if moves:
            lag.join(timeout=120)
        wanted = self.args.lookups if safe_because is None else 0
        while self.tally.answered(phase=name) < wanted:
            time.sleep(0.05)
        self.replicas.settle()
        self.phases.append(Phase(name, outcome, round(time.monotonic() - began, 2), safe_because))
        print(f"  {self.name}: {name} in {self.phases[-1].seconds} s", file=sys.stderr, flush=True)
        return outcome

    def _watch_lag(self, name: str, generation: int, over: threading.Event) -> None:
        """From home's pointer moving past ``generation`` to the region's following (none if the
        phase ends with home's pointer where it was: a refused rollback)."""
        home = LoaderTable(self.replicas.plain(HOME), self.table_name).for_dataset(DATASET)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not over.is_set():
            pointer = home.regions.home()
            if pointer is not None and pointer.generation > generation:
                moved = time.monotonic()
                try:
                    wait_until_following(self.watch, REPLICA, pointer.generation, timeout=90)
                except TimeoutError:
                    return
                self.lags[name] = time.monotonic() - moved
                return
            time.sleep(0.005)

    # -- acts in home -----------------------------------------------------------------------------

    def load(
        self,
        release: Release,
        table: LoaderTable | None = None,
        *,
        full: bool = False,
        lease: float | None = None,
        before_writes: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Load ``release`` (``full``: never a delta, so the version before it is no base); its truth is
        known before its version can answer (``on_prepared``). ``lease``: the load lock's.
        ``before_writes`` is told the version before its first item is written."""
        path = release.write_csv(WORK / f"{self.name}-release-{release.name}.csv")

        def known(prepared: Prepared) -> None:
            self.truths[keys.format_version(prepared.version)] = release
            if before_writes is not None:
                before_writes(prepared.version)

        options = LoadOptions(dataset=DATASET, delta="never" if full else "auto")
        if self.indexed:
            options = dataclasses.replace(options, index_field="asn", flag_column="organization")
        if lease is not None:
            options = dataclasses.replace(options, lock_lease_seconds=lease)
        loaded = driver.run_load([path], options, table or self.home, self.staging, on_prepared=known)
        return {"version": keys.format_version(loaded.version), "items": loaded.items}

    def cleanup(
        self,
        table: LoaderTable | None = None,
        *,
        retention_: int = 0,
        grace: float = GRACE_SECONDS,
        lease: float | None = None,
    ) -> dict[str, Any]:
        """``retention.cleanup`` in home; ``lease``: how long an unfinished load's lock is trusted."""
        return retention.cleanup(
            table or self.home,
            self.staging,
            retention=retention_,
            grace_seconds=grace,
            lease_seconds=DEFAULT_LOCK_LEASE_SECONDS if lease is None else lease,
        )

    def rollback(self, to: int | None = None) -> dict[str, Any]:
        return retention.rollback(self.home, to)

    def version_of(self, release: str) -> int:
        """The version that holds ``release`` (loaded in this scenario)."""
        [version] = [parse_version(name) for name, truth in self.truths.items() if truth.name == release]
        return version

    def report(self) -> dict[str, Any]:
        tally = self.tally
        return {
            "guard": self.guard,
            "guard_removed": not self.args.check,
            "lookups": tally.answered(),
            "mixed_answers": tally.total("mixed"),
            "deleted_while_served": self.deletes.while_served,
            "refused_lookups": tally.total("refused"),
            "lookups_per_phase": {phase.name: tally.answered(phase=phase.name) for phase in self.phases},
            "phases_that_can_go_wrong": [phase.name for phase in self.phases if phase.safe_because is None],
            "phases_that_cannot_go_wrong": {
                phase.name: phase.safe_because for phase in self.phases if phase.safe_because is not None
            },
            "phases": {
                phase.name: {
                    "seconds": phase.seconds,
                    "outcome": phase.outcome,
                    "lookups": tally.answered(phase=phase.name),
                    "mixed_answers": tally.total("mixed", phase=phase.name),
                }
                for phase in self.phases
            },
            "lag_seconds": {name: round(lag, 3) for name, lag in self.lags.items()},
            "deletes_applied": self.deletes.deleted,
            "replication": {
                "item_versions_applied": self.replicas.replicated,
                "superseded_by_a_newer_write": self.replicas.superseded,
            },
            "mixed_examples": tally.examples[:3],
            "notes": self.notes,
            **(
                {
                    "page_walks": self.walker.walks,
                    "home_first_pages_unlike_the_release": self.walker.home_mismatches,
                }
                if self.walker
                else {}
            ),
        }


# -- the scenarios --------------------------------------------------------------------------------


def plain(scenario: Scenario) -> None:
    a, b = scenario.releases["a"], scenario.releases["b"]
    scenario.phase("full", lambda: scenario.load(a))
    scenario.phase("delta", lambda: scenario.load(b))

    cleanups: list[dict[str, Any]] = []

    def roll_back_then_clean_up() -> dict[str, Any]:
        """A cleanup as soon as home's grace passed: it must hold B while the region still serves it."""
        rolled = scenario.rollback()
        time.sleep(GRACE_SECONDS + 0.1)
        cleanups.append(scenario.cleanup())
        return {**rolled, "cleanup_after_homes_grace": cleanups[-1]}

    scenario.phase("rollback", roll_back_then_clean_up)

    def clean_up_until_deleted() -> dict[str, Any]:
        """Again and again until B's items go (unless the first cleanup took them already)."""
        deadline = time.monotonic() + 120
        while not cleanups[-1].get("deleted") and time.monotonic() < deadline:
            time.sleep(0.2)
            cleanups.append(scenario.cleanup())
        return {"rounds": len(cleanups), "last": cleanups[-1]}

    scenario.phase("cleanup", clean_up_until_deleted, moves=False, safe_because=PLAIN_CLEANUP_IS_SAFE)


def pinned(scenario: Scenario) -> None:
    """Every lookup names home's newest version, as a page token or ``?version=`` minted in home does."""
    home = LoaderTable(scenario.replicas.plain(HOME), scenario.table_name).for_dataset(DATASET)

    def newest(address: str) -> str:
        pointer = home.regions.home()
        version = f"?version={keys.format_version(pointer.version)}" if pointer else ""
        return f"/v1/ip/{address}{version}"

    scenario.path_of = newest

    def held_back(release: str) -> Callable[[], dict[str, Any]]:
        """Load ``release`` with its IPv6 items held back from the region, released only once the
        region refused ``PINNED_REFUSALS`` lookups pinned to it (or a minute passed)."""

        def act() -> dict[str, Any]:
            phase = scenario.tally.phase
            loaded = scenario.load(scenario.releases[release], before_writes=hold_ipv6)
            deadline = time.monotonic() + 60
            while scenario.tally.total("refused", phase) < PINNED_REFUSALS and time.monotonic() < deadline:
                time.sleep(0.05)
            scenario.replicas.release()
            return {**loaded, "refused_before_release": scenario.tally.total("refused", phase)}

        return act

    def hold_ipv6(version: int) -> None:
        prefix = f"{keys.key_space(DATASET).version_key(version)}#6#"
        scenario.replicas.hold(lambda region, item: region == REPLICA and item.key[0].startswith(prefix))

    scenario.phase("full", held_back("a"))
    scenario.phase("delta", held_back("b"))


def page_tokens(scenario: Scenario) -> None:
    """Indexed loads (always written full), a rollback; page walks begun in home, continued in the region."""
    scenario.phase("full", lambda: scenario.load(scenario.releases["a"]))
    scenario.phase("reload", lambda: scenario.load(scenario.releases["b"]))
    scenario.phase("rollback", scenario.rollback)


def range_cache(scenario: Scenario) -> None:
    scenario.phase("full", lambda: scenario.load(scenario.releases["a"]))
    scenario.phase("delta", lambda: scenario.load(scenario.releases["b"]))
    scenario.phase("rollback", scenario.rollback)


def rollback_during_cleanup(scenario: Scenario) -> None:
    """``ipmeta cleanup --retention 0 --grace-seconds 0 & sleep; ipmeta rollback --to v2``."""
    for release in (scenario.releases[name] for name in ("a", "b", "c")):
        scenario.phase(f"load {release.name}", functools.partial(scenario.load, release))
    target = scenario.version_of("b")
    deleting: dict[str, Any] = {}

    def cleanup_in_background() -> None:
        try:
            deleting["outcome"] = scenario.cleanup(scenario._home_table(), grace=0.0)
        except Exception as error:
            deleting["outcome"] = {"error": f"{type(error).__name__}: {error}"}

    def race() -> dict[str, Any]:
        before = scenario.deletes.deleted
        cleaner = threading.Thread(target=cleanup_in_background, name="cleanup")
        cleaner.start()
        deadline = time.monotonic() + 30
        while scenario.deletes.deleted == before and cleaner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        try:
            rolled: Any = scenario.rollback(target)
        except Exception as error:
            rolled = {"refused": f"{type(error).__name__}: {error}"}
        cleaner.join()
        return {"rollback": rolled, "cleanup": deleting.get("outcome")}

    scenario.phase("cleanup and rollback", race)
    scenario.phase("after", lambda: None, moves=False)


def killed_cleanup(scenario: Scenario) -> None:
    """Cleanup killed at random calls; a rollback to the half-deleted version after each kill."""
    scenario.phase("load a", lambda: scenario.load(scenario.releases["a"]))
    scenario.phase("load b", lambda: scenario.load(scenario.releases["b"], full=True))
    target = scenario.version_of("a")
    rng = random.Random(scenario.args.seed)
    # A's items go 25 to a request: a kill anywhere from the first reads to the last delete
    calls = len(scenario.releases["a"].rows) // 25 + 10
    time.sleep(GRACE_SECONDS + 0.1)

    def killed_then_rolled_back() -> dict[str, Any]:
        table = scenario._home_table()
        switch = KillSwitch(table.client, at_call=rng.randint(5, calls))
        try:
            outcome: Any = scenario.cleanup(table)
        except Killed as kill:
            outcome = {"killed": str(kill)}
        try:
            rolled: Any = scenario.rollback(target)
        except Exception as error:
            rolled = {"refused": f"{type(error).__name__}: {error}"}
        return {"cleanup": outcome, "calls": switch.calls, "rollback": rolled}

    for kill in range(1, KILLS + 1):
        scenario.phase(f"killed {kill}", killed_then_rolled_back)

    def resumed() -> dict[str, Any]:
        outcomes = [scenario.cleanup()]
        while not outcomes[-1].get("deleted") and len(outcomes) < 20:
            time.sleep(0.2)
            outcomes.append(scenario.cleanup())
        return {"rounds": len(outcomes), "last": outcomes[-1]}

    scenario.phase("resumed", resumed, moves=False)


def activation_killed(scenario: Scenario) -> None:
    """Activation dies right after the pointer switch; the load record stays ``prepared``."""
    scenario.phase("load a", lambda: scenario.load(scenario.releases["a"]))

    def killed_activation() -> dict[str, Any]:
        table = scenario._home_table()
        return {
            "killed": kill_after_the_switch(
                table, lambda: scenario.load(scenario.releases["b"], table, full=True, lease=1.0)
            )
        }

    scenario.phase("activation killed", killed_activation)

    def next_release_then_cleanup() -> dict[str, Any]:
        """C activates; B, retired with its load record ``prepared``, is retained (retention 1) and
        may still serve in the region: a cleanup as soon as home's grace passed must keep it."""
        time.sleep(1.1)  # the killed load's lock lease
        loaded = scenario.load(scenario.releases["c"], full=True)
        time.sleep(GRACE_SECONDS + 0.1)
        return {"load": loaded, "cleanup": scenario.cleanup(retention_=1, lease=0.0)}

    scenario.phase("next release and cleanup", next_release_then_cleanup)


def cleanup_without_regions(scenario: Scenario) -> None:
    """A full reload, and a cleanup as soon as home's grace passed naming no region (retention 0): the
    replica region may still serve the version before."""
    scenario.phase("load a", lambda: scenario.load(scenario.releases["a"]))

    def delta_then_cleanup() -> dict[str, Any]:
        loaded = scenario.load(scenario.releases["b"], full=True)
        time.sleep(GRACE_SECONDS + 0.1)
        return {"load": loaded, "cleanup": scenario.cleanup()}

    scenario.phase("reload and cleanup", delta_then_cleanup)


#: Each scenario, and the guard it exercises (removed with ``--no-check``).
SCENARIOS: Final[dict[str, tuple[Callable[[Scenario], None], str]]] = {
    "plain": (plain, unguarded.ARRIVAL),
    "pinned": (pinned, unguarded.ARRIVAL),
    "page_tokens": (page_tokens, unguarded.ARRIVAL),
    "range_cache": (range_cache, unguarded.ARRIVAL),
    "rollback_during_cleanup": (rollback_during_cleanup, unguarded.DELETING_MARK),
    "killed_cleanup": (killed_cleanup, unguarded.DELETING_MARK),
    "activation_killed": (activation_killed, unguarded.EVER_ACTIVATED),
    "cleanup_without_regions": (cleanup_without_regions, unguarded.TABLE_REGIONS),
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    a = asn_subset(args.rows, args.seed)
    b = changed_release(a, "b", args.changed, args.seed)
    c = changed_release(b, "c", args.changed, args.seed + 1)
    releases = {"a": a, "b": b, "c": c}
    began = time.monotonic()
    commit = git_commit()
    results: dict[str, Any] = {}
    chart = RESULTS / ("replication.png" if args.check else "replication-no-check.png")
    with Dynalite() as home_endpoint, Dynalite() as replica_endpoint:
        for name in args.scenarios:
            act, guard = SCENARIOS[name]
            scenario = Scenario(
                name,
                args,
                {HOME: home_endpoint, REPLICA: replica_endpoint},
                releases,
                range_cache_bytes=RANGE_CACHE_BYTES if name == "range_cache" else 0,
                indexed=name == "page_tokens",
                guard=guard,
            )
            print(f"scenario {name} ...", file=sys.stderr, flush=True)
            with scenario.running():
                act(scenario)
            results[name] = scenario.report()
            figures = {
                key: results[name][key] for key in ("lookups", "mixed_answers", "deleted_while_served")
            }
            print(f"scenario {name}: {figures}", file=sys.stderr, flush=True)
            if name == "plain":
                draw_timeline(scenario, chart, args.check)
    lags = [lag for result in results.values() for lag in result["lag_seconds"].values()]
    return {
        "command": " ".join(["python -m bench.replication", *sys.argv[1:]]),
        "commit": commit,
        "attribution": ASN_ATTRIBUTION,
        "check": args.check,
        "regions": {"home": HOME, "replica": REPLICA},
        "lookups_at_least_per_phase_that_can_go_wrong": args.lookups,
        "table": {
            name: {
                key: result[key]
                for key in (
                    "guard",
                    "guard_removed",
                    "lookups",
                    "mixed_answers",
                    "deleted_while_served",
                    "lookups_per_phase",
                    "phases_that_cannot_go_wrong",
                )
            }
            for name, result in results.items()
        },
        "scenarios": results,
        "data": {"rows_a": len(a.rows), "rows_b": len(b.rows), "rows_c": len(c.rows)},
        "replication_delays": asdict(Delays(0.02, args.long_share, LONG_DELAYS)),
        "median_lag_seconds": round(statistics.median(lags), 3) if lags else None,
        "seconds": round(time.monotonic() - began, 1),
        "chart": str(chart.relative_to(PROJECT_ROOT)) if "plain" in results else None,
    }


def git_commit() -> str:
    """The commit the run measures, read as it starts, ``+dirty`` when files other than the
    results (which the run itself writes) had changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
    return git("rev-parse", "HEAD") + ("+dirty" if dirty else "")


def walked_values(releases: dict[str, Release]) -> list[int]:
    """The ASNs the walks list: those a release changed first, then the others with the most ranges,
    each with more ranges than a page in release A (so every walk reaches the region)."""
    a = releases["a"]
    counts = Counter(asn for _, _, asn, _ in a.rows)
    changed = {asn for other in releases.values() for _, _, asn, _ in set(a.rows) ^ set(other.rows)}
    ranked = sorted(counts, key=lambda asn: (asn not in changed, -counts[asn], asn))
    return [asn for asn in ranked if counts[asn] > PAGE_LIMIT][:WALKED_VALUES]


def draw_timeline(scenario: Scenario, path: Path, check: bool) -> Path:
    """The version home serves and the version the replica serves, over the run, and each mixed answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(11, 4.2), dpi=110)
    times = [at for at, _, _ in scenario.timeline]
    for column, label in ((1, f"home ({HOME})"), (2, f"replica ({REPLICA})")):
        axis.step(times, [sample[column] for sample in scenario.timeline], where="post", label=label, lw=2)
    mixed = [at - scenario.began for at in scenario.tally.mixed_at]
    if mixed:
        label = f"mixed answers ({len(mixed):,})"
        axis.plot(mixed, [0.5] * len(mixed), "|", color="#c44e52", ms=14, label=label)
    for name, at in scenario.phase_starts.items():
        axis.axvline(at, color="grey", lw=0.8, ls=":")
        axis.text(at, 2.3, f" {name}", fontsize=9, color="grey")
    axis.set_yticks([0, 1, 2], ["none", "v1 (A)", "v2 (B, delta)"])
    axis.set_ylim(-0.3, 2.6)
    axis.set_xlabel("seconds")
    checked = "with the arrival check" if check else "without the arrival check (--no-check)"
    axis.set_title(f"The version each region serves (scenario plain), {checked}")
    axis.legend(loc="lower right", fontsize=9)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def scenario_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenarios {', '.join(unknown)}; known: {', '.join(SCENARIOS)}"
        )
    return names


def main() -> None:
    # The lookup handler's metric lines would go to stdout, where no CloudWatch reads them.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=DEFAULT_ROWS, help="rows of release A, from the ASN files"
    )
    parser.add_argument("--changed", type=float, default=0.03, help="share of rows each next release changes")
    parser.add_argument(
        "--lookups",
        type=int,
        default=2_000,
        help="lookups at least in each phase where something can go wrong",
    )
    parser.add_argument(
        "--long-share", type=float, default=0.02, help="share of item versions delayed 5 to 30 s"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--scenarios", type=scenario_names, default=list(SCENARIOS), help="which to run, comma-separated"
    )
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="remove the guard each scenario exercises (bench.unguarded): each must then go wrong",
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    result = run(args)
    name = "replication.json" if args.check else "replication-no-check.json"
    Path(RESULTS / name).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result["table"], indent=2, default=str))


if __name__ == "__main__":
    main()
