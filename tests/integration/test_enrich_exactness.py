"""`ipmeta enrich` answers every row as `GET /v1/ip/{ip}` does, and so does the documented DuckDB join.

Two datasets on dynalite: ``asn`` (IPv4 and IPv6, gaps, a range over bogon
space, whole /8 buckets that load as a cover, empty cells), reloaded as a
*delta* version, and ``cloud``, whose ``organization`` collides with asn's.
The addresses are drawn from every one of those shapes, plus bogons,
IPv4-mapped IPv6 and invalid text. Each output row is compared with the
handler's answer for the same pinned versions: data, range, bogon flag, error.
"""

from __future__ import annotations

import csv
import ipaddress
import random
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.ips import format_address
from ipmeta.schema.settings import Settings
from ipmeta_cli.main import main
from loader.export.parquet import hex_of
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from testing.in_process_api import get

ROOT = Path(__file__).resolve().parents[2]
#: How many addresses are drawn: every shape many times over, small enough for a test.
ADDRESSES = 1500
INVALID = ["", "1.2.3", " 1.2.3.4", "01.2.3.4", "fe80::1%eth0", "not an ip", "1.2.3.4.5", "::g"]

Range = tuple[int, int, int, str]  # family, start, end, label


def v4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def v6(text: str) -> int:
    return int(ipaddress.IPv6Address(text))


def asn_release(rng: random.Random, relabel: float) -> list[tuple[int, int, int, int | None, str]]:
    """Ranges with gaps between them, a cover (3.0.0.0-4.255.255.255), bogon space, IPv6."""
    made: list[tuple[int, int, int, int | None, str]] = []
    cursor = v4("1.0.0.0")
    while cursor < v4("2.255.0.0"):
        size = rng.choice([255, 4095, 65535, 300])
        gap = rng.choice([0, 0, 256, 10_000])
        number = rng.randrange(1, 70000)
        label = f"org{number}" + ("-new" if rng.random() < relabel else "")
        made.append((4, cursor, cursor + size, None if rng.random() < 0.05 else number, label))
        cursor += size + 1 + gap
    made.append((4, v4("3.0.0.0"), v4("4.255.255.255"), 64500, ""))
    made.append((4, v4("10.1.0.0"), v4("10.1.255.255"), 64501, "private-org"))
    base = v6("2a00:1450::")
    for index in range(120):
        start = base + index * (1 << 96)
        made.append((6, start, start + (1 << 95) - 1, 15169 + index, f"v6org{index}"))
    made.append((6, v6("2001:db8::"), v6("2001:db8::ffff"), 64502, "doc-org"))
    return made


def write_asn(rows: list[tuple[int, int, int, int | None, str]], path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["start", "end", "asn", "organization"])
        for family, start, end, number, label in rows:
            writer.writerow([format_address(family, start), format_address(family, end), number or "", label])
    return path


def write_cloud(path: Path) -> Path:
    path.write_text(
        "network,cloud_provider,organization\n"
        "1.0.0.0/24,cf,Cloudflare\n"
        "1.0.4.0/22,cf,\n"
        "3.5.0.0/16,aws,Amazon\n"
        "2a00:1450:4000::/36,gcp,Google\n"
        "5.5.5.0/24,other,Only-cloud\n"
    )
    return path


def draw_addresses(rng: random.Random, release: list[tuple[int, int, int, int | None, str]]) -> list[str]:
    picks: list[str] = []
    for _ in range(ADDRESSES):
        shape = rng.random()
        family, start, end, _, _ = rng.choice(release)
        if shape < 0.45:
            picks.append(format_address(family, rng.randint(start, end)))
        elif shape < 0.6:  # just past a range: a gap, or the next range
            picks.append(
                format_address(
                    family, min(end + 1 + rng.randrange(3), (1 << (32 if family == 4 else 128)) - 1)
                )
            )
        elif shape < 0.7:
            picks.append(format_address(4, rng.randrange(1 << 32)))
        elif shape < 0.8:
            picks.append(
                rng.choice(
                    [
                        "10.0.0.1",
                        "10.1.2.3",
                        "192.168.1.1",
                        "127.0.0.1",
                        "::1",
                        "fe80::1",
                        "2001:db8::5",
                        "5.5.5.5",
                        "1.0.0.1",
                        "3.5.1.1",
                        "2a00:1450:4000::1",
                    ]
                )
            )
        elif shape < 0.85:
            picks.append(f"::ffff:{format_address(4, rng.randint(v4('1.0.0.0'), v4('4.255.255.255')))}")
        elif shape < 0.9:
            picks.append(rng.choice(INVALID))
        else:
            picks.append(format_address(6, rng.randrange(v6("2a00::"), v6("2b00::"))))
    return picks


