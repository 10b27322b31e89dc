"""What every reader yields, and the options that choose and steer a reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ipmeta.schema.ips import Family

#: ``--format`` values; ``auto`` picks ``mmdb`` for ``.mmdb``/``.mmdb.gz`` names, else ``csv``.
FORMATS: Final = ("auto", "csv", "mmdb", "geoip2-csv", "dbip-csv", "geofeed", "network")


@dataclass(frozen=True, slots=True)
class Header:
    """The first item of every file: its metadata column names, in order (no start/end/network)."""

    columns: list[str]


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One range and its metadata.

    ``values`` holds every header column: text for text formats, the value's own
    type for mmdb (a ``NativeValues``, None where the record lacks the field).
    """

    origin: str  #: ``<file>: line N`` or ``<file>: network 1.2.3.0/24``, for messages
    family: Family
    start: int  #: inclusive bounds, as integers
    end: int
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RowError:
    message: str  #: ``<file>: line N: reason`` (mmdb: ``<file>: network N: reason``)


@dataclass(frozen=True)
class FormatOptions:
    format: str = "auto"
    #: Column names of a CSV without a header row.
    columns: Sequence[str] | None = None
    #: Column -> ``int``, ``float`` or ``str`` (aliases ``number``, ``decimal``, ``string``).
    declared_types: Mapping[str, str] = field(default_factory=dict)
    #: mmdb: output column -> dotted path (``country.iso_code``); None: the database type's defaults.
    mmdb_fields: Mapping[str, str] | None = None
    #: geoip2-csv: the ``Locations-<lang>.csv`` file the blocks join on ``geoname_id``.
    locations: Path | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"unknown format {self.format!r}; use one of {', '.join(FORMATS)}")


def format_of(name: str, options: FormatOptions) -> str:
    """The reader for a file: the declared format, else by name (and ``--locations`` means GeoIP2 CSV)."""
    if options.format != "auto":
        return options.format
    if name.lower().endswith((".mmdb", ".mmdb.gz")):
        return "mmdb"
    return "geoip2-csv" if options.locations is not None else "csv"


#: Types a format declares for its own columns: a postcode is text even when all are digits.
FORMAT_DECLARED_TYPES: Final[Mapping[str, Mapping[str, str]]] = {"geoip2-csv": {"postal_code": "str"}}


def declared_types_for(name: str, options: FormatOptions) -> dict[str, str]:
    """The declared types a load of ``name`` types its columns with: the format's, then ``--types``."""
    return {**FORMAT_DECLARED_TYPES.get(format_of(name, options), {}), **options.declared_types}
