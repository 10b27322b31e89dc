"""The staging area between ``prepare`` and ``write_chunk``: chunk files and the load's report.

In AWS it is a prefix of the source bucket (``loader.s3.S3Staging``); locally a
folder (``LocalStaging``). Chunks are gzip'd JSON lines, so a Map state passes
only ``{"load_id", "chunk"}`` between states and never the items themselves.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

#: The load's full report, staged with its chunks (the load item keeps a summary).
REPORT = "report.json"


def chunk_name(index: int) -> str:
    return f"chunk-{index:05d}.jsonl.gz"


def encode_chunk(items: Sequence[dict[str, Any]]) -> bytes:
    lines = "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in items)
    return gzip.compress(lines.encode(), compresslevel=3)


def decode_chunk(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line]


class Staging(Protocol):
    def put(self, load_id: str, name: str, data: bytes) -> None: ...

    def get(self, load_id: str, name: str) -> bytes: ...

    def delete_load(self, load_id: str) -> None: ...


class LocalStaging:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, load_id: str, name: str, data: bytes) -> None:
        folder = self.root / load_id
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{name}.tmp"
        temporary.write_bytes(data)
        temporary.replace(folder / name)  # atomic: a reader never sees half a chunk

    def get(self, load_id: str, name: str) -> bytes:
        return (self.root / load_id / name).read_bytes()

    def delete_load(self, load_id: str) -> None:
        shutil.rmtree(self.root / load_id, ignore_errors=True)
