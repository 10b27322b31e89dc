"""The loader's S3 access: staging in the source bucket, and source downloads and uploads.

With ``loader.store.table`` (DynamoDB) and ``loader.store.events`` (EventBridge), the only
loader code that calls boto3.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3

from loader.settings import DEFAULT_CHUNK_PREFIX, ENV_CHUNK_PREFIX, ENV_SOURCE_BUCKET

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client


@functools.cache
def client() -> S3Client:
    """One client per container for staging, which every task of a load uses."""
    return boto3.client("s3")


def download(bucket: str, key: str, target: Path) -> None:
    # A client of its own: a download happens once per load, and the CLI may
    # download with credentials that changed since the cached client was made.
    boto3.client("s3").download_file(bucket, key, str(target))


def stream(bucket: str, key: str, block_bytes: int = 1 << 20) -> Iterator[bytes]:
    """An object's bytes in blocks, as they arrive: hashed without a copy on disk."""
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
    yield from body.iter_chunks(block_bytes)


def delete(bucket: str, key: str) -> None:
    """Delete one object; deleting a key that does not exist succeeds, as S3 has it."""
    client().delete_object(Bucket=bucket, Key=key)


def upload(source: Path, bucket: str, key: str) -> None:
    boto3.client("s3").upload_file(str(source), bucket, key)


class S3Staging:
    """Staged files of each load under ``s3://bucket/prefix/<load_id>/``."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str) -> None:
        self.client = s3
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    @classmethod
    def from_environment(cls) -> S3Staging:
        return cls(
            client(), os.environ[ENV_SOURCE_BUCKET], os.environ.get(ENV_CHUNK_PREFIX, DEFAULT_CHUNK_PREFIX)
        )

    @property
    def identity(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def _key(self, load_id: str, name: str) -> str:
        return f"{self.prefix}/{load_id}/{name}"

    def location(self, load_id: str, name: str) -> dict[str, str]:
        """Where a staged file is, as a Distributed Map's ItemReader names it."""
        return {"bucket": self.bucket, "key": self._key(load_id, name)}

    def put(self, load_id: str, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(load_id, name), Body=data)

    def put_file(self, load_id: str, name: str, path: Path) -> None:
        # upload_file goes multipart above 8 MB: a row or item file can be gigabytes.
        self.client.upload_file(str(path), self.bucket, self._key(load_id, name))
        path.unlink(missing_ok=True)

    def get(self, load_id: str, name: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._key(load_id, name))["Body"].read()

    def get_range(self, load_id: str, name: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        key = self._key(load_id, name)
        return self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")[
            "Body"
        ].read()

    def exists(self, load_id: str, name: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(load_id, name))
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def delete_load(self, load_id: str) -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/{load_id}/"):
            objects = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects})  # type: ignore[typeddict-item]
