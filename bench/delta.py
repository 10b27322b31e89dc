"""Reloads that write only what changed: consecutive GeoLite2-Country releases loaded as deltas.

Data: npm ``geoip-country`` (GeoLite2-Country by MaxMind, GeoLite2 EULA; a
release twice a week), fetched with ``npm pack`` into ``.data/bench/`` and never
committed. Its ``data/geoip-country.dat`` holds 10-byte records (IPv4 start and
end, big-endian, and the country code) and ``geoip-country6.dat`` 18-byte ones
(the top 64 bits of an IPv6 start and end, and the code); each release is
turned into a range CSV (``start,end,country``), and read back by bisection as
the oracle, which knows nothing of the loader.

1. **Loads.** Release A full, then B, C and D in turn with ``--delta auto``
   into one dataset, each timed; D is also loaded full into another dataset,
   the baseline of the run's times.
2. **Writes.** The items each delta wrote, as a share of a full load of the same
   release (a dry run counts those), against the *item-level diff* the oracle
   computes on its own: the release's items (ranges coalesced like the loader
   does, cut at bucket edges) not identical to the previous base's, plus the
   stretches the base held and the release does not. Goal: within 1.2x.
3. **Answers.** After each delta, 10,000 random probes plus the first and last
   address of every range that changed, over HTTP (the real handler), against
   the oracle on that release: 0 mismatches. Then a rollback to A answers as A.
4. **Lookups.** Zipf(1.1) over the active delta's ranges through the handler
   with the range cache, every DynamoDB request counted: requests per lookup
   (goal: at most 0.3), and Queries per uncached lookup (at most 2).

``python -m bench.delta [--releases V1 V2 ...] [--probes 10000] [--lookups 300000]``;
saves bench/results/delta.json.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
import struct
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.cache import Ranges, draw_workload, drive_handler
from bench.datasets import BENCH_DATA
from bench.mmdb_probe import ask_local_api
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema import keys
from ipmeta.schema.ips import Address, format_address, parse_ip
from ipmeta.schema.settings import DEFAULT_RANGE_CACHE_BYTES, Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

RESULTS: Final = PROJECT_ROOT / "bench" / "results" / "delta.json"
PACKAGE: Final = "geoip-country"
RELEASES: Final = ("5.0.202609120131", "5.0.202609160137", "5.0.202609190133", "5.0.202609230144")
ATTRIBUTION: Final = "GeoLite2-Country by MaxMind (GeoLite2 EULA), via npm geoip-country"
WORK: Final = BENCH_DATA / "delta"
DATASET: Final = "country"
GOAL_WRITE_RATIO: Final = 1.2
#: The top 64 bits of an IPv6 address are what the release stores; the rest runs to the /64's end.
LOW_64: Final = (1 << 64) - 1


@dataclass(frozen=True)
class Release:
    """One release's ranges per family, sorted by start, as (start, end, country)."""

    name: str
    ranges: dict[int, list[tuple[int, int, str]]]

    def csv(self, path: Path) -> Path:
        with path.open("w") as out:
            out.write("start,end,country\n")
            for family in (4, 6):
                for start, end, country in self.ranges[family]:
                    out.write(f"{format_address(family, start)},{format_address(family, end)},{country}\n")
        return path

    def answer(self, family: int, value: int) -> str | None:
        """The oracle: the country of the range holding the address, by bisection."""
        ranges = self.ranges[family]
        at = bisect.bisect_right(ranges, (value, LOW_64 << 64, "~")) - 1
        if at >= 0 and ranges[at][0] <= value <= ranges[at][1]:
            return ranges[at][2]
        return None


