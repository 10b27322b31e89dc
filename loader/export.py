"""A loaded version back out as a file: a MaxMind DB or a CSV, streamed in address order.

``iter_version_ranges`` reads a version's range items partition by partition
(``(family, bucket)`` order, one ascending Query each), so ranges arrive sorted
by (family, start) and memory holds one page. The writers are pure: they take
any iterable of sorted ``ExportRange`` and never hold it whole.

A range is stored once per bucket it touches, each piece carrying the whole
range's ``start`` and ``end``; it is exported once. Each range keeps the data
the API answers with: ``data`` as stored, Numbers exact (``Decimal``).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import heapq
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from ipmeta import keys
from ipmeta.ips import Family, address_value, format_address
from ipmeta.records import Cover
from loader.errors import LoadNotFound
from loader.formats.column_types import NUMBER, STRING, ColumnEvidence
from loader.mmdb_writer import DatabaseMetadata, write_database

if TYPE_CHECKING:
    from loader.table import LoaderTable

EXPORT_FORMATS: Final = ("mmdb", "csv")


@dataclass(frozen=True, slots=True)
class ExportRange:
    family: Family
    start: int  #: inclusive bounds, as integers
    end: int
    data: Mapping[str, Any]


@dataclass
class ExportStats:
    ranges: int = 0
    file_bytes: int = 0
    seconds: float = 0.0
    #: what the writer adds: the tree's shape for mmdb, reload hints for csv
    details: dict[str, Any] = field(default_factory=dict)


def write_mmdb(
    ranges: Iterable[ExportRange],
    out: Path,
    *,
    database_type: str,
    description: Mapping[str, str],
    languages: Sequence[str] = ("en",),
    build_epoch: int | None = None,
    ipv4_aliases: bool = False,
) -> ExportStats:
    """A MaxMind DB of ``ranges`` (sorted by family, start; disjoint): IPv4 and IPv6 in one IPv6 tree.

    Each record is the range's data; a missing (None) value is left out, as the format has no null.
    """
    metadata = DatabaseMetadata(database_type, dict(description), tuple(languages), build_epoch)
    records = ((item.family, item.start, item.end, _plain_data(item.data)) for item in ranges)
    with _replacing(out) as partial:
        written = write_database(records, partial, metadata, ipv4_aliases=ipv4_aliases, workdir=out.parent)
    details = {
        "networks": written.networks,
        "records": written.records,
        "node_count": written.node_count,
        "record_size": written.record_size,
        "aliases": written.aliases,
        "ipv6_ranges_in_ipv4_space": written.ipv6_in_ipv4_space,
    }
    return ExportStats(written.ranges, out.stat().st_size, written.seconds, details)


def write_csv(
    ranges: Iterable[ExportRange],
    out: Path,
    columns: Sequence[str],
    column_types: Mapping[str, str] | None = None,
) -> ExportStats:
    """``start,end,<columns>`` with a header, one row per range in order (gzip for ``.gz``).

    With the version's ``column_types``, ``details["reload_types"]`` names the
    ``--types`` a reload needs to keep them (a String column of digits, say).
    """
    started = time.monotonic()
    stats = ExportStats()
    evidence = ColumnEvidence()
    last: tuple[int, int] = (0, -1)
    with _replacing(out) as partial, _open_text(partial) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["start", "end", *columns])
        for item in ranges:
            if (item.family, item.start) <= last:
                raise ValueError(f"ranges must be sorted: IPv{item.family} {item.start} came after {last}")
            last = (item.family, item.end)
            texts = {column: csv_text(item.data.get(column)) for column in columns}
            evidence.observe(texts, "")
            writer.writerow(
                [
                    format_address(item.family, item.start),
                    format_address(item.family, item.end),
                    *texts.values(),
                ]
            )
            stats.ranges += 1
    stats.details["reload_types"] = _reload_types(evidence, column_types or {})
    stats.file_bytes = out.stat().st_size
    stats.seconds = round(time.monotonic() - started, 3)
    return stats


def csv_text(value: Any) -> str:
    """A stored value as CSV text that reloads to the same value: exact numbers, no exponent."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, int | float | bytes):
        return value.hex() if isinstance(value, bytes) else repr(value)
    return json.dumps(_plain_data(value), default=_json_number, separators=(",", ":"))


