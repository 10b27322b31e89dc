"""The MaxMind DB export's cost against the version's size: CPU time and peak memory per range.

``write_mmdb`` (``loader.export.mmdb_writer``) is the whole of the export task's work after its
check: it reads the version a page at a time and streams it into the file. Whether one Export
invocation (a Lambda: 15 minutes, 10 GB) can write a version of any size is measured here, on the
path the task runs (``write_mmdb``), with synthetic city-like ranges at growing sizes, each in a
child process so its peak RSS (``ru_maxrss``) and CPU time (user + sys) are its own:

- every range is two CIDR blocks (a /24 and a /25), in the IPv4 tree;
- every record is distinct (eight fields: city, country, coordinates, accuracy, postcode, ...),
  the worst case for the data section and for the writer's memory of records seen;
- every 997th range is read back with ``maxminddb`` and compared.

The per-range figures are the slope between the two largest sizes (what one more range costs),
and the extrapolation to 15 M ranges is that slope from the largest size on. Memory: the writer
forgets the records it remembers past ``MAX_REMEMBERED_RECORDS`` (1 M), so sizes on both sides of
it show whether the peak still grows.
``python -m bench.mmdb_export [--sizes 250000,1000000,2000000]``; saves ``bench/results/mmdb_export.json``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import resource
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import maxminddb

from bench.formats import run_child
from loader.export.files import ExportRange, write_mmdb

RESULTS = Path(__file__).with_name("results") / "mmdb_export.json"
SAMPLE_EVERY = 997
#: Each synthetic range is a /24 and the /25 after it (two CIDR blocks), one every 512 addresses:
#: a real version has one or two blocks a range (DB-IP City Lite: one).
RANGE_SIZE = 384
RANGE_STEP = 512
TARGET_RANGES = 15_000_000


def record(index: int) -> dict[str, Any]:
    return {
        "city": f"City {index}",
        "country_code": ("US", "DE", "JP", "BR", "IN")[index % 5],
        "subdivision": f"Region {index % 4_000}",
        "postal_code": f"{index % 100_000:05d}",
        "latitude": round(-60 + (index % 12_000) / 100, 4),
        "longitude": round(-180 + (index * 7 % 36_000) / 100, 4),
        "accuracy_radius": 1 + index % 1_000,
        "is_anycast": index % 97 == 0,
    }


def ranges(count: int) -> Iterator[ExportRange]:
    start = 1 << 24
    for index in range(count):
        yield ExportRange(4, start, start + RANGE_SIZE - 1, record(index))
        start += RANGE_STEP


def task(count: int) -> dict[str, Any]:
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ipmeta-bench-mmdb-") as folder:
        out = Path(folder) / "export.mmdb"
        stats = write_mmdb(ranges(count), out, database_type="ipmeta", description={"en": "bench"})
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        peak = usage.ru_maxrss / 1024
        mismatches = 0
        with maxminddb.open_database(str(out)) as reader:
            for index, item in enumerate(ranges(count)):
                if index % SAMPLE_EVERY == 0:
                    for value in (item.start, item.end):
                        mismatches += reader.get(str(ipaddress.IPv4Address(value))) != item.data
        return {
            "ranges": stats.ranges,
            "networks": stats.details["networks"],
            "records": stats.details["records"],
            "file_mb": round(stats.file_bytes / 2**20, 1),
            "write_seconds": stats.seconds,
            "cpu_seconds": round(cpu, 2),
            "peak_rss_mb": round(peak, 1),
            "sampled_mismatches": mismatches,
            "wall_seconds_with_check": round(time.monotonic() - began, 1),
        }


def extrapolate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    small, large = runs[-2], runs[-1]
    more = large["ranges"] - small["ranges"]
    cpu_per_range = (large["cpu_seconds"] - small["cpu_seconds"]) / more
    rss_per_range = (large["peak_rss_mb"] - small["peak_rss_mb"]) / more
    file_per_range = (large["file_mb"] - small["file_mb"]) / more
    beyond = TARGET_RANGES - large["ranges"]
    return {
        "between": [small["ranges"], large["ranges"]],
        "cpu_microseconds_per_range": round(cpu_per_range * 1e6, 2),
        "peak_rss_kb_per_range": round(rss_per_range * 1024, 4),
        "at_15m_ranges": {
            "cpu_seconds": round(large["cpu_seconds"] + cpu_per_range * beyond),
            "peak_rss_mb": round(large["peak_rss_mb"] + max(rss_per_range, 0) * beyond, 1),
            "file_mb": round(large["file_mb"] + file_per_range * beyond),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,1000000,2000000", help="ranges of each run")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(task(args.child)))
        return
    sizes = sorted(int(size) for size in args.sizes.split(","))
    runs = []
    for size in sizes:
        print(f"export {size:,} ranges", flush=True)
        runs.append(run_child(str(size), module="bench.mmdb_export"))
        print(json.dumps(runs[-1]), flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    result = {
        "command": "python -m bench.mmdb_export --sizes " + ",".join(map(str, sizes)),
        "commit": commit.stdout.strip(),
        "runs": runs,
        "per_range": extrapolate(runs),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["per_range"], indent=2))


if __name__ == "__main__":
    main()
