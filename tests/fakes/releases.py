"""Real-shaped vendor files, built in the test: MaxMind's dated archives, DB-IP's gzips, a small MaxMind DB.

The MaxMind DB is written by the project's own writer (``loader.export.mmdb_writer``),
so a fetched release can be loaded and looked up like the real one.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import stat
import tarfile
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loader.export.mmdb_writer import DatabaseMetadata, write_database

#: 1.0.0.0/24 -> AU and 8.8.8.0/24 -> US, in the GeoLite2-Country layout.
COUNTRY_RANGES = (
    (4, 0x01000000, 0x010000FF, {"country": {"iso_code": "AU", "names": {"en": "Australia"}}}),
    (4, 0x08080800, 0x080808FF, {"country": {"iso_code": "US", "names": {"en": "United States"}}}),
)

#: 1.0.0.0/24 -> AS13335 and 8.8.8.0/24 -> AS15169, in the GeoLite2-ASN layout.
ASN_RANGES = (
    (
        4,
        0x01000000,
        0x010000FF,
        {"autonomous_system_number": 13335, "autonomous_system_organization": "Cloudflare"},
    ),
    (
        4,
        0x08080800,
        0x080808FF,
        {"autonomous_system_number": 15169, "autonomous_system_organization": "Google"},
    ),
)


def mmdb_bytes(database_type: str = "GeoLite2-Country", label: str = "test") -> bytes:
    """A small MaxMind DB; ``label`` goes into its description, so two releases differ.

    An ``…-ASN`` database type holds ``ASN_RANGES``, any other ``COUNTRY_RANGES``.
    """
    ranges = ASN_RANGES if database_type.endswith("-ASN") else COUNTRY_RANGES
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "db.mmdb"
        write_database(ranges, path, DatabaseMetadata(database_type, {"en": label}))
        return path.read_bytes()


def md5_of(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Entry:
    name: str
    data: bytes = b""
    kind: Literal["file", "dir", "symlink", "hardlink"] = "file"
    target: str = ""


def tar_gz(entries: list[Entry]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.mtime = 1_790_000_000
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
            elif entry.kind in ("symlink", "hardlink"):
                info.type = tarfile.SYMTYPE if entry.kind == "symlink" else tarfile.LNKTYPE
                info.linkname = entry.target
            info.size = len(entry.data) if entry.kind == "file" else 0
            archive.addfile(info, io.BytesIO(entry.data) if entry.kind == "file" else None)
    return buffer.getvalue()


def zip_bytes(entries: list[Entry]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, warnings.catch_warnings():
        # A member twice is one of the bad archives a test builds on purpose.
        warnings.simplefilter("ignore", UserWarning)
        for entry in entries:
            info = zipfile.ZipInfo(entry.name + ("/" if entry.kind == "dir" else ""))
            info.compress_type = zipfile.ZIP_DEFLATED
            if entry.kind == "symlink":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                archive.writestr(info, entry.target)
            elif entry.kind == "dir":
                info.external_attr = (stat.S_IFDIR | 0o755) << 16
                archive.writestr(info, b"")
            else:
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                archive.writestr(info, entry.data)
    return buffer.getvalue()


def maxmind_tarball(edition: str, date: str, mmdb: bytes, *extra: Entry) -> bytes:
    """``<edition>_<YYYYMMDD>/<edition>.mmdb`` with its licence files, as MaxMind publishes it."""
    folder = f"{edition}_{date.replace('-', '')}"
    return tar_gz(
        [
            Entry(folder, kind="dir"),
            Entry(f"{folder}/COPYRIGHT.txt", b"Database and Contents Copyright (c) MaxMind, Inc.\n"),
            Entry(f"{folder}/LICENSE.txt", b"Use of this MaxMind product is governed by ...\n"),
            Entry(f"{folder}/{edition}.mmdb", mmdb),
            *extra,
        ]
    )


CITY_BLOCKS_V4 = (
    b"network,geoname_id,registered_country_geoname_id,represented_country_geoname_id,"
    b"is_anonymous_proxy,is_satellite_provider,postal_code,latitude,longitude,accuracy_radius\n"
    b"1.0.0.0/24,2077456,2077456,,0,0,,-33.4940,143.2104,1000\n"
)
CITY_BLOCKS_V6 = CITY_BLOCKS_V4.split(b"\n", 1)[0] + b"\n2001:200::/32,1861060,1861060,,0,0,,35.6,139.6,100\n"
CITY_LOCATIONS = (
    b"geoname_id,locale_code,continent_code,continent_name,country_iso_code,country_name,"
    b"subdivision_1_iso_code,subdivision_1_name,subdivision_2_iso_code,subdivision_2_name,"
    b"city_name,metro_code,time_zone,is_in_european_union\n"
    b"2077456,en,OC,Oceania,AU,Australia,,,,,,,Australia/Sydney,0\n"
    b"1861060,en,AS,Asia,JP,Japan,,,,,,,Asia/Tokyo,0\n"
)


def maxmind_city_csv_zip(date: str, *extra: Entry, languages: tuple[str, ...] = ("en", "de")) -> bytes:
    """GeoLite2-City-CSV as published: Blocks IPv4 and IPv6, a Locations file per language, licence files."""
    folder = f"GeoLite2-City-CSV_{date.replace('-', '')}"
    locations = [Entry(f"{folder}/GeoLite2-City-Locations-{lang}.csv", CITY_LOCATIONS) for lang in languages]
    return zip_bytes(
        [
            Entry(folder, kind="dir"),
            Entry(f"{folder}/GeoLite2-City-Blocks-IPv4.csv", CITY_BLOCKS_V4),
            Entry(f"{folder}/GeoLite2-City-Blocks-IPv6.csv", CITY_BLOCKS_V6),
            *locations,
            Entry(f"{folder}/LICENSE.txt", b"licence\n"),
            *extra,
        ]
    )


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)
