"""Cold start of the lookup function: importing its handler, as a ratio to ``import boto3``.

A new Lambda container imports the handler module once before its first answer,
so that import is the part of a cold start our code decides. Each sample runs
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
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results") / "cold_start.json"
HANDLER_MODULE = "ipmeta.api.handler"
BASELINE_MODULE = "boto3"
_CHILD = (
    "import time, importlib, sys\n"
    "started = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(time.perf_counter() - started)\n"
)


ROOT = Path(__file__).resolve().parents[1]


def import_seconds(module: str, root: Path = ROOT) -> float:
    """Seconds a fresh interpreter spends importing ``module``, with ``root``/lambdas on its path."""
    environment = {**os.environ, "PYTHONPATH": str(root / "lambdas"), "PYTHONDONTWRITEBYTECODE": "1"}
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, module], check=True, capture_output=True, text=True, env=environment
    ).stdout
    return float(output.strip().splitlines()[-1])


def measure(rounds: int, other: Path | None = None) -> dict[str, Any]:
    """Median import times; with ``other`` (a checkout of another commit), its handler too."""
    handler: list[float] = []
    baseline: list[float] = []
    others: list[float] = []
    import_seconds(HANDLER_MODULE)  # warm the OS file cache and .pyc files once
    if other is not None:
        import_seconds(HANDLER_MODULE, other)
    for _ in range(rounds):
        handler.append(import_seconds(HANDLER_MODULE))
        baseline.append(import_seconds(BASELINE_MODULE))
        if other is not None:
            others.append(import_seconds(HANDLER_MODULE, other))
    handler_ms, baseline_ms = statistics.median(handler) * 1000, statistics.median(baseline) * 1000
    report: dict[str, Any] = {
        "rounds": rounds,
        "handler_import_ms_median": round(handler_ms, 1),
        "boto3_import_ms_median": round(baseline_ms, 1),
        "ratio": round(handler_ms / baseline_ms, 3),
    }
    if other is not None:
        other_ms = statistics.median(others) * 1000
        report["other_tree"] = {
            "path": str(other),
            "handler_import_ms_median": round(other_ms, 1),
            "ratio": round(other_ms / baseline_ms, 3),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--label", default="current", help="the key the figures are saved under")
    parser.add_argument(
        "--other-tree",
        type=Path,
        help="a checkout of another commit (git worktree add DIR REV) whose handler is timed in the same run",
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
