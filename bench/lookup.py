"""Raw DynamoDB Query/s against HTTP lookups/s at 16 concurrent clients; what a lookup costs the handler.

Same dynalite, same data (the ASN dataset in the local store under .data/,
loaded first if needed), same random IPs. The HTTP side is `ipmeta serve` in
its own process(es), as a user runs it, with 1 worker (like for like: one
Python process on each side) and with 2 (one per core, as concurrent Lambda
containers would be); the raw side sends the very Query the lookup sends, with
boto3, from this process. The report is the ratio of the rates measured in this
run, never an absolute goal, so a slow machine cannot fail it.

- **Like for like**, the server's range cache is off (``IPMETA_RANGE_CACHE_BYTES=0``):
  every HTTP lookup sends the one Query the raw side sends.
- **As served**, with the range cache at its default size, for 1 worker: random
  addresses over the ASN ranges hit it often, so fewer lookups reach dynalite.
- **Two datasets against one**, range cache off: the same addresses answered from
  ``asn`` alone (``?datasets=asn``) and from ``asn`` and ``country`` together
  (``?datasets=asn,country``: two Queries per lookup, sent at once). The country
  dataset (``bench.datasets.country_csv``) has ranges of its own, so its Queries
  land in other items than the ASN ones. The goal is a rate at least
  ``TWO_DATASET_GOAL`` of the single dataset's, in the same run. Here one dynalite
  process answers both Queries on the machine's two cores, beside the server and
  the clients, so twice the Queries cost twice its CPU; in AWS the two Queries run
  on DynamoDB at once and the function pays only the second call's client side.
- **Two datasets against one, as served** (``--cached-dataset-workers``): the same
  pair with the range cache at its default size.
- **Each front against REST** (``--fronts rest url``): ``ipmeta serve --front F`` with one worker
  and the range cache off, keys on (``--api-key``: the server checks them before the function for
  rest, the function itself for url), every request carrying its key; the fronts measured in
  turns (A B, B A, ...), ``--front-rounds`` each, so the shared machine's drift falls on both, and
  each front's rate is the median of its rounds. The goal: the url front loses no lookups per
  second against rest (``FRONT_GOAL``).
- **The handler alone**, in a fresh interpreter with only ``lambdas/`` on its
  path, as a Lambda container imports it: import time, peak memory (VmHWM) after import
  and after lookups, and CPU per lookup with the range cache off, through each
  front's event (a function URL's with its key checked in the function), decoded
  from and encoded to JSON as the Lambda runtime does (docs/deploy.md turns these
  into billed milliseconds and the memory setting).

    python -m bench.lookup [--seconds 20] [--clients 16] [--workers 1 2] [--cached-workers 1]
                           [--fronts rest url] [--front-rounds 4]

Saves bench/results/lookup.json and a chart of rates and latencies, bench/results/lookup.png.
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
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.datasets import COUNTRY_ATTRIBUTION, COUNTRY_COLUMNS, country_csv
from ipmeta.schema.ips import Address
from ipmeta.schema.keys import key_space
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_RANGE_CACHE_BYTES, ENV_TABLE_NAME, Settings
from ipmeta_cli.arguments import ENV_API_KEY
from ipmeta_cli.demo import ASN_COLUMNS, ASN_DATASET, ASN_FILES, asn_options
from ipmeta_cli.dynalite import SharedLocalStore, free_port, port_open
from ipmeta_cli.loading import load_files
from loader.options import LoadOptions
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

RESULTS = Path(__file__).parent / "results"
COUNTRY_DATASET = "country"
ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.7
#: Lookups/s answering from two datasets, as a share of one dataset's (issue: datasets).
TWO_DATASET_GOAL = 0.6
ONE_DATASET = "?datasets=" + ASN_DATASET
TWO_DATASETS = f"?datasets={ASN_DATASET},{COUNTRY_DATASET}"
#: Lookups the handler child times, after as many again to warm it.
HANDLER_LOOKUPS = 2000
#: The url front against rest, lookups/s in the same run: no loss (issue 27).
FRONT_GOAL = 1.0
#: The key every front's measurement checks and carries.
FRONT_KEY = "bench-" + "k" * 34

#: Run in a fresh interpreter with only ``lambdas/`` importable, as in the Lambda.
#: Reads addresses on stdin, prints one JSON line. It reads the ``asn`` dataset alone,
#: so its figures stay those of one Query per lookup. ``VmHWM`` is the peak
#: resident set in KiB on Linux.
_HANDLER_CHILD = """
import contextlib, io, json, sys, time
FRONT, KEY = sys.argv[1], sys.argv[2]
def peak_mb():
    # VmHWM, this process's own peak: ru_maxrss would keep the parent's from before exec.
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
started = time.perf_counter()
from ipmeta.api.handler import handler
from ipmeta.api import dependencies
from ipmeta.api.fronts import key_check
dependencies.current()
import_ms = (time.perf_counter() - started) * 1000
after_import = peak_mb()
if FRONT == "url":  # the function checks the key itself, as behind its URL
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"bench": KEY})))
addresses = sys.stdin.read().split()
count = len(addresses) // 2
class Context:
    function_name = "bench"; function_version = "$LATEST"; memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:local:0:function:bench"; aws_request_id = "bench"
