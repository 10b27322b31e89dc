"""MaxMind's GeoIP2 web-service documents, rebuilt from what the datasets answered.

A MaxMind DB record is loaded flattened into dotted columns
(``country.names.de``, ``subdivisions.0.iso_code``, ``traits.is_anycast``);
this module nests them back (a run of digit keys is an array again) and shapes
the document each service answers, as MaxMind documents it
(dev.maxmind.com, "GeoIP and GeoLite API Responses"):

- **which records** each service has: Country the continent, the three
  countries and the traits; City adds city, location, postal and subdivisions;
  Insights adds the anonymizer (``RECORDS``). City's and Country's traits are
  the ones MaxMind lists for them (``TRAITS``); Insights keeps every trait.
- **several datasets**: each dataset's section becomes a document of its own
  (``geoip2_records``: known flat layouts, DB-IP's ``country``/``city``/``lat``, the
  GeoIP2 CSV's ``country_iso_code``, GeoLite2-ASN's ``autonomous_system_*``, become
  MaxMind's fields; every record is an object of fields of their kinds, so a column
  that merely shares a record's name is ignored), and the documents merge in
  the deployment's precedence order: each value from the first dataset that has
  it, an array (``subdivisions``) whole from the first that has one.
- **traits.network**: MaxMind defines it as the largest network around the
  address over which every field is the same. The datasets that gave the
  document a field agree on the intersection of their ranges, so the network is
  the largest CIDR around the address inside that intersection (``largest_cidr``).
  A range loaded with ``--no-coalesce`` is the database's own network, so this
  is the network ``geoip2.database.Reader`` reports; a coalesced range can be
  larger (neighbours with equal data merged), which is the web service's
  definition (docs/decisions.md, "The GeoIP2 and ipinfo APIs").

Pure: no AWS, no HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ipmeta.schema.ips import Address, format_address
from ipmeta.shapes import geoip2_records

SERVICES: Final = ("country", "city", "insights")
#: Where the routes live: ``https://{host}/geoip/v2.1/{service}/{ip}``, as the clients build it.
PATH_PREFIX: Final = "/geoip/v2.1"
#: The content type of each service's answer, and of errors (MaxMind's documented headers).
CONTENT_TYPES: Final = {
    service: f"application/vnd.maxmind.com-{service}+json; charset=UTF-8; version=2.1" for service in SERVICES
}
ERROR_CONTENT_TYPE: Final = "application/vnd.maxmind.com-error+json; charset=UTF-8; version=2.0"

_COUNTRY_RECORDS: Final = ("continent", "country", "registered_country", "represented_country", "traits")
_CITY_RECORDS: Final = (*_COUNTRY_RECORDS, "city", "location", "postal", "subdivisions")
RECORDS: Final[Mapping[str, tuple[str, ...]]] = {
    "country": _COUNTRY_RECORDS,
    "city": _CITY_RECORDS,
    "insights": (*_CITY_RECORDS, "anonymizer"),
}
_COUNTRY_TRAITS: Final = frozenset(
    # is_anonymous_proxy and is_satellite_provider are deprecated, but Country and City
    # databases still hold them and geoip2's readers report them.
    {"ip_address", "network", "is_anycast", "is_anonymous_proxy", "is_satellite_provider"}
)
_CITY_TRAITS: Final = _COUNTRY_TRAITS | {
    "autonomous_system_number",
    "autonomous_system_organization",
    "connection_type",
    "domain",
    "isp",
    "mobile_country_code",
    "mobile_network_code",
    "organization",
}
#: The traits each service answers; None: every trait.
TRAITS: Final[Mapping[str, frozenset[str] | None]] = {
    "country": _COUNTRY_TRAITS,
    "city": _CITY_TRAITS,
    "insights": None,
}
#: MaxMind's statuses for the codes a lookup raises where they differ from ``/v1``'s:
#: a reserved address is a bad request there (400), not a missing one.
ERROR_STATUSES: Final = {"IP_ADDRESS_RESERVED": 400}


def nested(data: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted columns as the nested record they were flattened from; empty cells left out.

    A map whose keys are all digits is an array again (``subdivisions.0...``),
    in index order: MaxMind's records have no maps keyed by numbers. Where a column
    names a record that other columns fill (``location`` beside ``location.latitude``),
    the record wins, whatever the columns' order: a record is an object.
    """
    root: dict[str, Any] = {}
    for column, value in data.items():
        if value is None:
            continue
        *parents, leaf = column.split(".")
        node = root
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if not isinstance(node.get(leaf), dict):
            node.setdefault(leaf, value)
    # The root stays a map even when every column is a number ("0"): only records become arrays.
    return {key: _arrays(value) for key, value in root.items()}


def _arrays(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    inner = {key: _arrays(value) for key, value in node.items()}
    # ASCII digits only: int() refuses some of what str.isdigit() accepts ("²")
    if inner and all(key.isascii() and key.isdigit() for key in inner):
        return [inner[key] for key in sorted(inner, key=int)]
    return inner


def section_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """One dataset's data as a GeoIP2 document: known flat layouts as MaxMind's fields, dotted
    columns nested, and only the records and fields of their kinds (``geoip2_records``)."""
    return geoip2_records.conformed(nested(geoip2_records.dotted_columns(data)))


def for_service(document: Mapping[str, Any], service: str) -> dict[str, Any]:
    """The records (and traits) ``service`` answers, as MaxMind lists them."""
    shaped = {name: value for name, value in document.items() if name in RECORDS[service]}
    allowed = TRAITS[service]
    if "traits" in shaped and allowed is not None:
        traits = {name: value for name, value in shaped["traits"].items() if name in allowed}
        if traits:
            shaped["traits"] = traits
        else:
            del shaped["traits"]
    return shaped


def merged(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Documents in precedence order as one: each value from the first that has it; arrays whole."""
    result: dict[str, Any] = {}
    for document in documents:
        _merge_into(result, document)
    return result


def _merge_into(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        present = target.get(key)
        if present is None:
            target[key] = _copy(value)
        elif isinstance(present, dict) and isinstance(value, dict):
            _merge_into(present, value)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(inner) for key, inner in value.items()}
    return value


def largest_cidr(family: int, value: int, start: int, end: int) -> str:
    """The largest CIDR network holding ``value`` that lies within ``start..end``."""
    bits = 32 if family == 4 else 128
    for prefix in range(bits + 1):
        host_mask = (1 << (bits - prefix)) - 1
        first = value & ~host_mask
        if first >= start and first | host_mask <= end:
            return f"{format_address(family, first)}/{prefix}"
    raise ValueError("the address lies outside its range")  # value is within start..end: unreachable


def document(
    service: str,
    address: Address,
    sections: Sequence[tuple[Mapping[str, Any], int, int]],
) -> dict[str, Any] | None:
    """The service's document from each dataset that holds the address (data, start, end), in
    precedence order; None when none of them has a field the service answers.
    """
    contributing = [
        (shaped, start, end)
        for data, start, end in sections
        if (shaped := for_service(section_document(data), service))
    ]
    if not contributing:
        return None
    result = merged(shaped for shaped, _, _ in contributing)
    start = max(start for _, start, _ in contributing)
    end = min(end for _, _, end in contributing)
    traits = result.setdefault("traits", {})
    traits["ip_address"] = str(address)
    traits["network"] = largest_cidr(address.family, address.value, start, end)
    return result


def error_body(code: str, message: str) -> dict[str, str]:
    """MaxMind's error document: ``code`` for programs, ``error`` for people."""
    return {"code": code, "error": message}
