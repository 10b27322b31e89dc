"""Reverse-index benchmark on the full ASN dataset (v4 + v6, 515k ranges), in one run:

1. **Spread:** loads both files with ``--index-field asn`` into an in-memory
   dynalite, scans the ``ranges-by-value`` index itself and counts the entries
   of every partition key: the shards of values with keys of their own, and the
   packs that rare values share. Reports every shard of the 5 hottest values,
   and the largest key against the mean key, as loaded and unsharded (the same
   entries under one key per value).
2. **Completeness:** the 20 values of the integration test (8 hottest, 12 at
   random), every page through the real handler, against the CSV.
3. **Fan-out cost:** Queries and entries read for the first page (limit 100) of
   the hottest value.
4. **A low-cardinality field:** the real IPv4 ranges again, each given a
   ``zone`` out of 250, Zipf-distributed (s = 1.3, the commonest ~30%) by a hash
   of its start, like a country column. Loaded with ``--index-field zone`` into
   a second table and scanned the same way: the shape of a country column,
   where one value has 30% of the ranges and nothing needs packing.

``python -m bench.reverse``; prints the JSON report and saves bench/results/reverse.json.
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import ipaddress
import itertools
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ipmeta.api import dependencies
from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta_cli.demo import ASN_COLUMNS, ASN_FILES
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.asn_reverse import expected_ranges, overlaps, pick_values, read_rows
from testing.in_process_api import get, list_all
from testing.index_scan import scan_index

RESULTS = PROJECT_ROOT / "bench" / "results" / "reverse.json"
HOTTEST = 5


ZONES = 250
ZONE_SKEW = 1.3


def load(
    store: LoaderTable,
    staging: Path,
    files: tuple[Path, ...] = ASN_FILES,
    columns: tuple[str, ...] = ASN_COLUMNS,
    *,
    index_field: str | None = "asn",
    dataset: str = keys.DEFAULT_DATASET,
) -> tuple[driver.LoadResult, float]:
    """A dataset into ``store`` with a progress bar (``index_field`` None: no reverse index)."""
    indexed = f", indexed by {index_field}" if index_field else ""
    bar = tqdm(total=0, unit="items", desc=f"loading{indexed}")
    started = time.monotonic()

    def advance(count: int) -> None:
        bar.update(count)

    result = driver.run_load(
        files,
        LoadOptions(dataset=dataset, columns=columns, index_field=index_field),
        store,
        LocalStaging(staging),
        on_items_written=advance,
        on_prepared=lambda prepared: bar.reset(total=prepared.items),
    )
    bar.close()
    return result, time.monotonic() - started


def spread(store: LoaderTable, field: str = "asn") -> dict[str, Any]:
    """Entries per index key (own shards and shared packs) and per value, from the index itself."""
    per_key: Counter[str] = Counter()
    per_value_key: dict[str, Counter[str]] = defaultdict(Counter)
    for entry in tqdm(
        scan_index(store.lookup, keys.RANGES_BY_VALUE), desc="scanning the index", unit="entries"
    ):
        key = entry[keys.GSI1_PARTITION_KEY]
        per_key[key] += 1
        per_value_key[keys.value_label(entry[keys.ATTR_DATA][field])][key] += 1
    per_value = {value: sum(where.values()) for value, where in per_value_key.items()}
    hottest = sorted(per_value, key=lambda value: -per_value[value])[:HOTTEST]
    packs = {key: count for key, count in per_key.items() if key.split("#")[2] == ""}
    shards = {key: count for key, count in per_key.items() if key not in packs}

    def ratio(largest: int, mean: float) -> float:
        return round(largest / mean, 2)

    def sizes(counts: Counter[str] | dict[str, int]) -> dict[str, Any]:
        values = list(counts.values())
        if not values:
            return {"keys": 0}
        mean = statistics.mean(values)
        return {
            "keys": len(values),
            "largest": max(values),
            "smallest": min(values),
            "mean": round(mean, 1),
            "largest_over_mean": ratio(max(values), mean),
        }

    def placement(value: str) -> dict[str, Any]:
        where = per_value_key[value]
        own = sorted((key for key in where if key not in packs), key=lambda key: int(key.rsplit("#", 1)[1]))
        return {
            "entries": per_value[value],
            "shards": len(own),
            "per_shard": [where[key] for key in own],
            "packed_in": {
                key: {"its_entries": where[key], "key_entries": packs[key]} for key in where if key in packs
            },
        }

    return {
        "entries": sum(per_key.values()),
        "values": len(per_value),
        "keys": len(per_key),
        "hottest_values": {value: placement(value) for value in hottest},
        "every_key": sizes(per_key),
        "own_shards": sizes(shards),
        "packs": sizes(packs),
        "unsharded": sizes(per_value),
    }


def zoned_copy(destination: Path) -> Path:
    """asn-ipv4.csv with a fifth column: a zone out of ``ZONES``, Zipf-weighted, by a hash of the start."""
    weights = [1 / (rank + 1) ** ZONE_SKEW for rank in range(ZONES)]
    bounds = list(itertools.accumulate(weight / sum(weights) for weight in weights))
    destination.parent.mkdir(parents=True, exist_ok=True)
    with ASN_FILES[0].open(newline="") as source, destination.open("w", newline="") as out:
        writer = csv.writer(out)
        for row in csv.reader(source):
            digest = hashlib.blake2b(row[0].encode(), digest_size=8).digest()
            point = int.from_bytes(digest, "big") / 2**64
            writer.writerow([*row, f"Z{min(bisect.bisect(bounds, point), ZONES - 1):03d}"])
    return destination


def low_cardinality_spread(endpoint: str, work: Path) -> dict[str, Any]:
    store = LoaderTable.from_settings(Settings("bench-reverse-zone", endpoint, 0.0))
    create_table_if_missing(store.client, store.table_name)
    source = zoned_copy(work / "asn-ipv4-zone.csv")
    result, seconds = load(
        store, work / "zone-staging", (source,), (*ASN_COLUMNS, "zone"), index_field="zone"
    )
    dependencies.install(dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0.0))
    figures = spread(store, "zone")
    hottest = next(iter(figures["hottest_values"]))
    started = time.monotonic()
    found, pages = list_all(hottest, 1000, "zone")
    listing = {
        "value": hottest,
        "ranges": len(found),
        "equal_to_index_entries": len(found) == figures["hottest_values"][hottest]["entries"],
        "distinct_and_sorted": len(set(found)) == len(found) and found == sorted(found, key=_start_order),
        "pages": pages,
        "seconds": round(time.monotonic() - started, 1),
    }
    return {
        "load": {"status": result.status, "items": result.items, "seconds": round(seconds, 1)},
        "index_report": result.report.value_index,
        "spread": figures,
        "first_page": first_page_cost(store, hottest, "zone"),
        "hottest_listing": listing,
    }


def _start_order(entry: tuple[str, str]) -> int:
    return int(ipaddress.ip_address(entry[0]))


def completeness() -> dict[str, Any]:
    rows = read_rows()
    overlapping = overlaps(rows)
    checked: dict[str, Any] = {}
    for value in tqdm(pick_values(rows), desc="paging 20 values"):
        started = time.monotonic()
        found, pages = list_all(value, 1000)
        expected = expected_ranges(value, rows, overlapping)
        checked[value] = {
            "ranges": len(found),
            "pages": pages,
            "equal_to_csv": found == expected,
            "seconds": round(time.monotonic() - started, 2),
        }
    return {"all_equal": all(entry["equal_to_csv"] for entry in checked.values()), "values": checked}


def first_page_cost(store: LoaderTable, value: str, field: str = "asn") -> dict[str, Any]:
    calls: list[int] = []
    original = store.lookup.query_index

    def counting(*args: Any, **kwargs: Any) -> Any:
        items, more = original(*args, **kwargs)
        calls.append(len(items))
        return items, more

    store.lookup.query_index = counting  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        status, body = get(f"/v1/ranges?field={field}&value={value}&limit=100")
        seconds = time.monotonic() - started
    finally:
        store.lookup.query_index = original  # type: ignore[method-assign]
    return {
        "value": value,
        "status": status,
        "ranges": len(body["ranges"]),
        "queries": len(calls),
        "entries_read": sum(calls),
        "seconds": round(seconds, 3),
    }


def main() -> int:
    with Dynalite() as endpoint:
        store = LoaderTable.from_settings(Settings("bench-reverse", endpoint, 0.0))
        create_table_if_missing(store.client, store.table_name)
        staging = PROJECT_ROOT / ".data" / "bench" / "reverse-staging"
        result, load_seconds = load(store, staging)
        dependencies.install(dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0.0))
        report: dict[str, Any] = {
            "load": {"status": result.status, "items": result.items, "seconds": round(load_seconds, 1)}
        }
        report["index_report"] = result.report.value_index
        report["spread"] = spread(store)
        hottest = next(iter(report["spread"]["hottest_values"]))
        report["first_page"] = first_page_cost(store, hottest)
        report["completeness"] = completeness()
        report["low_cardinality"] = low_cardinality_spread(endpoint, PROJECT_ROOT / ".data" / "bench")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    listing = report["low_cardinality"]["hottest_listing"]
    complete = listing["equal_to_index_entries"] and listing["distinct_and_sorted"]
    return 0 if report["completeness"]["all_equal"] and complete else 1


if __name__ == "__main__":
    sys.exit(main())
