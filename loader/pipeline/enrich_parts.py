"""An enrich job on AWS, cut into parts: what each child of the EnrichParts Distributed Map reads.

The job's input is an S3 prefix (every object under it) or a manifest: an S3 Inventory
``manifest.json`` (its CSV data files list the objects) or a CSV with a header naming
``bucket`` and ``key`` (and ``size``), as an Athena query over an inventory writes. Each
object becomes one part, or, when it is larger than ``part_bytes``:

- a CSV or JSON Lines object: byte ranges of ``part_bytes`` (the engine reads the rows
  that *start* in its range, so a row across a boundary is read once);
- a Parquet object: runs of whole row groups, about ``part_bytes`` each;
- a gzip object: one part, since a gzip stream has no seekable boundaries.

Part ``i`` writes ``<output>/part-<i>.<ext>``: the parts sort in the input's order
(objects by key, then ranges by offset). Everything here is plain data; the
handlers (``loader.pipeline.handlers``) do the listing and the reading.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from loader.errors import SourceError
from loader.settings import ENRICH_PART_BYTES

DEFAULT_PART_BYTES: Final = ENRICH_PART_BYTES
MIN_PART_BYTES: Final = 1024 * 1024
#: A job lists at most this many objects: the parts list is one S3 object the map reads, and
#: a Distributed Map runs up to 10,000 children at once, over any number of items.
MAX_OBJECTS: Final = 1_000_000
#: The key of each output part, in the input's order.
PART_KEY_DIGITS: Final = 6
#: Names an input object's format by its name; others are read as CSV.
_FORMATS: Final = {
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
}


@dataclass(frozen=True, slots=True)
class S3Location:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        """``s3://bucket/key`` (the key may be empty or a prefix)."""
        if not uri.startswith("s3://"):
            raise SourceError(f"{uri!r} is not an s3:// address")
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if not bucket:
            raise SourceError(f"{uri!r} names no bucket")
        return cls(bucket, key)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def prefix(self) -> S3Location:
        """The location as a folder: its key ends with ``/`` unless it is the bucket's root."""
        return self if not self.key or self.key.endswith("/") else S3Location(self.bucket, f"{self.key}/")


@dataclass(frozen=True, slots=True)
class InputObject:
    bucket: str
    key: str
    size: int

    @property
    def compressed(self) -> bool:
        return self.key.endswith(".gz")

    @property
    def format(self) -> str:
        name = self.key.removesuffix(".gz").lower()
        return next((kind for suffix, kind in _FORMATS.items() if name.endswith(suffix)), "csv")


@dataclass(frozen=True, slots=True)
class Part:
    """What one child reads (an object, or a byte range or row groups of it) and where it writes."""

    index: int
    bucket: str
    key: str
    size: int
    format: str
    output: str
    #: ``[first byte, end byte)`` of a CSV or JSON Lines object; None: all of it.
    byte_range: tuple[int, int] | None = None
    #: ``[first row group, end row group)`` of a Parquet object; None: all of it.
    row_groups: tuple[int, int] | None = None

    def to_item(self) -> dict[str, Any]:
        item = asdict(self)
        for name in ("byte_range", "row_groups"):
            if item[name] is None:
                del item[name]
            else:
                item[name] = list(item[name])
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Part:
        byte_range, row_groups = item.get("byte_range"), item.get("row_groups")
        return cls(
            index=int(item["index"]),
            bucket=str(item["bucket"]),
            key=str(item["key"]),
            size=int(item["size"]),
            format=str(item["format"]),
            output=str(item["output"]),
            byte_range=(int(byte_range[0]), int(byte_range[1])) if byte_range else None,
            row_groups=(int(row_groups[0]), int(row_groups[1])) if row_groups else None,
        )


