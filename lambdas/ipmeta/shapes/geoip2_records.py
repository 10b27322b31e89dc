"""MaxMind's GeoIP2 records: the fields each holds and of what kind, and the flat columns that name them.

Two jobs, so that every GeoIP2 document ipmeta answers is one MaxMind's clients parse
(``geoip2.webservice.Client`` builds each record with ``Record(**value)``: a record that
is not an object, or a list of subdivisions that are not, is a ``TypeError`` there):

- **Flat layouts** (``dotted_columns``). DB-IP's CSVs (``continent,country,region,city,lat,lon``),
  MaxMind's GeoIP2 CSV after its Locations join (``country_iso_code``, ``city_name``,
  ``postal_code``...), ip-location-db (``country_code``, ``state1``, ``postcode``, ``timezone``),
  IPinfo Lite (``country_code``, ``country``, ``continent_code``, ``asn``, ``as_name``) and the
  ASN layouts (GeoLite2-ASN's ``autonomous_system_*``, ``asn``/``organization``) name in flat
  columns what MaxMind's records hold nested. Each known flat column becomes the dotted column of
  the field it holds (``city`` -> ``city.names.en``); a dotted column the dataset has itself wins.
  ``country`` and ``continent`` hold a code in DB-IP's CSVs and a name in IPinfo Lite: a value of
  two capital letters is a code.
- **Kinds** (``conformed``). A record is an object and ``subdivisions`` a list of objects; each
  field MaxMind defines holds its kind (text, integer, number, flag, names, date) or is left
  out. A column that shares a record's name but not its shape (a text ``traits``, a number
  named ``location``, ``city.names`` as text, a list named ``country``) is therefore ignored by
  the document, never answered as something a client cannot parse; ``/v1`` still answers it as
  it was loaded. Values of another kind that say the same are converted: a number where MaxMind
  has text (a postcode column typed a number), 0/1 where it has a flag (the GeoIP2 CSV's
  ``is_anycast``), an integral Decimal where it has an integer (every DynamoDB number).
  Fields MaxMind does not define are kept when they are a plain name holding a scalar
  (or a list of scalars), as a newer database's traits would.

Pure: no AWS, no HTTP.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ipmeta.shapes.exact_json import plain_text

# -- flat layouts --------------------------------------------------------------------------------

#: Flat column -> the dotted column of the MaxMind field it holds, for the layouts ipmeta loads.
#: Where two flat columns name one field, the first the dataset has wins.
FLAT_COLUMNS: Final[Mapping[str, str]] = {
    # GeoIP2 / GeoLite2 CSV, Blocks joined with Locations (loader.formats.geoip2_csv)
    "continent_code": "continent.code",
    "continent_name": "continent.names.en",
    "country_iso_code": "country.iso_code",
    "country_name": "country.names.en",
    "is_in_european_union": "country.is_in_european_union",
    "registered_country_geoname_id": "registered_country.geoname_id",
    "registered_country_iso_code": "registered_country.iso_code",
    "registered_country_name": "registered_country.names.en",
    "represented_country_geoname_id": "represented_country.geoname_id",
    "represented_country_iso_code": "represented_country.iso_code",
    "represented_country_name": "represented_country.names.en",
    "subdivision_1_iso_code": "subdivisions.0.iso_code",
    "subdivision_1_name": "subdivisions.0.names.en",
    "subdivision_2_iso_code": "subdivisions.1.iso_code",
    "subdivision_2_name": "subdivisions.1.names.en",
    "city_name": "city.names.en",
    "metro_code": "location.metro_code",
    "time_zone": "location.time_zone",
    "postal_code": "postal.code",
    "latitude": "location.latitude",
    "longitude": "location.longitude",
    "accuracy_radius": "location.accuracy_radius",
    "is_anycast": "traits.is_anycast",
    "is_anonymous_proxy": "traits.is_anonymous_proxy",
    "is_satellite_provider": "traits.is_satellite_provider",
    # DB-IP Lite CSV (loader.formats.dbip_csv; ``stateprov`` is DB-IP's own name for region)
    "region": "subdivisions.0.names.en",
    "stateprov": "subdivisions.0.names.en",
    "city": "city.names.en",
    "lat": "location.latitude",
    "lon": "location.longitude",
    # ip-location-db (loader.formats.mmdb_fields.FLAT_CITY, and its CSVs' columns), ipinfo's postal
    "country_code": "country.iso_code",
    "state1": "subdivisions.0.names.en",
    "state2": "subdivisions.1.names.en",
    "postcode": "postal.code",
    "postal": "postal.code",
    "timezone": "location.time_zone",
    # GeoLite2-ASN, GeoIP2-ISP and the Connection-Type and Domain editions
    "autonomous_system_number": "traits.autonomous_system_number",
    "autonomous_system_organization": "traits.autonomous_system_organization",
    "isp": "traits.isp",
    "organization": "traits.organization",
    "mobile_country_code": "traits.mobile_country_code",
    "mobile_network_code": "traits.mobile_network_code",
    "connection_type": "traits.connection_type",
    "domain": "traits.domain",
    "user_type": "traits.user_type",
}
#: Flat columns holding a code or a name: (the field for a code, the field for a name).
CODE_OR_NAME: Final[Mapping[str, tuple[str, str]]] = {
    "country": ("country.iso_code", "country.names.en"),
    "continent": ("continent.code", "continent.names.en"),
}
#: The AS number of DB-IP's, ip-location-db's and IPinfo Lite's ASN layouts ("13335" or "AS13335"),
#: and beside it the AS's name (there ``organization`` is the AS's, not an ISP's trait).
ASN_COLUMN: Final = "asn"
AS_NAME_COLUMNS: Final = ("organization", "as_name")
_CODE: Final = re.compile(r"[A-Z]{2}")


def as_number(value: Any) -> int | None:
    """An AS number from ``13335``, ``Decimal(13335)`` or ``"AS13335"``; None if it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = plain_text(value).strip() if isinstance(value, str | Decimal) else ""
    digits = text[2:] if text[:2].upper() == "AS" else text
    return int(digits) if digits.isascii() and digits.isdigit() else None


