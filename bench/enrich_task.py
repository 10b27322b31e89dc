"""What ``ipmeta plan --enrich-rows`` assumes, measured through the enrich task's own code.

``python -m bench.enrich_task [--rows N]`` writes ``bench/results/enrich_task.json``:

1. the demo's ASN dataset (412 k IPv4 and 103 k IPv6 ranges) loaded into dynalite as ``make run``
   loads it (the store under ``.data/`` is shared, so a second run loads nothing);
2. **the snapshot**, written by the Snapshot task's code (``enrich_task.ensure_snapshot``): its
   seconds, its Parquet bytes, and the version's bytes in the table (the load report's item
   bytes: what one eventually consistent read of the version is billed on);
3. **one part**: N addresses (80% IPv4, 20% IPv6, a second column, as an access log), CSV, through
   the EnrichPart task's code (``enrich_task.run_part``), the process held to one core and
   pyarrow to one thread, as on a Lambda of ``ENRICH_PART_MEMORY_MB`` (about 1.2 vCPU): addresses
   per second, and the bytes
   of input and output per address. The baseline of the same run: ``numpy.searchsorted`` of the
   same addresses, sorted, against the snapshot's IPv4 starts, the merge's floor.

The part reads and writes through a local pyarrow file system where Lambda uses S3: the
model counts S3 requests from these bytes (``loader.planning.enrich_costs``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute
import pyarrow.fs as pafs

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.demo import ASN_COLUMNS, ASN_DATASET, ASN_FILES, asn_options
from ipmeta_cli.dynalite import SharedLocalStore
from ipmeta_cli.loading import load_files
from loader.pipeline import enrich_task
from loader.pipeline.enrich_parts import Part
from loader.settings import ENRICH_PART_MEMORY_MB
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

RESULTS: Final = Path(__file__).parent / "results" / "enrich_task.json"
BUCKET: Final = "bench"


def addresses(rows: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    made = []
    for _ in range(rows):
        if rng.random() < 0.8:
            made.append(".".join(str(rng.randrange(1, 224)) for _ in range(4)))
        else:
            made.append(
                f"2{rng.randrange(0x400, 0x600):03x}:{rng.randrange(1 << 16):x}::{rng.randrange(1 << 16):x}"
            )
    return made


def write_log(path: Path, ips: list[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        handle.write("ip,path\n")
        for index, ip in enumerate(ips):
            handle.write(f"{ip},/p/{index % 977}\n")
    return path.stat().st_size


def searchsorted_baseline(ips: list[str], snapshot_path: Path) -> float:
    """Addresses per second of the bare merge: sorted IPv4 addresses against the snapshot's starts."""
    import ipaddress

    import pyarrow.parquet as pq

    table = pq.read_table(snapshot_path, columns=["ip_family", "ip_start"])
    ipv4 = table.filter(pa.compute.equal(table["ip_family"], 4))
    starts = np.unique(ipv4["ip_start"].to_numpy())
    values = np.array([int(ipaddress.IPv4Address(ip)) for ip in ips if ":" not in ip], dtype=np.int64)
    began = time.perf_counter()
    np.searchsorted(starts, np.sort(values), side="right")
    return len(values) / (time.perf_counter() - began)


def measure(rows: int, data_dir: Path, work: Path) -> dict[str, Any]:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    # One core, as a Lambda of ENRICH_PART_MEMORY_MB has about 1.2: the part merges chunks on two
    # threads, which would otherwise take this machine's second core.
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    fs = pafs.SubTreeFileSystem(str(work), pafs.LocalFileSystem())
    with SharedLocalStore(data_dir) as endpoint:
        settings = Settings("ipmeta", endpoint, 5.0)
        os.environ[ENV_DYNAMODB_ENDPOINT], os.environ[ENV_TABLE_NAME] = endpoint, settings.table_name
        store = LoaderTable.from_settings(settings)
        create_table_if_missing(store.client, store.table_name)
        loaded = load_files(settings, ASN_FILES, ASN_COLUMNS, data_dir, options=asn_options())
        (pinned,) = enrich_task.pin_versions([ASN_DATASET], {})
        snapshot = {
            "dataset": pinned.dataset,
            "version": pinned.version,
            "snapshot": pinned.snapshot(BUCKET).uri,
        }
        local_snapshot = work / BUCKET / pinned.snapshot(BUCKET).key
        local_snapshot.unlink(missing_ok=True)
        local_snapshot.parent.mkdir(parents=True, exist_ok=True)  # S3 has no folders to make
        began = time.perf_counter()
        written = enrich_task.ensure_snapshot(snapshot, store, fs)
        snapshot_seconds = time.perf_counter() - began
    snapshot_path = work / BUCKET / pinned.snapshot(BUCKET).key
    ips = addresses(rows)
    size = write_log(work / BUCKET / "in" / "log.csv", ips)
    part = Part(
        index=0, bucket=BUCKET, key="in/log.csv", size=size, format="csv", output="out/part-000000.csv"
    )
    job = {"column": "ip", "format": None, "output": f"s3://{BUCKET}/out/", "versions": [snapshot]}
    (work / BUCKET / part.output).unlink(missing_ok=True)
    (work / BUCKET / part.output).parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    summary = enrich_task.run_part({"part": part.to_item(), "job": job}, fs)
    seconds = time.perf_counter() - began
    output_bytes = (work / BUCKET / part.output).stat().st_size
    # The version's own load report, as staged when it was written (a later run finds it unchanged).
    report = json.loads((data_dir / "staging" / str(loaded["version"]) / "report.json").read_text())
    items, table_bytes = int(report["items"]), float(report["item_bytes"])
    baseline = searchsorted_baseline(ips, snapshot_path)
    return {
        "rows": rows,
        "summary": {key: summary[key] for key in ("rows", "invalid_rows", "unmatched_rows", "seconds")},
        "rows_per_second": round(rows / seconds, 1),
        "searchsorted_rows_per_second": round(baseline, 1),
        "task_over_searchsorted": round(rows / seconds / baseline, 4),
        "input_bytes_per_row": round(size / rows, 3),
        "output_bytes_per_row": round(output_bytes / rows, 3),
        "snapshot": {
            "dataset": ASN_DATASET,
            "ranges": items,
            "written": written["written"],
            "table_bytes": table_bytes,
            "file_bytes": snapshot_path.stat().st_size,
            "seconds": round(snapshot_seconds, 3),
        },
        "memory_mb": ENRICH_PART_MEMORY_MB,
        "threads": 1,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--data-dir", default=".data")
    parser.add_argument("--work", default=".data/bench/enrich-task")
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    results = measure(args.rows, Path(args.data_dir), Path(args.work))
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
