"""Delta versions against dynalite: a reload written as what changed over a full base answers exactly
as a full load of the same release, in every shape releases take.

The oracle is twofold: a brute-force scan of the release's rows (the last row
holding an address wins) for the data, and a full load of the same release,
in another dataset of the same table, for the range each answer reports.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.errors import IpAddressNotFound
from ipmeta.schema.ips import Address, format_address
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta.store.dynamodb import make_client
from loader.options import DeltaPolicy, LoadOptions
from loader.pipeline import driver, retention
from loader.records import LoadStatus
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from testing.row_scan import Row, brute_force
from tests.integration.conftest import RequestCounter, get_json, running_api_server, skip_drain
from tests.killing import kill_when
from tests.one_version import lookup_version
from tests.pipeline import write_csv

#: The releases live in buckets 1 to 5 (IPv4 /8s): small enough to probe every edge,
#: with room for whole buckets (covers) and for buckets one release leaves empty.
FIRST, LAST = 1 << 24, (6 << 24) - 1
BUCKET = 1 << 24


def labelled(start: int, end: int, label: str) -> Row:
    """An IPv4 row whose one column, ``name``, is ``label``."""
    return Row(4, start, end, {"name": label})


def label(row: Row) -> str:
    return str(row.values["name"])


@st.composite
def rows(draw: st.DrawFn, count: int = 12) -> list[Row]:
    """Ranges of every shape: small, across a bucket edge, whole buckets (a cover), overlapping."""
    made = []
    for _ in range(draw(st.integers(min_value=1, max_value=count))):
        shape = draw(st.sampled_from(["small", "edge", "buckets", "any"]))
        if shape == "small":
            start = draw(st.integers(min_value=FIRST, max_value=LAST - 300))
            end = start + draw(st.integers(min_value=0, max_value=300))
        elif shape == "edge":
            edge = draw(st.integers(min_value=2, max_value=5)) * BUCKET
            start, end = edge - draw(st.integers(1, 200)), edge + draw(st.integers(0, 200))
        elif shape == "buckets":
            first = draw(st.integers(min_value=1, max_value=5))
            start, end = first * BUCKET, (draw(st.integers(first, 5)) + 1) * BUCKET - 1
        else:
            start = draw(st.integers(min_value=FIRST, max_value=LAST))
            end = draw(st.integers(min_value=start, max_value=min(LAST, start + 3 * BUCKET)))
        made.append(labelled(start, end, draw(st.sampled_from(["a", "b", "c", "d"]))))
    return made


@st.composite
def releases(draw: st.DrawFn) -> tuple[list[Row], list[Row]]:
    """Release A, and B made from it as releases are: most rows kept, some changed, dropped, added."""
    first = draw(rows())
    second = []
    for row in first:
        fate = draw(st.sampled_from(["keep", "keep", "keep", "relabel", "shrink", "drop"]))
        if fate == "keep":
            second.append(row)
        elif fate == "relabel":
            second.append(labelled(row.start, row.end, label(row) + "2"))
        elif fate == "shrink" and row.end > row.start:
            second.append(labelled(row.start, row.start + (row.end - row.start) // 2, label(row)))
    second.extend(draw(rows(count=3)))
    return first, second


def probes(first: list[Row], second: list[Row]) -> list[int]:
    edges = {
        value
        for row in itertools.chain(first, second)
        for value in (row.start - 1, row.start, row.end, row.end + 1, (row.start + row.end) // 2)
    }
    edges.update(bucket * BUCKET + offset for bucket in range(1, 6) for offset in (0, 1, BUCKET - 1))
    return sorted(value for value in edges if FIRST <= value <= LAST)


def answer(table: LoaderTable, version: int, base: int, value: int, cache: RangeCache | None) -> Any:
    try:
        found = lookup_version(table.lookup, version, Address(4, value), cache, base=base)
    except IpAddressNotFound:
        return None
    return found.data["name"], found.start, found.end


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(releases())
def test_a_delta_answers_every_address_as_a_full_load_of_its_release(
    store: LoaderTable, tmp_path_factory: pytest.TempPathFactory, shapes: tuple[list[Row], list[Row]]
) -> None:
    first, second = shapes
    folder = tmp_path_factory.mktemp("delta")
    staging = LocalStaging(folder / "staging")
    # Each example in datasets of its own: the table is the test's, shared by every example
    example = folder.name.replace("_", "-")[-20:].lstrip("0123456789-")
    deltas, fulls = store.for_dataset(f"d{example}"), store.for_dataset(f"f{example}")

    def load(rows: list[Row], table: LoaderTable, name: str, delta: DeltaPolicy) -> driver.LoadResult:
        path = write_csv(rows, folder / name)
        return driver.run_load([path], LoadOptions(dataset=table.dataset, delta=delta), store, staging)

    # Given release A loaded full, then B written as a delta over it, and B loaded full elsewhere
    load(first, deltas, "a.csv", "never")
    delta = load(second, deltas, "b.csv", "always")
    full = load(second, fulls, "b-full.csv", "never")
    meta = deltas.lookup.get_version_meta(delta.version)
    assert meta is not None
    # (B the same bytes as A is unchanged: nothing is written at all)
    assert (meta.base != 0) == (delta.status == "activated")
    cache = RangeCache(1 << 20)
    for value in probes(first, second):
        # Then every address answers B's data, with the range a full load of B reports
        expected = answer(fulls, full.version, 0, value, None)
        got = answer(deltas, delta.version, meta.base, value, cache)
        owner = brute_force(second, 4, value)
        assert (got[0] if got else None) == (label(owner) if owner else None), format_address(4, value)
        assert got == expected, format_address(4, value)
    # And what the cache proved answers the same again
    for value in probes(first, second):
        cached = answer(deltas, delta.version, meta.base, value, cache)
        assert cached == answer(deltas, delta.version, meta.base, value, None)


# -- the policy, the lifecycle and the lookups of real-sized releases ----------------------------


def release(count: int, seed: int, changed: float = 0.0, dropped: float = 0.0) -> list[Row]:
    """``count`` /24s spread over buckets 1-5, every ``1/changed``-th relabelled, some dropped."""
    rows = []
    for index in range(count):
        start = FIRST + (index * 4096 + (index % 7) * 256) % (LAST - FIRST - 256)
        name = f"r{index}"
        position = (index * 2654435761 + seed) % 1000 / 1000  # spread the changes over the buckets
        if position < dropped:
            continue
        if position < dropped + changed:
            name += f"-{seed}"
        rows.append(labelled(start, start + 255, name))
    return rows


def load_rows(
    store: LoaderTable, folder: Path, name: str, rows: list[Row], **options: Any
) -> driver.LoadResult:
    staging = LocalStaging(folder / "staging")
    return driver.run_load([write_csv(rows, folder / name)], LoadOptions(**options), store, staging)


def test_auto_writes_a_small_change_as_a_delta_and_a_large_one_full(
    store: LoaderTable, tmp_path: Path
) -> None:
    base = load_rows(store, tmp_path, "a.csv", release(2000, 1))
    small = load_rows(store, tmp_path, "b.csv", release(2000, 2, changed=0.03, dropped=0.01))
    large = load_rows(store, tmp_path, "c.csv", release(2000, 3, changed=0.5))
    small_meta = store.lookup.get_version_meta(small.version)
    large_meta = store.lookup.get_version_meta(large.version)
    assert small_meta is not None
    assert large_meta is not None
    # The small change is a delta over A, its report says what it wrote and why
    assert small_meta.base == base.version
    delta = small.report.delta
    assert delta is not None
    assert delta["written_as"] == "delta"
    assert delta["unchanged"] > 0.9 * 2000
    assert delta["replaced"] > 0
    assert delta["gaps"] > 0
    assert delta["share_of_base"] < 0.1
    assert small.report.items == small_meta.items == delta["items"]
    # The large one crossed the threshold: written full, and the report says so
    assert large_meta.base == 0
    assert large.report.delta is not None
    assert large.report.delta["written_as"] == "full"
    assert "above the 25% threshold" in large.report.delta["reason"]


def test_a_chain_too_long_is_compacted_into_a_full_version(store: LoaderTable, tmp_path: Path) -> None:
    base = load_rows(store, tmp_path, "a.csv", release(300, 1))
    chain = [
        load_rows(store, tmp_path, f"{n}.csv", release(300, 10 + n, changed=0.02), delta_max_chain=2)
        for n in range(3)
    ]
    bases = [store.lookup.get_version_meta(result.version).base for result in chain]  # type: ignore[union-attr]
    # Every delta sits on the full base, never on another delta; the third compacts
    assert bases == [base.version, base.version, 0]


def test_cleanup_keeps_a_base_while_a_delta_needs_it_and_deletes_only_a_deltas_own_items(
    store: LoaderTable, tmp_path: Path
) -> None:
    base = load_rows(store, tmp_path, "a.csv", release(500, 1))
    first = load_rows(store, tmp_path, "b.csv", release(500, 2, changed=0.05))
    second = load_rows(store, tmp_path, "c.csv", release(500, 3, changed=0.05))
    staging = LocalStaging(tmp_path / "staging")
    # Retention 0: the retired base would go, but the active delta answers through it
    outcome = retention.cleanup(store, staging, retention=0, now=10**10, sleep=skip_drain)
    assert outcome["bases"] == [f"v{base.version}"]
    assert [entry["version"] for entry in outcome["deleted"]] == [f"v{first.version}"]
    assert outcome["deleted"][0]["items_deleted"] == first.items
    assert store.lookup.get_version_meta(base.version).retained  # type: ignore[union-attr]
    # And the active delta still answers its release everywhere
    for row in release(500, 3, changed=0.05)[::25]:
        found = answer(store, second.version, base.version, row.start, None)
        assert found is not None
        assert found[0] == label(row)


def test_rollback_to_a_full_version_or_a_delta_answers_as_that_release(
    store: LoaderTable, tmp_path: Path
) -> None:
    releases_ = [release(400, seed, changed=0.05 if seed > 1 else 0.0) for seed in (1, 2, 3)]
    loaded = [load_rows(store, tmp_path, f"{n}.csv", rows) for n, rows in enumerate(releases_)]
    for target, rows in ((loaded[1], releases_[1]), (loaded[0], releases_[0])):
        retention.rollback(store, target.version)
        meta = store.lookup.get_version_meta(target.version)
        assert meta is not None
        pointer = store.lookup.read_active_versions([store.dataset])[store.dataset]
        assert pointer is not None
        assert (pointer.version, pointer.base) == (target.version, meta.base)
        for row in rows[::20]:
            found = answer(store, target.version, meta.base, row.start + 5, None)
            assert found is not None
            assert found[0] == label(row)


def test_a_delta_exports_the_same_ranges_as_a_full_load_of_its_release(
    store: LoaderTable, tmp_path: Path
) -> None:
    from loader.export.version_ranges import ranges_of_version

    load_rows(store, tmp_path, "a.csv", [*release(600, 1), labelled(4 * BUCKET, 5 * BUCKET - 1, "whole")])
    rows = [*release(600, 2, changed=0.05, dropped=0.02), labelled(4 * BUCKET, 4 * BUCKET + 99, "part")]
    delta = load_rows(store, tmp_path, "b.csv", rows)
    full = load_rows(store.for_dataset("full"), tmp_path, "b-full.csv", rows, dataset="full", delta="never")
    delta_meta = store.lookup.get_version_meta(delta.version)
    full_table = store.for_dataset("full")
    full_meta = full_table.lookup.get_version_meta(full.version)
    assert delta_meta is not None
    assert full_meta is not None
    assert delta_meta.base != 0
    exported = [(each.start, each.end, dict(each.data)) for each in ranges_of_version(store, delta_meta)]
    expected = [(each.start, each.end, dict(each.data)) for each in ranges_of_version(full_table, full_meta)]
    # The base's ranges are cut where the delta lies: equal data meets again, so merge neighbours
    assert merged(exported) == merged(expected)


def merged(ranges: list[tuple[int, int, dict[str, Any]]]) -> list[tuple[int, int, dict[str, Any]]]:
    out: list[tuple[int, int, dict[str, Any]]] = []
    for start, end, data in ranges:
        if out and out[-1][1] + 1 == start and out[-1][2] == data:
            out[-1] = (out[-1][0], end, data)
        else:
            out.append((start, end, data))
    return out


def test_a_load_with_reverse_indexes_is_written_full_and_says_why(store: LoaderTable, tmp_path: Path) -> None:
    load_rows(store, tmp_path, "a.csv", release(200, 1), flag_column="name")
    indexed = load_rows(store, tmp_path, "b.csv", release(200, 2, changed=0.02), flag_column="name")
    meta = store.lookup.get_version_meta(indexed.version)
    assert meta is not None
    assert meta.base == 0
    assert indexed.report.delta is None  # no base was even read


def test_an_uncached_lookup_of_a_delta_sends_two_queries_at_once_then_one_in_a_known_stretch(
    table_settings: Settings, tmp_path: Path
) -> None:
    # Given a delta over a base, and a client holding every Query until two are in flight
    client = make_client(table_settings)
    store = LoaderTable(client, table_settings.table_name)
    base = load_rows(store, tmp_path, "a.csv", release(400, 1))
    delta = load_rows(store, tmp_path, "b.csv", release(400, 2, changed=0.05))
    assert store.lookup.get_version_meta(delta.version).base == base.version  # type: ignore[union-attr]
    counter = RequestCounter()
    together = threading.Barrier(2)
    holding = threading.Event()

    def hold_queries(request: Any, **_: Any) -> None:
        if holding.is_set() and request.headers["X-Amz-Target"].decode().endswith(".Query"):
            together.wait(timeout=5)

    client.meta.events.register("before-send.dynamodb", counter)
    client.meta.events.register("before-send.dynamodb", hold_queries)
    rows = release(400, 2, changed=0.05)
    unchanged = [row for row in rows if not label(row).endswith("-2")]
    # Pairs of unchanged neighbours in one bucket, no delta item between them
    pairs = [
        (first, second)
        for first, second in itertools.pairwise(unchanged)
        if first.start // BUCKET == second.start // BUCKET and second.start == first.start + 4096 + 256
    ]
    assert len(pairs) >= 10
    cache = RangeCache(1 << 20)
    with running_api_server(store, ranges=cache) as server:
        get_json(server, "/v1/health")
        for first, second in pairs[::3][:10]:
            cache.clear()  # uncached: nothing of the delta known
            holding.set()
            counter.reset()
            status, body = get_json(server, f"/v1/ip/{format_address(4, first.start + 7)}")
            # Then each answers the new release, from exactly two Queries (the delta's, the base's)
            assert (status, body["data"]["name"]) == (200, label(first))
            assert body["datasets"]["default"]["version"] == f"v{delta.version}"
            assert counter.operations().count("Query") == 2, counter.operations()
            holding.clear()
            # And its neighbour falls through the stretch the delta's Query proved: the base's alone
            counter.reset()
            status, body = get_json(server, f"/v1/ip/{format_address(4, second.start + 7)}")
            assert (status, body["data"]["name"]) == (200, label(second))
            assert counter.operations().count("Query") == 1, counter.operations()
    assert not together.broken


def _killed_in(phase: str, staging: Path, store: LoaderTable) -> str | None:
    """A delta load's id once it is inside ``phase``: some partitions diffed, or some chunks written."""
    for folder in staging.glob("v*"):
        resolved = list((folder / "resolved").glob("*.json")) if (folder / "resolved").is_dir() else []
        if phase == "diff" and resolved and not (folder / "plan" / "writes.json").exists():
            return folder.name
    if phase == "write":
        for load in store.loads.list_all():
            if load.status == LoadStatus.PREPARED and 0 < len(load.done) < load.chunks:
                return load.load_id
    return None


