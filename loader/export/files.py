"""Sorted ranges out as a file: a MaxMind DB or a CSV, streamed in address order.

The writers are pure: they take any iterable of ``ExportRange`` sorted by
(family, start), from a version in the table (``loader.export.version_ranges``)
or from a source file's rows, and never hold it whole. Each range keeps the data
the API answers with, Numbers exact (``Decimal``).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Final

from ipmeta.schema.ips import Family, format_address
from ipmeta.shapes import exact_json
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.formats.column_types import NUMBER, STRING, ColumnEvidence

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
    # JSON text: its numbers exact and its bytes base64, as the API answers them.
    return exact_json.dumps(_plain_data(value))


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
