"""How a load reads its sources and what it builds: the options of ``ipmeta load`` and of an execution."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from ipmeta.schema import keys
from loader import reverse_index
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS

if TYPE_CHECKING:
    from loader.formats import FormatOptions

OverlapPolicy = Literal["last-wins", "most-specific", "reject", "merge"]
OVERLAP_POLICIES: Final[tuple[OverlapPolicy, ...]] = ("last-wins", "most-specific", "reject", "merge")
#: Items per chunk: one Map iteration, about 100 BatchWriteItem calls.
DEFAULT_CHUNK_SIZE: Final = 2500
#: Concurrent BatchWriteItem calls of one chunk.
DEFAULT_WRITE_WORKERS: Final = 8
#: Pieces a partition holds at most (a single larger bucket excepted): ~350 MB of a
#: resolve task's memory at DB-IP City Lite's widest rows (docs/loader.md).
DEFAULT_PARTITION_ROWS: Final = 250_000
DeltaPolicy = Literal["auto", "always", "never"]
DELTA_POLICIES: Final = ("auto", "always", "never")
#: ``auto`` writes a full version when the delta would hold more than this share of its base:
#: then a lookup's second Query buys little, and the chain's base keeps growing stale.
DEFAULT_DELTA_THRESHOLD: Final = 0.25
#: ``auto`` writes a full version (compaction) once this many deltas sit on one base.
DEFAULT_DELTA_MAX_CHAIN: Final = 8


@dataclass(frozen=True)
class LoadOptions:
    #: The dataset the load writes a version of (``keys.DATASET_NAME``). Not part of the
    #: fingerprint: a load is compared with the active version of its own dataset only.
    dataset: str = keys.DEFAULT_DATASET
    columns: Sequence[str] | None = None
    #: Declared metadata types, e.g. ``{"asn": "int", "lat": "float"}``; others are inferred.
    types: Mapping[str, str] = field(default_factory=dict)
    #: How the sources are read (``loader.formats.FORMATS``); ``auto`` goes by each file's name.
    format: str = "auto"
    #: MaxMind DB: output column -> dotted path (``country=country.iso_code``); None: the defaults.
    mmdb_fields: Mapping[str, str] | None = None
    #: GeoIP2 CSV: the ``Locations-<lang>.csv`` the blocks join, a local path or ``s3://bucket/key``.
    #: Its bytes are part of the load's checksum (``start``), so it is not in the fingerprint.
    locations: str | None = None
    overlaps: OverlapPolicy = "last-wins"
    max_errors: int = 0
    dry_run: bool = False
    chunk_size: int = DEFAULT_CHUNK_SIZE
    write_workers: int = DEFAULT_WRITE_WORKERS
    lock_lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS
    #: The metadata column the ``ranges-by-value`` index keys on (``--index-field``).
    index_field: str | None = None
    #: The column whose non-empty values put a range in the ``flagged-ranges`` index.
    flag_column: str | None = None
    shard_budget: int = reverse_index.DEFAULT_SHARD_BUDGET
    max_shards: int = reverse_index.DEFAULT_MAX_SHARDS
    #: Adjacent ranges with identical data become one item (``--no-coalesce`` keeps them apart).
    coalesce: bool = True
    #: Pieces a partition (one resolve task) holds at most: its memory bound. Not part of
    #: the fingerprint: ranges are joined across partitions, so it never changes the data.
    partition_rows: int = DEFAULT_PARTITION_ROWS
    #: Write a reload as a delta over the active full version (``loader.pipeline.diff``):
    #: ``auto`` when the delta is at most ``delta_threshold`` of its base and fewer than
    #: ``delta_max_chain`` deltas sit on that base already, ``always``, or ``never``. None of the
    #: three is in the fingerprint: a delta answers exactly as the full version would.
    delta: DeltaPolicy = "auto"
    delta_threshold: float = DEFAULT_DELTA_THRESHOLD
    delta_max_chain: int = DEFAULT_DELTA_MAX_CHAIN
    #: The guard (``loader.pipeline.guard``): a release that changes more than this share of
    #: the version it would replace is loaded but held, not activated (None: no limit).
    max_change_ratio: float | None = None
    #: ...and so is one with fewer items than this share of that version's (a cut file).
    min_size_ratio: float | None = None
    #: Why to hold the release whatever it changes, found before the load (a list of a
    #: combined dataset that moved too far); empty: the guard's own measure decides.
    held_by: str = ""

    def __post_init__(self) -> None:
        """Refuse what a load would only trip over later (an execution's options arrive as JSON)."""
        from loader.formats.column_types import stored_type_of

        keys.check_dataset_name(self.dataset)
        if self.overlaps not in OVERLAP_POLICIES:
            raise ValueError(f"overlaps must be one of {', '.join(OVERLAP_POLICIES)}, not {self.overlaps!r}")
        if self.delta not in DELTA_POLICIES:
            raise ValueError(f"delta must be one of {', '.join(DELTA_POLICIES)}, not {self.delta!r}")
        if not isinstance(self.delta_threshold, int | float) or not 0 < self.delta_threshold <= 1:
            raise ValueError(
                f"delta_threshold must be a share above 0 and at most 1, not {self.delta_threshold!r}"
            )
        for name in (
            "chunk_size",
            "write_workers",
            "partition_rows",
            "shard_budget",
            "max_shards",
            "delta_max_chain",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name in ("max_change_ratio", "min_size_ratio"):
            ratio = getattr(self, name)
            if ratio is not None and (not isinstance(ratio, int | float) or ratio < 0):
                raise ValueError(f"{name} must be a share of at least 0, not {ratio!r}")
        if not isinstance(self.max_errors, int) or self.max_errors < 0:
            raise ValueError(f"max_errors must be an integer of at least 0, not {self.max_errors!r}")
        for column, declared in self.types.items():
            try:
                stored_type_of(declared)
            except ValueError as error:
                raise ValueError(f"types: column {column!r}: {error}") from None

    def fingerprint(self) -> str:
        """What, besides the bytes, decides the dataset: the same source read differently is a change."""
        shape: dict[str, Any] = {
            "columns": list(self.columns or []),
            "types": dict(self.types),
            "overlaps": self.overlaps,
            "coalesce": self.coalesce,
        }
        # Each only when set, so the loads before formats existed keep their fingerprints.
        if self.format != "auto":
            shape["format"] = self.format
        if self.mmdb_fields is not None:
            shape["mmdb_fields"] = dict(self.mmdb_fields)
        if self.index_field or self.flag_column:
            # Only then, so a load without indexes keeps the fingerprint it always had.
            shape["indexes"] = {
                "field": self.index_field,
                "flag": self.flag_column,
                "budget": self.shard_budget,
                "max_shards": self.max_shards,
            }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]

    def format_options(self, locations: Path | None = None) -> FormatOptions:
        """What the readers take; ``locations`` is the Locations file made local (``materialize``)."""
        from loader.formats import FormatOptions

        return FormatOptions(
            format=self.format,
            columns=self.columns,
            declared_types=dict(self.types),
            mmdb_fields=self.mmdb_fields,
            locations=locations,
        )

    @classmethod
    def from_event(cls, options: Mapping[str, Any] | None) -> LoadOptions:
        """Options as a state machine's input spells them.

        ``columns`` may be ``"a,b,c"``, ``types`` ``"lat=float,postcode=str"`` and
        ``mmdb_fields`` ``"country=country.iso_code,..."``, as on the command line.
        """
        from loader.formats import FORMATS, parse_declared_types, parse_field_map

        options = dict(options or {})
        columns = options.pop("columns", None)
        if isinstance(columns, str):
            columns = [column.strip() for column in columns.split(",")]
        if isinstance(options.get("types"), str):
            options["types"] = parse_declared_types(options["types"])
        if isinstance(options.get("mmdb_fields"), str):
            options["mmdb_fields"] = parse_field_map(options["mmdb_fields"])
        if options.get("format", "auto") not in FORMATS:
            raise ValueError(f"unknown format {options['format']!r}; use one of {', '.join(FORMATS)}")
        for name in ("delta_threshold", "max_change_ratio", "min_size_ratio"):
            if isinstance(options.get(name), Decimal | str):  # as a stored load item reads back
                options[name] = float(options[name])
        known = {name for name in cls.__dataclass_fields__ if name != "columns"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"unknown load options {sorted(unknown)}")
        return cls(columns=columns, **options)

    def to_event(self) -> dict[str, Any]:
        data = asdict(self)
        data["columns"] = list(self.columns) if self.columns else None
        data["types"] = dict(self.types)
        data["mmdb_fields"] = dict(self.mmdb_fields) if self.mmdb_fields is not None else None
        return data
