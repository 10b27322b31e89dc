"""Source formats and export at full size: rows/s, peak memory, and answers checked against maxminddb.

Each task runs in a child process, so its peak RSS (``ru_maxrss``) is its own:

1. **read**: every network of each real ``.mmdb`` through ``loader.formats.open_rows``
   (the C reader), checking that starts rise strictly (no network twice, no
   IPv4-mapped copy) and that every 997th row answers as ``maxminddb`` does.
2. **read, pure Python**: the same through ``maxminddb``'s pure-Python reader,
   which the loader Lambda ships.
3. **export mmdb / csv**: DB-IP City Lite, both families (14.7 M ranges, 8
   columns: larger than the 10 M the goal names), streamed from the reader into
   ``write_mmdb`` and ``write_csv``; the mmdb is then checked at every 997th range.

Goal: peak RSS of every task under 1 GB whatever the size, as a Lambda task must.
``python -m bench.formats [--limit N]``; saves ``bench/results/formats.json`` and ``formats.png``.
"""

from __future__ import annotations

import argparse
import ipaddress
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import maxminddb

from bench.datasets import DBIP_ATTRIBUTION, dbip_city
from bench.mmdb_probe import geolite2_country
from loader.export.files import ExportRange, write_csv, write_mmdb
from loader.formats import FormatOptions, SourceRow, open_rows, typed_value

RESULTS = Path(__file__).with_name("results") / "formats.json"
CHART = RESULTS.with_suffix(".png")
SAMPLE_EVERY = 997
MEMORY_GOAL_MB = 1024


def sources() -> dict[str, Path]:
    found = {f"dbip-city-ipv{family}.mmdb": path for family, path in dbip_city().items()}
    found["geolite2-country.mmdb"] = geolite2_country()
    return found


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def address(family: int, value: int) -> str:
    return str(ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value))


def task_read(path: Path, limit: int | None, pure: bool) -> dict[str, Any]:
    if pure:
        maxminddb.open_database = maxminddb.Reader  # as the loader Lambda has it
    started = time.monotonic()
    rows = mismatches = 0
    last = {4: -1, 6: -1}
    families = {4: 0, 6: 0}
    with maxminddb.Reader(str(path)) as reader:
        for row in itertools.islice(
            open_rows(path, path.name, FormatOptions()), 1, None if limit is None else limit + 1
        ):
            assert isinstance(row, SourceRow), row
            rows += 1
            families[row.family] += 1
            assert row.start > last[row.family], f"{row.origin} is not after the previous network"
            last[row.family] = row.end
            if rows % SAMPLE_EVERY == 0:
                answer = {key: value for key, value in row.values.items() if value is not None}
                mismatches += answer != reader.get(address(row.family, row.start))
    seconds = time.monotonic() - started
    return {
        "rows": rows,
        "ipv4": families[4],
        "ipv6": families[6],
        "seconds": round(seconds, 1),
        "rows_per_second": round(rows / seconds),
        "sampled_mismatches": mismatches,
        "peak_rss_mb": peak_rss_mb(),
    }


def dbip_ranges(limit: int | None) -> Iterator[ExportRange]:
    """DB-IP City Lite as a loaded version holds it: both families in order, values typed."""
    for path in dbip_city().values():
        rows = itertools.islice(
            open_rows(path, path.name, FormatOptions()), 1, None if limit is None else limit + 1
        )
        for row in rows:
            assert isinstance(row, SourceRow)
            data = {column: typed_value(value, "native") for column, value in row.values.items()}
            yield ExportRange(row.family, row.start, row.end, data)


