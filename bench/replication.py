"""Replicas under load: a replica region never answers from a version that has not wholly arrived.

No AWS is reachable here, so two local DynamoDBs (dynalite) stand in for two
regions of a global table (``testing.replication``): every write in home is
applied in the replica item by item, in random order, after random delays (most
a few milliseconds, ``--long-share`` of them 5-30 seconds), the last writer
winning; the replica's own writes (its pointer, its arrival records) travel back
to home the same way. Then, with the replica region's arrival check running every
second (``loader.pipeline.arrival``; a minute in AWS):

1. **full**: release A, a seeded subset of the demo ASN files (``--rows``), loaded in home;
2. **delta**: release B (``--changed`` of A's ranges relabelled or dropped), a delta over A;
3. **rollback** to A in home;
4. **cleanup** in home (retention 0: B goes), retried until it deletes, while
   every region's own pointer holds it back (``loader.pipeline.retention``).

All along, lookups hammer the replica region through the real Lambda handler
(``--lookups`` at least, round random addresses and every changed range's edges),
and each answer is checked against the release of the version it names
(``testing.replicas``): ``mixed_answers`` counts those that differ. The
replicator counts ``deleted_while_served``: items deleted in a region while that
region's pointer still named their version. The lag of each region is the time
from home's pointer write to the region's own.

``--no-check`` makes the region copy home's pointer without counting (what a
replica without the check would do) and must show mixed answers.

``python -m bench.replication [--rows 60000] [--lookups 12000] [--no-check]``;
saves bench/results/replication.json and a timeline, replication.png (with --no-check:
replication-no-check.json and .png).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from bench.datasets import BENCH_DATA
from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import Store, make_client
from ipmeta_cli.demo import ASN_ATTRIBUTION
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
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
from testing.replication import Delays, GlobalTable

RESULTS: Final = PROJECT_ROOT / "bench" / "results"
WORK: Final = BENCH_DATA / "replication"
HOME: Final = "us-east-1"
REPLICA: Final = "eu-west-1"
TABLE: Final = "ipmeta"
DATASET: Final = "asn"
#: A lookup container's pointer cache in the simulation, and cleanup's grace beyond it.
POINTER_CACHE_SECONDS: Final = 0.5
GRACE_SECONDS: Final = 2.0
#: The check's schedule (a minute in AWS) and its recounts of the partitions still short.
CHECK_INTERVAL_SECONDS: Final = 1.0
CHECK_POLL_SECONDS: Final = 0.1
PHASES: Final = ("full", "delta", "rollback", "cleanup")
#: How late the late items are: long beside a load's last writes and its activation, as a
#: global table's replication is when it falls behind (ReplicationLatency has no upper bound).
LONG_DELAYS: Final = (5.0, 30.0)


class Simulation:
    """Two regions, the replicator between them, the region's check and the lookups against it."""

    def __init__(
        self, endpoints: dict[str, str], args: argparse.Namespace, truths: dict[str, Release]
    ) -> None:
        clients = {
            region: make_client(Settings(TABLE, endpoint, 0.0)) for region, endpoint in endpoints.items()
        }
        for client in clients.values():
            create_table_if_missing(client, TABLE)
        self.deletes = ServedDeletes(clients, TABLE, DATASET, HOME)
        delays = Delays(typical_seconds=0.02, long_share=args.long_share, long_seconds=LONG_DELAYS)
        self.replicas = GlobalTable(TABLE, endpoints, delays=delays, seed=args.seed, on_delete=self.deletes)
        self.home = LoaderTable(self.replicas.client(HOME), TABLE).for_dataset(DATASET)
        self.region = LoaderTable(self.replicas.client(REPLICA), TABLE).for_dataset(DATASET)
        self.watch = LoaderTable(self.replicas.plain(REPLICA), TABLE).for_dataset(DATASET)
        dependencies.install(
            dependencies.Dependencies(
                store=Store(self.replicas.plain(REPLICA), TABLE, pointer_region=REPLICA),
                pointer_cache_seconds=POINTER_CACHE_SECONDS,
                ranges=RangeCache(0),
            )
        )
        self.tally = AnswerTally(DATASET, truths)
        self.follower = Follower(
            self.region,
            REPLICA,
            check=args.check,
            interval=CHECK_INTERVAL_SECONDS,
            poll_seconds=CHECK_POLL_SECONDS,
        )
        #: Fresh for every run: a load id (``asn.v1``) repeats in every new table, and a staged scan
        #: of the same id would be resumed from an earlier run's files.
        self.staging = LocalStaging(Path(tempfile.mkdtemp(prefix="staging-", dir=WORK)))
        self.lags: dict[str, float] = {}
        self.cleanups: list[dict[str, Any]] = []
        self.began = time.monotonic()
        #: (seconds, home's version, the region's) every 50 ms, and when each phase began.
        self.timeline: list[tuple[float, int, int]] = []
        self.phase_starts: dict[str, float] = {}
        self._sampling = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True, name="timeline")

    def _sample(self) -> None:
        home = LoaderTable(self.replicas.plain(HOME), TABLE).for_dataset(DATASET)
        while not self._sampling.wait(0.05):
            ours, theirs = home.regions.home(), self.watch.regions.of(REPLICA)
            at = time.monotonic() - self.began
            self.timeline.append((at, ours.version if ours else 0, theirs.version if theirs else 0))

    def stop_sampling(self) -> None:
        self._sampling.set()
        self.sampler.join()

    def phase(self, name: str, act: Callable[[], Any], lookups: int, *, moves: bool = True) -> dict[str, Any]:
        """Run ``act`` in home while the lookups go on; then wait for the region and enough lookups."""
        self.tally.phase = name
        began = time.monotonic()
        self.phase_starts[name] = began - self.began
        before = self.home.regions.home()
        lag = threading.Thread(target=self._watch_lag, args=(name, before.generation if before else 0))
        if moves:  # a pointer write of home's, which the region follows
            lag.start()
        outcome = act()
        home = self.home.regions.home()
        assert home is not None
        wait_until_following(self.watch, REPLICA, home.generation)
        if moves:
            lag.join(timeout=120)
        while self.tally.answered(phase=name) < lookups:
            time.sleep(0.05)
        self.replicas.settle()
        return {"seconds": round(time.monotonic() - began, 2), "home": f"v{home.version}", "outcome": outcome}

    def _watch_lag(self, name: str, generation: int) -> None:
        """From the moment home's pointer moves past ``generation`` to the moment the region's follows."""
        home = LoaderTable(self.replicas.plain(HOME), TABLE).for_dataset(DATASET)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            pointer = home.regions.home()
            if pointer is not None and pointer.generation > generation:
                moved = time.monotonic()
                wait_until_following(self.watch, REPLICA, pointer.generation)
                self.lags[name] = time.monotonic() - moved
                return
            time.sleep(0.005)

    def roll_back(self) -> dict[str, Any]:
        """Rollback in home, and a cleanup as soon as home's grace has passed: it must hold B while the
        replica region still serves it, or moved off it less than a grace period ago."""
        rolled = retention.rollback(self.home)
        time.sleep(GRACE_SECONDS + 0.1)
        return {**rolled, "cleanup_after_homes_grace": self._cleanup()}

    def _cleanup(self) -> dict[str, Any]:
        outcome = retention.cleanup(self.home, self.staging, retention=0, grace_seconds=GRACE_SECONDS)
        self.cleanups.append(outcome)
        return outcome

    def clean_up(self) -> dict[str, Any]:
        """Cleanup with retention 0, again and again, until the rolled-back version's items go (unless the
        cleanup right after the rollback took them already: a region that followed within no time)."""
        outcome = self.cleanups[-1]
        while not outcome["deleted"]:
            time.sleep(0.2)
            outcome = self._cleanup()
        return outcome


