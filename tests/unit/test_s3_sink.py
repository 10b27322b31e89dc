"""S3 multipart sink (moto): parts leave as they fill, the object exists once closed, abort leaves no part."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from loader.store.s3 import MIN_PART_BYTES, S3MultipartSink, S3Sinks

BUCKET = "feeds"
KEY = "feeds/city/GeoLite2-City.mmdb"
MIB = 1 << 20


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def blocks(count: int, size: int = MIB) -> list[bytes]:
    """Blocks that differ from one another, so a part out of order would show."""
    return [bytes([index % 251]) * size for index in range(count)]


def exists(s3: Any, key: str = KEY) -> bool:
    return bool(s3.list_objects_v2(Bucket=BUCKET, Prefix=key).get("KeyCount"))


def uploads_in_progress(s3: Any) -> list[str]:
    return [upload["Key"] for upload in s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]


def test_a_large_file_streams_as_parts_and_exists_only_once_closed(s3: Any) -> None:
    # Given a sink of 5 MiB parts, written 13 MiB one block at a time
    sink = S3MultipartSink(s3, BUCKET, KEY, part_bytes=MIN_PART_BYTES)
    written = blocks(13)
    for block in written:
        sink.write(block)
    # Then two whole parts have already left, while the object does not exist yet
    [upload] = s3.list_multipart_uploads(Bucket=BUCKET)["Uploads"]
    parts = s3.list_parts(Bucket=BUCKET, Key=KEY, UploadId=upload["UploadId"])["Parts"]
    assert [part["Size"] for part in parts] == [MIN_PART_BYTES, MIN_PART_BYTES]
    assert not exists(s3)
    # When it is closed, the object is every byte in order, and no upload is left open
    sink.close()
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == b"".join(written)
    assert uploads_in_progress(s3) == []


def test_an_abort_leaves_no_object_and_no_parts_and_keeps_the_previous_object(s3: Any) -> None:
    # Given the object of the previous release, and a new release aborted after two parts
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"previous release")
    sink = S3MultipartSink(s3, BUCKET, KEY, part_bytes=MIN_PART_BYTES)
    for block in blocks(11):
        sink.write(block)
    assert uploads_in_progress(s3) == [KEY]
    sink.abort()
    # Then nothing of the new one is stored, and the previous object is untouched
    assert uploads_in_progress(s3) == []
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == b"previous release"


def test_a_file_smaller_than_a_part_is_one_put_on_close(s3: Any) -> None:
    sink = S3MultipartSink(s3, BUCKET, KEY)
    sink.write(b"a,b\n")
    sink.write(b"1,2\n")
    assert not exists(s3)
    assert uploads_in_progress(s3) == []
    sink.close()
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == b"a,b\n1,2\n"


def test_an_empty_file_is_an_empty_object(s3: Any) -> None:
    sink = S3MultipartSink(s3, BUCKET, KEY)
    sink.close()
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == b""


def test_a_close_that_fails_aborts_the_upload(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a multipart upload whose completion S3 refuses
    sink = S3MultipartSink(s3, BUCKET, KEY, part_bytes=MIN_PART_BYTES)
    for block in blocks(6):
        sink.write(block)

    def refuse(**_: Any) -> None:
        raise RuntimeError("S3 refused the completion")

    monkeypatch.setattr(s3, "complete_multipart_upload", refuse)
    # When it is closed, the error goes up, and no upload is left behind
    with pytest.raises(RuntimeError, match="refused"):
        sink.close()
    assert uploads_in_progress(s3) == []
    assert not exists(s3)


def test_parts_below_s3s_minimum_are_refused(s3: Any) -> None:
    with pytest.raises(ValueError, match="at least"):
        S3MultipartSink(s3, BUCKET, KEY, part_bytes=MIN_PART_BYTES - 1)


def test_the_sinks_name_plain_files_under_their_prefix(s3: Any) -> None:
    sinks = S3Sinks(s3, BUCKET, "feeds/city/")
    sink = sinks.open("GeoLite2-City.mmdb")
    sink.write(b"mmdb")
    sink.close()
    assert sinks.uri("GeoLite2-City.mmdb") == f"s3://{BUCKET}/{KEY}"
    assert exists(s3)
    for name in ("../escape.mmdb", "a/b.csv", "", ".."):
        with pytest.raises(ValueError, match="plain file name"):
            sinks.open(name)
