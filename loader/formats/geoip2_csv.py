"""MaxMind's GeoIP2 / GeoLite2 CSV layout: ``Blocks-IPv4.csv``, ``Blocks-IPv6.csv``, ``Locations-<lang>.csv``.

A block row names places by ``geoname_id``; the join adds that place's
Locations columns (``continent_code``, ``country_iso_code``, ``city_name``,
``time_zone``...), and the country columns of the registered and represented
countries as ``registered_country_iso_code``, ``registered_country_name``,
``represented_country_iso_code`` and ``represented_country_name``. The block's
own columns stay (``postal_code``, ``latitude``, ``geoname_id``...).

An empty ``geoname_id`` (an anonymous proxy, say, known only by its registered
country) leaves the joined columns empty; an id the Locations file lacks fails
the row, naming both. Blocks without any ``geoname_id`` column (the ASN
edition) need no Locations file.

The join streams: the Locations table (about 120k places for a City edition)
is held in memory, the blocks (millions of rows) are not.
"""

from __future__ import annotations

import csv
import functools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from loader.errors import SourceError
from loader.formats.csv_rows import normalized_names, parse_csv, records
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow
from loader.formats.text import TextLines, open_binary

GEONAME_ID: Final = "geoname_id"
#: Block columns naming a place, and the prefix of the columns their join adds.
PLACE_REFERENCES: Final = {
    GEONAME_ID: "",
    "registered_country_geoname_id": "registered_country_",
    "represented_country_geoname_id": "represented_country_",
}
#: Locations columns that describe the file, not the place.
_NOT_JOINED: Final = frozenset({GEONAME_ID, "locale_code"})
#: What the registered and represented countries add: the country columns of their place.
_COUNTRY_COLUMNS: Final = ("country_iso_code", "country_name")


@dataclass(frozen=True)
class Locations:
    name: str
    columns: tuple[str, ...]  #: joined columns, in file order
    places: dict[str, tuple[str, ...]]  #: geoname_id -> values of ``columns``

    def column(self, name: str) -> int:
        return self.columns.index(name)


def open_geoip2_rows(
    path: Path, name: str, options: FormatOptions
) -> Iterator[Header | SourceRow | RowError]:
    with open_binary(path) as handle:
        lines = TextLines(handle, name)
        first = lines.peek()
        if first is None:
            raise SourceError(f"{name}: line 1: the file is empty; expected a GeoIP2 Blocks header")
        names = normalized_names(next(csv.reader([first]), []))
        references = [column for column in PLACE_REFERENCES if column in names]
        join = None
        if references:
            if options.locations is None:
                raise SourceError(
                    f"{name}: line 1: GeoIP2 blocks name places by {references[0]}; "
                    "give the Locations file with --locations GeoLite2-City-Locations-en.csv"
                )
            join = _Join(load_locations(options.locations), references)
        yield from parse_csv(
            lines,
            name,
            None,
            options.declared_types,
            joined=join.columns if join else (),
            enrich=join.enrich if join else None,
        )


class _Join:
    """Adds the Locations columns of a block's places to its values."""

    def __init__(self, locations: Locations, references: Sequence[str]) -> None:
        self.locations = locations
        self.references = references
        has_country = all(column in locations.columns for column in _COUNTRY_COLUMNS)
        self.joins_own_place = GEONAME_ID in references
        self.columns: list[str] = list(locations.columns) if self.joins_own_place else []
        self.countries: list[tuple[str, list[tuple[str, int]]]] = []
        for reference in references:
            if reference != GEONAME_ID and has_country:
                prefix = PLACE_REFERENCES[reference]
                # registered_country_ + country_iso_code -> registered_country_iso_code
                targets = [
                    (prefix + column.removeprefix("country_"), locations.column(column))
                    for column in _COUNTRY_COLUMNS
                ]
                self.countries.append((reference, targets))
                self.columns.extend(target for target, _ in targets)
        self.blank = ("",) * len(locations.columns)

    def enrich(self, values: dict[str, str]) -> str | None:
        places = self.locations.places
        if self.joins_own_place:
            place_id = values[GEONAME_ID].strip()
            place = places.get(place_id) if place_id else self.blank
            if place is None:
                return f"{GEONAME_ID} {place_id} is not in {self.locations.name}"
            values.update(zip(self.locations.columns, place, strict=True))
        for reference, targets in self.countries:
            place_id = values[reference].strip()
            place = places.get(place_id) if place_id else self.blank
            if place is None:
                return f"{reference} {place_id} is not in {self.locations.name}"
            for target, at in targets:
                values[target] = place[at]
        return None


def load_locations(path: Path) -> Locations:
    stat = path.stat()
    return _load_locations(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1)
def _load_locations(path_text: str, modified: int, size: int) -> Locations:
    """The Locations table; cached, as the IPv4 and IPv6 blocks of one load join the same file."""
    path = Path(path_text)
    with open_binary(path) as handle:
        lines = TextLines(handle, path.name)
        reader = csv.reader(lines)
        try:
            names = normalized_names(next(reader))
        except StopIteration:
            raise SourceError(f"{path.name}: line 1: the Locations file is empty") from None
        except csv.Error as error:
            raise SourceError(f"{path.name}: line 1: {error}") from None
        lines.end_record()
        if GEONAME_ID not in names:
            raise SourceError(
                f"{path.name}: line 1: no geoname_id column in {names}; is it a Locations file?"
            )
        key_at = names.index(GEONAME_ID)
        kept = [index for index, column in enumerate(names) if column not in _NOT_JOINED]
        places: dict[str, tuple[str, ...]] = {}
        for line, record in records(reader, path.name, lines):
            if len(record) != len(names):
                raise SourceError(
                    f"{path.name}: line {line}: expected {len(names)} columns, found {len(record)}"
                )
            place_id = record[key_at].strip()
            if place_id in places:
                raise SourceError(f"{path.name}: line {line}: geoname_id {place_id} appears twice")
            places[place_id] = tuple(sys.intern(record[index]) for index in kept)
    return Locations(path.name, tuple(names[index] for index in kept), places)