def fetch(version: str) -> Release:
    folder = BENCH_DATA / "geoip-country" / version
    files = {4: folder / "geoip-country.dat", 6: folder / "geoip-country6.dat"}
    if not all(path.exists() for path in files.values()):
        folder.mkdir(parents=True, exist_ok=True)
        packed = subprocess.run(
            ["npm", "pack", f"{PACKAGE}@{version}", "--silent"],
            cwd=folder,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        with tarfile.open(folder / packed) as archive:
            for _family, path in files.items():
                member = archive.extractfile(f"package/data/{path.name}")
                assert member is not None
                path.write_bytes(member.read())
        (folder / packed).unlink()
    return Release(version, {4: list(_records(files[4], 4)), 6: list(_records(files[6], 6))})


def _records(path: Path, family: int) -> Iterator[tuple[int, int, str]]:
    data = path.read_bytes()
    if family == 4:
        for start, end, country in struct.iter_unpack(">II2s", data):
            yield start, end, country.decode()
    else:
        for start, end, country in struct.iter_unpack(">QQ2s", data):
            yield start << 64, (end << 64) | LOW_64, country.decode()


# -- the oracle's item-level diff ------------------------------------------------------------------


def coalesced(ranges: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Adjacent ranges with the same country as one, as the loader merges them."""
    out: list[tuple[int, int, str]] = []
    for start, end, country in ranges:
        if out and out[-1][1] + 1 == start and out[-1][2] == country:
            out[-1] = (out[-1][0], end, country)
        else:
            out.append((start, end, country))
    return out


def pieces(family: int, ranges: Sequence[tuple[int, int, str]]) -> set[tuple[int, int, int, str]]:
    """Each range cut at bucket edges: (first address of the piece, start, end, country)."""
    return {
        (piece.first, start, end, country)
        for start, end, country in ranges
        for piece in keys.split_at_buckets(family, start, end)
    }


def item_level_diff(base: Release, release: Release) -> dict[str, int]:
    """The release's pieces not identical to the base's, and the stretches only the base holds."""
    differ = gaps = 0
    for family in (4, 6):
        old, new = coalesced(base.ranges[family]), coalesced(release.ranges[family])
        differ += len(pieces(family, new) - pieces(family, old))
        gaps += _gap_stretches(family, old, new)
    return {"pieces_that_differ": differ, "gap_stretches": gaps, "total": differ + gaps}


def _gap_stretches(family: int, old: list[tuple[int, int, str]], new: list[tuple[int, int, str]]) -> int:
    """Maximal stretches, within a bucket, the old ranges hold and the new ones do not."""
    covered = [(start, end) for start, end, _ in new]
    count, at = 0, 0
    for start, end, _ in old:
        for piece in keys.split_at_buckets(family, start, end):
            cursor = piece.first
            while at < len(covered) and covered[at][1] < cursor:
                at += 1
            scan = at
            while cursor <= piece.last:
                if scan < len(covered) and covered[scan][0] <= cursor:
                    cursor = covered[scan][1] + 1
                    scan += 1
                    continue
                stop = min(piece.last, covered[scan][0] - 1) if scan < len(covered) else piece.last
                count += 1
                cursor = stop + 1
    return count


def changed_edges(base: Release, release: Release) -> list[Address]:
    """The first and last address of every range of the release not in the base."""
    edges = []
    for family in (4, 6):
        old = set(coalesced(base.ranges[family]))
        for start, end, country in coalesced(release.ranges[family]):
            if (start, end, country) not in old:
                edges += [Address(family, start), Address(family, end)]
    return edges


# -- loads and answers -------------------------------------------------------------------------------


def load(store: LoaderTable, release: Release, dataset: str, delta: str) -> dict[str, Any]:
    source = release.csv(WORK / f"{release.name}.csv")
    options = LoadOptions(dataset=dataset, delta=delta)  # type: ignore[arg-type]
    started = time.monotonic()
    result = driver.run_load([source], options, store, LocalStaging(WORK / "staging"), workers=2)
    meta = store.for_dataset(dataset).lookup.get_version_meta(result.version)
    assert meta is not None
    return {
        "release": release.name,
        "version": result.version,
        "base": meta.base,
        "items": meta.items,
        "seconds": round(time.monotonic() - started, 1),
        "delta": result.report.delta,
    }


def full_items(release: Release) -> int:
    """What a full load of the release writes: a dry run's items."""
    source = release.csv(WORK / f"{release.name}.csv")
    options = LoadOptions(dry_run=True)
    return driver.run_load([source], options, None, LocalStaging(WORK / "dry-run")).items  # type: ignore[arg-type]


def probes(release: Release, count: int, rng: random.Random) -> list[Address]:
    """Half uniformly random addresses (IPv6 in 2000::/3), half inside the release's ranges."""
    chosen: list[Address] = []
    for index in range(count):
        family = 4 if index % 4 else 6
        if index % 2:
            value = rng.getrandbits(32) if family == 4 else (0x2 << 124) | rng.getrandbits(125 - 1)
        else:
            start, end, _ = rng.choice(release.ranges[family])
            value = start + rng.randrange(end - start + 1)
        chosen.append(Address(family, value))  # type: ignore[arg-type]
    return chosen


def compare(store: LoaderTable, release: Release, addresses: Sequence[Address]) -> dict[str, Any]:
    """Every address over HTTP (the real handler, batches) against the oracle on the release."""
    texts = list(dict.fromkeys(str(address) for address in addresses))
    answers, seconds = ask_local_api(store, texts)
    mismatches = []
    for text in texts:
        address = parse_ip(text)
        expected = release.answer(address.family, address.value)
        answered = answers[text]
        got = None if "error" in answered else answered["data"].get("country")
        if got != expected:
            mismatches.append({"ip": text, "answered": got, "release": expected})
    return {
        "probes": len(texts),
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:5],
        "http_seconds": round(seconds, 1),
    }


def requests_per_lookup(
    settings: Settings, full_settings: Settings, release: Release, count: int
) -> dict[str, Any]:
    """Zipf(1.1) over the release's ranges, through the handler with its range cache: requests counted.

    The same workload on a full load of the same release, in the same run, is the baseline.
    """
    families, starts, ends = [], [], []
    for family in (4, 6):
        for start, end, _ in coalesced(release.ranges[family]):
            families.append(family)
            starts.append(start)
            ends.append(end)
    workload = draw_workload(Ranges(families, starts, ends), count, "zipf", seed=21)  # type: ignore[arg-type]
    cached = drive_handler(settings, workload, RangeCache(DEFAULT_RANGE_CACHE_BYTES), "delta, cache on")
    uncached = drive_handler(settings, workload[:2000], RangeCache(0), "delta, cache off")
    full = drive_handler(full_settings, workload, RangeCache(DEFAULT_RANGE_CACHE_BYTES), "full, cache on")
    return {
        "lookups": cached.lookups,
        "requests_per_lookup": round(cached.requests / cached.lookups, 4),
        "queries_per_lookup": round(cached.queries / cached.lookups, 4),
        "hit_ratio": round(cached.cached / cached.lookups, 4),
        "queries_per_uncached_lookup": round(uncached.queries / uncached.lookups, 4),
        "full_version_requests_per_lookup": round(full.requests / full.lookups, 4),
        "full_version_hit_ratio": round(full.cached / full.lookups, 4),
        "delta_over_full_requests": round(cached.requests / max(1, full.requests), 3),
        "goal": "<= 0.3 requests per lookup; <= 2 Queries per uncached lookup",
    }


def run(releases: Sequence[Release], probe_count: int, lookups: int) -> dict[str, Any]:
    rng = random.Random(21)
    with Dynalite() as endpoint:
        settings = Settings("bench-delta", endpoint, 0.0)
        store = LoaderTable.from_settings(settings).for_dataset(DATASET)
        create_table_if_missing(store.client, store.table_name)
        full_settings = Settings("bench-delta-full", endpoint, 0.0)
        full_table = LoaderTable.from_settings(full_settings)
        create_table_if_missing(full_table.client, full_table.table_name)
        first = load(store, releases[0], DATASET, "never")
        by_version = {first["version"]: releases[0]}
        steps: list[dict[str, Any]] = []
        for previous, release in itertools.pairwise(releases):
            step = load(store, release, DATASET, "auto")
            step["full_items"] = full_items(release)
            step["share_of_a_full_load"] = round(step["items"] / step["full_items"], 4)
            by_version[step["version"]] = release
            # A delta is computed against its chain's base, and so is the oracle's diff
            step["item_level_diff"] = item_level_diff(by_version.get(step["base"], release), release)
            step["written_over_item_level_diff"] = round(
                step["items"] / max(1, step["item_level_diff"]["total"]), 3
            )
            step["previous_release"] = previous.name
            addresses = probes(release, probe_count, rng) + changed_edges(previous, release)
            step["answers"] = compare(store, release, addresses)
            steps.append(step)
        baseline = load(full_table, releases[-1], keys.DEFAULT_DATASET, "never")
        lookups_report = (
            requests_per_lookup(settings, full_settings, releases[-1], lookups) if lookups else None
        )
        retention.rollback(store, first["version"])
        rollback = compare(store, releases[0], probes(releases[0], probe_count, rng))
    return {
        "first": first,
        "deltas": steps,
        "full_load_of_the_last_release": baseline,
        "delta_seconds_over_full_load": round(steps[-1]["seconds"] / baseline["seconds"], 3),
        "rollback_to_the_first": rollback,
        "lookups": lookups_report,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", nargs="+", default=list(RELEASES))
    parser.add_argument("--probes", type=int, default=10_000)
    parser.add_argument(
        "--lookups", type=int, default=300_000, help="Zipf lookups of the last delta (0: skip)"
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    releases = [fetch(version) for version in args.releases]
    result = {
        "command": " ".join(["python -m bench.delta", *sys.argv[1:]]),
        "attribution": ATTRIBUTION,
        **run(releases, args.probes, args.lookups),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
