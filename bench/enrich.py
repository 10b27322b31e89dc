"""`ipmeta enrich` against DuckDB's ASOF JOIN on the same snapshot and input, its memory, and its exactness.

    python -m bench.enrich [--rows 10000000] [--big-rows 50000000] [--exact 100000] [--city-ranges 5000000]
                           [--rounds 3]
    python -m bench.enrich --compare-only | --memory-only | --exact-only [--rows N]   # one point again

1. The demo datasets (``ipmeta_cli.demo``: ASN, 412k IPv4 and 103k IPv6 ranges, and the cloud
   list) are loaded into an in-memory dynalite as `make run` loads them, and exported as
   users export them (``ipmeta export --format parquet``).
2. A GeoLite2-City-sized synthetic (``--city-ranges``, 70% IPv4) with city-like columns is
   written by the same Parquet writer (loading 5 M ranges into dynalite first would take an
   hour here; the snapshot is what enrich reads either way).
3. ``--rows`` addresses (80% IPv4, 20% IPv6, 0.1% invalid; most inside ranges) as Parquet and CSV.
4. Timed, each in a fresh process (wall time and the child's peak RSS): `ipmeta enrich`
   Parquet→Parquet against DuckDB's ASOF JOIN Parquet→Parquet on the same snapshot and input,
   ``--rounds`` runs of each (default 3), interleaved and taking turns to go first, each
   engine's median compared (this 2-core machine moves a single run by 10% either way);
   `ipmeta enrich` CSV→CSV; then peak memory: `ipmeta enrich` against the city synthetic on
   ``--rows`` and on ``--big-rows`` (the same rows repeated). Both sides write snappy Parquet.
5. Exactness: the first ``--exact`` rows of the two-dataset output against the served
   handler's ``POST /v1/batch`` for the same pinned versions: data, range, bogon flag, error.
   It runs before the timings of 4, and the demo's dynalite is stopped after it.

Writes ``bench/results/enrich.json`` and ``bench/results/enrich.png``. Scratch files live in
``.data/bench/enrich`` (never committed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from bench.datasets import BENCH_DATA
from ipmeta_cli.dynalite import PROJECT_ROOT

WORK = BENCH_DATA / "enrich"
RESULTS = PROJECT_ROOT / "bench" / "results"
PYTHON = sys.executable


def timed_child(command: list[str]) -> dict[str, Any]:
    """Run ``command``; its wall seconds and peak RSS.

    The peak is the child's own ``VmHWM``, polled: ``wait4``'s ``ru_maxrss`` would report this
    process's size instead, since Linux carries the high-water mark across fork and exec.
    """
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = [0]
    watcher = threading.Thread(target=_watch_peak, args=(process, peak), daemon=True)
    watcher.start()
    output = process.stdout.read().decode() if process.stdout else ""
    code = process.wait()
    seconds = time.monotonic() - started
    watcher.join()
    if code not in (0, 1):
        raise RuntimeError(f"{command[:4]} failed: {output[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak[0] / 1024, 1), "output": output}


def _watch_peak(process: subprocess.Popen[bytes], peak: list[int]) -> None:
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            return
        for line in lines:
            if line.startswith("VmHWM:"):
                peak[0] = max(peak[0], int(line.split()[1]))
        time.sleep(0.05)


def enrich_command(source: Path, out: Path, snapshots: list[Path]) -> list[str]:
    command = [
        PYTHON,
        "-m",
        "ipmeta_cli.main",
        "enrich",
        str(source),
        "--out",
        str(out),
        "--overwrite",
        "--json",
    ]
    for snapshot in snapshots:
        command += ["--snapshot", str(snapshot)]
    return command


# -- the demo datasets, through a table ---------------------------------------------------------


def demo_snapshots_from_files(folder: Path) -> dict[str, Any]:
    """The demo's snapshots written straight from its files (``--demo-from-files``): the same
    ranges and types a load of them holds, for a machine too busy to load 515k items first."""
    import ipaddress

    from ipmeta.schema.ips import parse_network
    from ipmeta_cli.demo import ASN_FILES, write_cloud_csv
    from loader.export.files import ExportRange
    from loader.export.parquet import SnapshotInfo, write_parquet

    def asn_rows() -> Any:
        for path in ASN_FILES:
            table = pacsv.read_csv(
                path, read_options=pacsv.ReadOptions(column_names=["s", "e", "asn", "org"])
            )
            for start, end, number, org in zip(
                *(table[c].to_pylist() for c in ("s", "e", "asn", "org")), strict=True
            ):
                first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
                yield ExportRange(first.version, int(first), int(last), {"asn": number, "organization": org})

    def cloud_rows() -> Any:
        table = pacsv.read_csv(write_cloud_csv(folder / "demo" / "cloud-ranges.csv"))
        ranges = sorted(parse_network(text) for text in table["network"].to_pylist())
        for (family, start, end), provider in zip(ranges, table["cloud_provider"].to_pylist(), strict=True):
            yield ExportRange(family, start, end, {"cloud_provider": provider})

    paths = {"asn": folder / "asn.parquet", "cloud": folder / "cloud.parquet"}
    write_parquet(asn_rows(), str(paths["asn"]), SnapshotInfo("asn", 1, 0, {"asn": "N", "organization": "S"}))
    write_parquet(cloud_rows(), str(paths["cloud"]), SnapshotInfo("cloud", 1, 0, {"cloud_provider": "S"}))
    return {"versions": {"asn": 1, "cloud": 1}, "paths": paths, "load_seconds": 0.0, "store": None}


def demo_snapshots(folder: Path) -> dict[str, Any]:
    """Load the demo datasets into dynalite and export each as Parquet, as a user would."""
    from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
    from ipmeta.store.dynamodb import make_client
    from ipmeta_cli.demo import demo_datasets
    from ipmeta_cli.dynalite import Dynalite
    from ipmeta_cli.main import main
    from loader.pipeline import driver
    from loader.store.staging import LocalStaging
    from loader.store.table import LoaderTable
    from loader.store.table_creation import create_table_if_missing

    dynalite = Dynalite()
    endpoint = dynalite.start()
    os.environ[ENV_DYNAMODB_ENDPOINT] = endpoint
    os.environ[ENV_TABLE_NAME] = "ipmeta-bench-enrich"
    settings = Settings.from_environment()
    create_table_if_missing(make_client(settings), settings.table_name)
    store = LoaderTable.from_settings(settings)
    versions = {}
    started = time.monotonic()
    for demo in demo_datasets(folder):
        result = driver.run_load(list(demo.files), demo.options, store, LocalStaging(folder / "staging"))
        versions[demo.name] = result.version
    load_seconds = time.monotonic() - started
    paths = {}
    for name, version in versions.items():
        paths[name] = folder / f"{name}.parquet"
        argv = [
            "export",
            "--dataset",
            name,
            "--version",
            f"v{version}",
            "--format",
            "parquet",
            str(paths[name]),
        ]
        if main(argv) != 0:
            raise RuntimeError(f"export of {name} failed")
    return {
        "dynalite": dynalite,
        "store": store,
        "versions": versions,
        "paths": paths,
        "load_seconds": load_seconds,
    }


# -- the synthetic city snapshot -----------------------------------------------------------------


def city_snapshot(path: Path, ranges: int, seed: int = 5) -> None:
    """``ranges`` disjoint ranges with gaps, 70% IPv4, with city-like typed columns."""
    from ipmeta.schema.ips import Family
    from loader.export.files import ExportRange
    from loader.export.parquet import SnapshotInfo, write_parquet

    rng = np.random.default_rng(seed)
    v4_count = int(ranges * 0.7)
    v4_starts = np.unique(rng.integers(1 << 24, 224 << 24, v4_count + v4_count // 50, dtype=np.int64))[
        :v4_count
    ]
    v6_count = ranges - v4_count
    v6_high = np.unique(rng.integers(0x2000 << 48, 0x2C00 << 48, v6_count + v6_count // 50, dtype=np.int64))
    v6_high = v6_high[:v6_count]

    def rows() -> Any:
        families: tuple[tuple[Family, Any, int], ...] = ((4, v4_starts, 0), (6, v6_high, 64))
        for family, starts, shift in families:
            nexts = np.append(starts[1:], starts[-1] + 4096)
            gaps = rng.random(len(starts)) < 0.1
            for index, (start, following) in enumerate(zip(starts.tolist(), nexts.tolist(), strict=True)):
                end = (
                    (following - 1 - (following - start) // 3 * int(gaps[index]))
                    if following > start
                    else start
                )
                city = index % 120_000
                yield ExportRange(
                    family,
                    start << shift,
                    ((end + 1) << shift) - 1,
                    {
                        "geoname_id": 1_000_000 + city,
                        "city": f"City {city}",
                        "country_code": f"C{city % 250}",
                        "latitude": round((city % 18000) / 100 - 90, 4),
                        "longitude": round((city % 36000) / 100 - 180, 4),
                        "postal": f"{city % 99999:05d}",
                    },
                )

    kinds = {
        "geoname_id": "N",
        "city": "S",
        "country_code": "S",
        "latitude": "N",
        "longitude": "N",
        "postal": "S",
    }
    write_parquet(rows(), str(path), SnapshotInfo("city", 1, 0, kinds))


# -- the addresses -------------------------------------------------------------------------------


def addresses(snapshot: Path, rows: int, seed: int = 10) -> pa.Table:
    """80% IPv4, 20% IPv6, 0.1% invalid; nine in ten inside a range of ``snapshot``, the rest anywhere."""
    rng = np.random.default_rng(seed)
    ranges = pq.read_table(snapshot, columns=["ip_family", "ip_start", "ip_end", "ip_start_hex"])
    v4 = ranges.filter(pc.equal(ranges["ip_family"], 4))
    v6_starts = [
        int(text, 16) for text in ranges.filter(pc.equal(ranges["ip_family"], 6))["ip_start_hex"].to_pylist()
    ]
    v4_rows, v6_rows = int(rows * 0.8), rows - int(rows * 0.8)
    picks = rng.integers(0, len(v4), v4_rows)
    starts, ends = v4["ip_start"].to_numpy()[picks], v4["ip_end"].to_numpy()[picks]
    values = starts + (rng.random(v4_rows) * (ends - starts + 1)).astype(np.int64)
    anywhere = rng.random(v4_rows) < 0.1
    values[anywhere] = rng.integers(0, 1 << 32, int(anywhere.sum()))
    v4_text = _dotted(values)
    chosen = rng.integers(0, len(v6_starts), v6_rows).tolist()
    offsets = rng.integers(0, 1 << 40, v6_rows).tolist()
    import ipaddress

    v6_text = [
        str(ipaddress.IPv6Address(v6_starts[at] + offset)) for at, offset in zip(chosen, offsets, strict=True)
    ]
    texts = np.array([*v4_text.to_pylist(), *v6_text], dtype=object)
    texts[rng.random(rows) < 0.001] = "not-an-ip"
    rng.shuffle(texts)
    return pa.table({"id": pa.array(np.arange(rows)), "ip": pa.array(texts, type=pa.string())})


def _dotted(values: np.ndarray[Any, Any]) -> pa.Array:
    octets = [pc.cast(pa.array((values >> shift) & 255), pa.string()) for shift in (24, 16, 8, 0)]
    return pc.binary_join_element_wise(*octets, ".")


# -- DuckDB, the yardstick -----------------------------------------------------------------------

DUCKDB_SCRIPT = """
import sys, duckdb, pyarrow.parquet as pq
snapshot, source, out = sys.argv[1:4]
fields = [f.name for f in pq.read_schema(snapshot) if f.name not in
          ("ip_family", "network_bucket", "ip_start", "ip_end", "ip_start_hex", "ip_end_hex", "range_id")]
