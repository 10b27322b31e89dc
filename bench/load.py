"""The loader end to end against dynalite, with a bare BatchWriteItem loop as the baseline, in one run.

1. **Prepare** the dataset (the real pipeline, ``--workers`` processes) in a
   child process: seconds and the peak RSS of the largest process.
2. **Throughput.** The loader's write phase (``write_chunk`` over every chunk,
   two chunks at a time with eight writers each: 16 BatchWriteItem calls in
   flight, the load item's bookkeeping included) against a bare loop of
   BatchWriteItem over the very same items, already serialized, with 16
   threads. Each side writes to a fresh dynalite on disk. Goal: loader/bare ≥ 0.85.
3. **Spread.** Over every window of 1,000 consecutive writes of the load's
   write order, the hottest bucket's share against its share of the whole
   load. Goal: ≤ 1.5×.
4. **Answers** (``--dbip``). 10,000 random IPv4 addresses asked over HTTP
   (``POST /v1/batch``, the real handler on the loaded table) against the
   ``maxminddb`` reader on the same .mmdb: city and country exact, latitude and
   longitude within 1e-4.

``python -m bench.load`` (ASN IPv4, the everyday run) or ``python -m bench.load
--dbip`` (DB-IP City Lite IPv4, 6.3 M networks); saves ``bench/results/load*.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bench.datasets import ASN_DIR, DBIP_ATTRIBUTION, dbip_city, dbip_city_csv
from bench.prepare import prepare_in_child, window_spread, write_order
from ipmeta.api import dependencies
from ipmeta.schema.settings import Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from ipmeta_cli.server import LocalApiServer
from loader.batching import batched
from loader.options import DEFAULT_WRITE_WORKERS, LoadOptions
from loader.pipeline import driver
from loader.pipeline.activate import activate
from loader.pipeline.write import chunk_items, write_chunk
from loader.settings import DEFAULT_PARALLEL_CHUNKS
from loader.store.batch_writes import BATCH_WRITE_LIMIT
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

RESULTS = PROJECT_ROOT / "bench" / "results"
WORKERS = DEFAULT_WRITE_WORKERS * DEFAULT_PARALLEL_CHUNKS
PROBES = 10_000


def table_on(endpoint: str, table: str = "bench") -> LoaderTable:
    store = LoaderTable.from_settings(Settings(table, endpoint, 0.0), max_pool_connections=WORKERS * 2)
    create_table_if_missing(store.client, store.table_name)
    return store


def loader_writes(table: LoaderTable, staging: LocalStaging, load_id: str, chunks: int, items: int) -> float:
    """The driver's write phase: write_chunk over every chunk, DEFAULT_PARALLEL_CHUNKS at a time."""
    bar = tqdm(total=items, unit="items", desc="loader write_chunk", disable=None)

    def write(index: int) -> None:
        bar.update(write_chunk(load_id, index, table, staging).items)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=DEFAULT_PARALLEL_CHUNKS) as pool:
        for _ in pool.map(write, range(chunks)):
            pass
    seconds = time.monotonic() - started
    bar.close()
    return seconds


def serialized_chunks(staging: LocalStaging, load_id: str, chunks: int, folder: Path) -> list[Path]:
    """The load's items, serialized, one pickle per chunk (not timed: the bare loop only writes)."""
    paths = []
    for index in range(chunks):
        path = folder / f"bare-{index:06d}.pickle"
        path.write_bytes(pickle.dumps(chunk_items(load_id, index, staging), protocol=pickle.HIGHEST_PROTOCOL))
        paths.append(path)
    return paths


def bare_loop(table: LoaderTable, chunk_files: list[Path], items: int) -> float:
    """BatchWriteItem of 25 with WORKERS threads, retrying UnprocessedItems; returns seconds."""
    bar = tqdm(total=items, unit="items", desc="bare BatchWriteItem", disable=None)
    lock = threading.Lock()

    def write(batch: tuple[Any, ...]) -> None:
        pending: list[Any] = [{"PutRequest": {"Item": item}} for item in batch]
        while pending:
            response = table.client.batch_write_item(RequestItems={table.table_name: pending})
            pending = response.get("UnprocessedItems", {}).get(table.table_name, [])
        with lock:
            bar.update(len(batch))

    def batches() -> Iterator[tuple[Any, ...]]:
        for path in chunk_files:
            yield from batched(pickle.loads(path.read_bytes()), BATCH_WRITE_LIMIT)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        # Executor.map would submit every batch at once (millions of items in memory);
        # keep a few per thread in flight, as the loader's chunk writers do.
        in_flight: deque[Future[None]] = deque()
        for batch in batches():
            in_flight.append(pool.submit(write, batch))
            if len(in_flight) >= 4 * WORKERS:
                in_flight.popleft().result()
        for future in in_flight:
            future.result()
    seconds = time.monotonic() - started
    bar.close()
    return seconds


