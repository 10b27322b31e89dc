"""The working tree against a git ref on every core path, interleaved on one machine.

``make bench-compare REF=<ref>`` (``python -m bench.compare REF [--quick] [--rounds N]
[--paths prepare,load,...]``). The ref's tree is exported with ``git archive`` into
``.data/bench/compare/`` (no worktree is registered in the repository) and run with
this virtualenv, its own folders first on ``PYTHONPATH`` (the editable install's
finder comes after them: each tree's imported files are printed and checked
before anything is timed). Both trees are driven through the commands users run,
``python -m ipmeta_cli.main load|serve|enrich`` and a cold import of the lookup
handler, so an older tree's internal modules may differ freely:

- ``prepare``: ``ipmeta load --dry-run`` of a city-like CSV (``bench.prepare``'s
  synthetic /24s with gaps; 1 M rows by default);
- ``load``: ``ipmeta load`` of the first rows of both ASN files into a fresh local
  store (dynalite on disk);
- ``delta``: ``ipmeta load`` of the same files with 1% of organizations renamed,
  over that load: a delta reload;
- ``lookups_one``, ``lookups_two``: lookups over HTTP (``GET /v1/ip/<ip>``, four
  client threads) through ``ipmeta serve`` of one dataset (asn), then of two (asn
  and city), addresses inside loaded ranges, new ones each round;
- ``cold_import``: ``bench.cold_start``'s fresh-interpreter import of the lookup
  handler, the median of a few imports per round;
- ``enrich``: ``ipmeta enrich`` of a CSV of addresses against the one-dataset store.

A path a tree lacks (``ipmeta enrich`` before it existed) is skipped with its
reason. Each round runs every path on both trees, the order alternating between
rounds (head first, then ref first), so drift hits both alike;
``bench.significance`` judges the paired samples. Wall time is the figure judged;
the CPU time of the command's process tree is recorded beside it.

``IPMETA_BENCH_PLANT_SLOWDOWN=prepare:0.2`` (paths and shares, comma-separated)
plants a slowdown in the head's samples to see it flagged: the harness sleeps that
share of each head run's own time inside the timed interval. Only this harness
reads it; nothing in ipmeta does.

Saves ``bench/results/compare-<ref>.json`` (``-quick`` with ``--quick``) and both
trees' samples as pyperf suites under ``.data/bench/compare/`` for
``python -m pyperf compare_to ref.json head.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from http.client import HTTPConnection
from pathlib import Path
from typing import Any, Final

import pyperf
from tqdm import tqdm

from bench.cold_start import HANDLER_MODULE, import_seconds
from bench.datasets import ASN_DIR, BENCH_DATA
from bench.prepare import synthetic_csv
from bench.significance import Verdict, compare
from ipmeta_cli.dynalite import PROJECT_ROOT

WORK: Final = BENCH_DATA / "compare"
RESULTS: Final = PROJECT_ROOT / "bench" / "results"
PLANT_VARIABLE: Final = "IPMETA_BENCH_PLANT_SLOWDOWN"
ASN_COLUMNS: Final = "start,end,asn,organization"
PATHS: Final = ("prepare", "load", "delta", "lookups_one", "lookups_two", "cold_import", "enrich")
CLIENT_THREADS: Final = 4


@dataclass(frozen=True)
class Config:
    """Sizes and repetitions. DEFAULT fits 20 minutes on a quiet 2-core machine (docs/decisions.md)."""

    rounds: int
    prepare_rows: int
    load_rows: int
    lookups: int
    enrich_rows: int
    cold_imports: int
    workers: int = 2


DEFAULT: Final = Config(
    rounds=8, prepare_rows=1_000_000, load_rows=24_000, lookups=2_000, enrich_rows=100_000, cold_imports=3
)
QUICK: Final = Config(
    rounds=2, prepare_rows=50_000, load_rows=5_000, lookups=400, enrich_rows=10_000, cold_imports=1
)


@dataclass
class Tree:
    """A checkout driven through its own ``ipmeta`` command, with this virtualenv's packages."""

    label: str
    root: Path
    commit: str
    lacks: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        path = os.pathsep.join((str(self.root), str(self.root / "lambdas")))
        return {**os.environ, "PYTHONPATH": path, "POWERTOOLS_METRICS_DISABLED": "true"}

    def ipmeta(self, *arguments: str | Path) -> list[str]:
        return [sys.executable, "-m", "ipmeta_cli.main", *(str(argument) for argument in arguments)]

    def run(self, *arguments: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.ipmeta(*arguments), env=self.env, cwd=self.root, capture_output=True, text=True, check=False
        )

    def data(self, name: str) -> Path:
        return WORK / self.label / name