def rest_event(address):
    path = "/v1/ip/" + address
    context = {"resourcePath": "/v1/{proxy+}", "httpMethod": "GET", "path": path, "stage": "api",
               "requestId": "bench", "identity": {"sourceIp": "192.0.2.1"}}
    return {"resource": "/v1/{proxy+}", "path": path, "httpMethod": "GET", "headers": {"x-api-key": KEY},
            "multiValueHeaders": {"x-api-key": [KEY]}, "queryStringParameters": {"datasets": "asn"},
            "multiValueQueryStringParameters": {"datasets": ["asn"]},
            "pathParameters": {"proxy": path[4:]}, "stageVariables": None, "body": None,
            "isBase64Encoded": False, "requestContext": context}
def url_event(address):
    path = "/v1/ip/" + address
    http = {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1",
            "userAgent": "bench"}
    context = {"accountId": "anonymous", "apiId": "bench", "domainName": "bench.lambda-url.us-east-1.on.aws",
               "domainPrefix": "bench", "http": http, "requestId": "bench", "routeKey": "$default",
               "stage": "$default", "time": "01/Jan/2027:00:00:00 +0000", "timeEpoch": 0}
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "datasets=asn",
            "headers": {"x-api-key": KEY, "host": "bench.lambda-url.us-east-1.on.aws"},
            "queryStringParameters": {"datasets": "asn"}, "requestContext": context, "isBase64Encoded": False}