def task_export(kind: str, limit: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ipmeta-bench-") as folder:
        out = Path(folder) / f"dbip-city.{kind}"
        if kind == "mmdb":
            stats = write_mmdb(dbip_ranges(limit), out, database_type="ipmeta", description={"en": "bench"})
        else:
            stats = write_csv(dbip_ranges(limit), out, ["city", "country_code", "latitude", "longitude"])
        result = {
            "ranges": stats.ranges,
            "seconds": stats.seconds,
            "ranges_per_second": round(stats.ranges / stats.seconds) if stats.seconds else None,
            "file_mb": round(stats.file_bytes / 2**20, 1),
            "peak_rss_mb": peak_rss_mb(),
            **{key: value for key, value in stats.details.items() if key != "reload_types"},
        }
        if kind == "mmdb":
            result["sampled_mismatches"] = check_export(out, limit)
    return result


def check_export(out: Path, limit: int | None) -> int:
    """Every 997th range of the source answers the same from the export."""
    mismatches = 0
    originals = {family: maxminddb.open_database(str(path)) for family, path in dbip_city().items()}
    with maxminddb.open_database(str(out)) as exported:
        for index, item in enumerate(dbip_ranges(limit)):
            if index % SAMPLE_EVERY == 0:
                for value in (item.start, item.end):
                    ip = address(item.family, value)
                    mismatches += exported.get(ip) != originals[item.family].get(ip)
    return mismatches


def run_child(*arguments: str, module: str = "bench.formats") -> dict[str, Any]:
    """``module --child arguments`` in a process of its own (its peak RSS its own): its last line."""
    output = subprocess.run(
        [sys.executable, "-m", module, "--child", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(output.splitlines()[-1])
    return result


def measure(limit: int | None) -> dict[str, Any]:
    extra = ["--limit", str(limit)] if limit else []
    results: dict[str, Any] = {
        "attribution": DBIP_ATTRIBUTION,
        "limit": limit,
        "read": {},
        "read_pure_python": {},
    }
    for name, path in sources().items():
        print(f"read {name}", flush=True)
        results["read"][name] = run_child("read", str(path), *extra)
    smallest = min(sources().values(), key=lambda path: path.stat().st_size)
    print(f"read {smallest.name} with the pure-Python reader", flush=True)
    results["read_pure_python"][smallest.name] = run_child("read-pure", str(smallest), *extra)
    for kind in ("mmdb", "csv"):
        print(f"export DB-IP City Lite as {kind}", flush=True)
        results[f"export_{kind}"] = run_child(f"export-{kind}", "-", *extra)
    peaks = [
        entry["peak_rss_mb"] for group in ("read", "read_pure_python") for entry in results[group].values()
    ]
    peaks += [results["export_mmdb"]["peak_rss_mb"], results["export_csv"]["peak_rss_mb"]]
    results["goal"] = {"peak_rss_mb_at_most": MEMORY_GOAL_MB, "met": max(peaks) <= MEMORY_GOAL_MB}
    return results


def chart(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, peaks, rates = [], [], []
    for group, suffix in (("read", ""), ("read_pure_python", " (pure)")):
        for name, entry in results[group].items():
            labels.append(f"read {name}{suffix}")
            peaks.append(entry["peak_rss_mb"])
            rates.append(entry["rows_per_second"])
    for kind in ("mmdb", "csv"):
        labels.append(f"export {kind} ({results[f'export_{kind}']['ranges'] / 1e6:.1f} M ranges)")
        peaks.append(results[f"export_{kind}"]["peak_rss_mb"])
        rates.append(results[f"export_{kind}"]["ranges_per_second"] or 0)
    figure, (memory, speed) = plt.subplots(1, 2, figsize=(12, 0.6 * len(labels) + 1.5))
    memory.barh(labels, peaks, color="tab:blue")
    memory.axvline(MEMORY_GOAL_MB, color="tab:red", linestyle="--", label="1 GB goal")
    memory.set_xlabel("peak RSS (MB)")
    memory.legend()
    speed.barh(labels, rates, color="tab:green")
    speed.set_xlabel("rows or ranges per second")
    speed.set_yticks([])
    figure.suptitle("loader.formats and loader.export at full size")
    figure.tight_layout()
    figure.savefig(CHART, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="rows per file (default: all)")
    parser.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        task, path = args.child
        if task.startswith("read"):
            print(json.dumps(task_read(Path(path), args.limit, pure=task == "read-pure")))
        else:
            print(json.dumps(task_export(task.removeprefix("export-"), args.limit)))
        return
    results = measure(args.limit)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    chart(results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
