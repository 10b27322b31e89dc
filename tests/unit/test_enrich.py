"""The enrich engine on files: the sort-merge against a brute-force scan, parts, and every bad input.

Snapshots are written by the Parquet export from ranges made here; inputs are
files in a temporary folder (and one S3 object, on moto's server, read through
pyarrow's own S3 client as the task on AWS reads it). Each refusal is checked
for its message and for leaving nothing at the output location.
"""

from __future__ import annotations

import gzip
import io
import ipaddress
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.ips import Address, format_address
from ipmeta_cli.main import main
from loader.enrich import job, parts
from loader.enrich import snapshot as snapshot_module
from loader.enrich.job import Output, enrich_part
from loader.enrich.parts import EnrichInputError, Part, read_chunks
from loader.enrich.snapshot import Snapshot, load_dataset_snapshot
from loader.export import parquet as parquet_export
from loader.export.files import ExportRange
from loader.export.parquet import SnapshotInfo, write_parquet
from loader.formats.text import MAX_RECORD_BYTES


def ip(text: str) -> int:
    return int(ipaddress.ip_address(text))


RANGES = [
    ExportRange(4, ip("1.0.0.0"), ip("1.0.0.255"), {"asn": 13335, "org": "CF"}),
    ExportRange(4, ip("8.8.0.0"), ip("8.9.255.255"), {"asn": 15169, "org": "G"}),
    # Across many /16 buckets: one range, many bucket rows
    ExportRange(4, ip("20.0.0.0"), ip("20.3.255.255"), {"asn": 8075, "org": "MS"}),
    ExportRange(
        6, ip("2001:4860::"), ip("2001:4860:ffff:ffff:ffff:ffff:ffff:ffff"), {"asn": 15169, "org": "G6"}
    ),
    # Ends in zero bytes, which numpy's S16 drops from its values: the merge must not care
    ExportRange(6, ip("2a00::"), ip("2a00::ff00"), {"asn": 1, "org": None}),
]


@pytest.fixture
def snapshot(tmp_path: Path) -> Snapshot:
    path = tmp_path / "asn.parquet"
    write_parquet(RANGES, str(path), SnapshotInfo("asn", 3, 0, {"asn": "N", "org": "S"}))
    return Snapshot((load_dataset_snapshot(str(path)),))


