"""A replica region under watch: releases and their truth, lookups checked against it, the region's check.

What ``bench/replication.py`` and ``tests/integration/test_replicas.py`` run
beside the replicator (``testing.replication``):

- ``Release``: an ASN release (rows of ``start,end,asn,organization``), its CSV
  and its truth (``testing.row_scan``: the last row holding an address), built
  as a seeded subset of the demo ASN files (``asn_subset``), and a next release
  with a share of its ranges relabelled or dropped (``changed_release``);
- ``probe_addresses``: random addresses inside and between the ranges, and the
  edges of every range that changed (``changed_edges``);
- ``Hammer``: lookups through the real Lambda handler, in a thread, each answer
  checked against the truth of the release whose version it names
  (``AnswerTally``); an answer that differs is a *mixed answer*;
- ``PageWalker``: reverse-lookup page walks, each begun in home (its first page) and
  continued in the region with the page token home minted, each page the region
  answers checked against the ranges of the value in the release its token names;
- ``Follower``: the region's arrival check (``loader.pipeline.arrival``) run on
  an interval, as the schedule runs it in AWS;
- ``ServedDeletes``: every delete a region takes, counted when that region's own
  pointer (home's, in home) still names the deleted item's version;
- ``KillSwitch``: a client's process "killed" at its n-th DynamoDB call, or at its
  first call after one that wrote a given key (activation killed after the pointer
  switch), as SIGKILL would leave it: nothing after that call happens;
  ``kill_after_the_switch`` runs a load so killed.
"""

from __future__ import annotations

import csv
import ipaddress
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key
from ipmeta_cli.demo import ASN_COLUMNS, ASN_FILES
from loader.pipeline import arrival
from loader.records import Pointer
from loader.store.table import LoaderTable
from testing.in_process_api import get
from testing.row_scan import CsvScan, Row, asn_row

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: A line of an ASN CSV: first and last address, AS number, organization.
CsvLine = tuple[str, str, int, str]
#: A range as a listing shows it: (family, first, last address).
Span = tuple[int, int, int]
#: What a region answers for a pinned version it may not read (yet, or any longer).
REFUSALS: Final = frozenset({"VERSION_NOT_FOUND", "INDEX_NOT_ARRIVED"})
#: The version a 404 names: "... is not in any range of asn v2".
_NOT_FOUND_VERSION: Final = re.compile(r"\b([a-z][a-z0-9-]*) (v\d+)\b")


@dataclass(frozen=True)
class Release:
    """One release of an ASN dataset: its rows in file order, and the answer each address has."""

    name: str
    rows: tuple[CsvLine, ...]

    def write_csv(self, path: Path) -> Path:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(ASN_COLUMNS)
            writer.writerows(self.rows)
        return path

    @cached_property
    def _scans(self) -> dict[int, CsvScan]:
        rows: dict[int, list[Row]] = {4: [], 6: []}
        for position, line in enumerate(self.rows):
            row = asn_row(line, position)
            rows[row.family].append(row)
        return {family: CsvScan(found) for family, found in rows.items()}

    def owner(self, address: str) -> Row | None:
        parsed = ipaddress.ip_address(address)
        return self._scans[parsed.version].owner(int(parsed))

    @cached_property
    def _ranges_by_asn(self) -> dict[int, list[Span]]:
        found: dict[int, list[Span]] = {}
        for start, end, asn, _ in self.rows:
            first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
            found.setdefault(asn, []).append((first.version, int(first), int(last)))
        return {asn: sorted(spans) for asn, spans in found.items()}

    def ranges_of(self, asn: int) -> list[Span]:
        """The ranges whose AS is ``asn``, in (family, start) order: what ``/v1/ranges`` lists."""
        return self._ranges_by_asn.get(asn, [])


def asn_subset(rows: int, seed: int, ipv6_share: float = 0.2) -> Release:
    """``rows`` rows of the demo ASN files, drawn with ``seed``, in file order (IPv4, then IPv6)."""
    rng = random.Random(seed)
    chosen: list[CsvLine] = []
    for path, share in zip(ASN_FILES, (1 - ipv6_share, ipv6_share), strict=True):
        with path.open(newline="", encoding="utf-8") as handle:
            every = [
                (start, end, int(asn), organization) for start, end, asn, organization in csv.reader(handle)
            ]
        wanted = round(rows * share)
        chosen.extend(every[index] for index in sorted(rng.sample(range(len(every)), wanted)))
    return Release("a", tuple(chosen))


