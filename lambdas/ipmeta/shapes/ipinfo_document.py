"""ipinfo's answers, made from the merged view of the datasets: the classic API, Lite and Core.

- **classic** (``ipinfo.io/{ip}``, ``details``): ``{"ip", "city", "region", "country", "loc",
  "org", "postal", "timezone"}``, ``loc`` as ``"lat,long"`` and ``org`` as ``"AS15169 Google LLC"``
  (``"AS15169"`` when the AS has no name);
- **Lite** (``api.ipinfo.io/lite/{ip}``, ``lite``): ``{"ip", "asn", "as_name", "as_domain",
  "country_code", "country", "continent_code", "continent"}``, ``asn`` as ``"AS15169"``,
  ``country`` and ``continent`` as names (a continent's name from its code when no dataset has it);
- **Core and Plus** (``api.ipinfo.io/lookup/{ip}``, ``core``): ``{"ip", "geo": {"city", "region",
  "region_code", "country", "country_code", "continent", "continent_code", "latitude",
  "longitude", "timezone", "postal_code"}, "as": {"asn", "name", "domain", "type"}}`` and the
  flags ``is_anonymous``, ``is_anycast``, ``is_hosting``, ``is_satellite`` where a dataset holds them.

**Privacy** (the classic answer's ``privacy`` object, ipinfo's privacy detection): written when
the merged data holds ``network_kinds``, the public network lists' column
(``loader.formats.network_lists``, docs/feeds.md): ``tor`` is the ``tor`` kind (Tor's exit
list), ``relay`` the ``relay`` kind (iCloud Private Relay), ``hosting`` the ``cloud`` kind (a
cloud or CDN provider's ranges); ``vpn`` and ``proxy`` are false, as no public list names them,
and ``service`` names the relay or the provider when one does. An address no list covers has
no ``privacy``: the lists say what an address is, not what it is not.

Every answer is ``{"ip", "bogon": true}`` for a bogon. Fields a dataset does not hold are left
out, never guessed. Each field is read from the merged view (``ipmeta.lookup.answers``: each
column from the first dataset, in precedence order, that has it) with the known flat layouts
also under MaxMind's dotted columns (``geoip2_records.dotted_columns``: DB-IP's ``city``,
ip-location-db's ``state1``, the GeoIP2 CSV's ``country_iso_code``, GeoLite2-ASN's
``autonomous_system_number`` and the ``asn``/``organization`` layouts all read as MaxMind's
``city.names.en``, ``subdivisions.0.names.en``, ``country.iso_code``,
``traits.autonomous_system_number``...), from the first of its candidate columns that holds a
value of its kind: text for names and codes, numbers for coordinates, an AS number for ``org``,
a flag for the flags. A column that only shares a field's name (``ip``, ``org``, ``geo``, ``as``)
is never copied into an answer.

A deployment names its own columns with ``IPMETA_IPINFO_FIELDS`` (the stack's
``ipinfoFields``): ``{"city": "town", "loc": ["lat", "lng"]}``; a field it names
replaces that field's defaults, in every shape. Pure: no AWS, no HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from ipmeta.shapes.geoip2_records import as_decimal, as_flag, as_number, as_text, dotted_columns

#: Where the routes live (``/ipinfo/8.8.8.8``), unless a deployment serves them at the root too.
PATH_PREFIX: Final = "/ipinfo"
#: The paths of the Lite and the Core/Plus APIs under it (``/ipinfo/lite/8.8.8.8``, ``/ipinfo/lookup``).
LITE_PATH: Final = "lite"
CORE_PATH: Final = "lookup"
#: The classic API's fields, in the order ipinfo writes them.
FIELDS: Final = ("ip", "city", "region", "country", "loc", "org", "postal", "timezone")
#: A candidate: one column, or the two a composed field reads (loc: lat, lon; org: number, name).
Candidate = tuple[str, ...]
DEFAULT_FIELDS: Final[Mapping[str, tuple[Candidate, ...]]] = {
    "city": (("city.names.en",),),
    "region": (("subdivisions.0.names.en",),),
    "region_code": (("subdivisions.0.iso_code",),),
    "country": (("country.iso_code",),),
    "country_name": (("country.names.en",),),
    "continent_code": (("continent.code",),),
    "continent_name": (("continent.names.en",),),
    "loc": (("location.latitude", "location.longitude"),),
    "postal": (("postal.code",),),
    "timezone": (("location.time_zone",),),
    "org": (("traits.autonomous_system_number", "traits.autonomous_system_organization"),),
    "as_domain": (("as_domain",),),
    "as_type": (("as_type",),),
    "is_anonymous": (("anonymizer.is_anonymous",), ("traits.is_anonymous",), ("is_anonymous",)),
    "is_anycast": (("traits.is_anycast",),),
    "is_hosting": (("anonymizer.is_hosting_provider",), ("traits.is_hosting_provider",)),
    "is_satellite": (("traits.is_satellite_provider",),),
    "privacy": (("network_kinds", "relay", "cloud_provider"),),
}
#: How many columns each field reads.
_WIDTH: Final = {"loc": 2, "org": 2, "privacy": 3}
#: Core's flags, in the order ipinfo writes them.
CORE_FLAGS: Final = ("is_anonymous", "is_anycast", "is_hosting", "is_satellite")
#: The seven continent codes GeoNames (and so MaxMind and ipinfo) use, and their names.
CONTINENT_NAMES: Final = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}

#: ipinfo's answer to a malformed address: 404 "Wrong ip" (what ipinfo.io sends).
WRONG_IP: Final = (404, "Wrong ip", "Please provide a valid IP address")

FieldMap = Mapping[str, tuple[Candidate, ...]]


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


def _location(values: Sequence[Any]) -> tuple[int | Decimal, int | Decimal] | None:
    latitude, longitude = as_decimal(values[0]), as_decimal(values[1])
    return None if latitude is None or longitude is None else (latitude, longitude)


def _autonomous_system(values: Sequence[Any]) -> tuple[int, str | None] | None:
    number = as_number(values[0])
    return None if number is None else (number, as_text(values[1]))


def _privacy(values: Sequence[Any]) -> dict[str, Any] | None:
    """ipinfo's ``privacy`` object from the network kinds (a list), the relay and the cloud provider."""
    kinds, relay, provider = values
    if not isinstance(kinds, list):
        return None
    service = as_text(relay) if "relay" in kinds else as_text(provider) if "cloud" in kinds else None
    return {
        "vpn": False,
        "proxy": False,
        "tor": "tor" in kinds,
        "relay": "relay" in kinds,
        "hosting": "cloud" in kinds,
        "service": service or "",
    }


