"""The S3 an enrich job on AWS touches: its input listed, its parts list staged, its outputs.

With ``loader.store.s3``, the only enrich code that calls boto3. The parts themselves are read
and written by the engine (``loader.enrich``), through pyarrow's own S3 file system.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from loader.errors import SourceError
from loader.store import s3

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

#: A manifest or a ResultWriter file is read whole: far larger is not one.
MAX_MANIFEST_BYTES: Final = 256 << 20
#: DeleteObjects takes this many keys at once.
DELETE_BATCH: Final = 1000


class EnrichObjects:
    def __init__(self, client: S3Client | None = None) -> None:
        self._s3 = client or s3.client()

    def list_objects(self, bucket: str, prefix: str, limit: int) -> Iterator[tuple[str, int]]:
        """Each object's key and size under ``prefix`` (``_``-named files and folders aside: a job's
        own markers, as Spark and Athena write them)."""
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        count = 0
        for page in pages:
            for entry in page.get("Contents", []):
                name = entry["Key"].removeprefix(prefix)
                if entry["Key"].endswith("/") or any(part.startswith("_") for part in name.split("/")):
                    continue
                count += 1
                if count > limit:
                    raise SourceError(
                        f"s3://{bucket}/{prefix} holds more than {limit:,} objects: name a manifest"
                    )
                yield entry["Key"], int(entry["Size"])

    def any_object(self, bucket: str, prefix: str) -> bool:
        listed = self._s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        return bool(listed.get("KeyCount"))

    def read_text(self, bucket: str, key: str) -> str:
        uri = f"s3://{bucket}/{key}"
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
        except self._s3.exceptions.NoSuchKey:
            raise SourceError(f"{uri} does not exist") from None
        if response["ContentLength"] > MAX_MANIFEST_BYTES:
            raise SourceError(f"{uri} is over {MAX_MANIFEST_BYTES:,} bytes")
        body: bytes = response["Body"].read()
        if key.endswith(".gz"):
            import gzip
            import zlib

            try:
                body = gzip.GzipFile(fileobj=io.BytesIO(body)).read(MAX_MANIFEST_BYTES + 1)
            except (OSError, EOFError, zlib.error) as error:
                raise SourceError(f"{uri}: {error}") from None
            if len(body) > MAX_MANIFEST_BYTES:
                raise SourceError(f"{uri} unpacks to over {MAX_MANIFEST_BYTES:,} bytes")
        return body.decode("utf-8-sig")

    def read_json(self, bucket: str, key: str) -> Any:
        return json.loads(self.read_text(bucket, key))

    def put_json(self, bucket: str, key: str, document: Any) -> None:
        self._s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(document, separators=(",", ":")).encode(),
            ContentType="application/json",
        )

    def delete_keys(self, bucket: str, keys: list[str]) -> int:
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            self._s3.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True}
            )
        return len(keys)