@dataclass
class Sample:
    wall: float
    cpu: float | None


def git(*arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=PROJECT_ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def export_tree(ref: str) -> Tree:
    """The ref's files in a folder of their own (``git archive``, made once per commit)."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    folder = WORK / f"tree-{commit[:12]}"
    if not folder.exists():
        partial = folder.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit], cwd=PROJECT_ROOT, check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive.stdout, check=True)
        # dynalite and the ASN files come from npm; the ref's own tree has no node_modules.
        (partial / "node_modules").symlink_to(PROJECT_ROOT / "node_modules")
        partial.rename(folder)
    return Tree("ref", folder, commit)


def imported_files(tree: Tree) -> dict[str, str]:
    """Where each package is imported from when ``tree``'s command runs; refused if not from ``tree``."""
    code = (
        "import json, ipmeta, loader, ipmeta_cli.main as m;"
        "print(json.dumps({'ipmeta': ipmeta.__file__, 'loader': loader.__file__, 'ipmeta_cli': m.__file__}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], env=tree.env, cwd=tree.root, check=True, capture_output=True, text=True
    ).stdout
    files: dict[str, str] = json.loads(output)
    for package, path in files.items():
        if not Path(path).resolve().is_relative_to(tree.root.resolve()):
            raise RuntimeError(f"{tree.label}: {package} is imported from {path}, not from {tree.root}")
    return files


# -- inputs (made once, shared by both trees) -------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    city: Path
    #: The second dataset of the two-dataset store: city-like, as large as the ASN cut.
    second: Path
    asn: tuple[Path, Path]
    asn_release: tuple[Path, Path]
    enrich: Path
    probes: list[str]


def asn_cut(rows: int) -> tuple[tuple[Path, Path], tuple[Path, Path]]:
    """The first rows of both ASN files (a quarter as many IPv6), and a release with 1% renamed."""
    folder = WORK / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    cuts, releases = [], []
    for name, count in (("asn-ipv4.csv", rows), ("asn-ipv6.csv", rows // 4)):
        lines = (ASN_DIR / name).read_text(encoding="utf-8").splitlines(keepends=True)[:count]
        cut, release = folder / f"{count}-{name}", folder / f"{count}-release-{name}"
        cut.write_text("".join(lines), encoding="utf-8")
        # A trailing marker on the organization (the last column) of every 100th row.
        release.write_text(
            "".join(
                line.rstrip("\n") + "-renamed\n" if index % 100 == 0 else line
                for index, line in enumerate(lines)
            ),
            encoding="utf-8",
        )
        cuts.append(cut)
        releases.append(release)
    return (cuts[0], cuts[1]), (releases[0], releases[1])


def make_inputs(config: Config) -> Inputs:
    asn, release = asn_cut(config.load_rows)
    starts = [line.split(",", 1)[0] for line in asn[0].read_text(encoding="utf-8").splitlines()]
    rng = random.Random(36)
    enrich = WORK / "inputs" / f"enrich-{config.enrich_rows}.csv"
    enrich.write_text("ip\n" + "".join(f"{rng.choice(starts)}\n" for _ in range(config.enrich_rows)))
    probes = [rng.choice(starts) for _ in range(config.lookups * config.rounds * 2)]
    city = synthetic_csv(config.prepare_rows, gaps=True)
    return Inputs(city, synthetic_csv(config.load_rows, gaps=True), asn, release, enrich, probes)


# -- measuring --------------------------------------------------------------------------------------------


def timed_command(tree: Tree, *arguments: str | Path) -> Sample:
    """Wall and CPU seconds of one ``ipmeta`` command (its waited-for process tree); refused if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = tree.run(*arguments)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"{tree.label}: ipmeta {arguments[0]} exited {done.returncode}: {done.stderr[-2000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(tree: Tree, data_dir: Path, workers: int) -> Iterator[str]:
    """``ipmeta serve`` of ``data_dir`` until the block ends; yields its host:port once it answers."""
    port = free_port()
    log = (data_dir / "serve.log").open("w")
    process = subprocess.Popen(
        tree.ipmeta("serve", "--data-dir", data_dir, "--port", str(port), "--workers", str(workers)),
        env=tree.env,
        cwd=tree.root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tree.label}: ipmeta serve did not start; see {data_dir / 'serve.log'}")
            time.sleep(0.3)
        yield f"127.0.0.1:{port}"
    finally:
        # The server's own group: its workers and its dynalite end with it.
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _answers(port: int) -> bool:
    try:
        connection = HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/v1/health")
        connection.getresponse().read()
        connection.close()
    except OSError:
        return False
    return True


def lookup_seconds(address: str, probes: list[str]) -> Sample:
    """Seconds for CLIENT_THREADS persistent connections to look up every probe; each answer must be 200."""
    host, port = address.split(":")
    shares = [probes[index::CLIENT_THREADS] for index in range(CLIENT_THREADS)]
    failures: list[str] = []
    lock = threading.Lock()

    def ask(share: list[str]) -> None:
        connection = HTTPConnection(host, int(port), timeout=60)
        for ip in share:
            connection.request("GET", f"/v1/ip/{ip}")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                with lock:
                    failures.append(f"{ip}: {response.status}")
        connection.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(ask, shares))
    wall = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"lookups failed: {failures[:5]}")
    return Sample(wall, None)


def cold_import(tree: Tree, imports: int) -> Sample:
    """The median of ``imports`` fresh-interpreter imports of the lookup handler (bench.cold_start)."""
    times = [import_seconds(HANDLER_MODULE, tree.root) for _ in range(imports)]
    return Sample(statistics.median(t.wall for t in times), statistics.median(t.cpu for t in times))


def planted_slowdowns() -> dict[str, float]:
    """``IPMETA_BENCH_PLANT_SLOWDOWN``: ``path:share`` pairs, e.g. ``prepare:0.2,load:0.1``."""
    planted: dict[str, float] = {}
    for pair in filter(None, os.environ.get(PLANT_VARIABLE, "").split(",")):
        path, _, share = pair.partition(":")
        if path not in PATHS:
            raise SystemExit(f"{PLANT_VARIABLE}: no path {path!r} (paths: {', '.join(PATHS)})")
        planted[path] = float(share)
    return planted


_BURN = (
    "import sys, time\n"
    "clock = time.perf_counter if sys.argv[1] == 'wall' else time.process_time\n"
    "end = clock() + float(sys.argv[2])\n"
    "while clock() < end:\n"
    "    pass\n"
)


def planted_run(sample: Sample, share: float, metric: str) -> Sample:
    """``sample`` made ``share`` slower in ``metric``, as a slower command would be: a child process
    busy for that long (by the wall clock, or CPU time), timed and counted as the command is."""
    measured = sample.wall if metric == "wall" or sample.cpu is None else sample.cpu
    clock = "wall" if metric == "wall" or sample.cpu is None else "cpu"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", _BURN, clock, str(share * measured)], check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(sample.wall + wall, None if sample.cpu is None else sample.cpu + cpu)


# -- the run ----------------------------------------------------------------------------------------------


@dataclass
class Bench:
    config: Config
    inputs: Inputs
    trees: list[Tree]
    paths: list[str]
    planted: dict[str, float]
    metric: str = "wall"
    samples: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)
    servers: dict[tuple[str, str], str] = field(default_factory=dict)

    def measure(self, path: str, tree: Tree, round_index: int) -> Sample:
        config, inputs = self.config, self.inputs
        workers = ("--workers", str(config.workers))
        if path == "prepare":
            return timed_command(
                tree, "load", "--dry-run", *workers, "--data-dir", tree.data("dry"), inputs.city
            )
        if path == "load":
            shutil.rmtree(tree.data("load"), ignore_errors=True)
            return timed_command(
                tree, "load", *workers, "--data-dir", tree.data("load"), "--columns", ASN_COLUMNS, *inputs.asn
            )
        if path == "delta":
            return timed_command(
                tree,
                "load",
                *workers,
                "--data-dir",
                tree.data("load"),
                "--columns",
                ASN_COLUMNS,
                *inputs.asn_release,
            )
        if path in ("lookups_one", "lookups_two"):
            start = (round_index * 2 + (path == "lookups_two")) * config.lookups
            return lookup_seconds(
                self.servers[(tree.label, path)], inputs.probes[start : start + config.lookups]
            )
        if path == "cold_import":
            return cold_import(tree, config.cold_imports)
        if path == "enrich":
            out = tree.data("enrich-out.csv")
            return timed_command(
                tree, "enrich", "--data-dir", tree.data("one"), "--out", out, "--overwrite", inputs.enrich
            )
        raise ValueError(path)

    def run(self) -> None:
        runnable = [path for path in self.paths if not any(path in tree.lacks for tree in self.trees)]
        self.samples = {path: {tree.label: [] for tree in self.trees} for path in runnable}
        total = self.config.rounds * len(runnable) * len(self.trees)
        with tqdm(total=total, unit="run", desc="interleaved rounds", disable=None) as bar:
            for round_index in range(self.config.rounds):
                order = self.trees if round_index % 2 == 0 else self.trees[::-1]
                for path in runnable:
                    for tree in order:
                        bar.set_postfix_str(f"{path} {tree.label}")
                        sample = self.measure(path, tree, round_index)
                        if tree.label == "head" and path in self.planted:
                            sample = planted_run(sample, self.planted[path], self.metric)
                        self.samples[path][tree.label].append(sample)
                        bar.update()


def set_up(tree: Tree, inputs: Inputs, config: Config, paths: list[str]) -> None:
    """Per tree, untimed: what it lacks, its stores for lookups and enrich, and every module compiled once."""
    if "enrich" in paths and tree.run("enrich", "--help").returncode != 0:
        tree.lacks["enrich"] = "this tree's ipmeta has no `enrich` command"
    shutil.rmtree(WORK / tree.label, ignore_errors=True)
    asn = ("--columns", ASN_COLUMNS, *inputs.asn)
    workers = ("--workers", str(config.workers))
    stores: dict[str, list[tuple[str | Path, ...]]] = {
        "one": [("--dataset", "asn", *asn)],
        "two": [("--dataset", "asn", *asn), ("--dataset", "city", inputs.second)],
    }
    needed = {"one": {"lookups_one", "enrich"}, "two": {"lookups_two"}}
    for store in (store for store, users in needed.items() if users & set(paths)):
        for arguments in stores[store]:
            timed_command(tree, "load", *workers, "--data-dir", tree.data(store), *arguments)
    if "enrich" in paths and "enrich" not in tree.lacks:
        timed_command(
            tree, "enrich", "--data-dir", tree.data("one"), "--out", tree.data("warm.csv"), inputs.enrich
        )


def report(bench: Bench, ref: str, started: float) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, by_tree in bench.samples.items():
        has_cpu = all(sample.cpu for samples in by_tree.values() for sample in samples)
        metrics = {"wall": compare(_figures(by_tree["ref"], "wall"), _figures(by_tree["head"], "wall"))}
        if has_cpu:
            metrics["cpu"] = compare(_figures(by_tree["ref"], "cpu"), _figures(by_tree["head"], "cpu"))
        judged = bench.metric if bench.metric in metrics else "wall"
        figures: dict[str, Any] = {
            "judged_on": judged,
            **metrics[judged].as_dict(),
            **{f"{metric}_comparison": comparison.as_dict() for metric, comparison in metrics.items()},
            "seconds": {label: _figures(samples, "wall") for label, samples in by_tree.items()},
            "cpu_seconds": {label: _figures(samples, "cpu") for label, samples in by_tree.items()}
            if has_cpu
            else None,
        }
        if path in bench.planted:
            figures["planted_slowdown"] = bench.planted[path]
        paths[path] = figures
    skipped = {
        path: reason for tree in bench.trees for path, reason in tree.lacks.items() if path in bench.paths
    }
    return {
        "ref": ref,
        "trees": {
            tree.label: {
                "commit": tree.commit,
                "from": "the working tree" if tree.root == PROJECT_ROOT else "git archive",
            }
            for tree in bench.trees
        },
        "config": asdict(bench.config),
        "metric": bench.metric,
        "paths": paths,
        "skipped": skipped,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "load_average_at_end": [round(value, 2) for value in os.getloadavg()],
    }


def _figures(samples: list[Sample], metric: str) -> list[float]:
    return [round((sample.wall if metric == "wall" else sample.cpu) or 0.0, 4) for sample in samples]


def save_pyperf_suites(bench: Bench) -> list[Path]:
    """Each tree's wall times as a pyperf suite: ``python -m pyperf compare_to ref.json head.json``."""
    files = []
    for tree in bench.trees:
        benchmarks = [
            pyperf.Benchmark(
                [
                    pyperf.Run(
                        [sample.wall], metadata={"name": path, "unit": "second"}, collect_metadata=False
                    )
                    for sample in by_tree[tree.label]
                ]
            )
            for path, by_tree in bench.samples.items()
        ]
        target = WORK / f"{tree.label}.json"
        pyperf.BenchmarkSuite(benchmarks).dump(str(target), replace=True)
        files.append(target)
    return files


def table(results: dict[str, Any]) -> str:
    """One line a path: mean seconds of each tree, the judged ratio with its interval, the spreads, the
    verdict, and the other metric's ratio and verdict."""
    lines = [
        f"{'path':<12} {'ref s':>8} {'head s':>8} {'judged':>6} {'head/ref':>9} {'95% CI':>17} "
        f"{'spread ref/head':>16}  {'verdict':<20} other metric"
    ]
    for path, figures in results["paths"].items():
        low, high = figures["ci95"]
        interval = f"[{low:.3f}, {high:.3f}]"
        spread = f"{figures['ref_spread']:.1%} / {figures['head_spread']:.1%}"
        seconds = figures["seconds" if figures["judged_on"] == "wall" else "cpu_seconds"]
        means = [statistics.fmean(seconds[label]) for label in ("ref", "head")]
        other = "cpu" if figures["judged_on"] == "wall" else "wall"
        other_figures = figures.get(f"{other}_comparison")
        aside = f"{other} {other_figures['ratio']:.3f} ({other_figures['verdict']})" if other_figures else "-"
        planted = f" planted +{figures['planted_slowdown']:.0%}" if "planted_slowdown" in figures else ""
        lines.append(
            f"{path:<12} {means[0]:>8.2f} {means[1]:>8.2f} {figures['judged_on']:>6} "
            f"{figures['ratio']:>9.3f} {interval:>17} {spread:>16}  {figures['verdict'] + planted:<20} "
            f"{aside}"
        )
    lines.extend(f"{path:<12} skipped: {reason}" for path, reason in results["skipped"].items())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("ref", help="the commit to compare the working tree with, e.g. main~5")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, two rounds: checks every path runs")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 8; 2 with --quick)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"a subset of {','.join(PATHS)}")
    parser.add_argument(
        "--metric",
        choices=("wall", "cpu"),
        default="wall",
        help="the figure judged: wall time (default, on a quiet machine), or the CPU time of the command's "
        "processes (on a shared one: waits for a core do not count); lookups are always judged on wall time",
    )
    args = parser.parse_args(argv)
    config = QUICK if args.quick else DEFAULT
    if args.rounds:
        config = replace(config, rounds=args.rounds)
    paths = [path for path in args.paths.split(",") if path]
    if unknown := set(paths) - set(PATHS):
        parser.error(f"no such path: {', '.join(sorted(unknown))}")
    started = time.monotonic()
    head = Tree(
        "head",
        PROJECT_ROOT,
        git("rev-parse", "HEAD") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""),
    )
    trees = [head, export_tree(args.ref)]
    for tree in trees:
        print(f"{tree.label} {tree.commit[:12]} imports {imported_files(tree)}", flush=True)
    inputs = make_inputs(config)
    for tree in trees:
        set_up(tree, inputs, config, paths)
    setup_minutes = round((time.monotonic() - started) / 60, 1)
    bench = Bench(config, inputs, trees, paths, planted_slowdowns(), args.metric)
    lookups = [path for path in ("lookups_one", "lookups_two") if path in paths]
    with _servers(bench, lookups):
        bench.run()
    results = {**report(bench, args.ref, started), "setup_minutes": setup_minutes}
    planted = "-planted" if bench.planted else ""
    name = re.sub(r"[^\w.-]", "-", args.ref) + ("-quick" if args.quick else "") + planted
    name += "-cpu" if args.metric == "cpu" else ""
    target = RESULTS / f"compare-{name}.json"
    target.write_text(json.dumps(results, indent=2) + "\n")
    suites = save_pyperf_suites(bench)
    print(table(results))
    print(f"{results['minutes']} min; saved {target.relative_to(PROJECT_ROOT)} and pyperf suites {suites}")
    return 1 if any(f["verdict"] == Verdict.SLOWER for f in results["paths"].values()) else 0


@contextmanager
def _servers(bench: Bench, paths: list[str]) -> Iterator[None]:
    """Every tree's ``ipmeta serve`` of its one- and two-dataset stores, for the rounds' lookups."""
    stores = {"lookups_one": "one", "lookups_two": "two"}
    with ExitStack() as stack:
        for tree in bench.trees:
            for path in paths:
                server = serving(tree, tree.data(stores[path]), bench.config.workers)
                bench.servers[(tree.label, path)] = stack.enter_context(server)
        yield


if __name__ == "__main__":
    sys.exit(main())