def changed_release(base: Release, name: str, share: float, seed: int) -> Release:
    """``base`` with ``share`` of its rows changed: half of those given another row's AS, half dropped."""
    rng = random.Random(seed)
    changed = set(rng.sample(range(len(base.rows)), round(len(base.rows) * share)))
    rows: list[CsvLine] = []
    for index, row in enumerate(base.rows):
        if index not in changed:
            rows.append(row)
        elif index % 2:
            _, _, asn, organization = base.rows[rng.randrange(len(base.rows))]
            rows.append((row[0], row[1], asn + 1 if asn == row[2] else asn, organization))
    return Release(name, tuple(rows))


def changed_edges(before: Release, after: Release) -> list[str]:
    """The first and last address of each range one release has and the other has not, and their
    neighbours outside: where a half-arrived version answers wrong."""
    edges: list[str] = []
    for start, end, _, _ in sorted(set(before.rows) ^ set(after.rows)):
        first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
        top = (1 << first.max_prefixlen) - 1
        for value in (int(first) - 1, int(first), int(last), int(last) + 1):
            if 0 <= value <= top:
                edges.append(
                    str(ipaddress.ip_address(value) if first.version == 4 else ipaddress.IPv6Address(value))
                )
    return edges


def probe_addresses(release: Release, edges: Sequence[str], count: int, seed: int) -> list[str]:
    """Edges and random addresses in turn: half of the random ones inside a random row, half anywhere."""
    rng = random.Random(seed)
    probes: list[str] = []
    for index in range(count):
        if edges and index % 2 == 0:
            probes.append(edges[(index // 2) % len(edges)])
            continue
        start, end, _, _ = release.rows[rng.randrange(len(release.rows))]
        first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
        if rng.random() < 0.5:
            probes.append(str(ipaddress.ip_address(rng.randint(int(first), int(last)))))
        elif first.version == 4:
            probes.append(str(ipaddress.IPv4Address(rng.getrandbits(32))))
        else:
            probes.append(str(ipaddress.IPv6Address((0x2 << 124) | rng.getrandbits(125) >> 1)))
    return probes


@dataclass
class AnswerTally:
    """Lookups per phase, and each answer's verdict against the release its version names."""

    dataset: str
    truths: Mapping[str, Release]
    phase: str = "start"
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)
    #: When each mixed answer came (``time.monotonic``), for a timeline.
    mixed_at: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, address: str, status: int, body: Mapping[str, Any]) -> str:
        return self.record(
            self.verdict(address, status, body), {"ip": address, "status": status, "body": body}
        )

    def record(self, verdict: str, example: Mapping[str, Any]) -> str:
        """Count one lookup's verdict in the present phase (a mixed one's example kept)."""
        with self._lock:
            self.counts[self.phase, verdict] += 1
            if verdict == "mixed":
                self.mixed_at.append(time.monotonic())
            if verdict == "mixed" and len(self.examples) < 20:
                self.examples.append({"phase": self.phase, **example})
        return verdict

    def verdict(self, address: str, status: int, body: Mapping[str, Any]) -> str:
        """``right``, ``unanswered`` (no version serves yet), ``refused`` (a pinned version that may
        not be read here, said so) or ``mixed`` (not what its version holds)."""
        if status == 503 and body.get("code") == "NO_DATASET":
            return "unanswered"
        if status in (404, 409, 503) and body.get("code") in REFUSALS:
            return "refused"
        if status == 200:
            section = body["datasets"][self.dataset]
            truth = self.truths.get(section["version"])
            row = truth.owner(address) if truth else None
            data = section["data"]
            same = row is not None and {name: data.get(name) for name in row.values} == row.values
            return "right" if same else "mixed"
        if status == 404:
            named = dict(_NOT_FOUND_VERSION.findall(str(body.get("message", ""))))
            truth = self.truths.get(named.get(self.dataset, ""))
            return "right" if truth is not None and truth.owner(address) is None else "mixed"
        return "mixed"

    def answered(self, phase: str | None = None) -> int:
        """Lookups a version answered (rightly or not) or refused, leaving out those before any
        version served."""
        return self.total(phase=phase) - self.total("unanswered", phase)

    def total(self, verdict: str | None = None, phase: str | None = None) -> int:
        with self._lock:
            return sum(
                count
                for (at, said), count in self.counts.items()
                if (verdict is None or said == verdict) and (phase is None or at == phase)
            )


def plain_lookup(address: str) -> str:
    return f"/v1/ip/{address}"


class Hammer(threading.Thread):
    """Lookups through the real handler (the caller installs its dependencies), round the probes;
    ``path_of`` makes each request's path (``?version=`` for a pinned one)."""

    def __init__(
        self, probes: Sequence[str], tally: AnswerTally, path_of: Callable[[str], str] = plain_lookup
    ) -> None:
        super().__init__(daemon=True, name="hammer")
        self.probes = probes
        self.tally = tally
        self.path_of = path_of
        self.stopped = threading.Event()

    def run(self) -> None:
        index = 0
        while not self.stopped.is_set():
            address = self.probes[index % len(self.probes)]
            status, body = get(self.path_of(address))
            self.tally.check(address, status, body)
            index += 1

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def listed_spans(body: Mapping[str, Any]) -> list[Span]:
    spans: list[Span] = []
    for entry in body["ranges"]:
        first, last = ipaddress.ip_address(entry["start"]), ipaddress.ip_address(entry["end"])
        spans.append((first.version, int(first), int(last)))
    return spans


def page_verdict(truth: Sequence[Span], seen: int, status: int, body: Mapping[str, Any]) -> str:
    """A page after ``seen`` ranges of a listing: ``right`` when it holds exactly the next ones
    and ends only at the end, ``refused`` when the region says it may not list that version (yet,
    or any longer), else ``mixed``."""
    if status in (404, 503) and body.get("code") in REFUSALS:
        return "refused"
    if status != 200:
        return "mixed"
    got = listed_spans(body)
    ended = body.get("next") is None
    right = got == list(truth[seen : seen + len(got)]) and (
        seen + len(got) == len(truth) if ended else bool(got)
    )
    return "right" if right else "mixed"


class PageWalker(threading.Thread):
    """Page walks of ``/v1/ranges?field=asn``: the first page in home (``home`` installed), the rest
    in the region (``region``) with the tokens; every region page tallied (``page_verdict``)."""

    def __init__(
        self,
        values: Sequence[int],
        tally: AnswerTally,
        home: Any,
        region: Any,
        *,
        limit: int = 3,
    ) -> None:
        super().__init__(daemon=True, name="page-walker")
        self.values, self.tally, self.home, self.region, self.limit = values, tally, home, region, limit
        self.walks = 0
        #: First pages home answered unlike the release its version names (the oracle's own check).
        self.home_mismatches = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        from ipmeta.api import dependencies

        index = 0
        while not self.stopped.is_set():
            value = self.values[index % len(self.values)]
            index += 1
            path = f"/v1/ranges?field=asn&value={value}&limit={self.limit}"
            dependencies.install(self.home)
            status, body = get(path)
            if status != 200:  # nothing active in home yet
                self.tally.record("unanswered", {"path": path, "status": status, "body": body})
                time.sleep(0.01)
                continue
            release = self.tally.truths.get(body["dataset"]["version"])
            truth = release.ranges_of(value) if release else []
            seen = listed_spans(body)
            self.home_mismatches += seen != truth[: len(seen)]
            self.walks += 1
            token = body["next"]
            dependencies.install(self.region)
            while token and not self.stopped.is_set():
                status, body = get(f"{path}&next={token}")
                verdict = page_verdict(truth, len(seen), status, body)
                self.tally.record(verdict, {"path": path, "after": len(seen), "status": status, "body": body})
                if status != 200:
                    break
                seen += listed_spans(body)
                token = body["next"]

    def stop(self) -> None:
        self.stopped.set()
        self.join()


class Follower(threading.Thread):
    """The region's arrival check every ``interval`` seconds (each run waits up to most of it)."""

    def __init__(
        self, table: LoaderTable, region: str, *, check: bool, interval: float, poll_seconds: float
    ) -> None:
        super().__init__(daemon=True, name=f"follow-{region}")
        self.table, self.region, self.check = table, region, check
        self.interval, self.poll_seconds = interval, poll_seconds
        self.runs: list[arrival.Following] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            began = time.monotonic()
            self.runs.extend(
                arrival.follow_home(
                    self.table,
                    self.region,
                    check=self.check,
                    wait_seconds=self.interval * 0.8,
                    poll_seconds=self.poll_seconds,
                )
            )
            self.stopped.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def wait_until_following(table: LoaderTable, region: str, generation: int, timeout: float = 120.0) -> float:
    """Seconds until ``region``'s own pointer follows home's ``generation`` (polled every 10 ms)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        pointer = table.regions.of(region)
        if pointer is not None and pointer.generation >= generation:
            return time.monotonic() - began
        time.sleep(0.01)
    raise TimeoutError(f"{region} did not follow generation {generation} within {timeout} s")


class ServedDeletes:
    """``GlobalTable(on_delete=...)``: counts deletes of items whose version the region's pointer names."""

    def __init__(
        self, clients: Mapping[str, DynamoDBClient], table_name: str, dataset: str, home: str
    ) -> None:
        self.clients, self.table_name, self.home = clients, table_name, home
        self.space = keys.key_space(dataset)
        self.deleted = 0
        self.while_served = 0
        self._lock = threading.Lock()

    def __call__(self, region: str, key: tuple[str, str]) -> None:
        version = self._version_of(key[0])
        if version is None:
            return
        pointer_key = self.space.pointer if region == self.home else self.space.region_pointer(region)
        found = self.clients[region].get_item(
            TableName=self.table_name, Key=item_key(pointer_key, keys.META_SORT_KEY), ConsistentRead=True
        )
        item = found.get("Item")
        served = item is not None and version in Pointer.from_item(_plain(item)).names
        with self._lock:
            self.deleted += 1
            self.while_served += served

    def _version_of(self, partition: str) -> int | None:
        parsed = self.space.parse_partition_key(partition)
        if parsed is not None:
            return parsed[0]
        cover_list = re.fullmatch(re.escape(self.space.meta("covers#v")) + r"(\d+)", partition)
        return int(cover_list[1]) if cover_list else None


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: next(iter(value.values())) for name, value in item.items()}


