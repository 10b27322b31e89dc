"""A GeoIP2-City-layout and a GeoLite2-ASN-layout MaxMind DB, written by our own writer; and
MaxMind's own test databases, from the pinned maxminddb release's source distribution.

The City records are nested as MaxMind's are: names in several locales,
subdivisions (two levels), registered and represented countries, location,
postal, traits. The networks include both families, a range that is no CIDR
(so the file holds several networks with one record), neighbours with equal
records (which a coalescing load merges), and ASN networks both wider and
narrower than the City networks they overlap.
"""

from __future__ import annotations

import importlib.metadata
import ipaddress
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any, Final

from loader.export.mmdb_writer import DatabaseMetadata, Typed, write_database

LOCALES: Final = ("de", "en", "es", "fr", "ja", "pt-BR", "ru", "zh-CN")


def names(english: str, **others: str) -> dict[str, str]:
    return {"en": english, **{locale.replace("_", "-"): name for locale, name in others.items()}}


EUROPE: Final = {
    "code": "EU",
    "geoname_id": Typed("uint32", 6255148),
    "names": names("Europe", de="Europa", ja="ヨーロッパ", pt_BR="Europa", zh_CN="欧洲"),
}
ASIA: Final = {
    "code": "AS",
    "geoname_id": Typed("uint32", 6255147),
    "names": names("Asia", de="Asien", ru="Азия"),
}
UK: Final = {
    "geoname_id": Typed("uint32", 2635167),
    "iso_code": "GB",
    "names": names("United Kingdom", de="Vereinigtes Königreich", fr="Royaume-Uni", ja="イギリス"),
}
SWITZERLAND: Final = {
    "geoname_id": Typed("uint32", 2658434),
    "iso_code": "CH",
    "names": names("Switzerland", de="Schweiz", fr="Suisse", ru="Швейцария"),
}
GERMANY: Final = {
    "geoname_id": Typed("uint32", 2921044),
    "iso_code": "DE",
    "is_in_european_union": True,
    "names": names("Germany", de="Deutschland", es="Alemania"),
}
CHINA: Final = {
    "geoname_id": Typed("uint32", 1814991),
    "iso_code": "CN",
    "names": names("China", zh_CN="中国", de="China"),
}
USA_MILITARY: Final = {
    "geoname_id": Typed("uint32", 6252001),
    "iso_code": "US",
    "names": names("United States", de="USA"),
    "type": "military",
}

LONDON: Final[dict[str, Any]] = {
    "city": {
        "geoname_id": Typed("uint32", 2643743),
        "names": names("London", de="London", ja="ロンドン", ru="Лондон"),
    },
    "continent": EUROPE,
    "country": UK,
    "registered_country": UK,
    "location": {
        "accuracy_radius": Typed("uint16", 100),
        "latitude": 51.5142,
        "longitude": -0.0931,
        "time_zone": "Europe/London",
    },
    "postal": {"code": "EC1A"},
    "subdivisions": [
        {
            "geoname_id": Typed("uint32", 6269131),
            "iso_code": "ENG",
            "names": names("England", fr="Angleterre"),
        },
        {
            "geoname_id": Typed("uint32", 3333218),
            "iso_code": "WBK",
            "names": names("West Berkshire", ru="Западный Беркшир"),
        },
    ],
}
ZURICH: Final[dict[str, Any]] = {
    "city": {"geoname_id": Typed("uint32", 2657896), "names": names("Zurich", de="Zürich", fr="Zurich")},
    "continent": EUROPE,
    "country": SWITZERLAND,
    "registered_country": GERMANY,
    "location": {
        "accuracy_radius": Typed("uint16", 20),
        "latitude": 47.3667,
        "longitude": 8.55,
        "time_zone": "Europe/Zurich",
    },
    "postal": {"code": "8001"},
    "subdivisions": [
        {"geoname_id": Typed("uint32", 2657895), "iso_code": "ZH", "names": names("Zurich", de="Zürich")}
    ],
    "traits": {"is_anycast": True},
}
RAMSTEIN: Final[dict[str, Any]] = {
    "continent": EUROPE,
    "country": GERMANY,
    "registered_country": GERMANY,
    "represented_country": USA_MILITARY,
    "location": {
        "accuracy_radius": Typed("uint16", 500),
        "latitude": 49.4447,
        "longitude": 7.5553,
        "time_zone": "Europe/Berlin",
    },
}
CHANGCHUN: Final[dict[str, Any]] = {
    "city": {"geoname_id": Typed("uint32", 2038180), "names": names("Changchun", zh_CN="长春", ja="長春市")},
    "continent": ASIA,
    "country": CHINA,
    "registered_country": CHINA,
    "location": {
        "accuracy_radius": Typed("uint16", 100),
        "latitude": 43.88,
        "longitude": 125.3228,
        "time_zone": "Asia/Harbin",
    },
    "subdivisions": [
        {
            "geoname_id": Typed("uint32", 2036500),
            "iso_code": "22",
            "names": names("Jilin Sheng", zh_CN="吉林"),
        }
    ],
}
PROXY: Final[dict[str, Any]] = {
    "continent": EUROPE,
    "country": UK,
    "registered_country": SWITZERLAND,
    "traits": {"is_anonymous_proxy": True, "is_satellite_provider": True},
}

