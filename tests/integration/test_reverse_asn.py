"""Acceptance on the real ASN dataset: 20 values' ranges, every page, against the CSV.

To keep ``make test`` lean the load holds only the rows it needs: every row of
the 20 values (the 8 most frequent, 12 picked at random), every row that
overlaps one of them (so last-wins resolves as in the full file), and 5,000
other rows as company. The oracle (``testing.asn_reverse``) knows nothing of
the loader: a value's ranges are its rows minus the addresses later rows of the
file take over, sorted by (family, start). ``bench/reverse.py`` runs the same
check on the full v4+v6 load.
"""

from __future__ import annotations

import csv
import ipaddress
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from ipmeta.api import dependencies
from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.records import LoadStatus
from loader.settings import default_workers
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.asn_reverse import HOTTEST, expected_ranges, overlaps, pick_values, read_rows
from testing.in_process_api import list_all
from testing.index_scan import scan_index
from testing.row_scan import Row

COMPANY_ROWS = 5000


@pytest.fixture(scope="module")
def asn_subset(
    dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Row], LoaderTable]]:
    rows = read_rows()
    values = set(pick_values(rows))
    overlapping = overlaps(rows)
    wanted = {row.position for row in rows if row.values["asn"] in values}
    wanted |= {other.position for position in list(wanted) for other in overlapping.get(position, [])}
    rest = [row.position for row in rows if row.position not in wanted]
    wanted |= set(random.Random(5).sample(rest, COMPANY_ROWS))
    folder = tmp_path_factory.mktemp("asn-subset")
    path = folder / "asn-subset.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(  # file order kept
            [ipaddress.ip_address(row.start), ipaddress.ip_address(row.end), *row.values.values()]
            for row in rows
            if row.position in wanted
        )
    settings = Settings(
        table_name="ipmeta-reverse-asn", dynamodb_endpoint=dynalite_endpoint, pointer_cache_seconds=0
    )
    store = LoaderTable.from_settings(settings)
    create_table_if_missing(store.client, store.table_name)
    options = LoadOptions(columns=["start", "end", "asn", "organization"], index_field="asn")
    staging = LocalStaging(folder / "staging")
    result = driver.run_load([path], options, store, staging, workers=default_workers())
    assert result.status == LoadStatus.ACTIVATED
    dependencies.install(dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0.0))
    yield [row for row in rows if row.position in wanted], store
    dependencies.install(None)


def test_twenty_asns_page_to_exactly_their_csv_ranges(asn_subset: tuple[list[Row], LoaderTable]) -> None:
    rows, store = asn_subset
    overlapping = overlaps(rows)
    values = pick_values(read_rows())
    meta = store.lookup.get_version_meta(store.lookup.read_active_version() or 0)
    assert meta is not None
    assert meta.value_index is not None
    assert meta.value_index.own_shards is not None
    shards = keys.decode_own_shards(meta.value_index.own_shards)
    # The hottest values really are spread over many shards
    assert min(shards[keys.value_hash_text(value)] for value in values[:HOTTEST]) >= 8
    for number, value in enumerate(values):
        limit = 1000 if number < HOTTEST else random.Random(number).choice([1, 2, 7, 50, 333])
        found, pages = list_all(value, limit)
        expected = expected_ranges(value, rows, overlapping)
        assert expected, value
        assert len(found) == len(set(found)), f"AS{value}: duplicates"
        assert found == expected, f"AS{value}: {len(found)} found, {len(expected)} expected"
        assert pages <= len(expected) // limit + 2


def test_every_index_key_is_within_twice_the_mean_key(asn_subset: tuple[list[Row], LoaderTable]) -> None:
    _, store = asn_subset
    # Given the index itself, read key by key (not through the API)
    entries = list(scan_index(store.lookup, keys.RANGES_BY_VALUE))
    per_key = Counter(entry[keys.GSI1_PARTITION_KEY] for entry in entries)
    per_value = Counter(entry[keys.ATTR_DATA]["asn"] for entry in entries)
    # Then the largest key, shard or pack, holds at most twice the mean key
    assert max(per_key.values()) <= 2 * len(entries) / len(per_key)
    # Where one key per value would put the hottest value far beyond it
    assert max(per_value.values()) > 50 * len(entries) / len(per_value)
    # And the hottest values have several keys of their own, the rarest share packs
    counts = per_value.most_common()
    own_keys = Counter(key.split("#")[2] for key in per_key if key.split("#")[2])
    assert own_keys[str(counts[0][0])] >= 8
    assert own_keys[str(counts[-1][0])] == 0