@pytest.mark.parametrize("phase", ["diff", "write"])
def test_a_delta_load_killed_in_its_diff_or_its_writes_resumes_and_activates_exactly(
    table_settings: Settings, store: LoaderTable, tmp_path: Path, phase: str
) -> None:
    base = load_rows(store, tmp_path, "a.csv", release(6000, 1))
    rows = release(6000, 2, changed=0.08, dropped=0.02)
    source = write_csv(rows, tmp_path / "b.csv")
    # Given a loader process writing B as a delta: many partitions, small chunks, one at a time
    env = {
        **os.environ,
        ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint),
        ENV_TABLE_NAME: table_settings.table_name,
    }
    command = [sys.executable, "-m", "ipmeta_cli.main", "load", "--data-dir", str(tmp_path), "--workers", "1"]
    command += [
        "--delta",
        "always",
        "--partition-rows",
        "300",
        "--chunk-size",
        "25",
        "--parallel-chunks",
        "1",
    ]
    # When it is SIGKILLed inside the phase
    killed, _ = kill_when(
        [*command, str(source)], env, lambda: _killed_in(phase, tmp_path / "staging", store)
    )
    assert store.lookup.read_active_version(consistent=True) == base.version  # A keeps serving
    # Then a resume finishes the same load, writes each planned item once, and activates
    resumed = driver.run_load([], LoadOptions(), store, LocalStaging(tmp_path / "staging"), resume=killed)
    meta = store.lookup.get_version_meta(resumed.version)
    assert meta is not None
    assert (resumed.status, resumed.load_id, meta.base) == ("activated", killed, base.version)
    assert resumed.report.items_written == meta.items
    manifest = store.manifests.get(meta.version)
    assert manifest is not None
    assert sum(store.partitions.count(pk) for pk in manifest.partitions) == meta.items
    for row in rows[::50]:
        found = answer(store, meta.version, meta.base, row.end, None)
        assert found is not None
        assert found[0] == label(row)