def dotted_columns(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each known flat column replaced by the dotted column of the field it holds;
    the dataset's own dotted columns win, other columns stay as they are."""
    dotted: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    flat = _asn_layout(data, dotted)
    for column, value in data.items():
        if column in flat:
            continue
        target = FLAT_COLUMNS.get(column)
        if column in CODE_OR_NAME:
            code, name = CODE_OR_NAME[column]
            target = code if isinstance(value, str) and _CODE.fullmatch(value) else name
        if target is None:
            rest[column] = value
        elif value is not None:
            dotted.setdefault(target, value)
    return {**dotted, **rest}


def _asn_layout(data: Mapping[str, Any], dotted: dict[str, Any]) -> frozenset[str]:
    """The ``asn`` layouts' traits into ``dotted``; the columns they took."""
    if ASN_COLUMN not in data or (number := as_number(data[ASN_COLUMN])) is None:
        return frozenset()
    dotted["traits.autonomous_system_number"] = number
    name = next((data[column] for column in AS_NAME_COLUMNS if isinstance(data.get(column), str)), None)
    if name is not None:
        dotted["traits.autonomous_system_organization"] = name
    return frozenset({ASN_COLUMN, *AS_NAME_COLUMNS})


# -- kinds ---------------------------------------------------------------------------------------


def as_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return plain_text(value) if _finite(value) else None
    return None


def as_integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        return int(value)
    return None


def as_decimal(value: Any) -> int | Decimal | None:
    """A JSON number: an int or a finite Decimal (a float never: it would round)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float | str):
        try:
            value = Decimal(value.strip() if isinstance(value, str) else repr(value))
        except InvalidOperation:
            return None
    return value if isinstance(value, Decimal) and value.is_finite() else None


def as_flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | Decimal) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "0", "1"):
        return value.strip().lower() in ("true", "1")
    return None


def _finite(value: int | Decimal) -> bool:
    return not isinstance(value, Decimal) or value.is_finite()


def _names(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    names = {locale: text for locale, name in value.items() if (text := as_text(name)) is not None}
    return names or None


def _date(value: Any) -> str | None:
    try:
        datetime.date.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return str(value)


Kind = Callable[[Any], Any]
Fields = Mapping[str, "Kind | Fields"]

_PLACE: Final[Fields] = {"confidence": as_integer, "geoname_id": as_integer, "names": _names}
_COUNTRY: Final[Fields] = {**_PLACE, "iso_code": as_text, "is_in_european_union": as_flag}
_FEED: Final[Fields] = {"confidence": as_integer, "network_last_seen": _date, "provider_name": as_text}
_ANONYMIZER_FLAGS: Final = (
    "is_anonymous",
    "is_anonymous_vpn",
    "is_hosting_provider",
    "is_public_proxy",
    "is_residential_proxy",
    "is_tor_exit_node",
)
_TRAIT_TEXTS: Final = (
    "autonomous_system_organization",
    "connection_type",
    "domain",
    "isp",
    "organization",
    "user_type",
    "mobile_country_code",
    "mobile_network_code",
    "ip_address",
    "network",
)
_TRAIT_FLAGS: Final = (
    *_ANONYMIZER_FLAGS,
    "is_anycast",
    "is_anonymous_proxy",
    "is_legitimate_proxy",
    "is_satellite_provider",
)
#: Each record's fields as geoip2 5.3.0's records take them (``geoip2.records``); ``subdivisions``
#: is a list of the fields given here.
RECORD_FIELDS: Final[Mapping[str, Fields]] = {
    "continent": {"code": as_text, "geoname_id": as_integer, "names": _names},
    "country": _COUNTRY,
    "registered_country": _COUNTRY,
    "represented_country": {**_COUNTRY, "type": as_text},
    "city": _PLACE,
    "location": {
        "accuracy_radius": as_integer,
        "average_income": as_integer,
        "latitude": as_decimal,
        "longitude": as_decimal,
        "metro_code": as_integer,
        "population_density": as_integer,
        "time_zone": as_text,
    },
    "postal": {"code": as_text, "confidence": as_integer},
    "subdivisions": {**_PLACE, "iso_code": as_text},
    "anonymizer": {**_FEED, **dict.fromkeys(_ANONYMIZER_FLAGS, as_flag), "residential": _FEED},
    "traits": {
        "autonomous_system_number": as_integer,
        "ip_risk_snapshot": as_decimal,
        "static_ip_score": as_decimal,
        "user_count": as_integer,
        **dict.fromkeys(_TRAIT_TEXTS, as_text),
        **dict.fromkeys(_TRAIT_FLAGS, as_flag),
    },
}
#: A field MaxMind does not define is kept under a plain name, except those geoip2's records take
#: as positional parameters (``Record(locales, **fields)``: a ``locales`` field is a TypeError).
_EXTRA_FIELD: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: ``prefix_len`` is the readers' (a database's network), never the web service's.
_NOT_KEPT: Final = frozenset({"locales", "self", "prefix_len"})


def conformed(document: Mapping[str, Any]) -> dict[str, Any]:
    """The records of ``document`` MaxMind defines, each holding only fields of their kinds."""
    shaped: dict[str, Any] = {}
    for name, fields in RECORD_FIELDS.items():
        value = document.get(name)
        if name == "subdivisions":
            kept = (
                [record for item in value if (record := _record(item, fields))]
                if isinstance(value, list)
                else []
            )
            if kept:
                shaped[name] = kept
        elif record := _record(value, fields):
            shaped[name] = record
    return shaped


def _record(value: Any, fields: Fields) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    record: dict[str, Any] = {}
    for name, inner in value.items():
        kind = fields.get(name)
        if kind is None:
            kept = _extra(name, inner)
        elif callable(kind):
            kept = kind(inner)
        else:
            kept = _record(inner, kind)
        if kept is not None:
            record[name] = kept
    return record or None


def _extra(name: str, value: Any) -> Any:
    if name in _NOT_KEPT or not _EXTRA_FIELD.fullmatch(name):
        return None
    if isinstance(value, list):
        return value if all(_scalar(item) for item in value) else None
    return value if _scalar(value) else None


def _scalar(value: Any) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite()
    return isinstance(value, str | int | bool)
