"""Reading a loaded version back out of the table, in order, each range once; and ``ipmeta export``.

The table is moto's DynamoDB, laid out as the loader writes it: one item per
bucket a range touches (each carrying the whole range's bounds), a cover's
head item, the cover list and the manifest.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import maxminddb
import pytest
from moto import mock_aws

from ipmeta.schema import keys
from ipmeta.schema.ips import Family, format_address
from ipmeta.schema.records import Cover, VersionMeta, VersionStatus
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME
from ipmeta_cli import exporting
from loader.errors import LoadNotFound
from loader.export.version_ranges import iter_version_ranges
from loader.records import Manifest
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

VERSION = 3


def v4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def v6(text: str) -> int:
    return int(ipaddress.IPv6Address(text))


#: (family, start, end, data): what the version holds, in order.
RANGES: list[tuple[Family, int, int, dict[str, Any]]] = [
    (4, v4("1.0.0.0"), v4("1.0.0.255"), {"asn": Decimal("13335"), "lat": Decimal("-27.4767")}),
    (4, v4("1.255.255.0"), v4("2.0.0.255"), {"asn": Decimal("1"), "name": "across a /8 edge"}),
    (4, v4("9.255.255.0"), v4("13.255.255.255"), {"asn": Decimal("2"), "name": "a cover, with a head piece"}),
    (4, v4("14.0.0.0"), v4("14.0.0.9"), {"asn": Decimal("3"), "flag": True}),
    (6, v6("2001:200::"), v6("2001:200::ffff"), {"asn": Decimal("2500")}),
    (6, v6("2a00:1450::"), v6("2a00:1450:ffff::"), {"asn": Decimal("15169"), "blob": b"\x01"}),
]
COVER = Cover(4, 10, 13, v4("9.255.255.0"), v4("13.255.255.255"), RANGES[2][3])


def stored_items() -> Iterator[dict[str, Any]]:
    """The items a load writes for RANGES: a piece per bucket; of a cover's whole buckets, only the head."""
    for family, start, end, data in RANGES:
        for piece in keys.split_at_buckets(family, start, end):
            if family == 4 and COVER.first_bucket < piece.bucket <= COVER.last_bucket:
                continue  # whole buckets of the cover have no item, only the head at its first bucket
            yield {
                keys.PARTITION_KEY: keys.key_space().partition_key(VERSION, family, piece.bucket),
                keys.SORT_KEY: keys.encode_sort_key_value(family, piece.first),
                keys.ATTR_START: format_address(family, start),
                keys.ATTR_END: format_address(family, end),
                keys.ATTR_DATA: data,
            }


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoaderTable]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv(ENV_DYNAMODB_ENDPOINT, raising=False)
    with mock_aws():
        store = LoaderTable(boto3.client("dynamodb", region_name="us-east-1"), "ipmeta-test")
        create_table_if_missing(store.client, store.table_name)
        items = list(stored_items())
        for first in range(0, len(items), 25):
            store.writer.put(items[first : first + 25])
        partitions = {str(item[keys.PARTITION_KEY]) for item in items}
        # Manifest order is not address order: buckets 14 and 2 before 1, IPv6 first
        manifest = dict.fromkeys(sorted(partitions, reverse=True), 1)
        manifest[keys.key_space().covers_partition_key(VERSION)] = store.covers.put(VERSION, [COVER])
        store.manifests.put(VERSION, Manifest(manifest))
        store.versions.put_meta(
            VersionMeta(
                version=VERSION,
                status=VersionStatus.ACTIVE,
                sha256="ab" * 32,
                column_types={"asn": "N", "lat": "N", "name": "S", "flag": "native", "blob": "native"},
                created_at=1_780_000_000,
                items=len(items),
                covers=1,
            )
        )
        store.versions.activate(VERSION, expected_current=None)
        yield store


def test_a_version_reads_back_in_order_each_range_once_covers_merged(table: LoaderTable) -> None:
    # Given the table has the cover's head item and the cover list, and a range split at a /8 edge
    covers = table.lookup.read_covers(VERSION)
    # When the version is read back
    ranges = list(iter_version_ranges(table, VERSION, covers))
    # Then every range comes once, in (family, start) order, with its exact data
    assert [(item.family, item.start, item.end, dict(item.data)) for item in ranges] == RANGES
    assert isinstance(ranges[0].data["lat"], Decimal)
    assert ranges[-1].data["blob"] == b"\x01"


def test_covers_alone_fill_in_what_has_no_items(table: LoaderTable) -> None:
    # A cover over whole buckets whose head item is missing still comes out, from the list
    ranges = list(
        iter_version_ranges(table, VERSION, [Cover(4, 200, 201, v4("200.0.0.0"), v4("201.255.255.255"), {})])
    )
    assert (ranges[-3].start, ranges[-3].end) == (v4("200.0.0.0"), v4("201.255.255.255"))


def test_a_version_without_a_manifest_is_not_found(table: LoaderTable) -> None:
    with pytest.raises(LoadNotFound, match="v9 has no manifest"):
        list(iter_version_ranges(table, 9))


def run_export(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ipmeta")
    commands = parser.add_subparsers(dest="command", required=True)
    exporting.register(commands)
    args = parser.parse_args(["export", *argv])
    return int(args.run(args))


def test_the_export_command_writes_the_active_version_as_mmdb(
    table: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_TABLE_NAME, table.table_name)
    out = tmp_path / "v3.mmdb"
    assert run_export("--format", "mmdb", "--table", table.table_name, str(out)) == 0
    assert "exported v3 to" in capsys.readouterr().out
    with maxminddb.open_database(str(out)) as reader:
        assert reader.get("1.0.0.1") == {"asn": 13335, "lat": -27.4767}
        assert reader.get("2.0.0.1") == {"asn": 1, "name": "across a /8 edge"}
        assert reader.get("11.1.2.3") == {"asn": 2, "name": "a cover, with a head piece"}
        assert reader.get("14.0.0.10") is None
        assert reader.get("2a00:1450::1") == {"asn": 15169, "blob": b"\x01"}
        metadata = reader.metadata()
    assert metadata.description == {
        "en": f"ipmeta dataset v3; source sha256 {'ab' * 32}; loaded 2026-05-28T20:26:40Z"
    }
    assert metadata.build_epoch == 1_780_000_000


def test_the_export_command_writes_csv_and_refuses_unknown_versions(
    table: LoaderTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "v3.csv"
    assert run_export("--format", "csv", "--version", "v3", "--table", table.table_name, str(out)) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "start,end,asn,lat,name,flag,blob"
    assert lines[1] == "1.0.0.0,1.0.0.255,13335,-27.4767,,,"
    assert len(lines) == 1 + len(RANGES)
    with pytest.raises(LoadNotFound, match="v7 is unknown"):
        run_export("--format", "csv", "--version", "v7", "--table", table.table_name, str(out))