def _reload_types(evidence: ColumnEvidence, column_types: Mapping[str, str]) -> dict[str, str]:
    """Columns whose reload would infer another type than they were stored with, and what to declare."""
    inferred = evidence.column_types({})
    needed = {}
    for column, stored in column_types.items():
        again = inferred.get(column)
        if stored == STRING and again == NUMBER:
            needed[column] = "str"
        elif stored == NUMBER and again == STRING:
            needed[column] = "float"
    return needed


def _json_number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write a {type(value).__name__}")


def _plain_data(value: Any) -> Any:
    """Stored data as the writers take it: integral Decimals as int, sets as sorted lists."""
    if isinstance(value, Decimal):
        return int(value) if value.is_finite() and value == value.to_integral_value() else value
    if isinstance(value, Mapping):
        return {key: _plain_data(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_data(inner) for inner in value]
    if isinstance(value, set | frozenset):
        return [_plain_data(inner) for inner in sorted(value)]
    return value


@contextlib.contextmanager
def _replacing(out: Path) -> Iterator[Path]:
    """A temporary file beside ``out`` that replaces it only once the export has finished."""
    partial = out.with_name(f".{out.name}.partial")
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, out)


def _open_text(path: Path) -> IO[str]:
    # The partial file is ".name.gz.partial": the final name decides the compression.
    if path.name.removesuffix(".partial").endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", newline="")
    return path.open("w", encoding="utf-8", newline="")


# -- reading a version from the table --------------------------------------------------------------


def iter_version_ranges(
    table: LoaderTable, version: int, covers: Sequence[ExportRange] = ()
) -> Iterator[ExportRange]:
    """Every range of ``version`` in (family, start) order, each once; ``covers`` merged in."""
    manifest = table.get_manifest(version)
    if manifest is None:
        raise LoadNotFound(f"{keys.format_version(version)} has no manifest: it is not a loaded version")
    partitions = sorted(
        bucket for bucket in map(_bucket_of_partition, manifest.partitions) if bucket and bucket[0] == version
    )
    stored = (
        _range_of(family, item)
        for _, family, _, partition in partitions
        for item in table.iter_partition(partition)
    )
    ordered = sorted(covers, key=lambda cover: (cover.family, cover.start))
    last: tuple[int, int] | None = None
    for item in heapq.merge(stored, ordered, key=lambda each: (each.family, each.start)):
        # A range across bucket edges is an item in each bucket (and a cover's head item): once.
        if (item.family, item.start) != last:
            last = (item.family, item.start)
            yield item


def covers_as_ranges(covers: Iterable[Cover]) -> list[ExportRange]:
    """A version's cover list (``Store.read_covers``) as ranges to merge."""
    return [
        ExportRange(4 if cover.family == 4 else 6, cover.start, cover.end, cover.data) for cover in covers
    ]


def _bucket_of_partition(partition: str) -> tuple[int, Family, int, str] | None:
    """``v7#6#200100`` -> (7, 6, 0x200100, the key); None for other keys (the cover list's)."""
    version, _, rest = partition.partition("#")
    family_text, _, label = rest.partition("#")
    if not version.startswith("v") or family_text not in ("4", "6") or not label:
        return None
    family: Family = 4 if family_text == "4" else 6
    return int(version[1:]), family, int(label, 10 if family == 4 else 16), partition


def _range_of(family: Family, item: Mapping[str, Any]) -> ExportRange:
    return ExportRange(
        family,
        address_value(family, str(item[keys.ATTR_START])),
        address_value(family, str(item[keys.ATTR_END])),
        item.get(keys.ATTR_DATA) or {},
    )
