"""RFC 8805 self-published IP geolocation feeds (``--format geofeed``): ``prefix,country,region,city,postal``.

What the RFC says, and how it is read here:

- one entry per line, CSV (RFC 4180 quoting); a line whose first character is
  ``#`` is a comment, and a blank line is skipped (section 2.1.1);
- **prefix**: an address or a CIDR prefix, IPv4 or IPv6; a single address is
  its own /32 or /128. A prefix with host bits set is an error (the publisher
  meant another block, and guessing which would move someone else's addresses);
- **country**: ISO 3166-1 alpha-2, case-insensitive, stored upper case;
  empty when unknown. Anything else (``USA``, ``U1``) fails its line;
- **region**: ISO 3166-2 (``US-CA``), upper case; its country part must be the
  row's country;
- **city**: free text, as published;
- **postal**: deprecated by the RFC (section 2.1.1.5), kept when present.

Trailing fields may be left out (``2001:db8::/32,PL``). The values keep their
types as text (``NativeValues``): a postcode of digits stays text, and an
empty field is absent from the answer. Overlapping entries are the RFC's way
to refine a block (``192.0.2.0/25`` then ``192.0.2.5``): load with
``--overlaps most-specific`` so the narrower entry wins whatever the order.

Codes are checked in form, not against ISO's current list: a newly assigned
code loads without a release of ipmeta.
"""

from __future__ import annotations

import csv
import ipaddress
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from ipmeta.schema.ips import Family
from loader.errors import SourceError
from loader.formats.column_types import NativeValues
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow
from loader.formats.text import TextLines, open_binary

GEOFEED_COLUMNS: Final = ("country", "region", "city", "postal")
_COUNTRY: Final = re.compile(r"[A-Z]{2}")
_REGION: Final = re.compile(r"([A-Z]{2})-[A-Z0-9]{1,3}")


def open_geofeed_rows(
    path: Path, name: str, options: FormatOptions
) -> Iterator[Header | SourceRow | RowError]:
    with open_binary(path) as handle:
        lines = TextLines(handle, name)
        first = lines.peek()
        if first is not None and first.lstrip().startswith("<"):
            raise SourceError(
                f"{name}: line 1: an HTML page, not a geofeed (a captive portal or an error page?)"
            )
        yield Header(list(GEOFEED_COLUMNS))
        for entry in geofeed_entries(lines, name):
            yield entry if isinstance(entry, RowError) else _row(entry)


def _row(entry: GeofeedEntry) -> SourceRow:
    where, network, values = entry
    family: Family = 4 if network.version == 4 else 6
    first, last = int(network.network_address), int(network.broadcast_address)
    return SourceRow(where, family, first, last, NativeValues(values))


#: ``(where, network, {country, region, city, postal})``: a value None where the feed left it empty.
GeofeedEntry = tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network, dict[str, str | None]]


def geofeed_entries(lines: Iterable[str], name: str) -> Iterator[GeofeedEntry | RowError]:
    """Each entry of a geofeed, or a ``file: line N: reason`` for one the RFC does not allow."""
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{name}: line {number}"
        try:
            fields = next(csv.reader([text]))
        except csv.Error as error:
            yield RowError(f"{where}: {error}")
            continue
        parsed = parse_geofeed_fields(fields)
        yield RowError(f"{where}: {parsed}") if isinstance(parsed, str) else (where, *parsed)


def parse_geofeed_fields(
    fields: list[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, dict[str, str | None]] | str:
    """One entry's prefix and values; else why it is not an RFC 8805 entry."""
    if len(fields) > 1 + len(GEOFEED_COLUMNS):
        return f"{len(fields)} fields; a geofeed entry has at most 5 (prefix,country,region,city,postal)"
    prefix = fields[0].strip()
    try:
        network = ipaddress.ip_network(prefix, strict=True)
    except ValueError as error:
        return f"prefix {prefix!r} is not an address or a CIDR prefix: {error}"
    values = [value.strip() for value in fields[1:]] + [""] * (len(GEOFEED_COLUMNS) + 1 - len(fields))
    country, region, city, postal = values
    country, region = country.upper(), region.upper()
    if country and not _COUNTRY.fullmatch(country):
        return f"country {values[0]!r} is not an ISO 3166-1 alpha-2 code"
    if region:
        form = _REGION.fullmatch(region)
        if form is None:
            return f"region {values[1]!r} is not an ISO 3166-2 code (such as US-CA)"
        if country and form.group(1) != country:
            return f"region {region} is not in country {country}"
    data = {"country": country, "region": region, "city": city, "postal": postal}
    return network, {column: value or None for column, value in data.items()}