def write_csv(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def left_behind(folder: Path, *inputs: Path) -> list[str]:
    """What a refused job left in ``folder`` besides its inputs and snapshots."""
    return sorted(p.name for p in folder.iterdir() if p not in inputs and not p.name.endswith("asn.parquet"))


# -- answers -----------------------------------------------------------------------------------


def brute_force(value: int, family: int) -> ExportRange | None:
    return next((r for r in RANGES if r.family == family and r.start <= value <= r.end), None)


addresses = st.one_of(
    st.integers(ip("0.255.255.0"), ip("21.0.0.0")).map(lambda v: str(ipaddress.IPv4Address(v))),
    st.integers(ip("2001:4860::") - 5, ip("2001:4861::") + 5).map(lambda v: str(ipaddress.IPv6Address(v))),
    st.integers(ip("2a00::") - 3, ip("2a00::ff02")).map(lambda v: str(ipaddress.IPv6Address(v))),
    st.sampled_from(["", "x", "1.2.3", "010.0.0.1", "::ffff:8.8.8.8", "10.0.0.1", "::1"]),
)


@settings(max_examples=30, deadline=None)
@given(picked=st.lists(addresses, min_size=1, max_size=200))
def test_each_row_gets_the_range_a_scan_finds_in_input_order(
    tmp_path_factory: Any, picked: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("merge")
    path = folder / "asn.parquet"
    write_parquet(RANGES, str(path), SnapshotInfo("asn", 3, 0, {"asn": "N", "org": "S"}))
    snapshot = Snapshot((load_dataset_snapshot(str(path)),))
    source = write_csv(folder / "in.csv", ["n,ip", *(f'{n},"{text}"' for n, text in enumerate(picked))])
    # When a small chunk size makes the merge run many times
    summary = enrich_part(Part(str(source)), snapshot, Output(str(folder / "out.parquet")), chunk_rows=7)
    rows = pq.read_table(folder / "out.parquet").to_pylist()
    # Then every row is in place, with what a scan of the ranges finds
    assert [row["n"] for row in rows] == [str(n) for n in range(len(picked))]
    invalid = 0
    for row in rows:
        try:
            address = ipaddress.ip_address(row["ip"])
        except ValueError:
            address = None
        if address is None or row["ip"] == "010.0.0.1":
            invalid += 1
            assert row["ip_error"] == "IP_ADDRESS_INVALID"
            continue
        mapped = getattr(address, "ipv4_mapped", None)
        family, value = (4, int(mapped)) if mapped else (address.version, int(address))
        found = brute_force(value, family)
        assert row["org"] == (found.data["org"] if found else None)
        assert (row["ip_range_start"], row["ip_range_end"]) == (
            (format_address(family, found.start), format_address(family, found.end))
            if found
            else (None, None)
        )
        assert row["ip_bogon"] == is_bogon(Address(family, value))  # type: ignore[arg-type]
        if found is None:
            assert row["ip_error"] in ("IP_ADDRESS_NOT_FOUND", "IP_ADDRESS_RESERVED")
    assert summary.invalid_rows == invalid
    assert summary.rows == len(picked)


#: IPv6 ranges of a few addresses each, several within one /64, one across two /64s
_BASE = ip("2a01:4f8::")
_NARROW = [
    ExportRange(6, _BASE + low, _BASE + high, {"asn": n, "org": f"N{n}"})
    for n, (low, high) in enumerate(
        [
            (0, 3),
            (4, 4),
            (9, 15),
            (1 << 40, (1 << 40) + 7),
            ((1 << 64) - 2, (1 << 64) + 1),
            ((1 << 64) + 9, (1 << 64) + 9),
        ]
    )
]


@settings(max_examples=20, deadline=None)
@given(offsets=st.lists(st.integers(-3, (1 << 64) + 12), min_size=1, max_size=120))
def test_ipv6_ranges_within_one_64_bit_half_are_found_as_a_scan_finds_them(
    tmp_path_factory: Any, offsets: list[int]
) -> None:
    # Given ranges narrower than a /64 (the search goes over the starts' 64-bit halves)
    folder = tmp_path_factory.mktemp("narrow")
    write_parquet(_NARROW, str(folder / "narrow.parquet"), SnapshotInfo("n", 1, 0, {"asn": "N", "org": "S"}))
    snapshot = Snapshot((load_dataset_snapshot(str(folder / "narrow.parquet")),))
    spaced = [*offsets, *(r.start - _BASE + d for r in _NARROW for d in (-1, 0, 1))]
    source = write_csv(folder / "in.csv", ["ip", *(str(ipaddress.IPv6Address(_BASE + o)) for o in spaced)])
    enrich_part(Part(str(source)), snapshot, Output(str(folder / "out.parquet")))
    # Then each address gets the range that holds it, and none in a gap
    for offset, row in zip(spaced, pq.read_table(folder / "out.parquet").to_pylist(), strict=True):
        held = [r for r in _NARROW if r.start <= _BASE + offset <= r.end]
        assert row["org"] == (held[0].data["org"] if held else None)
        assert row["ip_range_start"] == (str(ipaddress.IPv6Address(held[0].start)) if held else None)
        assert row["ip_range_end"] == (str(ipaddress.IPv6Address(held[0].end)) if held else None)


def test_a_snapshot_of_many_row_groups_keeps_each_ranges_data_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a snapshot in row groups of 4 rows, each group with its own dictionaries, folded
    # every 2 groups, with ranges across buckets (repeated rows) and both families
    monkeypatch.setattr(parquet_export, "ROW_GROUP_ROWS", 4)
    monkeypatch.setattr(snapshot_module, "_COMBINE_EVERY", 2)
    ranges = [
        ExportRange(
            4,
            n << 20,
            (n << 20) + (3 << 16 if n % 5 == 0 else 9),
            {"org": f"o{n % 7}", "name": None if n % 4 else f"n{n}"},
        )
        for n in range(1, 41)
    ] + [
        ExportRange(6, (0x2A00 + n) << 112, ((0x2A00 + n) << 112) + 5, {"org": f"o{n}", "name": f"six{n}"})
        for n in range(10)
    ]
    path = tmp_path / "many.parquet"
    write_parquet(ranges, str(path), SnapshotInfo("many", 1, 0, {"org": "S", "name": "S"}))
    assert pq.ParquetFile(path).num_row_groups > 10
    # When it is loaded
    loaded = load_dataset_snapshot(str(path))
    # Then each range is kept once, in (family, start) order, with its own data
    assert loaded.data.to_pylist() == [r.data for r in ranges]
    assert loaded.v4.starts.tolist() == [r.start for r in ranges if r.family == 4]
    six = [r for r in ranges if r.family == 6]
    assert loaded.v6.starts.tolist() == [r.start.to_bytes(16, "big").rstrip(b"\0") for r in six]
    assert loaded.v6.ends.tolist() == [r.end.to_bytes(16, "big").rstrip(b"\0") for r in six]
    assert loaded.v6.start_halves is not None
    assert [int(high) << 64 | int(low) for high, low in zip(*loaded.v6.start_halves, strict=True)] == [
        r.start for r in six
    ]


@pytest.mark.parametrize("failing", ["read", "fold"])
def test_a_row_group_that_fails_to_read_or_fold_refuses_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    # Given a snapshot of many row groups, whose fourth group cannot be read, or whose
    # dictionaries cannot be folded (each on a thread of its own)
    monkeypatch.setattr(parquet_export, "ROW_GROUP_ROWS", 4)
    monkeypatch.setattr(snapshot_module, "_COMBINE_EVERY", 2)
    ranges = [ExportRange(4, n << 20, (n << 20) + 9, {"org": f"o{n % 7}"}) for n in range(1, 41)]
    path = tmp_path / "many.parquet"
    write_parquet(ranges, str(path), SnapshotInfo("many", 1, 0, {"org": "S"}))
    if failing == "read":
        read = pq.ParquetFile.read_row_group

        def read_but_the_fourth(self: pq.ParquetFile, group: int, **options: Any) -> pa.Table:
            if group == 3:
                raise OSError("the disk failed")
            return read(self, group, **options)

        monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_but_the_fourth)
        why = "the disk failed"
    else:

        def fold_fails(chunks: list[pa.Array], kind: pa.DataType) -> pa.Array:
            raise pa.ArrowInvalid("the dictionaries disagree")

        monkeypatch.setattr(snapshot_module, "_combined", fold_fails)
        why = "the dictionaries disagree"
    # Then the load refuses it, naming why, and leaves no thread of its own running
    with pytest.raises(EnrichInputError, match=why):
        load_dataset_snapshot(str(path))
    assert not [t.name for t in threading.enumerate() if t.name.startswith("snapshot-")]


def test_byte_ranges_tile_a_file_and_row_groups_select(tmp_path: Path) -> None:
    # Given a CSV and cuts at awkward places (inside lines, on newlines, at the ends)
    source = write_csv(tmp_path / "in.csv", ["ip,n", *(f"1.0.0.{n % 256},{n}" for n in range(5000))])
    size = source.stat().st_size
    cuts = [0, 1, 4, 5, 99, size // 3, size // 2, size - 1, size]
    seen: list[str] = []
    for start, end in itertools.pairwise(cuts):
        for table in read_chunks(Part(str(source), byte_range=(start, end)), 700):
            seen += table.column("n").to_pylist() if table.num_columns else []
    # Then every row is read once, in order
    assert seen == [str(n) for n in range(5000)]
    # And a Parquet part reads just its row groups
    pq.write_table(pa.table({"ip": ["1.0.0.1"] * 30}), tmp_path / "in.parquet", row_group_size=10)
    tables = list(read_chunks(Part(str(tmp_path / "in.parquet"), row_groups=[1, 2]), 100))
    assert sum(table.num_rows for table in tables) == 20


def test_json_lines_and_gzip_keep_the_format(snapshot: Snapshot, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl.gz"
    source.write_bytes(gzip.compress(b'{"ip": "8.8.8.8", "n": 1}\n{"ip": "9.9.9.9", "n": 2}\n'))
    summary = enrich_part(Part(str(source)), snapshot, Output(str(tmp_path / "out.jsonl.gz")))
    rows = [
        json.loads(line) for line in gzip.decompress((tmp_path / "out.jsonl.gz").read_bytes()).splitlines()
    ]
    assert [(row["n"], row["org"], row["ip_error"]) for row in rows] == [
        (1, "G", None),
        (2, None, "IP_ADDRESS_NOT_FOUND"),
    ]
    assert (summary.rows, summary.unmatched_rows) == (2, 1)


@pytest.mark.parametrize(
    "case",
    # The organizations' dictionary holds 4 values: a page at 1/3 of a chunk's rows or fewer,
    # and only while it fits the page limit. (chunk rows, page limit in bytes, paged)
    [(1000, 8 << 20, True), (20, 8 << 20, True), (11, 8 << 20, False), (1000, 8, False)],
)
def test_parquet_output_pages_a_small_dictionary_and_keeps_the_inputs_statistics(
    snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[int, int, bool]
) -> None:
    chunk_rows, page_limit, paged = case
    monkeypatch.setattr(job, "DICTIONARY_PAGE_LIMIT", page_limit)
    # Given a log with a time column, whose addresses hit 4 organizations
    addresses = ["8.8.8.8", "1.0.0.1", "20.1.2.3", "2001:4860::1", "9.9.9.9"]
    lines = [f"{addresses[n % 5]},2026-11-{1 + n // 20:02d}" for n in range(600)]
    source = write_csv(tmp_path / "in.csv", ["ip,day", *lines])
    out = tmp_path / "out.parquet"
    enrich_part(Part(str(source)), snapshot, Output(str(out)), chunk_rows=chunk_rows)
    group = pq.read_metadata(out).row_group(0)
    columns = {group.column(at).path_in_schema: group.column(at) for at in range(group.num_columns)}
    # Then the organizations are a dictionary page and indices where a chunk repeats them enough
    assert ("RLE_DICTIONARY" in columns["org"].encodings) is paged
    # And the log's own columns keep their statistics (a reader prunes a time range by them),
    # but for its addresses; the added text has none, the added numbers have theirs
    with_statistics = {name for name, column in columns.items() if column.is_stats_set}
    assert {"day", "asn", "ip_bogon"} <= with_statistics
    assert not {"ip", "org", "ip_range_start"} & with_statistics
    # And every reader reads the same values
    expected = {"8.8.8.8": "G", "1.0.0.1": "CF", "20.1.2.3": "MS", "2001:4860::1": "G6", "9.9.9.9": None}
    rows = duckdb.connect().execute(f"SELECT ip, org FROM read_parquet('{out}')").fetchall()
    assert rows == [(ip, expected[ip]) for ip in (line.split(",")[0] for line in lines)]


# -- bad input ---------------------------------------------------------------------------------


def refused(snapshot: Snapshot, part: Part, out: Path, match: str, **output: Any) -> None:
    with pytest.raises(EnrichInputError, match=match):
        enrich_part(part, snapshot, Output(str(out), **output))
    assert left_behind(out.parent, Path(part.uri)) == []


def test_a_missing_column_names_the_columns_there_are(snapshot: Snapshot, tmp_path: Path) -> None:
    source = write_csv(tmp_path / "in.csv", ["address,n", "1.0.0.1,1"])
    refused(snapshot, Part(str(source)), tmp_path / "out.csv", r"no column 'ip'; the columns are: address, n")


def test_a_header_less_csv_needs_the_column_as_an_index(snapshot: Snapshot, tmp_path: Path) -> None:
    source = write_csv(tmp_path / "in.csv", ["1.0.0.1,a", "8.8.8.8,b"])
    refused(snapshot, Part(str(source)), tmp_path / "out.csv", r"no header; .*--column 0")
    # With the index, every line is a row
    summary = enrich_part(Part(str(source), column="0"), snapshot, Output(str(tmp_path / "out.csv")))
    assert (summary.rows, summary.invalid_rows, summary.unmatched_rows) == (2, 0, 0)


@pytest.mark.parametrize(
    ("name", "content"), [("in.csv", b""), ("in.jsonl", b""), ("in.csv.gz", gzip.compress(b"", mtime=0))]
)
def test_an_empty_file_is_refused(snapshot: Snapshot, tmp_path: Path, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    refused(snapshot, Part(str(tmp_path / name)), tmp_path / "out.csv", "the file is empty")


def test_a_header_without_rows_and_a_parquet_without_rows_are_refused(
    snapshot: Snapshot, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "in.csv", ["ip,n"])
    refused(snapshot, Part(str(source)), tmp_path / "out.csv", "a header but no rows")
    source.unlink()
    pq.write_table(pa.table({"ip": pa.array([], pa.string())}), tmp_path / "in.parquet")
    refused(snapshot, Part(str(tmp_path / "in.parquet")), tmp_path / "out.parquet", "has no rows")


@pytest.mark.parametrize("name", ["in.csv", "in.jsonl"])
def test_a_line_over_the_loaders_cap_is_refused(snapshot: Snapshot, tmp_path: Path, name: str) -> None:
    long = "1" * (MAX_RECORD_BYTES + 10)
    lines = (
        ["ip,n", "8.8.8.8,1", f"8.8.8.8,{long}"]
        if name == "in.csv"
        else ['{"ip": "8.8.8.8"}', f'{{"ip": "{long}"}}']
    )
    source = write_csv(tmp_path / name, lines)
    refused(snapshot, Part(str(source)), tmp_path / "out.csv", r"(longer than|over) 1048576 bytes")


def test_a_gzip_bomb_is_refused(snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The ratio is judged after a grace of inflated bytes: small here, so the bomb is small
    monkeypatch.setattr(parts, "_RATIO_GRACE", 1 << 20)
    source = tmp_path / "in.csv.gz"
    source.write_bytes(gzip.compress(b"ip\n" + b"\n" * (8 << 20), compresslevel=9))
    refused(snapshot, Part(str(source)), tmp_path / "out.csv", "refused as a gzip bomb")


def test_an_existing_output_is_refused_unless_overwrite(snapshot: Snapshot, tmp_path: Path) -> None:
    source = write_csv(tmp_path / "in.csv", ["ip", "8.8.8.8"])
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    with pytest.raises(EnrichInputError, match="already exists; give --overwrite"):
        enrich_part(Part(str(source)), snapshot, Output(str(out)))
    assert out.read_text() == "keep me"
    enrich_part(Part(str(source)), snapshot, Output(str(out), overwrite=True))
    assert "8.8.0.0" in out.read_text()


def test_an_unknown_dataset_or_version_of_the_snapshots_is_refused(
    snapshot: Snapshot, tmp_path: Path
) -> None:
    path = tmp_path / "asn.parquet"
    source = write_csv(tmp_path / "in.csv", ["ip", "8.8.8.8"])
    base = ["enrich", str(source), "--out", str(tmp_path / "out.csv"), "--snapshot", str(path)]
    assert main([*base, "--datasets", "city"]) == 2
    assert main([*base, "--version", "v4"]) == 2
    assert left_behind(tmp_path, source) == []
    # And the snapshot's own version is accepted
    assert main([*base, "--version", "v3"]) == 0


@pytest.mark.parametrize(
    ("kind", "why"),
    [("other-parquet", "footer has no ipmeta key"), ("not-parquet", "Parquet"), ("cut", "")],
)
def test_a_snapshot_that_is_no_ipmeta_snapshot_is_refused_in_one_line(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, why: str
) -> None:
    # Given a --snapshot that is another Parquet file, not Parquet at all, or a real one cut short
    given = tmp_path / "given.parquet"
    if kind == "other-parquet":
        pq.write_table(pa.table({"ip": ["8.8.8.8"]}), given)
    elif kind == "not-parquet":
        given.write_bytes(b"not a parquet file")
    else:
        whole = (tmp_path / "asn.parquet").read_bytes()
        given.write_bytes(whole[: len(whole) // 2] + whole[-2000:])
    source = write_csv(tmp_path / "in.csv", ["ip", "8.8.8.8"])
    out = tmp_path / "out.csv"
    # When enrich is run with it
    code = main(["enrich", str(source), "--out", str(out), "--snapshot", str(given)])
    # Then it is refused (exit 2) in one line naming the file, and nothing is written
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert error.startswith(f"ipmeta enrich: {given}: not a readable ipmeta snapshot")
    assert why in error
    assert "Traceback" not in error
    assert not out.exists()
    assert left_behind(tmp_path, source, given) == []


# -- S3 ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"{host}:{port}"
    finally:
        server.stop()


def test_an_s3_object_that_vanishes_midway_leaves_no_output(snapshot: Snapshot, s3_endpoint: str) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{s3_endpoint}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket="logs")
    body = io.BytesIO()
    body.write(b"ip,n\n" + b"".join(b"8.8.8.8,%d\n" % n for n in range(1_500_000)))
    client.put_object(Bucket="logs", Key="in/part-0.csv", Body=body.getvalue())
    fs = pafs.S3FileSystem(
        access_key="test", secret_key="test", endpoint_override=s3_endpoint, scheme="http", region="us-east-1"
    )
    part = Part("logs/in/part-0.csv", filesystem=fs)

    def delete_after_the_first_chunk(rows: int) -> None:
        client.delete_object(Bucket="logs", Key="in/part-0.csv")

    # When the object is deleted once the first chunk is written (the reader has read ahead
    # about 5 MB by then, of 20 MB)
    with pytest.raises(EnrichInputError, match=r"could not be read to its end|not found"):
        enrich_part(
            part,
            snapshot,
            Output("logs/out/part-0.csv", filesystem=fs),
            chunk_rows=50_000,
            progress=delete_after_the_first_chunk,
        )
    # Then nothing is left under the output prefix, partial or whole (pyarrow keeps the
    # emptied "directory" as a zero-byte "out/" marker: no output, and nothing a reader takes for one)
    listed = client.list_objects_v2(Bucket="logs", Prefix="out/").get("Contents", [])
    assert [entry["Key"] for entry in listed if not entry["Key"].endswith("/")] == []
