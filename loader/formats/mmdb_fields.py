"""Which fields of MaxMind DB records become columns, and how a dotted path finds its value.

Records are nested maps; a column is a dotted path to a value: ``country.iso_code``,
``location.latitude``, ``subdivisions.0.names.en`` (a number indexes an array).
A column holds a scalar or an array of scalars; maps are always flattened.

``--mmdb-fields all`` keeps every leaf path of every record (every locale's
name, every trait), found by a first pass. Without ``--mmdb-fields``, the
database type picks the columns:

- MaxMind's and DB-IP's GeoIP2 layouts (``GeoLite2-City``, ``GeoIP2-Country``,
  ``DBIP-City-Lite``, ``GeoLite2-ASN``...): the fields those editions define,
  names in English; the Enterprise and Precision layouts (``GeoIP2-Enterprise``,
  ``GeoIP2-Precision-Enterprise``) add their confidences and traits;
- ip-location-db's flat layouts (``country ipvAll``, ``city ipv4``, ``asn``...): their fields;
- anything else, or a database whose first record has none of the expected
  fields: every leaf path found in the database, discovered by a first pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

#: Fields that name a whole country in the GeoIP2 layout (country, registered, represented).
_COUNTRY_FIELDS: Final = ("geoname_id", "iso_code", "names.en", "is_in_european_union")
GEOIP2_COUNTRY: Final = (
    "continent.code",
    "continent.geoname_id",
    "continent.names.en",
    *(f"country.{field}" for field in _COUNTRY_FIELDS),
    *(f"registered_country.{field}" for field in _COUNTRY_FIELDS),
    *(f"represented_country.{field}" for field in _COUNTRY_FIELDS),
    "represented_country.type",
    "traits.is_anonymous_proxy",
    "traits.is_satellite_provider",
    "traits.is_anycast",
)
GEOIP2_CITY: Final = (
    *GEOIP2_COUNTRY,
    "city.geoname_id",
    "city.names.en",
    *(
        f"subdivisions.{level}.{field}"
        for level in (0, 1)
        for field in ("geoname_id", "iso_code", "names.en")
    ),
    "postal.code",
    "location.latitude",
    "location.longitude",
    "location.accuracy_radius",
    "location.time_zone",
    "location.metro_code",
)
#: GeoIP2 Enterprise (and Precision): the City fields, each place's confidence, and the traits.
GEOIP2_ENTERPRISE: Final = (
    *GEOIP2_CITY,
    "country.confidence",
    "city.confidence",
    "subdivisions.0.confidence",
    "subdivisions.1.confidence",
    "postal.confidence",
    *(
        f"traits.{trait}"
        for trait in (
            "autonomous_system_number",
            "autonomous_system_organization",
            "connection_type",
            "domain",
            "isp",
            "organization",
            "mobile_country_code",
            "mobile_network_code",
            "user_type",
            "static_ip_score",
            "is_legitimate_proxy",
        )
    ),
)
GEOIP2_ASN: Final = ("autonomous_system_number", "autonomous_system_organization")
GEOIP2_ISP: Final = (*GEOIP2_ASN, "isp", "organization", "mobile_country_code", "mobile_network_code")
#: ip-location-db's mmdb layouts (npm @ip-location-db/*-mmdb).
FLAT_CITY: Final = (
    "city",
    "country_code",
    "latitude",
    "longitude",
    "postcode",
    "state1",
    "state2",
    "timezone",
)

_VENDOR: Final = r"(?:geolite2|geoip2|geoip|dbip)-.*"
#: database_type (whole, any case) -> default paths; the first match wins.
DEFAULT_LAYOUTS: Final[tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]] = (
    (re.compile(_VENDOR + r"(?:enterprise|precision).*", re.IGNORECASE), GEOIP2_ENTERPRISE),
    (re.compile(_VENDOR + r"(?:city|location).*", re.IGNORECASE), GEOIP2_CITY),
    (re.compile(_VENDOR + r"country.*", re.IGNORECASE), GEOIP2_COUNTRY),
    (re.compile(_VENDOR + r"isp.*", re.IGNORECASE), GEOIP2_ISP),
    (re.compile(_VENDOR + r"asn.*", re.IGNORECASE), GEOIP2_ASN),
    # ip-location-db names them "country ipvAll", "city ipv4"...
    (re.compile(r"country(?: .*)?", re.IGNORECASE), ("country_code",)),
    (re.compile(r"city(?: .*)?", re.IGNORECASE), FLAT_CITY),
    (re.compile(r"asn(?: .*)?", re.IGNORECASE), GEOIP2_ASN),
)
#: The column of a database whose records are not maps.
WHOLE_RECORD: Final = "value"
#: More leaf paths than this means the records are not a table: choose with --mmdb-fields.
MAX_DISCOVERED_COLUMNS: Final = 200
#: ``--mmdb-fields all`` (or ``*``) as the options carry it: every leaf path, without that limit.
ALL_FIELDS: Final = {"*": "*"}

FieldPath = tuple[str, ...]


def default_paths(database_type: str) -> tuple[str, ...] | None:
    return next((paths for pattern, paths in DEFAULT_LAYOUTS if pattern.fullmatch(database_type)), None)


def split_path(dotted: str) -> FieldPath:
    return tuple(dotted.split(".")) if dotted and dotted != WHOLE_RECORD else ()


def pick(record: Any, path: FieldPath) -> Any:
    """The value at ``path``, or None where the record has no such field."""
    value = record
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def holds_a_map(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(inner, dict) for inner in value)
    )


def leaf_paths(record: Any, prefix: str = "") -> Iterable[str]:
    """Every path to a scalar or an array of scalars; arrays holding maps are indexed."""
    if isinstance(record, dict):
        for key, value in record.items():
            yield from leaf_paths(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(record, list) and holds_a_map(record):
        for index, value in enumerate(record):
            yield from leaf_paths(value, f"{prefix}.{index}" if prefix else str(index))
    else:
        yield prefix or WHOLE_RECORD


def parse_field_map(text: str) -> dict[str, str]:
    """``--mmdb-fields``: ``country=country.iso_code,lat=location.latitude``; a bare path names itself.

    ``all`` (or ``*``) is ``ALL_FIELDS``: every field of every record.
    """
    if text.strip().lower() in ("all", "*"):
        return dict(ALL_FIELDS)
    fields: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        column, _, path = entry.partition("=") if "=" in entry else (entry, "", entry)
        column, path = column.strip(), path.strip()
        if not column or not path:
            raise ValueError(f"--mmdb-fields expects column=dotted.path,..., got {entry!r}")
        if column in fields:
            raise ValueError(f"--mmdb-fields names column {column!r} twice")
        fields[column] = path
    if not fields:
        raise ValueError("--mmdb-fields names no fields")
    return fields


def flatten(record: Any, prefix: str = "", into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every leaf path of ``record`` and its value, in one walk (``leaf_paths`` with the values)."""
    flat: dict[str, Any] = {} if into is None else into
    if isinstance(record, dict):
        for key, value in record.items():
            flatten(value, f"{prefix}.{key}" if prefix else str(key), flat)
    elif isinstance(record, list) and holds_a_map(record):
        for index, value in enumerate(record):
            flatten(value, f"{prefix}.{index}" if prefix else str(index), flat)
    else:
        flat[prefix or WHOLE_RECORD] = record
    return flat


def columns_of(fields: Mapping[str, str] | Sequence[str]) -> dict[str, FieldPath]:
    """Output column -> path, from ``--mmdb-fields`` or a list of default paths (each names itself)."""
    if isinstance(fields, Mapping):
        return {column: split_path(path) for column, path in fields.items()}
    return {path: split_path(path) for path in fields}
