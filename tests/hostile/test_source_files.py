"""Hostile files given to ``ipmeta load``: CSV, .csv.gz, MaxMind DB, GeoIP2 CSV and Locations, DB-IP CSV.

Every case is named by what it sends. Each one must be refused cleanly (a
``LoadError`` with its stable code, the line or network named), in bounded
memory, and leave the dataset that was active before serving the same answer,
its load lock free. Cases that could crash or balloon the process run in a
child, whose peak RSS (``wait4``) must stay under ``MAX_RSS_MB``: the whole
``ipmeta load`` for the headline cases, the format reader alone for the rest
(with the C reader and with the pure-Python one the loader Lambda runs).
Inputs are built in the test, small on disk: a gibibyte is a thousand gzip
members of one mebibyte each.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.server import LocalApiServer
from loader.errors import LoadError
from loader.export.mmdb_writer import (
    METADATA_MARKER,
    DatabaseMetadata,
    _metadata_map,
    control_bytes,
    write_database,
)
from loader.formats import mmdb_rows
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.integration.conftest import dynalite_endpoint, get_json, running_api_server

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MAXMIND = FIXTURES / "maxmind"
DATASET = "active"
#: The issue's bound for every case: no input takes the loader past this.
MAX_RSS_MB = 300
MIB = 1 << 20
ACTIVE_CSV = b"start,end,org\n1.0.0.0,1.0.0.255,first\n2001:db8::,2001:db8::ffff,second\n"

__all__ = ["dynalite_endpoint"]  # the session's dynalite, shared with the integration tests


# -- what every case shares: an active dataset, a clean refusal, a child with its peak memory --------


@dataclass
class Active:
    """A dataset loaded before any hostile file, and what it answers."""

    table: LoaderTable
    settings: Settings
    server: LocalApiServer
    staging: Path
    version: int
    answers: dict[str, Any]

    def answer(self) -> dict[str, Any]:
        return {address: self._lookup(address) for address in ("1.0.0.1", "2001:db8::1")}

    def _lookup(self, address: str) -> Any:
        status, body = get_json(self.server, f"/v1/ip/{address}?dataset={DATASET}")
        return status, body.get("datasets", {}).get(DATASET)

    def assert_untouched(self) -> None:
        """The refusal left the active version serving the same answers, and freed the lock."""
        dataset = self.table.for_dataset(DATASET)
        assert dataset.lookup.read_active_version(consistent=True) == self.version
        assert self.answer() == self.answers
        assert dataset.lock.read() is None
        assert [load.status for load in dataset.loads.list_all() if load.status == "preparing"] == []

    def refused(self, path: Path, **options: Any) -> LoadError:
        """``ipmeta load``'s driver on ``path`` into the active dataset: the error it raises."""
        with pytest.raises(LoadError) as refusal:
            driver.run_load(
                [path], LoadOptions(dataset=DATASET, **options), self.table, LocalStaging(self.staging)
            )
        self.assert_untouched()
        return refusal.value

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            ENV_DYNAMODB_ENDPOINT: str(self.settings.dynamodb_endpoint),
            ENV_TABLE_NAME: self.settings.table_name,
            "PYTHONPATH": f"{ROOT / 'lambdas'}{os.pathsep}{ROOT}",
        }


@pytest.fixture(scope="module")
def active(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Active]:
    settings = Settings(f"ipmeta-hostile-files-{os.getpid()}", dynalite_endpoint, 0.0)
    table = LoaderTable.from_settings(settings)
    create_table_if_missing(table.client, table.table_name)
    folder = tmp_path_factory.mktemp("active")
    source = folder / "active.csv"
    source.write_bytes(ACTIVE_CSV)
    staging = folder / "staging"
    loaded = driver.run_load([source], LoadOptions(dataset=DATASET), table, LocalStaging(staging))
    with running_api_server(table) as server:
        first = Active(table, settings, server, staging, loaded.version, {})
        first.answers = first.answer()
        assert first.answers["1.0.0.1"][0] == 200
        yield first


