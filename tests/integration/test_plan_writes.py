"""`ipmeta plan` counts every write a load sends: its items, and its reverse-lookup index entries.

Given a CSV indexed by ``asn`` with a flag column, the plan's write units are checked against the
writes the same load sends to DynamoDB, counted at botocore (``counted_store``): each item takes
one write unit per KB begun, and each item carrying an index's keys one more write, of its
projected size, in that GSI (DynamoDB bills GSI writes like table writes). In three regions every
region's GSIs are written again by replication, and an indexed reload is written full. The reads
of the version's count (home's activation, each region's arrival check) are checked the same way,
against the ``Select=COUNT`` Queries the activation sends.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from ipmeta.schema import keys
from ipmeta_cli.main import main
from loader.formats import stored_bytes
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter

INDEXING = ["--index-field", "asn", "--flag-column", "rule"]
REGIONS = 3


def indexed_csv(path: Path, rows: int = 400) -> Path:
    lines = ["start,end,asn,org,rule"]
    for row in range(rows):
        start = (11 << 24) + row * 256
        rule = "drop" if row % 7 == 0 else ""
        lines.append(f"{start},{start + 255},{64_512 + row % 9},Org {row % 9},{rule}")
    path.write_text("\n".join(lines) + "\n")
    return path


def item_bytes(item: dict[str, Any], names: tuple[str, ...] | None = None) -> int:
    """DynamoDB's size of ``item`` (its ``names`` only, when given): names and values."""
    return sum(
        len(name.encode()) + stored_bytes(value) for name, value in item.items() if not names or name in names
    )


def plan_then_load(
    counted_store: tuple[LoaderTable, RequestCounter],
    path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, Any]:
    """The plan of ``path``'s indexed load in ``REGIONS`` regions; then the load, its requests counted."""
    store, counter = counted_store
    assert main(["plan", str(path), *INDEXING, "--workers", "1", "--regions", str(REGIONS), "--json"]) == 0
    plan: dict[str, Any] = json.loads(capsys.readouterr().out)
    counter.reset()
    driver.run_load(
        [path], LoadOptions(index_field="asn", flag_column="rule"), store, LocalStaging(tmp_path / "staging")
    )
    return plan


def written_items(counter: RequestCounter) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item the load's BatchWriteItem requests put, by key, as the table holds it."""
    deserialize = TypeDeserializer().deserialize
    written: dict[tuple[str, str], dict[str, Any]] = {}
    for operation, body in counter.calls:
        if operation != "BatchWriteItem":
            continue
        for requests in body["RequestItems"].values():
            for request in requests:
                if wire := request.get("PutRequest", {}).get("Item"):
                    item = {name: deserialize(value) for name, value in wire.items()}
                    written[(str(item[keys.PARTITION_KEY]), str(item[keys.SORT_KEY]))] = item
    return written


def counted_write_units(counter: RequestCounter) -> tuple[int, int, int]:
    """(items, the items' write units, the GSI entries' write units) of the load's range items."""
    written = {key: item for key, item in written_items(counter).items() if keys.ATTR_START in item}
    item_units = sum(math.ceil(item_bytes(item) / 1024) for item in written.values())
    index_units = 0
    for index in (keys.RANGES_BY_VALUE, keys.FLAGGED):
        projected = (keys.PARTITION_KEY, keys.SORT_KEY, index.partition_key, index.sort_key, *index.projected)
        entries = [item for item in written.values() if index.partition_key in item]
        assert entries, index
        index_units += sum(math.ceil(item_bytes(item, projected) / 1024) for item in entries)
    return len(written), item_units, index_units


