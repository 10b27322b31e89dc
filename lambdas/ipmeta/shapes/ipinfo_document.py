"""ipinfo's flat answer, made from the merged view of the datasets.

ipinfo answers ``{"ip", "city", "region", "country", "loc", "org", "postal",
"timezone"}`` with ``loc`` as ``"lat,long"`` and ``org`` as ``"AS15169 Google LLC"``,
and ``{"ip", "bogon": true}`` for a bogon. Each field is read from a column of
the merged view (``ipmeta.lookup.answers``: each column from the first dataset, in
precedence order, that has it), the first of its candidates that the answer
has. The defaults cover the layouts ipmeta loads:

- ``city``: ``city.names.en`` (GeoLite2/GeoIP2 and DB-IP .mmdb), ``city_name`` (GeoIP2 CSV),
  ``city`` (DB-IP CSV, ip-location-db);
- ``region``: ``subdivisions.0.names.en``, ``subdivision_1_name``, ``region``, ``state1``;
- ``country``: ``country.iso_code``, ``country_iso_code``, ``country``, ``country_code``;
- ``loc``: ``location.latitude`` and ``location.longitude``, ``latitude`` and ``longitude``,
  ``lat`` and ``lon``;
- ``postal``: ``postal.code``, ``postal_code``, ``postcode``;
- ``timezone``: ``location.time_zone``, ``time_zone``, ``timezone``;
- ``org``: ``autonomous_system_number`` and ``autonomous_system_organization`` (GeoLite2-ASN),
  the same under ``traits.`` (GeoIP2 Enterprise), ``asn`` and ``organization`` (DB-IP,
  ip-location-db).

A deployment names its own columns with ``IPMETA_IPINFO_FIELDS`` (the stack's
``ipinfoFields``): ``{"city": "town", "loc": ["lat", "lng"]}``; a field it names
replaces that field's defaults. Pure: no AWS, no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from ipmeta.shapes.exact_json import plain_text
from ipmeta.shapes.geoip2_records import as_number

#: Where the routes live (``/ipinfo/8.8.8.8``), unless a deployment serves them at the root too.
PATH_PREFIX: Final = "/ipinfo"
#: The fields, in the order ipinfo writes them.
FIELDS: Final = ("ip", "city", "region", "country", "loc", "org", "postal", "timezone")
#: A candidate: one column, or the two a composed field reads (loc: lat, lon; org: number, name).
Candidate = tuple[str, ...]
DEFAULT_FIELDS: Final[Mapping[str, tuple[Candidate, ...]]] = {
    "city": (("city.names.en",), ("city_name",), ("city",)),
    "region": (("subdivisions.0.names.en",), ("subdivision_1_name",), ("region",), ("state1",)),
    "country": (("country.iso_code",), ("country_iso_code",), ("country",), ("country_code",)),
    "loc": (
        ("location.latitude", "location.longitude"),
        ("latitude", "longitude"),
        ("lat", "lon"),
    ),
    "postal": (("postal.code",), ("postal_code",), ("postcode",)),
    "timezone": (("location.time_zone",), ("time_zone",), ("timezone",)),
    "org": (
        ("autonomous_system_number", "autonomous_system_organization"),
        ("traits.autonomous_system_number", "traits.autonomous_system_organization"),
        ("asn", "organization"),
    ),
}
#: How many columns each field reads.
_WIDTH: Final = {"loc": 2, "org": 2}

#: ipinfo's answer to a malformed address: 404 "Wrong ip" (what ipinfo.io sends).
WRONG_IP: Final = (404, "Wrong ip", "Please provide a valid IP address")


def field_map(configured: Mapping[str, Sequence[str] | str]) -> dict[str, tuple[Candidate, ...]]:
    """The defaults, each field a deployment names replaced by its columns."""
    fields = dict(DEFAULT_FIELDS)
    for name, columns in configured.items():
        if name not in DEFAULT_FIELDS:
            raise ValueError(f"ipinfo has no field {name!r}; its fields: {', '.join(DEFAULT_FIELDS)}")
        candidate = (columns,) if isinstance(columns, str) else tuple(columns)
        if len(candidate) != _WIDTH.get(name, 1):
            raise ValueError(f"ipinfo field {name!r} reads {_WIDTH.get(name, 1)} column(s), got {candidate}")
        fields[name] = (candidate,)
    return fields


def _coordinate(value: Any) -> str:
    # ipinfo writes decimals, never exponents: 0.00001, not 1E-5.
    return format(value, "f") if isinstance(value, Decimal) else plain_text(value)


def _compose(name: str, values: Sequence[Any]) -> str | None:
    if name == "loc":
        return f"{_coordinate(values[0])},{_coordinate(values[1])}"
    if name == "org":
        # An AS may have a number and no name: ipinfo's org is then "AS7018" alone.
        number = as_number(values[0])
        label = "" if values[1] is None else plain_text(values[1])
        return None if number is None else f"AS{number} {label}".rstrip()
    return plain_text(values[0])


def details(
    ip: str, data: Mapping[str, Any] | None, bogon: bool, fields: Mapping[str, tuple[Candidate, ...]]
) -> dict[str, Any]:
    """ipinfo's answer for ``ip`` from the merged data (None: no dataset holds it)."""
    answer: dict[str, Any] = {"ip": ip}
    if bogon:
        answer["bogon"] = True
    for name in FIELDS[1:]:
        for candidate in fields.get(name, ()):
            values = [data.get(column) for column in candidate] if data else [None]
            required = values[:1] if name == "org" else values
            if all(value is not None for value in required) and (text := _compose(name, values)) is not None:
                answer[name] = text
                break
    return answer


def error_body(status: int, title: str, message: str) -> dict[str, Any]:
    """ipinfo's error document: ``{"status", "error": {"title", "message"}}``."""
    return {"status": status, "error": {"title": title, "message": message}}