@dataclass(frozen=True)
class Child:
    exit_code: int | None  #: None: killed for outliving its time
    stdout: str
    stderr: str
    peak_rss_mb: float
    seconds: float


#: Runs the command in its own fresh process and reports that process's exit and peak RSS. A child
#: forked straight from pytest would count pytest's own size: Linux keeps the peak of the memory a
#: process had before ``exec`` (hundreds of MB once the unit tests ran), so a small launcher forks it.
LAUNCHER = """
import json, os, sys
report, command = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *command])
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as out:
    json.dump({"exit_code": os.waitstatus_to_exitcode(status), "peak_kib": usage.ru_maxrss}, out)
"""


def run_child(arguments: list[str], environment: dict[str, str], timeout: float = 60.0) -> Child:
    """A Python child, its exit code and its own peak RSS; killed with its group past ``timeout``."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        out, err = Path(folder) / "out", Path(folder) / "err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            launcher = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(report), *arguments],
                stdout=stdout,
                stderr=stderr,
                env=environment,
                start_new_session=True,
            )
            try:
                launcher.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)
                launcher.wait()
        ended: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
        return Child(
            ended.get("exit_code"),
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
            ended.get("peak_kib", 0) / 1024,  # KiB on Linux
            time.monotonic() - began,
        )


def ipmeta_load(active: Active, path: Path, *arguments: str) -> Child:
    """The real command, in a child, into the active dataset (one worker: the child is the load)."""
    command = ["-m", "ipmeta_cli.main", "load", "--workers", "1", "--dataset", DATASET, *arguments]
    return run_child([*command, "--data-dir", str(path.parent / "data"), str(path)], active.environment())


#: Reads sources with the format readers in a child, one JSON line per file as each ends (so a
#: crash leaves the lines before it, and names the file it died on by their absence).
READ_IN_CHILD = """
import json, sys
from pathlib import Path
import maxminddb
from loader.errors import LoadError
from loader.formats import FormatOptions, RowError, SourceRow, open_rows
reader, paths = sys.argv[1], sys.argv[2:]
if reader == "pure":
    maxminddb.open_database = maxminddb.Reader
for path in paths:
    outcome = {"file": Path(path).name, "rows": 0, "bad_rows": []}
    try:
        for entry in open_rows(Path(path), Path(path).name, FormatOptions()):
            if isinstance(entry, SourceRow):
                outcome["rows"] += 1
            elif isinstance(entry, RowError):
                outcome["bad_rows"].append(entry.message)
    except LoadError as error:
        outcome.update(code=error.code, message=str(error))
    print(json.dumps(outcome), flush=True)
"""


@dataclass(frozen=True)
class Readings:
    """What one child's reader made of each file, and how the child ended."""

    outcomes: dict[str, dict[str, Any]]
    child: Child

    def of(self, name: str) -> dict[str, Any]:
        outcome = self.outcomes.get(name)
        assert outcome is not None, (
            f"the reader died on {name} ({self.child.exit_code}): {self.child.stderr[-2000:]}"
        )
        assert self.child.peak_rss_mb < MAX_RSS_MB, self.child
        return outcome


def read_in_child(paths: list[Path], reader: str) -> Readings:
    environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'lambdas'}{os.pathsep}{ROOT}"}
    child = run_child(["-c", READ_IN_CHILD, reader, *map(str, paths)], environment)
    outcomes = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    return Readings({outcome["file"]: outcome for outcome in outcomes}, child)


def gzip_of_repeats(head: bytes, block: bytes, times: int, tail: bytes = b"") -> bytes:
    """``head + block * times + tail`` as a gzip file of small size: one member per part, repeated."""
    repeated = gzip.compress(block, compresslevel=9, mtime=0)
    return gzip.compress(head, mtime=0) + repeated * times + gzip.compress(tail, mtime=0)


