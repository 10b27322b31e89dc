"""The loader's S3 access: staging in the source bucket, source downloads and uploads, feed files.

With ``loader.store.table`` (DynamoDB) and ``loader.store.events`` (EventBridge), the only
loader code that calls boto3. ``S3Sinks`` is where the Fetch state streams a vendor's
release: each file a multipart upload that exists only once it is complete.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

import boto3

from loader.settings import DEFAULT_CHUNK_PREFIX, ENV_CHUNK_PREFIX, ENV_SOURCE_BUCKET

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef, CopySourceTypeDef

#: S3 takes parts of 5 MiB at least (the last one aside) and 10,000 parts at most: 8 MiB
#: parts hold a file of 78 GiB, far above the feeds' caps, in 8 MiB of memory.
MULTIPART_PART_BYTES: Final = 8 << 20
MIN_PART_BYTES: Final = 5 << 20


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


class S3MultipartSink:
    """One object, written as it streams: each full part is uploaded, and only ``close`` makes it exist.

    Memory holds one part, whatever the file's size. ``abort`` (or a failed
    ``close``) aborts the multipart upload, so a refused release leaves no
    object and no stored parts; the object a previous release wrote stays as it was.
    A file smaller than one part is one PutObject on ``close``.
    """

    def __init__(self, s3: S3Client, bucket: str, key: str, part_bytes: int = MULTIPART_PART_BYTES) -> None:
        if part_bytes < MIN_PART_BYTES:
            raise ValueError(f"S3 parts are at least {MIN_PART_BYTES} bytes, not {part_bytes}")
        self.client, self.bucket, self.key = s3, bucket, key
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[CompletedPartTypeDef] = []

    def write(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= self._part_bytes:
            part = bytes(self._buffer[: self._part_bytes])
            del self._buffer[: self._part_bytes]
            self._upload_part(part)

    def close(self) -> None:
        try:
            if self._upload_id is None:
                self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self._buffer))
            else:
                if self._buffer:
                    self._upload_part(bytes(self._buffer))
                self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=self.key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},
                )
        except BaseException:
            self.abort()
            raise
        self._buffer.clear()
        self._upload_id = None

    def abort(self) -> None:
        self._buffer.clear()
        if self._upload_id is not None:
            upload, self._upload_id = self._upload_id, None
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=upload)

    def _upload_part(self, part: bytes) -> None:
        if self._upload_id is None:
            created = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key)
            self._upload_id = created["UploadId"]
        number = len(self._parts) + 1
        uploaded = self.client.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, PartNumber=number, Body=part
        )
        self._parts.append({"ETag": uploaded["ETag"], "PartNumber": number})


class S3Sinks:
    """A release's files under ``s3://bucket/prefix/``, one multipart sink each: a feed's ``SinkFactory``."""

    def __init__(
        self, s3: S3Client, bucket: str, prefix: str, part_bytes: int = MULTIPART_PART_BYTES
    ) -> None:
        self.client, self.bucket, self.prefix = s3, bucket, prefix.strip("/")
        self._part_bytes = part_bytes

    def open(self, name: str) -> S3MultipartSink:
        if not name or PurePosixPath(name).name != name or name in (".", ".."):
            raise ValueError(f"a sink is named by a plain file name, not {name!r}")
        return S3MultipartSink(self.client, self.bucket, self.key(name), self._part_bytes)

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def uri(self, name: str) -> str:
        """What a load's ``sources`` name: ``s3://bucket/prefix/name``."""
        return f"s3://{self.bucket}/{self.key(name)}"


class S3ListFiles:
    """A network dataset's list files under ``s3://bucket/prefix/`` (``network_feed.ListFiles``): the
    current ones beside ``incoming/``, where a run's new files wait for its load."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = s3, bucket, prefix.strip("/")
        self._current = S3Sinks(s3, bucket, self.prefix)
        self._incoming = S3Sinks(s3, bucket, f"{self.prefix}/incoming")

    def incoming(self) -> S3Sinks:
        return self._incoming

    def _folder(self, renewed: bool) -> S3Sinks:
        return self._incoming if renewed else self._current

    def has(self, name: str) -> bool:
        # A LIST of the key itself (it sorts first among the keys it prefixes): a missing file is an
        # empty answer, whatever HeadObject would say without ListBucket on the whole bucket.
        key = self._current.key(name)
        listing = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        return any(entry.get("Key") == key for entry in listing.get("Contents", []))

    def source(self, name: str, *, renewed: bool) -> str:
        return self._folder(renewed).uri(name)

    def readable(self, name: str, *, renewed: bool, scratch: Path) -> Path:
        scratch.mkdir(parents=True, exist_ok=True)
        target = scratch / name
        self.client.download_file(self.bucket, self._folder(renewed).key(name), str(target))
        return target

    def promote(self, name: str) -> None:
        # A server-side copy (a list is megabytes; CopyObject takes up to 5 GB in one request).
        source: CopySourceTypeDef = {"Bucket": self.bucket, "Key": self._incoming.key(name)}
        self.client.copy_object(Bucket=self.bucket, Key=self._current.key(name), CopySource=source)