class Killed(BaseException):
    """A process killed mid-run: a BaseException, so no ``except Exception`` of the product stops it."""


class KillSwitch:
    """Kills whoever uses ``client`` at its ``at_call``-th DynamoDB call, or at its first call after
    a write of the partition key ``after_writing`` (the call itself is never sent)."""

    def __init__(self, client: Any, *, at_call: int | None = None, after_writing: str | None = None) -> None:
        self.at_call, self.after_writing = at_call, after_writing
        self.calls = 0
        self.armed = at_call is not None
        self.fired = False
        client.meta.events.register("before-parameter-build.dynamodb", self._before)

    def _before(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if self.fired:
            return
        self.calls += 1
        if self.armed and (self.at_call is None or self.calls >= self.at_call):
            self.fired = True
            raise Killed(f"killed at call {self.calls} ({model.name})")
        key = params.get("Key") or params.get("Item") or {}
        written = key.get(keys.PARTITION_KEY, {}).get("S")
        if (
            self.after_writing is not None
            and model.name in ("PutItem", "UpdateItem")
            and written == self.after_writing
        ):
            self.armed = True


def kill_after_the_switch(table: LoaderTable, load: Callable[[], object]) -> str:
    """Run ``load``, a load of ``table``'s dataset through ``table.client``, killed at its first DynamoDB
    call after it switched the pointer. SIGKILL would leave the same: the pointer names the new version,
    whose load record stays ``prepared`` and whose lock stays held until its lease runs out. Returns
    how it was killed; fails if the load never switched the pointer."""
    KillSwitch(table.client, after_writing=keys.key_space(table.dataset).pointer)
    try:
        load()
    except Killed as kill:
        return str(kill)
    raise AssertionError(f"the load of {table.dataset} ended without switching its pointer")
