"""An enrich job cut into parts, its manifests read and its input JSON checked: pure, no AWS."""

from __future__ import annotations

import csv
import io
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loader.errors import SourceError
from loader.pipeline.enrich_parts import (
    MIN_PART_BYTES,
    InputObject,
    InventoryManifest,
    Part,
    S3Location,
    byte_ranges,
    inventory_objects,
    listing_objects,
    plan_parts,
    row_group_runs,
)
from loader.pipeline.enrich_task import EnrichJob

OUT = S3Location("results", "enriched/")
MB = 1 << 20


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=10**9, max_value=10**11))
def test_byte_ranges_tile_the_object_in_order_each_at_most_a_part(size: int, part_bytes: int) -> None:
    ranges = byte_ranges(size, part_bytes)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == size
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(ranges))
    assert all(0 < end - start <= part_bytes for start, end in ranges) or size == 0


@given(
    st.lists(st.integers(min_value=1, max_value=500), max_size=60), st.integers(min_value=1, max_value=800)
)
def test_row_group_runs_cover_every_group_once_and_stay_near_a_part(
    groups: list[int], part_bytes: int
) -> None:
    runs = row_group_runs(groups, part_bytes)
    covered = [index for first, end in runs for index in range(first, end)]
    assert covered == list(range(len(groups)))
    for first, end in runs:
        # A run holds several groups only while they fit a part; a larger group is alone.
        assert end - first == 1 or sum(groups[first:end]) <= part_bytes


def test_parts_follow_the_input_order_and_large_objects_are_cut_by_their_kind() -> None:
    objects = [
        InputObject("logs", "b/big.csv", 5 * MB),
        InputObject("logs", "a/small.jsonl", 100),
        InputObject("logs", "c/huge.csv.gz", 9 * MB),
        InputObject("logs", "d/table.parquet", 7 * MB),
    ]
    parts = plan_parts(objects, OUT, part_bytes=2 * MB, row_groups=lambda _: [MB, MB, MB, 3 * MB, MB])

    assert [(p.key, p.byte_range, p.row_groups) for p in parts] == [
        ("a/small.jsonl", None, None),
        ("b/big.csv", (0, 2 * MB), None),
        ("b/big.csv", (2 * MB, 4 * MB), None),
        ("b/big.csv", (4 * MB, 5 * MB), None),
        ("c/huge.csv.gz", None, None),  # gzip has no boundaries to cut at
        ("d/table.parquet", None, (0, 2)),
        ("d/table.parquet", None, (2, 3)),
        ("d/table.parquet", None, (3, 4)),
        ("d/table.parquet", None, (4, 5)),
    ]
    assert [p.index for p in parts] == list(range(len(parts)))
    assert parts[0].output == "enriched/part-000000.jsonl"
    assert parts[5].output == "enriched/part-000005.parquet"
    # Every item survives the trip through the staged parts list
    assert [Part.from_item(json.loads(json.dumps(p.to_item()))) for p in parts] == parts


def test_parts_smaller_than_a_mebibyte_are_refused() -> None:
    with pytest.raises(SourceError, match="at least"):
        plan_parts([InputObject("b", "k.csv", 10)], OUT, part_bytes=MIN_PART_BYTES - 1)


def test_an_inventory_manifest_lists_its_data_files_and_their_live_objects() -> None:
    manifest = {
        "sourceBucket": "logs",
        "destinationBucket": "arn:aws:s3:::inventory",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, IsLatest, IsDeleteMarker",
        "files": [{"key": "logs/inv/data/1.csv.gz", "size": 1, "MD5checksum": "x"}],
    }
    parsed = InventoryManifest.parse(json.dumps(manifest), S3Location("inventory", "logs/inv/manifest.json"))
    assert parsed.data_files == (S3Location("inventory", "logs/inv/data/1.csv.gz"),)
    rows = [
        ["logs", "access/2026%2F11/a+b.csv", "120", "true", "false"],
        ["logs", "access/old.csv", "80", "false", "false"],  # a previous version
        ["logs", "access/gone.csv", "", "true", "true"],  # a delete marker
    ]
    assert list(inventory_objects(rows, parsed.columns)) == [
        InputObject("logs", "access/2026/11/a b.csv", 120)
    ]


def test_a_manifest_that_is_not_one_is_refused_with_its_address() -> None:
    where = S3Location("inventory", "manifest.json")
    with pytest.raises(SourceError, match=r"s3://inventory/manifest\.json"):
        InventoryManifest.parse("{}", where)
    with pytest.raises(SourceError, match="only CSV"):
        InventoryManifest.parse(json.dumps({"fileFormat": "ORC", "fileSchema": "", "files": []}), where)


def test_an_athena_listing_names_bucket_key_and_size_and_a_bad_size_names_its_line() -> None:
    where = S3Location("athena", "results/q.csv")
    text = io.StringIO()
    csv.writer(text).writerows([["bucket", "key", "size"], ["logs", "a.csv", "10"], ["logs", "b.csv", "x"]])
    found = listing_objects(text.getvalue(), where)
    assert next(found) == InputObject("logs", "a.csv", 10)
    with pytest.raises(SourceError, match="line 3"):
        next(found)
    with pytest.raises(SourceError, match="no size"):
        list(listing_objects("bucket,key\nlogs,a.csv\n", where))


def test_the_execution_input_is_checked_before_anything_runs() -> None:
    job = EnrichJob.from_event(
        {
            "input": "s3://logs/access",
            "output": "s3://out/x",
            "datasets": "city,asn",
            "versions": {"city": "3"},
        }
    )
    assert job.input == S3Location("logs", "access/")
    assert job.output == S3Location("out", "x/")
    assert job.datasets == ("city", "asn")
    assert job.versions == {"city": 3}
    for bad, message in (
        ({"output": "s3://o/"}, "either 'input'"),
        ({"input": "s3://i/", "manifest": "s3://m/x.csv", "output": "s3://o/"}, "either 'input'"),
        ({"input": "s3://i/"}, "'output'"),
        ({"input": "s3://i/", "output": "s3://o/", "format": "xml"}, "format 'xml'"),
        ({"input": "/local/file", "output": "s3://o/"}, "not an s3://"),
    ):
        with pytest.raises(SourceError, match=message):
            EnrichJob.from_event(bad)


def test_the_command_writes_the_execution_input_the_state_machine_reads() -> None:
    from ipmeta_cli.enrich_jobs import execution_input
    from ipmeta_cli.main import parser

    args = parser().parse_args(
        [
            "enrich", "s3://inv/logs/manifest.json", "--manifest", "--out", "s3://out/run/",
            "--stack", "Ipmeta", "--datasets", "city,asn", "--version", "city:v12", "--column", "3",
            "--format", "parquet",
        ]
    )  # fmt: skip
    job = execution_input(args)
    assert job == {
        "manifest": "s3://inv/logs/manifest.json",
        "output": "s3://out/run/",
        "overwrite": False,
        "column": 3,
        "datasets": ["city", "asn"],
        "versions": {"city": 12},
        "format": "parquet",
    }
    # What the command writes, the state machine's first step reads back as the same job
    parsed = EnrichJob.from_event(job)
    assert parsed.manifest == S3Location("inv", "logs/manifest.json")
    assert (parsed.column, parsed.datasets, dict(parsed.versions)) == (3, ("city", "asn"), {"city": 12})
