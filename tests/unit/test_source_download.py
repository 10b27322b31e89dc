"""Sources named by ``s3://bucket/key`` are downloaded before a reader sees them; local paths are not."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from loader.errors import SourceError
from loader.formats import FormatOptions, SourceRow, open_rows
from loader.options import LoadOptions
from loader.pipeline.descriptor import LoadDescriptor, Source
from loader.pipeline.scan import _locations
from loader.pipeline.start import sha256_of
from loader.store.source import materialize, split_s3_uri


@mock_aws
def test_an_s3_uri_is_downloaded_first_and_reads_like_a_local_file(tmp_path: Path) -> None:
    # Given a gzipped CSV in a bucket
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sources")
    s3.put_object(
        Bucket="sources",
        Key="asn/latest.csv.gz",
        Body=gzip.compress(b"start,end,asn\n1.0.0.0,1.0.0.255,13335\n"),
    )
    # When it is materialized
    path = materialize("s3://sources/asn/latest.csv.gz", tmp_path)
    # Then it keeps its name (the reader goes by it) and reads as a local file would
    assert path.name == "latest.csv.gz"
    rows = [row for row in open_rows(path, path.name, FormatOptions()) if isinstance(row, SourceRow)]
    assert [(row.family, row.start, row.end, row.values) for row in rows] == [
        (4, 0x01000000, 0x010000FF, {"asn": "13335"})
    ]


def test_a_local_path_is_used_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("start,end\n")
    assert materialize(path) == path
    with pytest.raises(SourceError, match="no such file"):
        materialize(tmp_path / "missing.csv")


def test_an_s3_uri_needs_a_bucket_and_a_key() -> None:
    assert split_s3_uri("s3://b/k/x.mmdb") == ("b", "k/x.mmdb")
    with pytest.raises(SourceError, match="expected s3://bucket/key"):
        split_s3_uri("s3://bucket-only")


@mock_aws
def test_a_locations_file_in_s3_is_downloaded_for_each_scan(tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sources")
    s3.put_object(Bucket="sources", Key="geo/Locations-en.csv", Body=b"geoname_id,city_name\n1,Kassel\n")
    s3.put_object(Bucket="sources", Key="geo/Blocks-IPv4.csv", Body=b"network,geoname_id\n1.0.0.0/24,1\n")
    options = LoadOptions(format="geoip2-csv", locations="s3://sources/geo/Locations-en.csv")
    descriptor = LoadDescriptor(
        "v1", 1, (Source.of("s3://sources/geo/Blocks-IPv4.csv"),), options, "", "", 0.0
    )
    # The scan reads a local copy
    local = _locations(descriptor, tmp_path)
    assert local is not None
    assert local.read_bytes() == b"geoname_id,city_name\n1,Kassel\n"
    # And start's checksum, streamed from S3, covers the blocks and then the Locations
    both = hashlib.sha256(
        b"network,geoname_id\n1.0.0.0/24,1\n" + b"geoname_id,city_name\n1,Kassel\n"
    ).hexdigest()
    assert sha256_of(["s3://sources/geo/Blocks-IPv4.csv", "s3://sources/geo/Locations-en.csv"]) == both
