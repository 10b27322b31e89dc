"""Acceptance on the real ASN dataset: 20 values' ranges, every page, against the CSV.

To keep ``make test`` lean the load holds only the rows it needs: every row of
the 20 values (the 8 most frequent, 12 picked at random), every row that
overlaps one of them (so last-wins resolves as in the full file), and 5,000
other rows as company. The oracle knows nothing of the loader: a value's
ranges are its rows minus the addresses later rows of the file take over,
sorted by (family, start). ``bench/reverse.py`` runs the same check on the full
v4+v6 load.
"""

from __future__ import annotations

import csv
import ipaddress
import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta_cli.demo import ASN_FILES
from ipmeta_cli.server import LocalLambdaContext, proxy_event
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.records import LoadStatus
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing

HOTTEST, RANDOM_VALUES, COMPANY_ROWS = 8, 12, 5000


@dataclass(frozen=True)
class Row:
    position: int
    family: int
    start: int
    end: int
    asn: str
    line: list[str]


def read_rows(paths: tuple[Path, ...] = ASN_FILES) -> list[Row]:
    rows: list[Row] = []
    for path in paths:
        with path.open(newline="") as handle:
            for line in csv.reader(handle):
                first, last = ipaddress.ip_address(line[0]), ipaddress.ip_address(line[1])
                rows.append(Row(len(rows), first.version, int(first), int(last), line[2], line))
    return rows


def overlaps(rows: list[Row]) -> dict[int, list[Row]]:
    """Each row's overlapping rows (a sweep: the file has almost none)."""
    found: dict[int, list[Row]] = {}
    open_rows: list[Row] = []
    for row in sorted(rows, key=lambda r: (r.family, r.start)):
        open_rows = [other for other in open_rows if other.family == row.family and other.end >= row.start]
        for other in open_rows:
            found.setdefault(row.position, []).append(other)
            found.setdefault(other.position, []).append(row)
        open_rows.append(row)
    return found


def expected_ranges(value: str, rows: list[Row], overlapping: dict[int, list[Row]]) -> list[tuple[str, str]]:
    """The value's rows minus what later rows take (last wins), in (family, start) order."""
    pieces: list[tuple[int, int, int]] = []
    for row in rows:
        if row.asn != value:
            continue
        remaining = [(row.start, row.end)]
        for later in (other for other in overlapping.get(row.position, []) if other.position > row.position):
            remaining = [
                part
                for first, last in remaining
                for part in ((first, min(last, later.start - 1)), (max(first, later.end + 1), last))
                if part[0] <= part[1]
            ]
        pieces.extend((row.family, first, last) for first, last in remaining)
    return [
        (str(ipaddress.ip_address(first)), str(ipaddress.ip_address(last)))
        for family, first, last in sorted(pieces)
        if family in (4, 6)
    ]


def pick_values(rows: list[Row], seed: int = 20) -> list[str]:
    counts = Counter(row.asn for row in rows)
    hottest = [value for value, _ in counts.most_common(HOTTEST)]
    others = sorted(set(counts) - set(hottest))
    return hottest + random.Random(seed).sample(others, RANDOM_VALUES)


def get(path: str) -> tuple[int, dict[str, Any]]:
    from ipmeta.api.handler import handler

    response = handler(proxy_event("GET", path, {}, b"", "127.0.0.1"), LocalLambdaContext())
    return int(response["statusCode"]), json.loads(response["body"])


def list_all(value: str, limit: int, field: str = "asn") -> tuple[list[tuple[str, str]], int]:
    found: list[tuple[str, str]] = []
    token: str | None = None
    pages = 0
    while True:
        path = f"/v1/ranges?field={field}&value={value}&limit={limit}" + (f"&next={token}" if token else "")
        status, body = get(path)
        assert status == 200, body
        found.extend((entry["start"], entry["end"]) for entry in body["ranges"])
        pages += 1
        token = body["next"]
        if token is None:
            return found, pages


@pytest.fixture(scope="module")
def asn_subset(
    dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Row], LoaderTable]]:
    rows = read_rows()
    values = set(pick_values(rows))
    overlapping = overlaps(rows)
    wanted = {row.position for row in rows if row.asn in values}
    wanted |= {other.position for position in list(wanted) for other in overlapping.get(position, [])}
    rest = [row.position for row in rows if row.position not in wanted]
    wanted |= set(random.Random(5).sample(rest, COMPANY_ROWS))
    folder = tmp_path_factory.mktemp("asn-subset")
    path = folder / "asn-subset.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(row.line for row in rows if row.position in wanted)  # file order kept
    settings = Settings(
        table_name="ipmeta-reverse-asn", dynamodb_endpoint=dynalite_endpoint, pointer_cache_seconds=0
    )
    store = LoaderTable.from_settings(settings)
    create_table_if_missing(store.client, store.table_name)
    options = LoadOptions(columns=["start", "end", "asn", "organization"], index_field="asn")
    result = driver.run_load([path], options, store, LocalStaging(folder / "staging"))
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
    entries = list(store.lookup.scan_index(keys.RANGES_BY_VALUE))
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
