"""The staging area between ``prepare`` and ``write_chunk``: chunk files and a manifest.

In AWS it is a prefix of the source bucket (``S3Staging``); locally a folder
(``LocalStaging``). Chunks are gzip'd JSON lines, so a Map state passes only
``{"load_id", "chunk"}`` between states and never the items themselves.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

MANIFEST = "manifest.json"


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


class S3Staging:
    def __init__(self, client: S3Client, bucket: str, prefix: str) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    def _key(self, load_id: str, name: str) -> str:
        return f"{self.prefix}/{load_id}/{name}"

    def put(self, load_id: str, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(load_id, name), Body=data)

    def get(self, load_id: str, name: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._key(load_id, name))["Body"].read()

    def delete_load(self, load_id: str) -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/{load_id}/"):
            objects = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects})  # type: ignore[typeddict-item]
