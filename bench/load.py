"""Loader benchmark on the real ASN IPv4 file (412k ranges), in one run:

1. **Throughput:** the loader's ``write_chunk`` phase (two chunks at a time, eight
   writers each: 16 BatchWriteItem calls in flight, progress and lock
   bookkeeping included) against a bare loop of BatchWriteItem over the very
   same items with 16 threads. Each side gets a fresh in-memory dynalite, so
   neither pays for the other's data. Goal: loader/bare ≥ 0.85.
2. **Spread:** over every window of 1,000 consecutive writes (the staged order),
   the largest share one bucket takes, against that bucket's share of the whole
   file. Goal: ≤ 1.5×.
3. **Memory:** the peak RSS of ``prepare`` on the file, measured in a subprocess
   (ru_maxrss of a process that only prepares). Goal: ≤ 1 GB.

``python -m bench.load [--file PATH]``; prints a JSON report and saves it under .data/bench/.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ipmeta import keys
from ipmeta.settings import Settings
from ipmeta.store import deserialize_item, serialize_item
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader import driver
from loader.activate import activate
from loader.batching import batched
from loader.driver import prepare
from loader.options import DEFAULT_WRITE_WORKERS, LoadOptions
from loader.staging import LocalStaging
from loader.table import BATCH_WRITE_LIMIT, LoaderTable
from loader.write import chunk_items, write_chunk

ASN_V4 = PROJECT_ROOT / "node_modules" / "@ip-location-db" / "asn" / "asn-ipv4.csv"
COLUMNS = ("start", "end", "asn", "organization")
WINDOW = 1000
WORKERS = DEFAULT_WRITE_WORKERS * driver.DEFAULT_PARALLEL_CHUNKS


def store_on(endpoint: str, table: str = "bench") -> LoaderTable:
    store = LoaderTable.from_settings(Settings(table, endpoint, 5.0), max_pool_connections=WORKERS * 2)
    store.create_table_if_missing()
    return store


def prepare_only(endpoint: str, staging_dir: Path, source: Path) -> None:
    """The subprocess: prepare, then report the peak RSS of this process alone."""
    started = time.monotonic()
    prepared = prepare([source], LoadOptions(columns=COLUMNS), store_on(endpoint), LocalStaging(staging_dir))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(
        json.dumps(
            {
                "load_id": prepared.load_id,
                "chunks": prepared.chunks,
                "items": prepared.items,
                "rows": prepared.report.rows_read,
                "prepare_seconds": round(time.monotonic() - started, 1),
                "peak_rss_mb": round(peak_kib / 1024, 1),
            }
        )
    )


def staged_items(staging: LocalStaging, load_id: str, chunks: int) -> list[dict[str, Any]]:
    return [
        deserialize_item(item) for index in range(chunks) for item in chunk_items(load_id, index, staging)
    ]


def window_spread(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Largest share of any bucket in any window of WINDOW consecutive writes, vs its file share."""
    buckets = [keys.bucket_name_of_partition(item[keys.PARTITION_KEY]) for item in items]
    whole = Counter(buckets)
    window: Counter[str] = Counter(buckets[:WINDOW])
    recent = deque(buckets[:WINDOW])
    worst_share, worst_bucket = 0.0, ""
    for position in range(WINDOW, len(buckets) + 1):
        bucket, count = window.most_common(1)[0]
        if count / WINDOW > worst_share:
            worst_share, worst_bucket = count / WINDOW, bucket
        if position < len(buckets):
            leaving = recent.popleft()
            window[leaving] -= 1
            recent.append(buckets[position])
            window[buckets[position]] += 1
    file_share = whole[worst_bucket] / len(buckets)
    hottest, hottest_count = whole.most_common(1)[0]
    return {
        "window": WINDOW,
        "max_window_share": round(worst_share, 4),
        "bucket": worst_bucket,
        "bucket_file_share": round(file_share, 4),
        "ratio": round(worst_share / file_share, 2),
        "hottest_bucket": hottest,
        "hottest_bucket_file_share": round(hottest_count / len(buckets), 4),
        "goal_ratio_at_most": 1.5,
    }


