"""The files a load stages between its phases: names, encodings and the bucket spill.

Everything a phase hands to the next goes through the staging area (a folder
locally, a prefix of the source bucket in AWS), so a Step Functions state only
ever passes ids. Row and item files are JSON lines in gzip members: one member
per bucket (rows) or per section (items), so a reader fetches a byte range
and decompresses it alone.

``load_id/``
    ``scan/S.json``        what the scan of source S found (``ScanSummary``)
    ``rows/S.jsonl.gz``    its rows, split at bucket edges, one member per bucket, in bucket order
    ``plan/partitions.json``  the partitions and everything they need (``partitions.PartitionPlan``)
    ``plan/partition-list.json``  the partitions as a JSON array: the Distributed Map's items
    ``items/P.jsonl.gz``   the items of partition P, one member per section
    ``delta/P.jsonl.gz``   over a base: the delta's items of partition P (``loader.pipeline.diff``)
    ``resolved/P.json``    what partition P resolved (``resolve.PartitionSummary``)
    ``plan/writes.json``, ``plan/sections.bin``   what the chunk writers need
    ``plan/chunk-list.json``  the chunks as a JSON array: the write Map's items
    ``report.json``        the load's report
"""

from __future__ import annotations

import gzip
import heapq
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPORT: Final = "report.json"
PARTITIONS: Final = "plan/partitions.json"
PARTITION_LIST: Final = "plan/partition-list.json"
WRITES: Final = "plan/writes.json"
SECTIONS: Final = "plan/sections.bin"
CHUNK_LIST: Final = "plan/chunk-list.json"
#: Fast compression: the staged files live for one load, and the phases are CPU bound.
_LEVEL: Final = 1


def scan_name(source: int) -> str:
    return f"scan/{source:04d}.json"


def rows_name(source: int) -> str:
    return f"rows/{source:04d}.jsonl.gz"


def items_name(partition: int) -> str:
    return f"items/{partition:05d}.jsonl.gz"


def delta_name(partition: int) -> str:
    return f"delta/{partition:05d}.jsonl.gz"


def resolved_name(partition: int) -> str:
    return f"resolved/{partition:05d}.json"


def encode_text_member(lines: Sequence[str]) -> bytes:
    """One gzip member of lines that are JSON text already (empty input: empty bytes)."""
    if not lines:
        return b""
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=_LEVEL)


def decode_lines(data: bytes) -> list[str]:
    """The lines of one or more concatenated gzip members, as text."""
    return gzip.decompress(data).decode().splitlines() if data else []


@dataclass(frozen=True, slots=True)
class BucketSpan:
    """Where one bucket's rows are in a source's row file."""

    family: int
    bucket: int
    offset: int
    length: int
    rows: int


class BucketSpill:
    """Rows arrive in file order and leave grouped by bucket, in bounded memory.

    Lines are buffered per bucket; when the buffers pass ``flush_bytes`` the
    largest ones are appended to per-bucket temporary files. ``finish`` writes
    one gzip member per bucket, in (family, bucket) order, into one file and
    returns where each bucket is. Memory stays near ``flush_bytes`` however
    many rows come; the disk holds the rows once, then once compressed.
    """

    def __init__(self, folder: Path, flush_bytes: int = 32 << 20) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="spill-", dir=folder))
        self._flush_bytes = flush_bytes
        self._buffers: dict[tuple[int, int], list[str]] = {}
        self._rows: dict[tuple[int, int], int] = {}
        self._buffered = 0

    def add(self, family: int, bucket: int, line: str) -> None:
        key = (family, bucket)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = []
            self._rows.setdefault(key, 0)
        buffer.append(line)
        self._rows[key] += 1
        self._buffered += len(line)
        if self._buffered > self._flush_bytes:
            self._flush_largest()

    def _path(self, key: tuple[int, int]) -> Path:
        return self._folder / f"{key[0]}-{key[1]:x}"

    def _flush(self, key: tuple[int, int]) -> None:
        lines = self._buffers.pop(key)
        with self._path(key).open("a", encoding="utf-8") as handle:
            handle.writelines(lines)
        self._buffered -= sum(len(line) for line in lines)

    def _flush_largest(self) -> None:
        """Write out the biggest buffers until half the budget is free: few, large appends."""
        sizes = {key: sum(len(line) for line in lines) for key, lines in self._buffers.items()}
        for key in heapq.nlargest(len(sizes), sizes, key=sizes.__getitem__):
            if self._buffered <= self._flush_bytes // 2:
                break
            self._flush(key)

    def finish(self, target: Path) -> list[BucketSpan]:
        """The bucket-ordered row file at ``target`` and its index; temporary files are removed."""
        spans: list[BucketSpan] = []
        offset = 0
        with target.open("wb") as out:
            for key in sorted(self._rows):
                text = self._path(key).read_text(encoding="utf-8") if self._path(key).exists() else ""
                text += "".join(self._buffers.pop(key, []))
                self._path(key).unlink(missing_ok=True)
                member = gzip.compress(text.encode(), compresslevel=_LEVEL)
                out.write(member)
                spans.append(BucketSpan(key[0], key[1], offset, len(member), self._rows[key]))
                offset += len(member)
        self._folder.rmdir()
        return spans


def sections_table(offsets: Sequence[Sequence[int]]) -> bytes:
    """Every partition's section offsets, as one table of little-endian uint64 rows."""
    return b"".join(offset.to_bytes(8, "little") for row in offsets for offset in row)


def read_sections_table(data: bytes, partitions: int) -> list[list[int]]:
    values = [int.from_bytes(data[at : at + 8], "little") for at in range(0, len(data), 8)]
    width = len(values) // partitions if partitions else 0
    return [values[row * width : (row + 1) * width] for row in range(partitions)]
