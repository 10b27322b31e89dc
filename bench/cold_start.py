"""Cold start of the lookup and loader functions: importing their handlers, as a ratio to ``import boto3``.

A new Lambda container imports the handler module once before its first answer,
so that import is the part of a cold start our code decides. The lookup's
asset is ``lambdas/``; the loader's holds ``loader/`` beside the core package,
so its handler module (``LOADER_MODULE`` of each tree's ``stacks/constants.py``)
is imported with both on the path. Each sample runs
in a fresh interpreter (``python -X importtime`` is not needed: wall time of the
import alone, measured inside the child), interleaving the handler and the
baseline so that a busy machine slows both alike. The ratio is the figure to
compare between commits; the milliseconds depend on the machine. The child's CPU
time is recorded too (``cpu_ratio``): on a machine shared with other work, wall
time also counts the waits for a core, which CPU time leaves out.

``python -m bench.cold_start [--rounds N] [--other-tree DIR]``: with ``--other-tree``
(a checkout of another commit, e.g. the one before a change) both trees' handlers
are timed in the same run, interleaved. Saves ``bench/results/cold_start.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

RESULTS = Path(__file__).with_name("results") / "cold_start.json"
HANDLER_MODULE = "ipmeta.api.handler"
BASELINE_MODULE = "boto3"
#: The stack names the loader's handler module here; it moves when the loader does.
_LOADER_MODULE = re.compile(r'^LOADER_MODULE: Final = "([\w.]+)"$', re.MULTILINE)
_CHILD = (
    "import time, importlib, sys\n"
    "started, cpu = time.perf_counter(), time.process_time()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(time.perf_counter() - started, time.process_time() - cpu)\n"
)


class ImportTime(NamedTuple):
    wall: float
    cpu: float


ROOT = Path(__file__).resolve().parents[1]


def loader_module(root: Path) -> str:
    """The loader's handler module in the checkout at ``root``, as its stack names it."""
    found = _LOADER_MODULE.search((root / "stacks" / "constants.py").read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{root}/stacks/constants.py names no LOADER_MODULE")
    return found.group(1)


def import_seconds(module: str, root: Path = ROOT, *, with_root: bool = False) -> ImportTime:
    """Seconds (wall and CPU) a fresh interpreter takes to import ``module``, ``root``/lambdas (and
    ``root``) on its path."""
    path = os.pathsep.join((str(root / "lambdas"), *([str(root)] if with_root else [])))
    environment = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    # From the tree's own folder: ``-c`` puts the working folder first on the path.
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, module],
        check=True,
        capture_output=True,
        text=True,
        env=environment,
        cwd=root,
    ).stdout
    wall, cpu = output.strip().splitlines()[-1].split()
    return ImportTime(float(wall), float(cpu))


def _median_ms(samples: list[ImportTime], *, cpu: bool = False) -> float:
    return round(statistics.median(sample.cpu if cpu else sample.wall for sample in samples) * 1000, 1)


def measure(rounds: int, other: Path | None = None) -> dict[str, Any]:
    """Median import times of both handlers; with ``other`` (a checkout of another commit), its handlers too.

    Every round imports each module once, in the same order, so a busy machine slows all alike.
    """
    trees = {"current": ROOT, **({"other_tree": other} if other is not None else {})}
    # The lookup's asset is lambdas/ alone; the loader's holds the core package beside loader/.
    modules = {
        (tree, function): (HANDLER_MODULE if function == "lookup" else loader_module(root), root)
        for tree, root in trees.items()
        for function in ("lookup", "loader")
    }
    samples: dict[Any, list[ImportTime]] = {key: [] for key in (*modules, BASELINE_MODULE)}
    for (_, function), (module, root) in modules.items():  # warm the OS file cache once
        import_seconds(module, root, with_root=function == "loader")
    for _ in range(rounds):
        for key, (module, root) in modules.items():
            samples[key].append(import_seconds(module, root, with_root=key[1] == "loader"))
        samples[BASELINE_MODULE].append(import_seconds(BASELINE_MODULE))
    baseline_ms = _median_ms(samples[BASELINE_MODULE])
    baseline_cpu_ms = _median_ms(samples[BASELINE_MODULE], cpu=True)
    report: dict[str, Any] = {
        "rounds": rounds,
        "boto3_import_ms_median": baseline_ms,
        "boto3_cpu_ms_median": baseline_cpu_ms,
    }
    for (tree, function), (module, root) in modules.items():
        handler_ms = _median_ms(samples[(tree, function)])
        handler_cpu_ms = _median_ms(samples[(tree, function)], cpu=True)
        figures = {
            "module": module,
            "import_ms_median": handler_ms,
            "ratio": round(handler_ms / baseline_ms, 3),
            "cpu_ms_median": handler_cpu_ms,
            "cpu_ratio": round(handler_cpu_ms / baseline_cpu_ms, 3),
        }
        report.setdefault(tree, {"path": str(root)})[function] = figures
    if other is not None:
        for suffix, ratio in (("", "ratio"), ("_cpu", "cpu_ratio")):
            report[f"current_over_other{suffix}"] = {
                function: round(report["current"][function][ratio] / report["other_tree"][function][ratio], 3)
                for function in ("lookup", "loader")
            }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--label", default="current", help="the key the figures are saved under")
    parser.add_argument(
        "--other-tree",
        type=Path,
        help="a checkout of another commit (git worktree add DIR REV), its handlers timed in the same run",
    )
    args = parser.parse_args()
    report = measure(args.rounds, args.other_tree)
    saved: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    command = f"python -m bench.cold_start --rounds {args.rounds}"
    if args.other_tree:
        command += f" --other-tree {args.other_tree}"
    saved[args.label] = {**report, "command": command}
    RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
