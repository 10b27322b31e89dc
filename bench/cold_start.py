"""Cold start of the lookup and loader functions: importing their handlers, as a ratio to ``import boto3``.

A new Lambda container imports the handler module once before its first answer,
so that import is the part of a cold start our code decides. The lookup's
asset is ``lambdas/``; the loader's holds ``loader/`` beside the core package,
so its handler module (``LOADER_MODULE`` of each tree's ``stacks/constants.py``)
is imported with both on the path. Each sample runs
in a fresh interpreter (``python -X importtime`` is not needed: wall time of the
import alone, measured inside the child), interleaving the handler and the
baseline so that a busy machine slows both alike. The ratio is the figure to
compare between commits; the milliseconds depend on the machine.

``python -m bench.cold_start [--rounds N]``; saves ``bench/results/cold_start.json``.
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
from typing import Any

RESULTS = Path(__file__).with_name("results") / "cold_start.json"
HANDLER_MODULE = "ipmeta.api.handler"
BASELINE_MODULE = "boto3"
#: The stack names the loader's handler module here; it moves when the loader does.
_LOADER_MODULE = re.compile(r'^LOADER_MODULE: Final = "([\w.]+)"$', re.MULTILINE)
_CHILD = (
    "import time, importlib, sys\n"
    "started = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(time.perf_counter() - started)\n"
)


ROOT = Path(__file__).resolve().parents[1]


def loader_module(root: Path) -> str:
    """The loader's handler module in the checkout at ``root``, as its stack names it."""
    found = _LOADER_MODULE.search((root / "stacks" / "constants.py").read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{root}/stacks/constants.py names no LOADER_MODULE")
    return found.group(1)


def import_seconds(module: str, root: Path = ROOT, *, with_root: bool = False) -> float:
    """Seconds a fresh interpreter takes to import ``module``, ``root``/lambdas (and ``root``) on its path."""
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
    return float(output.strip().splitlines()[-1])


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


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
    samples: dict[Any, list[float]] = {key: [] for key in (*modules, BASELINE_MODULE)}
    for (_, function), (module, root) in modules.items():  # warm the OS file cache once
        import_seconds(module, root, with_root=function == "loader")
    for _ in range(rounds):
        for key, (module, root) in modules.items():
            samples[key].append(import_seconds(module, root, with_root=key[1] == "loader"))
        samples[BASELINE_MODULE].append(import_seconds(BASELINE_MODULE))
    baseline_ms = _median_ms(samples[BASELINE_MODULE])
    report: dict[str, Any] = {"rounds": rounds, "boto3_import_ms_median": baseline_ms}
    for (tree, function), (module, root) in modules.items():
        handler_ms = _median_ms(samples[(tree, function)])
        figures = {
            "module": module,
            "import_ms_median": handler_ms,
            "ratio": round(handler_ms / baseline_ms, 3),
        }
        report.setdefault(tree, {"path": str(root)})[function] = figures
    if other is not None:
        report["current_over_other"] = {
            function: round(report["current"][function]["ratio"] / report["other_tree"][function]["ratio"], 3)
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