def test_the_plans_write_units_are_the_writes_a_load_sends_in_every_region(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, counter = counted_store
    # Given the plan of an indexed load served from three regions, when the same load runs
    plan = plan_then_load(counted_store, indexed_csv(tmp_path / "indexed.csv"), tmp_path, capsys)
    items, item_units, index_units = counted_write_units(counter)
    # Then the plan's writes are the load's: its items and every GSI entry, once in each region
    assert plan["load"]["items"] == items
    assert index_units > 0
    assert plan["load"]["cost"]["write_units"] == item_units + index_units
    assert plan["regions"]["load"]["write_units"] == REGIONS * (item_units + index_units)


def counted_read_units(counter: RequestCounter) -> tuple[float, float, int]:
    """(the table's, the GSIs' read units, index keys) of the load's ``Select=COUNT`` Queries: each
    billed on the items it counted, their sizes summed and rounded up to 4 KB, a unit per 4 KB read
    consistently and half a unit eventually consistent (a GSI)."""
    written = written_items(counter)
    counts = [
        body for operation, body in counter.calls if operation == "Query" and body.get("Select") == "COUNT"
    ]
    table = index_units = 0.0
    index_keys = 0
    for query in counts:
        (partition_key,) = (value["S"] for value in query["ExpressionAttributeValues"].values())
        name = query.get("IndexName")
        if name is None:
            assert query["ConsistentRead"] is True
            read = sum(item_bytes(item) for (pk, _), item in written.items() if pk == partition_key)
            table += math.ceil(read / 4096)
            continue
        (index,) = (index for index in keys.INDEXES if index.name == name)
        projected = (keys.PARTITION_KEY, keys.SORT_KEY, index.partition_key, index.sort_key, *index.projected)
        entries = [item for item in written.values() if item.get(index.partition_key) == partition_key]
        index_units += 0.5 * math.ceil(sum(item_bytes(item, projected) for item in entries) / 4096)
        index_keys += 1
    return table, index_units, index_keys


def test_the_plan_prices_the_counts_home_and_every_region_read(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, counter = counted_store
    # Given the plan of an indexed load served from three regions, when the same load runs (its
    # activation counts the version: its items, and its index entries)
    path = indexed_csv(tmp_path / "indexed.csv", rows=3_000)
    plan = plan_then_load(counted_store, path, tmp_path, capsys)
    table, index, index_keys = counted_read_units(counter)
    count = plan["load"]["count_reads"]
    # Then the plan's count of the table is what the activation's consistent Queries are billed
    assert table > 0
    assert count["table_read_units"] == table
    # And its count of the GSIs, a Query of each index key, is theirs
    assert index_keys == plan["load"]["index_keys"]
    assert index > 0
    assert count["index_read_units"] == index
    # And each region counts it again: home's activation and each replica's arrival check
    regions = plan["regions"]["load"]
    assert regions["count_read_units_per_region"] == count["read_units"]
    assert regions["count_reads_usd"] == pytest.approx(REGIONS * count["read_usd"], abs=1e-4)


def test_an_indexed_reload_is_priced_written_full(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    previous = indexed_csv(tmp_path / "previous.csv")
    current = indexed_csv(tmp_path / "current.csv", rows=401)  # one range more: a 0.25% delta
    argv = ["plan", str(current), "--previous", str(previous), "--workers", "1", "--regions", str(REGIONS)]
    assert main([*argv, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["reload"]["auto_writes"] == "delta"  # an unindexed load would write a delta
    assert main([*argv, *INDEXING, "--json"]) == 0
    indexed = json.loads(capsys.readouterr().out)
    month = indexed["reload"]["following_every_release"]
    assert indexed["reload"]["auto_writes"] == "full"
    assert month["releases_per_full_load"] == 1
    assert month["delta_usd_per_month"] == month["full_usd_per_month"]
    assert indexed["regions"]["reload"]["releases_per_full_load"] == 1
    assert indexed["regions"]["reload"]["breakdown"]["diff_reads"] == 0


#: How far above the count sized item by item by the dry run the model of it may go (no item
#: sizes: items of the mean size, each index entry's keys at ``INDEX_KEY_BYTES`` on its item).
#: The model never goes below it; here, items of 74 bytes whose index keys take 60, it goes 29%
#: above: the keys' estimate (96 bytes, room for a packed value's hash and a long value) over
#: items this small is the worst case, and the share shrinks as items grow.
FALLBACK_TOLERANCE = 0.35


def test_the_fallback_count_of_an_indexed_load_is_the_dry_runs_within_a_stated_tolerance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from loader.planning.costs import IndexWrites, count_read_costs

    # Given the plan of an indexed load, its count sized from the dry run's own items
    path = indexed_csv(tmp_path / "indexed.csv", rows=3_000)
    assert main(["plan", str(path), *INDEXING, "--workers", "1", "--json"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    sized = load["count_reads"]
    # When the same version is priced by the model alone, as the plan does without dry-run sizes
    index = IndexWrites(load["index_entries"], load["index_entry_bytes"], load["index_keys"])
    model = count_read_costs(None, items=load["items"], item_bytes=load["item_bytes"], index=index)
    # Then its table reads count the index keys each item carries: never below the sized ones
    sized_table = sized["table_read_units"]
    assert sized_table > 0
    assert sized_table <= model["table_read_units"] <= (1 + FALLBACK_TOLERANCE) * sized_table
    # And the index reads (each key rounded up once, an upper bound) are not below them
    assert sized["index_read_units"] <= model["index_read_units"]


def test_an_item_its_index_keys_push_over_1_kb_is_planned_at_two_write_units(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one flagged, indexed range whose item, padded by its org, is just under 1 KB before
    # the load gives it its index keys (the dry run's size of it, sized once unpadded)
    def one_row(padding: int) -> Path:
        path = tmp_path / f"padded{padding}.csv"
        path.write_text(f"start,end,asn,org,rule\n11.0.0.0,11.0.0.255,64512,{'x' * (1 + padding)},drop\n")
        return path

    assert main(["plan", str(one_row(0)), *INDEXING, "--workers", "1", "--json"]) == 0
    unpadded = json.loads(capsys.readouterr().out)["load"]["item_bytes"]
    padding = 1024 - 8 - round(unpadded)
    # When it is planned, then loaded
    plan = plan_then_load(counted_store, one_row(padding), tmp_path, capsys)
    # Then the item as written is over 1 KB, though it was under before its keys
    assert plan["load"]["item_bytes"] <= 1024
    written = [item for item in written_items(counted_store[1]).values() if keys.ATTR_START in item]
    assert len(written) == 1
    assert item_bytes(written[0]) > 1024
    # And the plan bills it the two write units the load's request takes, its GSI entries apart
    items, item_units, index_units = counted_write_units(counted_store[1])
    assert (items, item_units) == (1, 2)
    assert plan["load"]["cost"]["write_units"] == item_units + index_units


def edge_crossing_csv(path: Path) -> Path:
    """Indexed, flagged ranges that cross bucket edges: /8s' tails into the next /8, runs of whole
    /8s (covers) continuing a range begun mid-bucket, and small ranges between them."""
    lines = ["start,end,asn,org,rule"]
    for block in range(8):
        base = (20 + 6 * block) << 24
        lines.append(f"{base + 256},{base + (1 << 24) + 511},{64_600 + block},Cross {block},drop")
        lines.append(f"{base + (1 << 24) + 512},{base + (4 << 24) + 99},{64_700 + block},Span {block},")
        lines.extend(
            f"{base + (4 << 24) + 100 + 256 * row},{base + (4 << 24) + 355 + 256 * row},{64_800 + row},Small,"
            + ("drop" if row % 3 == 0 else "")
            for row in range(6)
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_census_counts_the_index_entries_the_load_writes_when_ranges_cross_partitions(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path
) -> None:
    store, counter = counted_store
    # Given ranges that run on across bucket edges, cut into many small partitions, so that many
    # ranges begin in one partition (or a cover) and continue in the next
    options = LoadOptions(index_field="asn", flag_column="rule", partition_rows=3)
    # When the load runs (home's activation counts the GSIs against the census before it switches)
    result = driver.run_load(
        [edge_crossing_csv(tmp_path / "crossing.csv")], options, store, LocalStaging(tmp_path / "staging")
    )
    # Then it activates, and the census is exactly the entries the items carry: one per range
    assert result.status == "activated"
    written = written_items(counter).values()
    manifest = store.manifests.get(int(str(result.version).lstrip("v")))
    assert manifest is not None
    for index in (keys.RANGES_BY_VALUE, keys.FLAGGED):
        carried = sum(1 for item in written if index.partition_key in item)
        assert manifest.indexes[index.name].entries == carried
    assert manifest.indexes[keys.RANGES_BY_VALUE.name].entries == 8 * 8


def test_the_load_report_shows_the_write_units_the_load_sent(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path
) -> None:
    store, counter = counted_store
    # Given an indexed, flagged load, its requests counted at botocore
    path = indexed_csv(tmp_path / "indexed.csv")
    counter.reset()
    result = driver.run_load(
        [path], LoadOptions(index_field="asn", flag_column="rule"), store, LocalStaging(tmp_path / "staging")
    )
    items, item_units, index_units = counted_write_units(counter)
    # Then its report shows what it wrote: its items' write units, index keys included, and
    # its GSI entries', the same as the requests DynamoDB billed
    report = result.report.to_dict()
    assert report["items_written"] == items
    assert index_units > 0
    assert report["index_write_units"] == index_units
    assert report["write_units"] == item_units + index_units
    # And the record of the load in the table says the same
    record = store.loads.get(result.version)
    assert record is not None
    assert record.report.write_units == item_units + index_units
    # And the summary a person reads prints them
    from ipmeta_cli.loading import summarize

    outcome = {"report": report, "version": result.load_id, "status": "activated", "report_path": "-"}
    printed = f"write units {item_units + index_units:,} (index keys included), {index_units:,} of them GSI"
    assert printed in summarize(outcome)