def bare_loop(store: LoaderTable, items: list[dict[str, Any]]) -> float:
    """BatchWriteItem of 25 with WORKERS threads, retrying UnprocessedItems; returns seconds."""
    batches = [list(batch) for batch in batched(items, BATCH_WRITE_LIMIT)]
    bar = tqdm(total=len(items), unit="items", desc="bare BatchWriteItem", disable=None)
    lock = threading.Lock()

    def write(batch: list[dict[str, Any]]) -> None:
        # Serializing is part of writing: the loader pays for it too.
        pending: list[Any] = [{"PutRequest": {"Item": serialize_item(item)}} for item in batch]
        while pending:
            response = store.client.batch_write_item(RequestItems={store.table_name: pending})
            pending = response.get("UnprocessedItems", {}).get(store.table_name, [])
        with lock:
            bar.update(len(batch))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for _ in pool.map(write, batches):
            pass
    seconds = time.monotonic() - started
    bar.close()
    return seconds


def loader_writes(store: LoaderTable, staging: LocalStaging, load_id: str, chunks: int, items: int) -> float:
    """The driver's write phase: write_chunk over every chunk, DEFAULT_PARALLEL_CHUNKS at a time."""
    bar = tqdm(total=items, unit="items", desc="loader write_chunk", disable=None)

    def write(index: int) -> None:
        bar.update(write_chunk(load_id, index, store, staging).items)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=driver.DEFAULT_PARALLEL_CHUNKS) as pool:
        for _ in pool.map(write, range(chunks)):
            pass
    seconds = time.monotonic() - started
    bar.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=ASN_V4)
    parser.add_argument("--prepare-only", nargs=2, metavar=("ENDPOINT", "STAGING"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare_only:
        prepare_only(args.prepare_only[0], Path(args.prepare_only[1]), args.file)
        return 0

    with tempfile.TemporaryDirectory(prefix="ipmeta-bench-") as folder:
        staging = LocalStaging(Path(folder))
        with Dynalite() as endpoint:
            print(f"preparing {args.file.name} in a subprocess (peak RSS)...", file=sys.stderr)
            command = [sys.executable, "-m", "bench.load", "--file", str(args.file), "--prepare-only"]
            output = subprocess.run([*command, endpoint, folder], check=True, capture_output=True, text=True)
            prepared = json.loads(output.stdout.strip().splitlines()[-1])
            items = staged_items(staging, prepared["load_id"], prepared["chunks"])
            spread = window_spread(items)
            store = store_on(endpoint)
            loader_seconds = loader_writes(
                store, staging, prepared["load_id"], prepared["chunks"], len(items)
            )
            activation_started = time.monotonic()
            activate(prepared["load_id"], store, staging)
            activate_seconds = time.monotonic() - activation_started
        with Dynalite() as endpoint:
            bare_seconds = bare_loop(store_on(endpoint), items)

    loader_rate = len(items) / loader_seconds
    bare_rate = len(items) / bare_seconds
    report = {
        "file": args.file.name,
        "rows": prepared["rows"],
        "items": len(items),
        "workers": WORKERS,
        "throughput": {
            "loader_items_per_second": round(loader_rate),
            "bare_items_per_second": round(bare_rate),
            "ratio": round(loader_rate / bare_rate, 3),
            "goal_ratio_at_least": 0.85,
            "loader_write_seconds": round(loader_seconds, 1),
            "bare_write_seconds": round(bare_seconds, 1),
            "activate_seconds_including_count_verification": round(activate_seconds, 1),
        },
        "spread": spread,
        "prepare": {
            "peak_rss_mb": prepared["peak_rss_mb"],
            "seconds": prepared["prepare_seconds"],
            "goal_mb_at_most": 1024,
        },
    }
    print(json.dumps(report, indent=2))
    saved = PROJECT_ROOT / "bench" / "results" / "load.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
