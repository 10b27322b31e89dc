"""pyarrow's file system over a boto3 S3 client: the enrich engine's S3 reads and writes, on moto.

On Lambda the engine reaches S3 through pyarrow's own (C++) S3 file system, which moto's in-process
mock cannot see. In tests the same calls go through this handler to the boto3 client moto serves,
so the plan (boto3), the parts (pyarrow) and the summary (boto3) share one bucket.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs


class Boto3Handler(pafs.FileSystemHandler):  # type: ignore[misc]
    """``bucket/key`` paths; an object is read whole, and written when its stream closes."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = path.strip("/").partition("/")
        return bucket, key

    def get_type_name(self) -> str:
        return "boto3-s3"

    def equals(self, other: Any) -> bool:
        return isinstance(other, Boto3Handler) and other.client is self.client

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos = []
        for path in paths:
            bucket, key = self._split(path)
            try:
                head = self.client.head_object(Bucket=bucket, Key=key)
                infos.append(pafs.FileInfo(path, pafs.FileType.File, size=head["ContentLength"]))
            except self.client.exceptions.ClientError:
                infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        bucket, prefix = self._split(selector.base_dir)
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "")
        return [
            pafs.FileInfo(f"{bucket}/{entry['Key']}", pafs.FileType.File, size=entry["Size"])
            for entry in listed.get("Contents", [])
        ]

    def create_dir(self, path: str, recursive: bool) -> None:
        pass

    def delete_dir(self, path: str) -> None:
        raise NotImplementedError

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise NotImplementedError

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        bucket, key = self._split(path)
        self.client.delete_object(Bucket=bucket, Key=key)

    def move(self, src: str, dest: str) -> None:
        source, target = self._split(src), self._split(dest)
        self.client.copy_object(
            Bucket=target[0], Key=target[1], CopySource={"Bucket": source[0], "Key": source[1]}
        )
        self.delete_file(src)

    def copy_file(self, src: str, dest: str) -> None:
        source, target = self._split(src), self._split(dest)
        self.client.copy_object(
            Bucket=target[0], Key=target[1], CopySource={"Bucket": source[0], "Key": source[1]}
        )

    def _body(self, path: str) -> bytes:
        bucket, key = self._split(path)
        try:
            body: bytes = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(path) from None
        return body

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._body(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._body(path))

    def open_output_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        return pa.PythonFile(_Upload(self.client, *self._split(path)), mode="w")

    def open_append_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        raise NotImplementedError

    def normalize_path(self, path: str) -> str:
        return path


class _Upload(io.BytesIO):
    """Bytes that become the object when closed, as a multipart upload's object appears when complete."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        super().__init__()
        self._target = (client, bucket, key)

    def close(self) -> None:
        if not self.closed:
            client, bucket, key = self._target
            client.put_object(Bucket=bucket, Key=key, Body=self.getvalue())
        super().close()


def boto3_filesystem(client: Any) -> pafs.FileSystem:
    return pafs.PyFileSystem(Boto3Handler(client))