def probe_answers(table: LoaderTable, mmdb: Path, count: int = PROBES) -> dict[str, Any]:
    """Random IPv4 addresses over HTTP against the maxminddb reader: fields exact, coordinates within 1e-4."""
    import maxminddb

    rng = random.Random(12)
    dependencies.install(dependencies.Dependencies(store=table.lookup, pointer_cache_seconds=60.0))
    server = LocalApiServer("127.0.0.1", 0, __import__("ipmeta.api.handler", fromlist=["handler"]).handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mismatches: list[dict[str, Any]] = []
    compared = 0
    try:
        with maxminddb.open_database(str(mmdb)) as reader:
            addresses = [".".join(str(rng.randrange(256)) for _ in range(4)) for _ in range(count)]
            for group in batched(addresses, 1000):
                request = urllib.request.Request(
                    f"{server.url}/v1/batch", data=json.dumps(list(group)).encode(), method="POST"
                )
                with urllib.request.urlopen(request, timeout=120) as response:
                    answers = json.loads(response.read())
                for address in group:
                    compared += 1
                    problem = _compare(reader.get(address), answers[address])
                    if problem:
                        mismatches.append({"ip": address, "problem": problem})
    finally:
        server.shutdown()
        server.server_close()
        dependencies.install(None)
    return {"probes": compared, "mismatches": len(mismatches), "first_mismatches": mismatches[:5]}


def _compare(expected: Any, answer: dict[str, Any]) -> str | None:
    if not isinstance(expected, dict):
        return None if "error" in answer else f"reader has no record, API answered {answer.get('data')}"
    if "error" in answer:
        return f"API answered {answer['error']['code']}, reader has {expected.get('city')}"
    data = answer["data"]
    for field in ("city", "country_code"):
        if (data.get(field) or "") != (expected.get(field) or ""):
            return f"{field}: {data.get(field)!r} != {expected.get(field)!r}"
    for field in ("latitude", "longitude"):
        if abs(float(data[field]) - float(expected[field])) > 1e-4:
            return f"{field}: {data[field]} != {expected[field]}"
    return None


def run(source: Path, columns: str | None, workers: int, probe: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ipmeta-bench-", dir=PROJECT_ROOT / ".data") as folder:
        work = Path(folder)
        staging = LocalStaging(work / "staging")
        prepared_figures = prepare_in_child([source], workers, columns)
        report: dict[str, Any] = {"source": source.name, "prepare": prepared_figures}
        with Dynalite(path=work / "loader-db") as endpoint:
            table = table_on(endpoint)
            options = LoadOptions(columns=columns.split(",") if columns else None)
            prepared = driver.prepare([source], options, table, staging, workers=workers)
            report["spread"] = window_spread(lambda: write_order(staging, prepared.load_id, prepared.chunks))
            loader_seconds = loader_writes(table, staging, prepared.load_id, prepared.chunks, prepared.items)
            started = time.monotonic()
            activate(prepared.load_id, table, staging)
            report["activate_seconds"] = round(time.monotonic() - started, 1)
            if probe is not None:
                report["answers"] = probe_answers(table, probe)
            files = serialized_chunks(staging, prepared.load_id, prepared.chunks, work)
        with Dynalite(path=work / "bare-db") as endpoint:
            bare_seconds = bare_loop(table_on(endpoint), files, prepared.items)
    report["throughput"] = {
        "items": prepared.items,
        "chunks": prepared.chunks,
        "workers": WORKERS,
        "loader_items_per_second": round(prepared.items / loader_seconds),
        "bare_items_per_second": round(prepared.items / bare_seconds),
        "ratio": round(bare_seconds / loader_seconds, 3),
        "goal_ratio_at_least": 0.85,
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--dbip", action="store_true", help="DB-IP City Lite IPv4 instead of the ASN file")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.dbip:
        report = run(dbip_city_csv(4), None, args.workers, dbip_city()[4])
        report["attribution"] = DBIP_ATTRIBUTION
        name = "load-dbip.json"
    else:
        report = run(ASN_DIR / "asn-ipv4.csv", "start,end,asn,organization", args.workers, None)
        name = "load.json"
    report["command"] = "python -m bench.load" + (" --dbip" if args.dbip else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