def _flag(values: Sequence[Any]) -> bool | None:
    return as_flag(values[0])


def _text(values: Sequence[Any]) -> str | None:
    return as_text(values[0])


#: How a field's columns become its value; text unless named here.
_KINDS: Final[Mapping[str, Callable[[Sequence[Any]], Any]]] = {
    "loc": _location,
    "org": _autonomous_system,
    "privacy": _privacy,
    **dict.fromkeys(CORE_FLAGS, _flag),
}


class _View:
    """The merged data with the known flat layouts also under MaxMind's columns, read by field."""

    def __init__(self, data: Mapping[str, Any] | None, fields: FieldMap) -> None:
        self._data = {**data, **dotted_columns(data)} if data else {}
        self._fields = fields

    def value(self, name: str) -> Any:
        """The field's value from the first of its candidates holding one of its kind; else None."""
        kind: Callable[[Sequence[Any]], Any] = _KINDS.get(name, _text)
        for candidate in self._fields.get(name, ()):
            if (value := kind([self._data.get(column) for column in candidate])) is not None:
                return value
        return None


def _coordinate(value: int | Decimal) -> str:
    # ipinfo writes decimals, never exponents: 0.00001, not 1E-5.
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _start(ip: str, bogon: bool) -> dict[str, Any]:
    return {"ip": ip, "bogon": True} if bogon else {"ip": ip}


def _put(answer: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        answer[name] = value


def details(ip: str, data: Mapping[str, Any] | None, bogon: bool, fields: FieldMap) -> dict[str, Any]:
    """ipinfo's classic answer for ``ip`` from the merged data (None: no dataset holds it)."""
    view = _View(data, fields)
    answer = _start(ip, bogon)
    for name in FIELDS[1:]:
        value = view.value(name)
        if name == "loc" and value is not None:
            value = f"{_coordinate(value[0])},{_coordinate(value[1])}"
        elif name == "org" and value is not None:
            value = f"AS{value[0]} {value[1] or ''}".rstrip()
        _put(answer, name, value)
    _put(answer, "privacy", view.value("privacy"))
    return answer


def lite(ip: str, data: Mapping[str, Any] | None, bogon: bool, fields: FieldMap) -> dict[str, Any]:
    """ipinfo Lite's answer (``api.ipinfo.io/lite/{ip}``) for ``ip`` from the merged data."""
    view = _View(data, fields)
    answer = _start(ip, bogon)
    if (system := view.value("org")) is not None:
        answer["asn"] = f"AS{system[0]}"
        _put(answer, "as_name", system[1])
    _put(answer, "as_domain", view.value("as_domain"))
    _put(answer, "country_code", view.value("country"))
    _put(answer, "country", view.value("country_name"))
    continent = view.value("continent_code")
    _put(answer, "continent_code", continent)
    _put(answer, "continent", view.value("continent_name") or CONTINENT_NAMES.get(continent or ""))
    return answer


def core(ip: str, data: Mapping[str, Any] | None, bogon: bool, fields: FieldMap) -> dict[str, Any]:
    """ipinfo Core's (and Plus's) answer (``api.ipinfo.io/lookup/{ip}``) for ``ip`` from the merged data."""
    view = _View(data, fields)
    answer = _start(ip, bogon)
    geo: dict[str, Any] = {}
    for name, field in (("city", "city"), ("region", "region"), ("region_code", "region_code")):
        _put(geo, name, view.value(field))
    _put(geo, "country", view.value("country_name"))
    _put(geo, "country_code", view.value("country"))
    continent = view.value("continent_code")
    _put(geo, "continent", view.value("continent_name") or CONTINENT_NAMES.get(continent or ""))
    _put(geo, "continent_code", continent)
    if (location := view.value("loc")) is not None:
        geo["latitude"], geo["longitude"] = location
    _put(geo, "timezone", view.value("timezone"))
    _put(geo, "postal_code", view.value("postal"))
    if geo:
        answer["geo"] = geo
    if (system := view.value("org")) is not None:
        autonomous = {"asn": f"AS{system[0]}", "name": system[1]}
        autonomous |= {"domain": view.value("as_domain"), "type": view.value("as_type")}
        answer["as"] = {name: value for name, value in autonomous.items() if value is not None}
    for flag in CORE_FLAGS:
        _put(answer, flag, view.value(flag))
    return answer


def error_body(status: int, title: str, message: str) -> dict[str, Any]:
    """ipinfo's error document: ``{"status", "error": {"title", "message"}}``."""
    return {"status": status, "error": {"title": title, "message": message}}