picked = ", ".join(f'CASE WHEN a.k <= r.e THEN r."{f}" END AS "{f}"' for f in fields)
c = duckdb.connect()
c.execute(f\"\"\"
CREATE MACRO v6_groups(ip) AS CASE
  WHEN contains(ip, '::') THEN list_concat(
    list_filter(string_split(split_part(ip, '::', 1), ':'), lambda g: g <> ''),
    list_transform(range(8 - len(list_filter(string_split(split_part(ip, '::', 1), ':'), lambda g: g <> ''))
                           - len(list_filter(string_split(split_part(ip, '::', 2), ':'), lambda g: g <> ''))),
                   lambda x: '0'),
    list_filter(string_split(split_part(ip, '::', 2), ':'), lambda g: g <> ''))
  ELSE string_split(ip, ':') END;
CREATE TABLE s4 AS SELECT ip_start AS s, ip_end AS e, * FROM read_parquet('{snapshot}')
  WHERE ip_family = 4 AND network_bucket = ip_start // 65536;
CREATE TABLE s6 AS SELECT ip_start_hex AS s, ip_end_hex AS e, * FROM read_parquet('{snapshot}')
  WHERE ip_family = 6 AND network_bucket = CAST('0x' || substr(ip_start_hex, 1, 4) AS BIGINT);
COPY (
  WITH a AS (SELECT * FROM read_parquet('{source}')),
  a4 AS (SELECT *, CAST(split_part(ip, '.', 1) AS BIGINT) * 16777216
                 + CAST(split_part(ip, '.', 2) AS BIGINT) * 65536
                 + CAST(split_part(ip, '.', 3) AS BIGINT) * 256 + CAST(split_part(ip, '.', 4) AS BIGINT) AS k
         FROM a WHERE regexp_full_match(ip, '[0-9]{{1,3}}(\\\\.[0-9]{{1,3}}){{3}}')),
  a6 AS (SELECT *, array_to_string(list_transform(v6_groups(lower(ip)), lambda g: lpad(g, 4, '0')), '') AS k
         FROM a WHERE contains(ip, ':'))
  SELECT a.id, a.ip, {picked} FROM a4 a ASOF LEFT JOIN s4 r ON a.k >= r.s
  UNION ALL
  SELECT a.id, a.ip, {picked} FROM a6 a ASOF LEFT JOIN s6 r ON a.k >= r.s
) TO '{out}' (FORMAT parquet);
\"\"\")
print(pq.read_metadata(out).num_rows)
"""


def duckdb_run(snapshot: Path, source: Path, out: Path) -> dict[str, Any]:
    return timed_child([PYTHON, "-c", DUCKDB_SCRIPT, str(snapshot), str(source), str(out)])


# -- exactness ----------------------------------------------------------------------------------


def exactness(output: Path, versions: dict[str, int], store: Any, count: int) -> dict[str, Any]:
    """The first ``count`` rows of ``output`` against ``POST /v1/batch`` through the served handler."""
    from ipmeta.api import dependencies
    from ipmeta.api.handler import handler
    from ipmeta.lookup.range_cache import RangeCache
    from ipmeta_cli.events import proxy_event
    from ipmeta_cli.server import LocalLambdaContext

    rows = pq.ParquetFile(output).iter_batches(batch_size=count).__next__().to_pylist()
    pinned = ",".join(f"{name}:v{version}" for name, version in versions.items())
    dependencies.install(
        dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0, ranges=RangeCache(0))
    )
    counts = {"rows": 0, "equal": 0, "different": 0, "found": 0, "not_found": 0, "invalid": 0}
    examples: list[Any] = []
    try:
        for start in range(0, len(rows), 100):
            batch = rows[start : start + 100]
            body = json.dumps(list(dict.fromkeys(row["ip"] for row in batch))).encode()
            event = proxy_event(
                "POST", f"/v1/batch?version={pinned}", {"content-type": "application/json"}, body, "127.0.0.1"
            )
            answers = json.loads(handler(event, LocalLambdaContext())["body"])
            for row in batch:
                kind, same = _same(row, answers[row["ip"]])
                counts["rows"] += 1
                counts[kind] += 1
                counts["equal" if same else "different"] += 1
                if not same and len(examples) < 5:
                    examples.append({"row": row, "api": answers[row["ip"]]})
    finally:
        dependencies.install(None)
    return {**counts, "examples": examples}


def _same(row: dict[str, Any], answer: dict[str, Any]) -> tuple[str, bool]:
    if "error" in answer:
        code = answer["error"]["code"]
        kind = "invalid" if code == "IP_ADDRESS_INVALID" else "not_found"
        return kind, row["ip_error"] == code and row["ip_range_start"] is None
    data = answer["data"]
    same = (
        row["ip_error"] is None
        and row["ip_bogon"] == answer["bogon"]
        and (row["ip_range_start"], row["ip_range_end"]) == (answer["range"]["start"], answer["range"]["end"])
        and all(row.get(name) == value for name, value in data.items())
    )
    return "found", same


# -- the run ------------------------------------------------------------------------------------


def throughput(rows: int, run: dict[str, Any]) -> float:
    return round(rows / float(run["seconds"]) / 1e6, 2)


#: Runs of each engine per comparison: the machine's load moves a single run by 10% either way.
ROUNDS: Final = 3


def compare(
    name: str, snapshots: list[Path], source: Path, rows: int, rounds: int = ROUNDS
) -> dict[str, Any]:
    """`ipmeta enrich` and DuckDB on one snapshot and input, Parquet to Parquet, both writing
    Parquet with snappy compression (each one's default).

    ``rounds`` runs of each, interleaved and taking turns to go first (ABBA: drift in the machine's
    load falls on both alike), each after ``_settle``; each engine's figure is its median run,
    its peak the highest of its runs, and every run's seconds are in the report.
    """
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {"enrich": [], "duckdb_asof": []}
    outputs = {"enrich": WORK / f"{name}-out.parquet", "duckdb_asof": WORK / f"{name}-duckdb.parquet"}
    measure = {
        "enrich": lambda: timed_child(enrich_command(source, outputs["enrich"], snapshots)),
        "duckdb_asof": lambda: duckdb_run(snapshots[0], source, outputs["duckdb_asof"]),
    }
    for round_number in range(rounds):
        order = list(measure) if round_number % 2 == 0 else list(reversed(measure))
        for engine in order:
            _settle(outputs[engine])
            runs[engine].append(measure[engine]())
    figures = {engine: _median_run(each, rows) for engine, each in runs.items()}
    result = {
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "compression": "snappy",
        "rounds": rounds,
        "snapshot_ranges": sum(pq.read_metadata(path).num_rows for path in snapshots),
        **figures,
    }
    result["ratio_enrich_over_duckdb"] = round(
        figures["duckdb_asof"]["seconds"] / figures["enrich"]["seconds"], 2
    )
    return result


def _settle(output: Path) -> None:
    """Before a timed run: its engine's last output removed and every written page on disk.

    Otherwise a run pays for the one before it: the kernel writes the last runs' outputs back
    (hundreds of MB each) while it runs, and replacing an output frees the old file's blocks
    inside the timing (measured: 0.4 s for the city synthetic's 711 MB).
    """
    output.unlink(missing_ok=True)
    os.sync()


def _median_run(runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    median = round(statistics.median(float(run["seconds"]) for run in runs), 2)
    return {
        "seconds": median,
        "peak_rss_mb": max(float(run["peak_rss_mb"]) for run in runs),
        "million_rows_per_second": throughput(rows, {"seconds": median}),
        "runs_seconds": [float(run["seconds"]) for run in runs],
    }


def _public(run: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in run.items() if key != "output"}


def chart(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, values, colors = [], [], []
    for name in ("asn", "city"):
        for who, color in (("enrich", "tab:blue"), ("duckdb_asof", "tab:orange")):
            labels.append(f"{name}\n{who}")
            values.append(report["parquet_to_parquet"][name][who]["million_rows_per_second"])
            colors.append(color)
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.bar(labels, values, color=colors)
    axis.set_ylabel("million addresses / s")
    axis.set_title(f"Parquet to Parquet, {report['rows']:,} addresses (80% IPv4)")
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--big-rows", type=int, default=50_000_000)
    parser.add_argument("--exact", type=int, default=100_000)
    parser.add_argument("--city-ranges", type=int, default=5_000_000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help="runs of each engine per comparison, interleaved; each one's median is compared",
    )
    parser.add_argument(
        "--demo-from-files",
        action="store_true",
        help="write the demo snapshots from its files instead of loading and exporting a table "
        "(no exactness check then: it needs the table)",
    )
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="measure only the Parquet-to-Parquet comparisons and CSV to CSV again, on the inputs of "
        "the last run, into its report (the figures of the run before stay under previous_runs)",
    )
    parser.add_argument(
        "--exact-only",
        action="store_true",
        help="load the demo into dynalite, export it, and measure only the two-dataset run and its "
        "exactness again, on the inputs of the last run, into its report",
    )
    parser.add_argument(
        "--memory-only",
        action="store_true",
        help="measure only the memory point again, on the inputs of the last run, into its report",
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if args.memory_only:
        _memory_again(args)
        return
    if args.compare_only:
        _compare_again(args)
        return
    if args.exact_only:
        _exact_again(args)
        return
    report: dict[str, Any] = {
        "command": _command(),
        "rows": args.rows,
        "city_ranges": args.city_ranges,
        "complete": False,
    }
    report["targets"] = {"ratio_at_least": 1.0, "peak_rss_mb_at_most": 1024}
    report["demo_snapshots"] = (
        "written from the demo's files" if args.demo_from_files else "loaded and exported"
    )
    demo = demo_snapshots_from_files(WORK) if args.demo_from_files else demo_snapshots(WORK)
    try:
        _measure(report, demo, args)
    finally:
        if "dynalite" in demo:
            demo["dynalite"].stop()


def _measure(report: dict[str, Any], demo: dict[str, Any], args: argparse.Namespace) -> None:
    """Each figure in turn, the report saved after each (a shared machine may stop a long run)."""
    report["demo_load_seconds"] = round(demo["load_seconds"], 1)
    city = WORK / "city.parquet"
    started = time.monotonic()
    city_snapshot(city, args.city_ranges)
    report["city_snapshot_seconds"] = round(time.monotonic() - started, 1)
    asn_input, city_input = WORK / "asn-input.parquet", WORK / "city-input.parquet"
    pq.write_table(addresses(demo["paths"]["asn"], args.rows), asn_input)
    pq.write_table(addresses(city, args.rows, seed=11), city_input)
    # The exactness check first, while the demo's dynalite holds the table; then dynalite is
    # stopped, so nothing but the engine measured runs while the others are timed.
    report["demo_two_datasets"] = _two_datasets(demo, asn_input, args)
    save(report)
    if "dynalite" in demo:
        demo["dynalite"].stop()
    report["parquet_to_parquet"] = {
        "asn": compare("asn", [demo["paths"]["asn"]], asn_input, args.rows, args.rounds)
    }
    save(report)
    report["parquet_to_parquet"]["city"] = compare("city", [city], city_input, args.rows, args.rounds)
    save(report)
    report["csv_to_csv"] = _csv(demo, asn_input, args.rows)
    save(report)
    report["memory"] = _memory([city], city_input, args)
    report["complete"] = True
    save(report)
    chart(report, RESULTS / "enrich.png")
    print(json.dumps(report, indent=2))


def _command() -> str:
    """How this report's figures were made: the command, as run from the project's root."""
    return " ".join(["python -m bench.enrich", *sys.argv[1:]])


def save(report: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "enrich.json").write_text(json.dumps(report, indent=2) + "\n")


def _two_datasets(demo: dict[str, Any], source: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = WORK / "demo-out.parquet"
    _settle(out)
    run = timed_child(enrich_command(source, out, [demo["paths"]["asn"], demo["paths"]["cloud"]]))
    result = {**_public(run), "million_rows_per_second": throughput(args.rows, run)}
    if demo["store"] is not None:
        result["exactness"] = exactness(out, demo["versions"], demo["store"], args.exact)
    return result


def _csv(demo: dict[str, Any], source: Path, rows: int) -> dict[str, Any]:
    csv_input = WORK / "asn-input.csv"
    pacsv.write_csv(pq.read_table(source), csv_input)
    _settle(WORK / "asn-out.csv")
    run = timed_child(enrich_command(csv_input, WORK / "asn-out.csv", [demo["paths"]["asn"]]))
    return {**_public(run), "million_rows_per_second": throughput(rows, run)}


def _compare_again(args: argparse.Namespace) -> None:
    """The comparisons of the last run's report measured again (same inputs, same snapshots)."""
    report = json.loads((RESULTS / "enrich.json").read_text())
    if report["rows"] != args.rows:
        raise SystemExit(f"the last run had --rows {report['rows']}; give the same")
    report.setdefault("previous_runs", []).append({"parquet_to_parquet": report["parquet_to_parquet"]})
    report["parquet_to_parquet"] = {
        "command": _command(),
        "asn": compare("asn", [WORK / "asn.parquet"], WORK / "asn-input.parquet", args.rows, args.rounds),
        "city": compare("city", [WORK / "city.parquet"], WORK / "city-input.parquet", args.rows, args.rounds),
        "measured_again_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    save(report)
    # CSV to CSV in the same run as Parquet to Parquet, on the same input.
    report["csv_to_csv"] = _csv(
        {"paths": {"asn": WORK / "asn.parquet"}}, WORK / "asn-input.parquet", args.rows
    )
    report["csv_to_csv"]["command"] = _command()
    save(report)
    chart(report, RESULTS / "enrich.png")
    print(json.dumps(report["parquet_to_parquet"], indent=2))


def _exact_again(args: argparse.Namespace) -> None:
    """The two-dataset run and its exactness against the served handler, on the last run's input."""
    report = json.loads((RESULTS / "enrich.json").read_text())
    if report["rows"] != args.rows:
        raise SystemExit(f"the last run had --rows {report['rows']}; give the same")
    demo = demo_snapshots(WORK)
    try:
        report["demo_load_seconds"] = round(demo["load_seconds"], 1)
        report["demo_snapshots"] = f"{report['demo_snapshots']}; loaded and exported for demo_two_datasets"
        report["demo_two_datasets"] = _two_datasets(demo, WORK / "asn-input.parquet", args)
        report["demo_two_datasets"]["command"] = _command()
        report["demo_two_datasets"]["measured_again_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    finally:
        demo["dynalite"].stop()
    save(report)
    print(json.dumps(report["demo_two_datasets"], indent=2))


def _memory_again(args: argparse.Namespace) -> None:
    """The memory point of the last run's report measured again (same inputs, same snapshots)."""
    report = json.loads((RESULTS / "enrich.json").read_text())
    if report["rows"] != args.rows:
        raise SystemExit(f"the last run had --rows {report['rows']}; give the same")
    report["memory"] = _memory([WORK / "city.parquet"], WORK / "city-input.parquet", args)
    report["memory"]["command"] = _command()
    report["memory"]["measured_again_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save(report)
    chart(report, RESULTS / "enrich.png")
    print(json.dumps(report["memory"], indent=2))


def _memory(snapshots: list[Path], source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Peak RSS at ``--rows`` and at ``--big-rows`` (the input's row groups written again and
    again), against the largest snapshot (the city synthetic): the snapshot is most of it."""
    big = WORK / "big-input.parquet"
    table = pq.read_table(source)
    with pq.ParquetWriter(big, table.schema) as writer:
        for _ in range(max(1, args.big_rows // args.rows)):
            writer.write_table(table)
    rows = pq.read_metadata(big).num_rows
    _settle(WORK / "big-out.parquet")
    run = timed_child(enrich_command(big, WORK / "big-out.parquet", snapshots))
    _settle(WORK / "small-out.parquet")
    small = timed_child(enrich_command(source, WORK / "small-out.parquet", snapshots))
    return {
        "snapshots": [path.stem for path in snapshots],
        f"{args.rows}": _public(small),
        f"{rows}": {**_public(run), "million_rows_per_second": throughput(rows, run)},
    }


if __name__ == "__main__":
    main()