event = url_event if FRONT == "url" else rest_event
# As the Lambda runtime hands the handler each event and sends its answer: JSON both ways.
invocations = [json.dumps(event(address)) for address in addresses]
statuses = {}
with contextlib.redirect_stdout(io.StringIO()):
    for raw in invocations[:count]:
        json.dumps(handler(json.loads(raw), Context()))
    cpu, wall = time.process_time(), time.perf_counter()
    for raw in invocations[count:]:
        response = handler(json.loads(raw), Context())
        json.dumps(response)
        statuses[response["statusCode"]] = statuses.get(response["statusCode"], 0) + 1
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({
    "front": FRONT,
    "import_ms": round(import_ms, 1),
    "peak_rss_mb_after_import": round(after_import, 1),
    "peak_rss_mb_after_lookups": round(peak_mb(), 1),
    "lookups": count,
    "statuses": statuses,
    "cpu_us_per_lookup": round(cpu / count * 1e6, 1),
    "wall_us_per_lookup": round(wall / count * 1e6, 1),
}))
"""


def country_options() -> LoadOptions:
    return LoadOptions(dataset=COUNTRY_DATASET, columns=COUNTRY_COLUMNS)


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
    args: argparse.Namespace,
    endpoint: str,
    addresses: list[Address],
    workers: int,
    environment: Mapping[str, str],
    *,
    query: str = ONE_DATASET,
    front: str = "rest",
    key: str | None = None,
) -> dict[str, float]:
    """`ipmeta serve --front F --workers N` in its own process, measured like the raw side; with
    ``key``, the server requires it (``IPMETA_API_KEY``) where that front checks keys, and every
    request carries it."""
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
        "--front",
        front,
    ]
    keyed = {ENV_API_KEY: key} if key else {}
    headers = {"x-api-key": key} if key else {}
    server_log = Path(args.data_dir) / "bench-lookup-server.log"  # its logs, for a 5xx's cause
    server = subprocess.Popen(
        command,
        env={**os.environ, ENV_DYNAMODB_ENDPOINT: endpoint, **environment, **keyed},
        stdout=server_log.open("w"),
        stderr=subprocess.STDOUT,
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
            connection.request("GET", f"/v1/ip/{addresses[n % len(addresses)]}{query}", headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status >= 500 or response.status == 401:
                raise RuntimeError(f"HTTP {response.status}; the server's logs: {server_log}")

        measure(http_lookup, args.clients, 2.0)  # warm: connections, each worker's pointer cache
        return measure(http_lookup, args.clients, args.seconds)
    finally:
        server.terminate()
        server.wait(timeout=10)


def measure_handler(
    endpoint: str, table_name: str, addresses: list[Address], front: str = "rest"
) -> dict[str, Any]:
    """The lookup handler in a fresh interpreter, range cache off: every lookup is one Query,
    through ``front``'s event (behind a function URL, the key checked in the function)."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "lambdas"),
        ENV_DYNAMODB_ENDPOINT: endpoint,
        ENV_TABLE_NAME: table_name,
        ENV_RANGE_CACHE_BYTES: "0",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    stdin = "\n".join(str(address) for address in addresses[: 2 * HANDLER_LOOKUPS])
    output = subprocess.run(
        [sys.executable, "-c", _HANDLER_CHILD, front, FRONT_KEY],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd="/",
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def ratios(results: Mapping[int, Mapping[str, float]], raw: Mapping[str, float]) -> dict[int, float]:
    return {
        workers: round(result["per_second"] / raw["per_second"], 3) for workers, result in results.items()
    }


def chart(report: Mapping[str, Any], path: Path) -> None:
    """Rates (with the ratio to raw) and p50/p99 latencies of every measured setup."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    raw = report["raw_query"]
    setups: list[tuple[str, Mapping[str, float]]] = [("raw Query\n(boto3, 1 process)", raw)]
    for workers, result in report["http_lookup_by_server_workers"].items():
        setups.append((f"HTTP, {workers} worker{'s' if int(workers) > 1 else ''}\n(range cache off)", result))
    for workers, result in report["http_lookup_with_range_cache_by_server_workers"].items():
        setups.append((f"HTTP, {workers} worker{'s' if int(workers) > 1 else ''}\n(range cache on)", result))
    fronts = report.get("fronts", {}).get("by_front", {})
    for front, result in fronts.items():
        setups.append((f"{front} front\n(keys on, cache off)", result))
    labels = [label for label, _ in setups]
    positions = range(len(setups))
    colors = ["#7f7f7f"] + ["#1f77b4"] * len(report["http_lookup_by_server_workers"])
    colors += ["#2ca02c"] * len(report["http_lookup_with_range_cache_by_server_workers"])
    colors += ["#9467bd"] * len(fronts)

    figure, (rates, latencies) = plt.subplots(1, 2, figsize=(15, 4.8), dpi=110)
    bars = rates.bar(positions, [result["per_second"] for _, result in setups], color=colors)
    for bar, (_, result) in zip(bars, setups, strict=True):
        share = result["per_second"] / raw["per_second"]
        rates.annotate(
            f"{result['per_second']:.0f}/s\n{share:.2f}× raw",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    rates.axhline(GOAL * raw["per_second"], color="#d62728", linestyle="--", linewidth=1)
    rates.text(-0.4, GOAL * raw["per_second"], f"goal: {GOAL}× raw", color="#d62728", va="bottom", fontsize=8)
    rates.set_xticks(list(positions), labels, fontsize=8)
    rates.set_ylabel("lookups per second")
    rates.set_ylim(0, max(result["per_second"] for _, result in setups) * 1.25)
    rates.set_title(f"Rate at {report['clients']} concurrent clients", fontsize=10)

    width = 0.38
    p50 = [result["p50_ms"] for _, result in setups]
    p99 = [result["p99_ms"] for _, result in setups]
    latencies.bar([p - width / 2 for p in positions], p50, width, label="p50", color="#1f77b4")
    latencies.bar([p + width / 2 for p in positions], p99, width, label="p99", color="#ff7f0e")
    for position, (low, high) in enumerate(zip(p50, p99, strict=True)):
        latencies.annotate(f"{low:.0f}", (position - width / 2, low), ha="center", va="bottom", fontsize=8)
        latencies.annotate(f"{high:.0f}", (position + width / 2, high), ha="center", va="bottom", fontsize=8)
    latencies.set_xticks(list(positions), labels, fontsize=8)
    latencies.set_ylabel("milliseconds per lookup")
    latencies.set_title("Latency (p50, p99)", fontsize=10)
    latencies.legend()
    for axes in (rates, latencies):
        axes.grid(True, axis="y", alpha=0.3)
    items, seconds = report["dataset_items"], report["seconds"]
    figure.suptitle(f"ipmeta lookups against one dynalite, {items:,} items, {seconds:g} s each", fontsize=11)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def measure_fronts(args: argparse.Namespace, endpoint: str, addresses: list[Address]) -> dict[str, Any]:
    """Each front's lookups/s (1 worker, range cache off, keys on), the fronts in turns; each
    front's rate is the median of its rounds, and ``ratio_to_rest`` the url front's against rest's."""
    rounds: dict[str, list[dict[str, float]]] = {front: [] for front in args.fronts}
    uncached = {ENV_RANGE_CACHE_BYTES: "0"}
    for turn in range(args.front_rounds):
        # A B, then B A: a machine getting busier or quieter during the run falls on both alike.
        for front in args.fronts if turn % 2 == 0 else reversed(args.fronts):
            rounds[front].append(
                measure_http(args, endpoint, addresses, 1, uncached, front=front, key=FRONT_KEY)
            )
    by_front = {
        front: {
            name: round(statistics.mean(r[name] for r in runs), 2)
            for name in ("per_second", "p50_ms", "p99_ms")
        }
        for front, runs in rounds.items()
    }
    report: dict[str, Any] = {"rounds": rounds, "by_front": by_front}
    if "rest" in by_front:
        rest = by_front["rest"]["per_second"]
        report["ratio_to_rest"] = {
            front: round(result["per_second"] / rest, 3) for front, result in by_front.items()
        }
        report["goal"] = f"url >= {FRONT_GOAL} x rest (same run)"
    return report


def two_to_one(pairs: Mapping[int, Mapping[str, Mapping[str, Any]]]) -> dict[int, float]:
    return {w: round(pair["two"]["per_second"] / pair["one"]["per_second"], 3) for w, pair in pairs.items()}


def parse_arguments() -> argparse.Namespace:
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
        help="server processes to measure with the range cache off: 1 is like for like with the raw client",
    )
    options.add_argument(
        "--dataset-workers",
        type=int,
        nargs="*",
        default=[1, 2],
        help="server processes to measure one dataset against two with (range cache off)",
    )
    options.add_argument(
        "--cached-dataset-workers",
        type=int,
        nargs="*",
        default=[1],
        help="server processes to measure one dataset against two with, range cache on",
    )
    options.add_argument(
        "--fronts",
        nargs="*",
        default=["rest", "url"],
        help="fronts measured against each other (1 worker, range cache off, keys on), in turns",
    )
    options.add_argument("--front-rounds", type=int, default=4, help="turns of each front (A B, B A, ...)")
    options.add_argument(
        "--cached-workers",
        type=int,
        nargs="*",
        default=[1],
        help="server processes to measure again with the range cache at its default size",
    )
    return options.parse_args()