# -- CSV, .csv.gz, GeoIP2 CSV, DB-IP CSV: refused with their line ------------------------------------


def csv_case(content: bytes, name: str = "hostile.csv") -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(content)
        return path

    return write


def fixture_case(name: str) -> Callable[[Path], Path]:
    return lambda _folder: FIXTURES / "bad" / name


#: id -> (file, load options, the error's code, a pattern its message matches)
CSV_CASES: dict[str, tuple[Callable[[Path], Path], dict[str, Any], str, str]] = {
    "csv-empty-file": (
        fixture_case("16-empty-file.csv"),
        {},
        "SOURCE_UNREADABLE",
        r"line 1: the file is empty",
    ),
    "csv-header-only": (
        fixture_case("17-header-only.csv"),
        {},
        "SOURCE_UNREADABLE",
        r"line 1: no ranges to load",
    ),
    "csv-invalid-utf8": (
        fixture_case("18-invalid-utf8.csv"),
        {},
        "SOURCE_UNREADABLE",
        r"line \d+: not valid UTF-8",
    ),
    "csv-truncated-gzip": (
        fixture_case("23-truncated-gzip.csv.gz"),
        {},
        "SOURCE_UNREADABLE",
        r"line \d+: cannot read",
    ),
    "csv-item-over-400kb": (
        fixture_case("13-item-over-400kb.csv"),
        {},
        "LOAD_REJECTED",
        r"line 3: the item would take",
    ),
    "csv-nul-byte-in-an-address": (
        csv_case(b"start,end,org\n1.0.0.0\x00,1.0.0.255,a\n"),
        {},
        "LOAD_REJECTED",
        r"line 2: .*not a valid IP address",
    ),
    "csv-bom-inside-a-line": (
        csv_case(b"start,end,org\n\xef\xbb\xbf1.0.0.0,1.0.0.255,a\n"),
        {},
        "LOAD_REJECTED",
        r"line 2: .*not a valid IP address",
    ),
    "csv-cr-only-line-endings": (
        csv_case(b"start,end,org\r1.0.0.0,1.0.0.255,a\r"),
        {},
        "SOURCE_UNREADABLE",
        r"line 1: new-line character seen in unquoted field",
    ),
    "csv-huge-field-count": (
        csv_case(b"start,end,org\n1.0.0.0,1.0.0.255" + b",x" * (1 << 20) + b"\n"),
        {},
        "SOURCE_UNREADABLE",
        rf"line 2: line longer than {MIB} bytes",
    ),
    "csv-quoted-field-never-closed": (
        csv_case(b'start,end,org\n1.0.0.0,1.0.0.255,"open\n' + b"a short line\n" * (2 * MIB // 13)),
        {},
        "SOURCE_UNREADABLE",
        rf"line \d+: the record that starts at line 2 is longer than {MIB} bytes",
    ),
    "csv-huge-number": (
        csv_case(b"start,end,n\n1.0.0.0,1.0.0.255,1\n2.0.0.0,2.0.0.255,1e999999\n"),
        {},
        "LOAD_REJECTED",
        r"line 3: column 'n' holds numbers, but also '1e999999'",
    ),
    "csv-number-of-400-digits": (
        csv_case(b"start,end,n\n1.0.0.0,1.0.0.255," + b"9" * 400 + b"\n"),
        {},
        "LOAD_REJECTED",
        r"line 2: column 'n' holds numbers, but also '9{10}",
    ),
    "csv-nan-and-infinity": (
        csv_case(b"start,end,n\n1.0.0.0,1.0.0.255,1.5\n2.0.0.0,2.0.0.255,Infinity\n"),
        {},
        "LOAD_REJECTED",
        r"line 3: .*NaN or Infinity",
    ),
    "csv-nested-quotes-in-an-address": (
        csv_case(b'start,end,org\n"1.0.""0.0",1.0.0.255,a\n'),
        {},
        "LOAD_REJECTED",
        r"line 2: .*not a valid IP address",
    ),
    "csv-gz-line-without-newline-64mib": (
        lambda folder: _write(
            folder / "one-line.csv.gz", gzip_of_repeats(b"start,end,org\n1.0.0.0,", b"9" * MIB, 64)
        ),
        {},
        "SOURCE_UNREADABLE",
        rf"one-line.csv.gz: line 2: line longer than {MIB} bytes",
    ),
    "geoip2-locations-line-without-newline": (
        lambda folder: _geoip2_blocks(
            folder, locations=gzip_of_repeats(b"geoname_id,country_iso_code\n", b"7" * MIB, 8)
        ),
        {"locations": "LOCATIONS"},
        "SOURCE_UNREADABLE",
        rf"Locations-en.csv.gz: line 2: line longer than {MIB} bytes",
    ),
    "geoip2-locations-geoname-twice": (
        lambda folder: _geoip2_blocks(
            folder, locations=gzip.compress(b"geoname_id,country_iso_code\n1,AU\n1,NZ\n")
        ),
        {"locations": "LOCATIONS"},
        "SOURCE_UNREADABLE",
        r"line 3: geoname_id 1 appears twice",
    ),
    "geoip2-blocks-geoname-not-in-locations": (
        lambda folder: _geoip2_blocks(
            folder, locations=gzip.compress(b"geoname_id,country_iso_code\n1,AU\n"), block_geoname=b"9"
        ),
        {"locations": "LOCATIONS"},
        "LOAD_REJECTED",
        r"Blocks-IPv4.csv: line 2: geoname_id 9 is not in",
    ),
    "geoip2-locations-empty": (
        lambda folder: _geoip2_blocks(folder, locations=b""),
        {"locations": "LOCATIONS"},
        "SOURCE_UNREADABLE",
        r"line 1: the Locations file is empty",
    ),
    "dbip-csv-first-line-without-newline": (
        lambda folder: _write(folder / "dbip-city-lite.csv.gz", gzip_of_repeats(b"", b"1" * MIB, 16)),
        {"format": "dbip-csv"},
        "SOURCE_UNREADABLE",
        rf"line 1: line longer than {MIB} bytes",
    ),
    "dbip-csv-five-fields": (
        csv_case(b"1.0.0.0,1.0.0.255,AU,x,y\n", "dbip-country-lite.csv"),
        {"format": "dbip-csv"},
        "SOURCE_UNREADABLE",
        r"line 1: 5 fields, but DB-IP Lite CSVs have 3",
    ),
}


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def _geoip2_blocks(folder: Path, *, locations: bytes, block_geoname: bytes = b"1") -> Path:
    _write(folder / "GeoLite2-City-Locations-en.csv.gz", locations)
    return _write(
        folder / "GeoLite2-City-Blocks-IPv4.csv",
        b"network,geoname_id,postal_code\n1.0.0.0/24," + block_geoname + b",\n",
    )


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_a_hostile_csv_is_refused_by_its_line_and_the_active_version_serves_on(
    case: str, active: Active, tmp_path: Path
) -> None:
    make, options, code, pattern = CSV_CASES[case]
    path = make(tmp_path)
    if options.get("locations") == "LOCATIONS":
        options = {**options, "locations": str(tmp_path / "GeoLite2-City-Locations-en.csv.gz")}
    error = active.refused(path, **options)
    assert error.code == code, error
    assert re.search(pattern, str(error)), error


def test_csv_gz_one_gibibyte_line_is_refused_in_bounded_memory(active: Active, tmp_path: Path) -> None:
    """``csv-gz-one-gibibyte-line``: 1 MB on disk, one 1 GiB line once inflated (it peaked at 3.1 GB)."""
    source = _write(
        tmp_path / "one-line.csv.gz", gzip_of_repeats(b"start,end,org\n1.0.0.0,", b"9" * MIB, 1024)
    )
    assert source.stat().st_size < 2 * MIB
    child = ipmeta_load(active, source)
    assert child.exit_code == 2, child.stderr[-2000:]
    assert f"one-line.csv.gz: line 2: line longer than {MIB} bytes" in child.stderr
    assert "Traceback" not in child.stderr
    assert child.peak_rss_mb < MAX_RSS_MB, child
    active.assert_untouched()


# -- MaxMind DB: trees that loop, metadata that lies, data that explodes ---------------------------

NETWORKS = [
    (4, 0x01000000 + (index << 8), 0x01000000 + (index << 8) + 255, {"org": f"org {index}", "asn": index})
    for index in range(40)
]


def valid_mmdb() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "valid.mmdb"
        write_database(NETWORKS, path, DatabaseMetadata("ipmeta-hostile", {"en": "test"}))
        return path.read_bytes()


@dataclass(frozen=True)
class Parts:
    """A MaxMind DB cut at its seams: tree, separator, data section, metadata."""

    tree: bytes
    data: bytes
    node_count: int
    record_size: int

    @classmethod
    def of(cls, database: bytes) -> Parts:
        marker = database.rindex(METADATA_MARKER)
        node_count = int.from_bytes(_after(database[marker:], b"node_count"), "big")
        record_size = int.from_bytes(_after(database[marker:], b"record_size"), "big")
        tree_bytes = node_count * record_size // 4
        return cls(database[:tree_bytes], database[tree_bytes + 16 : marker], node_count, record_size)

    def joined(self, *, node_count: int | None = None, record_size: int | None = None) -> bytes:
        metadata = _metadata_map(
            DatabaseMetadata("ipmeta-hostile", {"en": "test"}, build_epoch=1_790_000_000),
            self.node_count if node_count is None else node_count,
            self.record_size if record_size is None else record_size,
        )
        return self.tree + b"\x00" * 16 + self.data + METADATA_MARKER + metadata


def _after(metadata: bytes, key: bytes) -> bytes:
    """An unsigned metadata value: the control byte after the key says how many bytes follow."""
    at = metadata.index(key) + len(key)
    return metadata[at + 1 : at + 1 + (metadata[at] & 0x1F)]


def nodes(records: list[tuple[int, int]], record_size: int = 24) -> bytes:
    width = record_size // 8
    return b"".join(left.to_bytes(width, "big") + right.to_bytes(width, "big") for left, right in records)


def records_point_back(database: bytes) -> bytes:
    """The issue's reproduction: every node's two records overwritten with 1 and 2."""
    parts = Parts.of(database)
    assert parts.record_size == 24
    return nodes([(1, 2)] * parts.node_count) + database[len(parts.tree) :]


def chain_past_the_address(depth: int = 200) -> bytes:
    """Each node's left record points to the next node (forward!), 200 deep in a 128-bit tree."""
    node_count = depth + 1
    data = control_bytes(7, 1) + b"\x41a\x41b"  # {"a": "b"}
    records = [(index + 1, node_count) for index in range(depth)] + [(node_count + 16, node_count)]
    return Parts(nodes(records), data, node_count, 24).joined()


def data_record(record: bytes) -> bytes:
    """A one-network IPv6 tree (``::/1`` holds ``record``), the data section that record alone."""
    return Parts(nodes([(1 + 16, 1)]), record, 1, 24).joined()


def pointer_out_of_range() -> bytes:
    return data_record(b"\x38" + (0x7FFFFFF0).to_bytes(4, "big") + b"\x00" * 8)


def map_of_most_entries() -> bytes:
    # The largest size a map can claim (65,821 + 2^24 - 1: the format cannot say 2^28).
    return data_record(b"\xff\xff\xff\xff" + b"\x41a\x41b" * 4)


def nesting_10000_deep() -> bytes:
    # An array holding an array... 10,000 levels, then a uint16: extended type 11 is 0x01 0x04.
    return data_record(b"\x01\x04" * 10_000 + b"\xa1\x07")


def pointer_loop() -> bytes:
    # {"a": <pointer to this map>}: decoding it never ends without a depth limit.
    return data_record(control_bytes(7, 1) + b"\x41a" + b"\x20\x00")


def gzip_bomb(folder: Path) -> Path:
    return _write(folder / "bomb.mmdb.gz", gzip_of_repeats(b"", b"\x00" * MIB, 64))


#: id -> (the file's bytes, a pattern the refusal matches). Every one is refused with SOURCE_UNREADABLE.
MMDB_CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "mmdb-records-point-back": (lambda: records_point_back(valid_mmdb()), r"loops back or shares a subtree"),
    "mmdb-tree-deeper-than-128-bits": (chain_past_the_address, r"past the 128-bit address"),
    "mmdb-record-points-into-the-separator": (
        lambda: Parts(nodes([(1 + 3, 1)]), b"\x41a", 1, 24).joined(),
        r"neither a node, the empty marker nor a place in the data section",
    ),
    "mmdb-record-points-past-the-data": (
        lambda: Parts(nodes([(1 + 16 + 999, 1)]), b"\x41a", 1, 24).joined(),
        r"neither a node, the empty marker nor a place in the data section",
    ),
    "mmdb-bad-metadata-marker": (
        lambda: valid_mmdb().replace(METADATA_MARKER, b"\xab\xcd\xefMaxMind.org"),
        r"no metadata marker",
    ),
    "mmdb-absurd-node-count": (
        lambda: Parts.of(valid_mmdb()).joined(node_count=0xFFFFFFFF),
        r"node_count 4,294,967,295 needs a",
    ),
    "mmdb-record-size-0": (lambda: Parts.of(valid_mmdb()).joined(record_size=0), r"record_size 0"),
    "mmdb-record-size-33": (lambda: Parts.of(valid_mmdb()).joined(record_size=33), r"record_size 33"),
    "mmdb-truncated-in-half": (lambda: valid_mmdb()[: len(valid_mmdb()) // 2], r"no metadata marker"),
    "mmdb-empty-file": (lambda: b"", r"not a MaxMind DB file"),
    "mmdb-data-pointer-out-of-range": (pointer_out_of_range, r"cannot read the database"),
    "mmdb-map-size-2-24": (map_of_most_entries, r"cannot read the database"),
    "mmdb-nesting-depth-10000": (nesting_10000_deep, r"cannot read the database"),
    "mmdb-data-pointer-loop": (pointer_loop, r"cannot read the database"),
}


#: MaxMind's corpus (tests/fixtures/maxmind): the files any reader must refuse or read cleanly.
#: These few are well-formed enough to read: their oddities are in metadata the loader does not use,
#: or in a part of the tree no network reaches.
READABLE_CORPUS = {
    "libmaxminddb-corrupt-search-tree.mmdb",
    "libmaxminddb-empty-array-last-in-metadata.mmdb",
    "libmaxminddb-empty-map-last-in-metadata.mmdb",
    "libmaxminddb-uint64-max-epoch.mmdb",
}
CORPUS = sorted(
    [
        *(MAXMIND / "bad-data").glob("*.mmdb"),
        *(path for path in MAXMIND.glob("*.mmdb") if "decoder.mmdb" not in path.name),
    ]
)

READERS = {"c": "C reader", "pure": "pure-Python reader"}


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Readings]:
    """Every MaxMind DB case and MaxMind's corpus, read by each reader in one child (the Lambda's is pure)."""
    folder = tmp_path_factory.mktemp("mmdb")
    paths = [_write(folder / f"{case}.mmdb", make()) for case, (make, _) in MMDB_CASES.items()]
    return {reader: read_in_child([*paths, *CORPUS], reader) for reader in READERS}


@pytest.mark.parametrize("reader", READERS, ids=READERS.values())
@pytest.mark.parametrize("case", list(MMDB_CASES))
def test_a_hostile_mmdb_is_refused_without_crashing_the_reader(
    case: str, reader: str, readings: dict[str, Readings]
) -> None:
    outcome = readings[reader].of(f"{case}.mmdb")
    assert outcome.get("code") == "SOURCE_UNREADABLE", outcome
    assert outcome["message"].startswith(f"{case}.mmdb: ")
    assert re.search(MMDB_CASES[case][1], outcome["message"]), outcome


def test_mmdb_records_point_back_is_refused_by_ipmeta_load_and_frees_the_lock(
    active: Active, tmp_path: Path
) -> None:
    """``mmdb-records-point-back`` through the real command: it aborted the process (exit 134)."""
    source = _write(tmp_path / "looping.mmdb", records_point_back(valid_mmdb()))
    child = ipmeta_load(active, source)
    assert child.exit_code == 2, child.stderr[-2000:]
    assert "looping.mmdb: not a MaxMind DB file, or a damaged one: " in child.stderr
    assert "loops back or shares a subtree" in child.stderr
    assert "Traceback" not in child.stderr
    assert child.peak_rss_mb < MAX_RSS_MB
    # And the lock is free at once, not after its 15-minute lease; what served serves on
    active.assert_untouched()


def test_mmdb_gz_bomb_is_refused_before_it_fills_the_disk(
    active: Active, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mmdb-gz-bomb``: 64 KB that inflates to 64 MiB, against a cap lowered to 8 MiB for the test."""
    monkeypatch.setattr(mmdb_rows, "MAX_INFLATED_BYTES", 8 * MIB)
    error = active.refused(gzip_bomb(tmp_path))
    assert error.code == "SOURCE_UNREADABLE"
    assert re.search(rf"bomb.mmdb.gz: inflates past {8 * MIB} bytes", str(error))
    assert not list(Path(tempfile.gettempdir()).glob("ipmeta-mmdb-*/bomb.mmdb"))


@pytest.mark.parametrize("reader", READERS, ids=READERS.values())
@pytest.mark.parametrize("path", CORPUS, ids=lambda path: f"mmdb-maxmind-corpus-{path.stem}")
def test_maxminds_corpus_of_hostile_databases_is_refused_cleanly(
    path: Path, reader: str, readings: dict[str, Readings]
) -> None:
    outcome = readings[reader].of(path.name)
    if path.name in READABLE_CORPUS:
        assert "code" not in outcome, outcome
    else:
        assert outcome.get("code") == "SOURCE_UNREADABLE", outcome
        assert outcome["message"].startswith(f"{path.name}: ")


def test_max_errors_skips_mmdb_networks_dynamodb_cannot_hold(active: Active, tmp_path: Path) -> None:
    """``mmdb-double-of-infinity``: MaxMind's decoder database holds ``inf`` at 255.255.255.255/32."""
    decoder = MAXMIND / "MaxMind-DB-test-decoder.mmdb"
    staging = LocalStaging(tmp_path / "staging")
    # Without --max-errors the network is refused, by name
    with pytest.raises(LoadError) as refusal:
        driver.run_load([decoder], LoadOptions(dataset="decoder"), active.table, staging)
    assert refusal.value.code == "LOAD_REJECTED"
    assert "network 255.255.255.255/32: column 'double' holds inf" in str(refusal.value)
    # With --max-errors 5 it is skipped as a bad row, listed in the report, and the rest loads
    loaded = driver.run_load([decoder], LoadOptions(dataset="decoder", max_errors=5), active.table, staging)
    assert loaded.status == "activated"
    assert loaded.report.rows_rejected == 1
    assert loaded.report.rejected == (
        "MaxMind-DB-test-decoder.mmdb: network 255.255.255.255/32: column 'double' holds inf: "
        "DynamoDB numbers cannot be NaN or Infinity",
    )
    status, body = get_json(active.server, "/v1/ip/1.1.1.1?dataset=decoder")
    assert status == 200
    assert body["datasets"]["decoder"]["data"]["uint16"] == 100
    assert get_json(active.server, "/v1/ip/255.255.255.255?dataset=decoder")[0] == 404