@pytest.fixture
def two_datasets(table_environment: Settings, store: LoaderTable, tmp_path: Path) -> dict[str, Any]:
    rng = random.Random(32)
    staging = LocalStaging(tmp_path / "staging")
    first = asn_release(random.Random(1), 0.0)
    second = [row if rng.random() > 0.1 else (*row[:4], row[4] + "-changed") for row in first[:-3]]
    second = [row for index, row in enumerate(second) if index % 17] + first[-3:]
    driver.run_load([write_asn(first, tmp_path / "a1.csv")], LoadOptions(dataset="asn"), store, staging)
    delta = driver.run_load(
        [write_asn(second, tmp_path / "a2.csv")], LoadOptions(dataset="asn", delta="always"), store, staging
    )
    cloud = driver.run_load([write_cloud(tmp_path / "c.csv")], LoadOptions(dataset="cloud"), store, staging)
    meta = store.for_dataset("asn").lookup.get_version_meta(delta.version)
    assert meta is not None
    assert meta.base, "the reload must be a delta version"
    return {"addresses": draw_addresses(rng, first), "asn": delta.version, "cloud": cloud.version}


def test_every_enriched_row_equals_the_api_answer(
    two_datasets: dict[str, Any], store: LoaderTable, tmp_path: Path
) -> None:
    # Given a CSV of addresses of every shape
    addresses = two_datasets["addresses"]
    source = tmp_path / "in.csv"
    with source.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["row", "ip"])
        writer.writerows([index, ip] for index, ip in enumerate(addresses))
    # When it is enriched to Parquet, versions pinned
    pinned = f"asn:v{two_datasets['asn']},cloud:v{two_datasets['cloud']}"
    out = tmp_path / "out.parquet"
    assert main(["enrich", str(source), "--out", str(out), "--version", pinned]) == 1  # some invalid
    rows = pq.read_table(out).to_pylist()
    # Then the rows are the input's, in order, and each one is what the API answers
    assert [row["row"] for row in rows] == [str(index) for index in range(len(addresses))]
    dependencies.install(
        dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0, ranges=RangeCache(0))
    )
    try:
        counts = {"found": 0, "invalid": 0, "not found": 0}
        for row in rows:
            if not row["ip"]:  # no URL asks for a blank address: enrich calls it invalid
                assert row["ip_error"] == "IP_ADDRESS_INVALID"
                continue
            status, body = get(f"/v1/ip/{_quoted(row['ip'])}?version={pinned}")
            counts[_compare(row, status, body)] += 1
    finally:
        dependencies.install(None)
    # And every shape was there
    assert min(counts.values()) > 20, counts
    assert b'"asn": "v' in pq.read_metadata(out).metadata[b"ipmeta"]


def _quoted(ip: str) -> str:
    import urllib.parse

    return urllib.parse.quote(ip, safe="")


def _compare(row: dict[str, Any], status: int, body: dict[str, Any]) -> str:
    where = f"{row['ip']!r}: {body}"
    if status == 400:
        assert row["ip_error"] == "IP_ADDRESS_INVALID", where
        return "invalid"
    if status == 404:
        assert row["ip_error"] == _code(body), where
        assert (row["ip_range_start"], row["organization"]) == (None, None), where
        return "not found"
    assert status == 200, where
    assert row["ip_error"] is None, where
    assert row["ip_bogon"] == body["bogon"], where
    assert (row["ip_range_start"], row["ip_range_end"]) == (body["range"]["start"], body["range"]["end"]), (
        where
    )
    for name in ("asn", "organization", "cloud_provider"):
        assert row[name] == body["data"].get(name), (name, where)
    for dataset in ("asn", "cloud"):
        section = body["datasets"][dataset]["data"] or {}
        assert row[f"{dataset}__organization"] == section.get("organization"), where
    return "found"