def main() -> int:
    args = parse_arguments()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

    with SharedLocalStore(Path(args.data_dir)) as endpoint:
        settings = Settings("ipmeta", endpoint, 5.0)
        store = LoaderTable.from_settings(settings, max_pool_connections=args.clients * 2)
        create_table_if_missing(store.client, store.table_name)
        loaded = load_files(settings, ASN_FILES, ASN_COLUMNS, Path(args.data_dir), options=asn_options())
        country = load_files(settings, country_csv(), None, Path(args.data_dir), options=country_options())
        version = int(loaded["version"].rsplit("v", 1)[1])
        addresses = random_addresses(50_000)
        space = key_space(ASN_DATASET)

        def raw_query(n: int) -> None:
            store.lookup.find_range_piece(*space.lookup_key(version, addresses[n % len(addresses)]))

        measure(raw_query, args.clients, 2.0)  # warm the connections
        raw = measure(raw_query, args.clients, args.seconds)
        uncached = {ENV_RANGE_CACHE_BYTES: "0"}
        via_http = {w: measure_http(args, endpoint, addresses, w, uncached) for w in args.workers}
        via_http_cached = {w: measure_http(args, endpoint, addresses, w, {}) for w in args.cached_workers}
        one_and_two = {
            w: {
                "one": measure_http(args, endpoint, addresses, w, uncached, query=ONE_DATASET),
                "two": measure_http(args, endpoint, addresses, w, uncached, query=TWO_DATASETS),
            }
            for w in args.dataset_workers
        }
        one_and_two_cached = {
            w: {
                "one": measure_http(args, endpoint, addresses, w, {}, query=ONE_DATASET),
                "two": measure_http(args, endpoint, addresses, w, {}, query=TWO_DATASETS),
            }
            for w in args.cached_dataset_workers
        }
        fronts = measure_fronts(args, endpoint, addresses)
        handler = {
            front: measure_handler(endpoint, settings.table_name, addresses, front) for front in args.fronts
        }

    report = {
        "clients": args.clients,
        "seconds": args.seconds,
        "dataset_items": loaded["items"],
        "raw_query": raw,
        "http_lookup_by_server_workers": via_http,
        "ratio_http_to_raw_by_server_workers": ratios(via_http, raw),
        "http_lookup_with_range_cache_by_server_workers": via_http_cached,
        "ratio_http_with_range_cache_to_raw_by_server_workers": ratios(via_http_cached, raw),
        "goal": f">= {GOAL} (1 worker, range cache off)",
        "two_datasets": {
            "datasets": {ASN_DATASET: loaded["items"], COUNTRY_DATASET: country["items"]},
            "attribution": COUNTRY_ATTRIBUTION,
            "by_server_workers": one_and_two,
            "ratio_two_to_one_by_server_workers": two_to_one(one_and_two),
            "with_range_cache_by_server_workers": one_and_two_cached,
            "ratio_two_to_one_with_range_cache_by_server_workers": two_to_one(one_and_two_cached),
            "goal": f">= {TWO_DATASET_GOAL} (same run)",
        },
        "fronts": fronts,
        "handler_in_fresh_interpreter": handler.get("rest") or next(iter(handler.values()), {}),
        "handler_in_fresh_interpreter_by_front": handler,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lookup.json").write_text(json.dumps(report, indent=2) + "\n")
    chart(json.loads(json.dumps(report)), RESULTS / "lookup.png")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
