"""Raw DynamoDB Query/s against HTTP lookups/s, both at 16 concurrent clients.

Same dynalite, same data (the ASN dataset in the local store under .data/,
loaded first if needed), same random IPs. The HTTP side is `ipmeta serve` in
its own process(es), as a user runs it, with 1 worker (like for like: one
Python process on each side) and with 2 (one per core, as concurrent Lambda
containers would be); the raw side sends the very Query the lookup sends, with
boto3, from this process. The report is the ratio of the rates measured in this
run, never an absolute goal, so a slow machine cannot fail it.

    python -m bench.lookup [--seconds 20] [--clients 16] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ipmeta.ips import Address
from ipmeta.keys import lookup_key
from ipmeta.settings import Settings
from ipmeta_cli.dynalite import SharedLocalStore, free_port, port_open
from ipmeta_cli.loading import load_files
from ipmeta_cli.main import DEFAULT_DATASET, DEFAULT_DATASET_COLUMNS, default_dataset_options
from loader.table import LoaderTable

RESULTS = Path(__file__).parent / "results"


def random_addresses(count: int, seed: int = 7) -> list[Address]:
    rng = random.Random(seed)
    return [
        Address(4, rng.getrandbits(32))
        if rng.random() < 0.8
        else Address(6, (0x2 << 124) | rng.getrandbits(124))
        for _ in range(count)
    ]


def measure(call: Callable[[int], None], clients: int, seconds: float) -> dict[str, float]:
    """Run ``call(i)`` from ``clients`` threads for ``seconds``; rate and latency percentiles."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop = threading.Event()

    def client(index: int) -> None:
        n = index
        while not stop.is_set():
            started = time.perf_counter()
            call(n)
            latencies[index].append(time.perf_counter() - started)
            n += clients

    with ThreadPoolExecutor(max_workers=clients) as pool:
        began = time.perf_counter()
        futures = [pool.submit(client, index) for index in range(clients)]
        time.sleep(seconds)
        stop.set()
        for future in futures:
            future.result()
        elapsed = time.perf_counter() - began
    merged = sorted(value for per_client in latencies for value in per_client)
    return {
        "requests": len(merged),
        "per_second": round(len(merged) / elapsed, 1),
        "p50_ms": round(statistics.median(merged) * 1000, 2),
        "p99_ms": round(merged[int(len(merged) * 0.99) - 1] * 1000, 2),
    }


def measure_http(
    args: argparse.Namespace, endpoint: str, addresses: list[Address], workers: int
) -> dict[str, float]:
    """`ipmeta serve --workers N` in its own process group, measured like the raw side."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "ipmeta_cli.main",
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    server = subprocess.Popen(
        command, env={**os.environ, "IPMETA_DYNAMODB_ENDPOINT": endpoint}, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("ipmeta serve did not start")
            time.sleep(0.1)
        local = threading.local()

        def http_lookup(n: int) -> None:
            connection = getattr(local, "connection", None)
            if connection is None:
                connection = local.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", f"/v1/ip/{addresses[n % len(addresses)]}")
            response = connection.getresponse()
            response.read()
            if response.status >= 500:
                raise RuntimeError(f"HTTP {response.status}")

        measure(http_lookup, args.clients, 2.0)  # warm: connections, each worker's pointer cache
        return measure(http_lookup, args.clients, args.seconds)
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    options = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_argument("--seconds", type=float, default=20.0)
    options.add_argument("--clients", type=int, default=16)
    options.add_argument("--data-dir", default=".data")
    options.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="server processes to measure: 1 is like for like with the single-process raw client",
    )
    args = options.parse_args()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

    with SharedLocalStore(Path(args.data_dir)) as endpoint:
        settings = Settings("ipmeta", endpoint, 5.0)
        store = LoaderTable.from_settings(settings, max_pool_connections=args.clients * 2)
        store.create_table_if_missing()
        loaded = load_files(
            settings,
            DEFAULT_DATASET,
            DEFAULT_DATASET_COLUMNS,
            Path(args.data_dir),
            options=default_dataset_options(),
        )
        version = int(loaded["version"].lstrip("v"))
        addresses = random_addresses(50_000)

        def raw_query(n: int) -> None:
            store.find_range_piece(*lookup_key(version, addresses[n % len(addresses)]))

        for call in (raw_query,):  # warm the connections
            measure(call, args.clients, 2.0)
        raw = measure(raw_query, args.clients, args.seconds)
        via_http = {workers: measure_http(args, endpoint, addresses, workers) for workers in args.workers}

    report = {
        "clients": args.clients,
        "seconds": args.seconds,
        "dataset_items": loaded["items"],
        "raw_query": raw,
        "http_lookup_by_server_workers": via_http,
        "ratio_http_to_raw_by_server_workers": {
            workers: round(result["per_second"] / raw["per_second"], 3)
            for workers, result in via_http.items()
        },
        "goal": ">= 0.7",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lookup.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