def _load(simulation: Simulation, release: Release) -> dict[str, Any]:
    path = release.write_csv(WORK / f"release-{release.name}.csv")
    loaded = driver.run_load([path], LoadOptions(dataset=DATASET), simulation.home, simulation.staging)
    return {"version": f"v{loaded.version}", "items": loaded.items, "delta": loaded.report.delta}


def run(args: argparse.Namespace) -> dict[str, Any]:
    a = asn_subset(args.rows, args.seed)
    b = changed_release(a, "b", args.changed, args.seed)
    probes = probe_addresses(a, changed_edges(a, b), 50_000, args.seed)
    began = time.monotonic()
    with Dynalite() as home_endpoint, Dynalite() as replica_endpoint:
        simulation = Simulation({HOME: home_endpoint, REPLICA: replica_endpoint}, args, {"v1": a, "v2": b})
        hammer = Hammer(probes, simulation.tally)
        simulation.follower.start()
        simulation.sampler.start()
        hammer.start()
        per_phase = args.lookups // len(PHASES) + 1
        try:
            phases = {
                "full": simulation.phase("full", lambda: _load(simulation, a), per_phase),
                "delta": simulation.phase("delta", lambda: _load(simulation, b), per_phase),
                "rollback": simulation.phase("rollback", simulation.roll_back, per_phase),
                "cleanup": simulation.phase("cleanup", simulation.clean_up, per_phase, moves=False),
            }
        finally:
            hammer.stop()
            simulation.stop_sampling()
            simulation.follower.stop()
            simulation.replicas.close()
            dependencies.install(None)
            shutil.rmtree(simulation.staging.root, ignore_errors=True)
    chart = RESULTS / ("replication.png" if args.check else "replication-no-check.png")
    draw_timeline(simulation, chart, args.check)
    result = report(args, simulation, phases=phases, a=a, b=b, seconds=round(time.monotonic() - began, 1))
    return {**result, "chart": str(chart.relative_to(PROJECT_ROOT))}