def _code(body: dict[str, Any]) -> str:
    error = body.get("error")
    return str(error.get("code") if isinstance(error, dict) else body.get("code"))


def test_the_documented_duckdb_join_gives_the_api_answers(
    two_datasets: dict[str, Any], store: LoaderTable, tmp_path: Path
) -> None:
    import duckdb

    # Given each pinned version exported as Parquet, as docs/parquet.md says
    for dataset in ("asn", "cloud"):
        out = tmp_path / f"{dataset}.parquet"
        version = f"v{two_datasets[dataset]}"
        assert (
            main(["export", "--dataset", dataset, "--version", version, "--format", "parquet", str(out)]) == 0
        )
    # (the macros read canonical text: no mapped IPv4, nothing invalid)
    canonical = (ip for ip in two_datasets["addresses"] if ip and ip not in INVALID and "ffff:" not in ip)
    addresses = list(dict.fromkeys(canonical))
    connection = duckdb.connect()
    connection.execute("CREATE TABLE addresses (ip VARCHAR)")
    connection.executemany("INSERT INTO addresses VALUES (?)", [[ip] for ip in addresses])
    # When the documented SQL runs, as written, in the exports' folder
    for block in _duckdb_blocks():
        connection.execute(
            block.replace("'asn.parquet'", f"'{tmp_path / 'asn.parquet'}'").replace(
                "'cloud.parquet'", f"'{tmp_path / 'cloud.parquet'}'"
            )
        )
    answers = connection.execute(
        "SELECT ip, asn, organization, cloud_provider, range_start_hex, range_end_hex FROM merged_answers"
    ).fetchall()
    # Then each address answers as the API does
    pinned = f"asn:v{two_datasets['asn']},cloud:v{two_datasets['cloud']}"
    dependencies.install(
        dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=0, ranges=RangeCache(0))
    )
    try:
        found = 0
        for ip, number, organization, provider, start_hex, end_hex in answers:
            status, body = get(f"/v1/ip/{_quoted(ip)}?version={pinned}")
            if status == 404:
                assert (start_hex, organization) == (None, None), (ip, body)
                continue
            assert status == 200, (ip, body)
            found += 1
            data = body["data"]
            assert (number, organization, provider) == (
                data.get("asn"),
                data.get("organization"),
                data.get("cloud_provider"),
            ), (ip, body)
            family = 6 if ":" in ip else 4
            expected = (
                hex_of(family, _value(body["range"]["start"])),
                hex_of(family, _value(body["range"]["end"])),
            )
            assert (start_hex, end_hex) == expected, (ip, body)
    finally:
        dependencies.install(None)
    assert len(answers) == len(addresses)
    assert found > 100


def _value(text: str) -> int:
    return int(ipaddress.ip_address(text))


def _duckdb_blocks() -> list[str]:
    text = (ROOT / "docs" / "parquet.md").read_text(encoding="utf-8")
    section = text.split("## DuckDB", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)


def test_an_unknown_dataset_or_version_in_the_table_is_refused_before_reading(
    table_environment: Settings, store: LoaderTable, tmp_path: Path
) -> None:
    # Given one dataset with one version
    staging = LocalStaging(tmp_path / "staging")
    driver.run_load([write_cloud(tmp_path / "c.csv")], LoadOptions(dataset="cloud"), store, staging)
    source = tmp_path / "in.csv"
    source.write_text("ip\n5.5.5.5\n")
    out = tmp_path / "out.csv"
    # When enrich names another dataset, or a version that was never loaded
    assert main(["enrich", str(source), "--out", str(out), "--datasets", "city"]) == 2
    assert main(["enrich", str(source), "--out", str(out), "--version", "v7"]) == 2
    # Then nothing is written; and the version that exists answers
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.csv", "in.csv", "staging"]
    assert main(["enrich", str(source), "--out", str(out), "--version", "v1"]) == 0
    assert "Only-cloud" in out.read_text()