def byte_ranges(size: int, part_bytes: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of at most ``part_bytes`` covering ``size`` bytes; one for an empty object."""
    if size <= part_bytes:
        return [(0, size)]
    return [(start, min(size, start + part_bytes)) for start in range(0, size, part_bytes)]


def row_group_runs(group_bytes: Sequence[int], part_bytes: int) -> list[tuple[int, int]]:
    """Consecutive row groups, each run about ``part_bytes`` (a single larger group is a run alone)."""
    runs: list[tuple[int, int]] = []
    first, total = 0, 0
    for index, size in enumerate(group_bytes):
        if total and total + size > part_bytes:
            runs.append((first, index))
            first, total = index, 0
        total += size
    if group_bytes:
        runs.append((first, len(group_bytes)))
    return runs or [(0, 0)]


def output_key(output: S3Location, index: int, extension: str) -> str:
    return f"{output.prefix().key}part-{index:0{PART_KEY_DIGITS}d}.{extension}"


def plan_parts(
    objects: Iterable[InputObject],
    output: S3Location,
    *,
    part_bytes: int = DEFAULT_PART_BYTES,
    output_format: str | None = None,
    row_groups: Callable[[InputObject], Sequence[int]] | None = None,
) -> list[Part]:
    """Every part of the job, in the input's order; ``row_groups`` gives a Parquet object's row
    groups' sizes (its footer), asked only of objects larger than ``part_bytes``."""
    if part_bytes < MIN_PART_BYTES:
        raise SourceError(f"parts of {part_bytes:,} bytes: at least {MIN_PART_BYTES:,}")
    parts: list[Part] = []
    for source in sorted(objects, key=lambda found: (found.bucket, found.key)):
        kind = output_format or source.format
        extension = "parquet" if kind == "parquet" else kind
        for byte_range, groups in _pieces(source, part_bytes, row_groups):
            index = len(parts)
            parts.append(
                Part(
                    index=index,
                    bucket=source.bucket,
                    key=source.key,
                    size=source.size,
                    format=source.format,
                    output=output_key(output, index, extension),
                    byte_range=byte_range,
                    row_groups=groups,
                )
            )
    return parts


def _pieces(
    source: InputObject,
    part_bytes: int,
    row_groups: Callable[[InputObject], Sequence[int]] | None,
) -> Iterator[tuple[tuple[int, int] | None, tuple[int, int] | None]]:
    if source.size <= part_bytes or source.compressed:
        yield None, None
    elif source.format == "parquet":
        if row_groups is None:
            yield None, None
            return
        for run in row_group_runs(row_groups(source), part_bytes):
            yield None, run
    else:
        for byte_range in byte_ranges(source.size, part_bytes):
            yield byte_range, None


# --- manifests ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InventoryManifest:
    """An S3 Inventory ``manifest.json``: its CSV data files, and the columns they hold."""

    data_files: tuple[S3Location, ...]
    columns: tuple[str, ...]

    @classmethod
    def parse(cls, text: str | bytes, manifest: S3Location) -> InventoryManifest:
        try:
            document = json.loads(text)
            if document.get("fileFormat", "CSV").upper() != "CSV":
                raise SourceError(
                    f"{manifest.uri}: only CSV inventories are read, not {document['fileFormat']}"
                )
            columns = tuple(name.strip() for name in str(document["fileSchema"]).split(","))
            bucket = str(document.get("destinationBucket", "")).rsplit(":", 1)[-1] or manifest.bucket
            files = tuple(S3Location(bucket, str(entry["key"])) for entry in document["files"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise SourceError(f"{manifest.uri} is not an S3 Inventory manifest: {error}") from None
        if "Key" not in columns or "Bucket" not in columns:
            raise SourceError(f"{manifest.uri}: its fileSchema names no Bucket and Key")
        return cls(files, columns)


def inventory_objects(rows: Iterable[Sequence[str]], columns: Sequence[str]) -> Iterator[InputObject]:
    """The objects of an inventory data file (its rows have no header; ``columns`` names them).
    Keys are URL-encoded in an inventory; a delete marker or a size-less row is skipped."""
    from urllib.parse import unquote_plus

    at = {name: index for index, name in enumerate(columns)}
    for row in rows:
        if "IsDeleteMarker" in at and row[at["IsDeleteMarker"]].lower() == "true":
            continue
        if "IsLatest" in at and row[at["IsLatest"]].lower() == "false":
            continue
        size = row[at["Size"]] if "Size" in at else ""
        if not size:
            continue
        yield InputObject(row[at["Bucket"]], unquote_plus(row[at["Key"]]), int(size))


def listing_objects(text: str, manifest: S3Location) -> Iterator[InputObject]:
    """A CSV with a header naming ``bucket``, ``key`` and ``size`` (an Athena query's result)."""
    reader = csv.DictReader(io.StringIO(text))
    names = {name.lower(): name for name in reader.fieldnames or ()}
    missing = [name for name in ("bucket", "key", "size") if name not in names]
    if missing:
        raise SourceError(f"{manifest.uri}: its header has no {', '.join(missing)} column")
    for line, row in enumerate(reader, start=2):
        try:
            yield InputObject(row[names["bucket"]], row[names["key"]], int(row[names["size"]]))
        except (TypeError, ValueError):
            raise SourceError(f"{manifest.uri}, line {line}: size {row[names['size']]!r}") from None


def within(location: InputObject, allowed: Sequence[S3Location]) -> bool:
    """Whether an object lies under one of the prefixes the job may read."""
    return any(location.bucket == prefix.bucket and location.key.startswith(prefix.key) for prefix in allowed)