def report(
    args: argparse.Namespace,
    simulation: Simulation,
    *,
    phases: dict[str, Any],
    a: Release,
    b: Release,
    seconds: float,
) -> dict[str, Any]:
    tally = simulation.tally
    waiting = [run for run in simulation.follower.runs if run.status == "waiting"]
    return {
        "command": " ".join(["python -m bench.replication", *sys.argv[1:]]),
        "attribution": ASN_ATTRIBUTION,
        "check": args.check,
        "regions": {"home": HOME, "replica": REPLICA},
        "lookups": tally.answered(),
        "unanswered_before_the_first_version_arrived": tally.total("unanswered"),
        "mixed_answers": tally.total("mixed"),
        "deleted_while_served": simulation.deletes.while_served,
        # From home's pointer write to the region's; cleanup moves no pointer.
        "lag_seconds": {
            HOME: dict.fromkeys(simulation.lags, 0.0),
            REPLICA: {k: round(v, 3) for k, v in simulation.lags.items()},
        },
        "phases": {
            name: {
                **phase,
                "lookups": tally.answered(phase=name),
                "mixed_answers": tally.total("mixed", phase=name),
            }
            for name, phase in phases.items()
        },
        "data": {
            "rows_a": len(a.rows),
            "rows_b": len(b.rows),
            "rows_changed": len(set(a.rows) ^ set(b.rows)),
        },
        "replication": {
            "delays": asdict(simulation.replicas.delays),
            "item_versions_applied": simulation.replicas.replicated,
            "superseded_by_a_newer_write": simulation.replicas.superseded,
            "deletes_applied": simulation.deletes.deleted,
        },
        "check_runs": {
            "runs": len(simulation.follower.runs),
            "waiting": len(waiting),
            "partitions_short_at_most": max((run.missing for run in waiting), default=0),
            "counts": [
                {"home": run.home, "items": run.counted_items, "seconds": run.seconds}
                for run in simulation.follower.runs
                if run.counted_items
            ],
        },
        "cleanup": {
            "rounds": len(simulation.cleanups),
            "held_by_regions": [
                round_["held_by_regions"] for round_ in simulation.cleanups if round_.get("held_by_regions")
            ][:3],
        },
        "mixed_examples": tally.examples[:5],
        "seconds": seconds,
        "median_lag_seconds": round(statistics.median(simulation.lags.values()), 3)
        if simulation.lags
        else None,
    }


def draw_timeline(simulation: Simulation, path: Path, check: bool) -> Path:
    """The version home serves and the version the replica serves, over the run, and each mixed answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(11, 4.2), dpi=110)
    times = [at for at, _, _ in simulation.timeline]
    for column, label in ((1, f"home ({HOME})"), (2, f"replica ({REPLICA})")):
        axis.step(times, [sample[column] for sample in simulation.timeline], where="post", label=label, lw=2)
    mixed = [at - simulation.began for at in simulation.tally.mixed_at]
    if mixed:
        label = f"mixed answers ({len(mixed):,})"
        axis.plot(mixed, [0.5] * len(mixed), "|", color="#c44e52", ms=14, label=label)
    for name, at in simulation.phase_starts.items():
        axis.axvline(at, color="grey", lw=0.8, ls=":")
        axis.text(at, 2.3, f" {name}", fontsize=9, color="grey")
    axis.set_yticks([0, 1, 2], ["none", "v1 (A)", "v2 (B, delta)"])
    axis.set_ylim(-0.3, 2.6)
    axis.set_xlabel("seconds")
    checked = "with the arrival check" if check else "without the arrival check (--no-check)"
    axis.set_title(f"The version each region serves, {checked}")
    axis.legend(loc="lower right", fontsize=9)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def main() -> None:
    # The lookup handler's metric lines would go to stdout, where no CloudWatch reads them.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000, help="rows of release A, from the ASN files")
    parser.add_argument("--changed", type=float, default=0.03, help="share of A's rows that B changes")
    parser.add_argument("--lookups", type=int, default=12_000, help="lookups at least, over the four phases")
    parser.add_argument(
        "--long-share", type=float, default=0.02, help="share of item versions delayed 5 to 30 s"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="copy home's pointer without counting (the fault)",
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    result = run(args)
    name = "replication.json" if args.check else "replication-no-check.json"
    Path(RESULTS / name).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps({key: result[key] for key in list(result)[:12]}, indent=2, default=str))


if __name__ == "__main__":
    main()