def test_plan_with_the_previous_release_prints_the_items_a_delta_load_then_writes(
    store: LoaderTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipmeta_cli import main as cli

    old = write_csv(release(800, 1), tmp_path / "old.csv")
    new = write_csv(release(800, 2, changed=0.04, dropped=0.01), tmp_path / "new.csv")
    # Given the plan of the new release over the previous one
    assert cli.main(["plan", "--json", "--workers", "1", str(new), "--previous", str(old)]) == 0
    reload = json.loads(capsys.readouterr().out)["reload"]
    assert reload["auto_writes"] == "delta"
    assert reload["delta"]["write_usd"] < reload["full"]["write_usd"] / 10
    # When both are loaded, the delta writes the items the plan counted
    load_rows(store, tmp_path, "old.csv", release(800, 1))
    delta = load_rows(store, tmp_path, "new.csv", release(800, 2, changed=0.04, dropped=0.01))
    assert delta.report.delta is not None
    assert delta.report.delta["written_as"] == "delta"
    assert reload["delta_items"] == delta.items
    assert reload["previous_items"] == 800


def test_a_failed_delta_leaves_its_base_serving_and_cleanup_takes_only_its_items(
    store: LoaderTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.pipeline import abort
    from loader.pipeline.write import write_chunk

    rows_a = release(1200, 1)
    base = load_rows(store, tmp_path, "a.csv", rows_a)
    base_manifest = store.manifests.get(base.version)
    assert base_manifest is not None
    base_items = sum(store.partitions.count(pk) for pk in base_manifest.partitions)
    # Given a delta load whose third chunk breaks (a throttled table, a killed task)
    written: list[int] = []
    real_write_chunk = write_chunk

    def breaking_write_chunk(load_id: str, index: int, *args: Any, **kwargs: Any) -> Any:
        if len(written) == 2:
            raise RuntimeError("the table refused the chunk")
        written.append(index)
        return real_write_chunk(load_id, index, *args, **kwargs)

    monkeypatch.setattr(driver, "write_chunk", breaking_write_chunk)
    with pytest.raises(RuntimeError, match="refused"):
        driver.run_load(
            [write_csv(release(1200, 2, changed=0.1), tmp_path / "b.csv")],
            LoadOptions(delta="always", chunk_size=25),
            store,
            LocalStaging(tmp_path / "staging"),
            parallel_chunks=1,
        )
    # Then A keeps serving every address, through the API as well
    assert store.lookup.read_active_version(consistent=True) == base.version
    with running_api_server(store) as server:
        for row in rows_a[::60]:
            _, body = get_json(server, f"/v1/ip/{format_address(4, row.start)}")
            assert body["data"]["name"] == label(row)
    # And once the load is failed (the state machine's Abort), cleanup deletes the delta's items alone
    (failed,) = [load for load in store.loads.list_all() if load.status == LoadStatus.PREPARED]
    abort.fail(failed.load_id, "States.TaskFailed", store, now=10.0)
    outcome = retention.cleanup(store, LocalStaging(tmp_path / "staging"), now=10**10, sleep=skip_drain)
    assert [entry["version"] for entry in outcome["deleted"]] == [failed.load_id]
    assert outcome["deleted"][0]["items_deleted"] == 2 * 25
    assert sum(store.partitions.count(pk) for pk in base_manifest.partitions) == base_items