#: (first, last) address and record of each City range; 89.160.20.112-143 is no CIDR (a /28 and a /28).
CITY_RANGES: Final[tuple[tuple[str, str, dict[str, Any]], ...]] = (
    ("81.2.69.0", "81.2.69.255", LONDON),
    ("81.2.70.0", "81.2.70.127", ZURICH),
    ("81.2.70.128", "81.2.70.255", ZURICH),  # an equal neighbour: merged unless --no-coalesce
    ("89.160.20.112", "89.160.20.143", LONDON),
    ("175.16.199.0", "175.16.199.255", CHANGCHUN),
    ("202.196.224.0", "202.196.224.255", PROXY),
    ("2a02:2770::", "2a02:2770:ffff:ffff:ffff:ffff:ffff:ffff", RAMSTEIN),
    ("2001:218::", "2001:218::ffff", CHANGCHUN),
)
ASN_RANGES: Final[tuple[tuple[str, str, dict[str, Any]], ...]] = (
    # wider than the City networks it holds
    (
        "81.2.68.0",
        "81.2.69.255",
        {
            "autonomous_system_number": Typed("uint32", 20712),
            "autonomous_system_organization": "Andrews & Arnold Ltd",
        },
    ),
    # narrower than the City /25 it sits in
    (
        "81.2.70.0",
        "81.2.70.63",
        {"autonomous_system_number": Typed("uint32", 8560), "autonomous_system_organization": "IONOS SE"},
    ),
    # a number and no name, as 61 of the 640 networks of MaxMind's GeoLite2-ASN test database
    ("89.160.20.0", "89.160.20.255", {"autonomous_system_number": Typed("uint32", 7018)}),
    (
        "175.16.199.0",
        "175.16.199.255",
        {
            "autonomous_system_number": Typed("uint32", 4837),
            "autonomous_system_organization": "CHINA UNICOM China169 Backbone",
        },
    ),
    (
        "2a02:2770::",
        "2a02:2770::ffff:ffff:ffff:ffff:ffff",
        {
            "autonomous_system_number": Typed("uint32", 42),
            "autonomous_system_organization": "Packet Clearing House",
        },
    ),
)


def _ranges(rows: tuple[tuple[str, str, dict[str, Any]], ...]) -> list[tuple[int, int, int, dict[str, Any]]]:
    out = []
    for first, last, record in rows:
        start, end = ipaddress.ip_address(first), ipaddress.ip_address(last)
        out.append((start.version, int(start), int(end), record))
    return sorted(out, key=lambda item: item[:2])


def write_city(path: Path) -> Path:
    write_database(
        _ranges(CITY_RANGES), path, DatabaseMetadata("GeoIP2-City", {"en": "ipmeta test City"}, LOCALES)
    )
    return path


def write_asn(path: Path) -> Path:
    write_database(_ranges(ASN_RANGES), path, DatabaseMetadata("GeoLite2-ASN", {"en": "ipmeta test ASN"}))
    return path


def maxmind_test_database(name: str, folder: Path) -> Path:
    """MaxMind's test database ``name`` (e.g. ``GeoIP2-Enterprise-Test``), as the pinned maxminddb
    release's source distribution (``tests/data/test-data``) ships it; fetched by pip into
    ``folder`` once, never committed."""
    target = folder / f"{name}.mmdb"
    if target.exists():
        return target
    version = importlib.metadata.version("maxminddb")
    sdist = folder / f"maxminddb-{version}.tar.gz"
    if not sdist.exists():
        command = [sys.executable, "-m", "pip", "download", f"maxminddb=={version}", "--no-binary", ":all:"]
        subprocess.run([*command, "--no-deps", "--quiet", "--dest", str(folder)], check=True, timeout=300)
    with tarfile.open(sdist) as archive:
        member = archive.getmember(f"maxminddb-{version}/tests/data/test-data/{name}.mmdb")
        source = archive.extractfile(member)
        assert source is not None
        target.write_bytes(source.read())
    return target
