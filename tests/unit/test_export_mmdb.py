"""Exporting to a MaxMind DB: ranges become CIDR blocks of one IPv6 tree that ``maxminddb`` reads back."""

from __future__ import annotations

import ipaddress
import tracemalloc
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import maxminddb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.export.files import ExportRange, write_mmdb
from loader.export.mmdb_writer import control_bytes, pointer_bytes, range_blocks
from loader.formats import FormatOptions, SourceRow, open_rows

READERS = {"C extension": maxminddb.open_database, "pure Python": maxminddb.Reader}


def address(family: int, value: int) -> str:
    return str(ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value))


def export(tmp_path: Path, ranges: list[ExportRange], **options: Any) -> Path:
    out = tmp_path / "out.mmdb"
    write_mmdb(ranges, out, database_type="ipmeta", description={"en": "test"}, **options)
    return out


RANGES = [
    # Not CIDR-aligned: each range is split into its blocks
    ExportRange(4, 0x01000003, 0x010001FE, {"asn": 13335, "name": "Cloudflare", "lat": Decimal("-27.4767")}),
    ExportRange(
        4, 0x08080800, 0x080808FF, {"asn": 15169, "anycast": True, "tags": ["dns", "cdn"], "gone": None}
    ),
    ExportRange(4, 0xFFFFFF00, 0xFFFFFFFF, {"asn": 0, "neg": -5, "big": 2**70}),
    ExportRange(6, 0x2001_0200 << 96, (0x2001_0200 << 96) + 12345, {"asn": 2500, "lat": Decimal("35.6895")}),
    ExportRange(6, (2**128) - 256, (2**128) - 1, {"asn": 1, "flag": False}),
]


def expected(data: dict[str, Any]) -> dict[str, Any]:
    """What a reader answers: no nulls, integral numbers as int, decimals as doubles."""
    return {
        key: float(value) if isinstance(value, Decimal) else value
        for key, value in data.items()
        if value is not None
    }


@pytest.mark.parametrize("reader_name", READERS)
def test_every_range_answers_its_data_at_its_edges_and_nothing_in_the_gaps(
    tmp_path: Path, reader_name: str
) -> None:
    out = export(tmp_path, RANGES)
    with READERS[reader_name](str(out)) as reader:
        for item in RANGES:
            for value in (item.start, item.end, (item.start + item.end) // 2):
                answer = reader.get(address(item.family, value))
                assert answer == expected(dict(item.data)), (item, value)
                assert {key: type(inner) for key, inner in answer.items()} == {
                    key: type(inner) for key, inner in expected(dict(item.data)).items()
                }
            if item.start > 0:
                assert reader.get(address(item.family, item.start - 1)) is None
        assert reader.get("1.0.0.2") is None
        assert reader.get("::ffff:8.8.8.8") is None  # no aliases unless asked for
        metadata = reader.metadata()
        assert (metadata.database_type, metadata.description, metadata.ip_version) == (
            "ipmeta",
            {"en": "test"},
            6,
        )


def test_true_one_and_one_point_zero_stay_apart(tmp_path: Path) -> None:
    # mmdb-writer 0.2.7 caches values by equality and writes the 1 as true (docs/decisions.md)
    data = {"flag": True, "count": 1, "ratio": Decimal("1.5"), "off": False, "zero": 0}
    out = export(tmp_path, [ExportRange(4, 1, 1, data), ExportRange(4, 3, 3, {"count": 1, "flag": True})])
    with maxminddb.open_database(str(out)) as reader:
        answer, second = reader.get("0.0.0.1"), reader.get("0.0.0.3")
    assert isinstance(answer, dict)
    assert isinstance(second, dict)
    assert answer == {"flag": True, "count": 1, "ratio": 1.5, "off": False, "zero": 0}
    assert [type(answer[key]) for key in ("flag", "count", "off", "zero")] == [bool, int, bool, int]
    assert (second, type(second["count"]), type(second["flag"])) == ({"count": 1, "flag": True}, int, bool)


def test_ipv4_aliases_answer_mapped_and_6to4_addresses_unless_ipv6_data_is_there(tmp_path: Path) -> None:
    six_to_four = ExportRange(6, 0x2002 << 112, (0x2002 << 112) + 99, {"asn": 6})
    out = export(tmp_path, [*RANGES[:2], RANGES[3], six_to_four, RANGES[4]], ipv4_aliases=True)
    with maxminddb.open_database(str(out)) as reader:
        assert reader.get("::ffff:8.8.8.8") == reader.get("8.8.8.8") == expected(dict(RANGES[1].data))
        assert reader.get("2002::1") == {"asn": 6}  # 2002::/16 holds data: no alias there
        networks = [network for network, _ in reader]
    # Iterating lists each IPv4 network once, as IPv4
    assert not any(
        network.version == 6 and network.subnet_of(ipaddress.ip_network("::ffff:0:0/96"))
        for network in networks
    )


def test_ipv6_ranges_inside_the_ipv4_space_are_left_out_and_counted(tmp_path: Path) -> None:
    ranges = [RANGES[0], ExportRange(6, 0, 1, {"loopback": True}), ExportRange(6, 2**32 - 1, 2**33, {"x": 1})]
    out = tmp_path / "out.mmdb"
    stats = write_mmdb(ranges, out, database_type="ipmeta", description={})
    assert stats.details["ipv6_ranges_in_ipv4_space"] == 2
    with maxminddb.open_database(str(out)) as reader:
        assert reader.get("::1:0:0") == {"x": 1}  # the part above ::/96 stays
        assert reader.get("0.0.0.1") is None


def test_unsorted_or_overlapping_ranges_are_refused_and_no_file_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out.mmdb"
    with pytest.raises(ValueError, match="sorted by \\(family, start\\) and disjoint"):
        write_mmdb([RANGES[1], RANGES[0]], out, database_type="t", description={})
    assert list(tmp_path.iterdir()) == []


def test_a_round_trip_through_the_reader_gives_back_the_same_ranges(tmp_path: Path) -> None:
    # Given an export, read back by the mmdb reader of loader.formats
    out = export(tmp_path, RANGES)
    rows = [row for row in open_rows(out, out.name, FormatOptions()) if isinstance(row, SourceRow)]
    # Then its blocks join up to the ranges exported, each with its data
    joined: list[tuple[int, int, int, dict[str, Any]]] = []
    for row in rows:
        data = {key: value for key, value in row.values.items() if value is not None}
        if (
            joined
            and joined[-1][0] == row.family
            and joined[-1][2] + 1 == row.start
            and joined[-1][3] == data
        ):
            joined[-1] = (row.family, joined[-1][1], row.end, data)
        else:
            joined.append((row.family, row.start, row.end, data))
    assert joined == [(item.family, item.start, item.end, expected(dict(item.data))) for item in RANGES]


def disjoint_ranges() -> st.SearchStrategy[list[ExportRange]]:
    def build(cuts: list[int], family: int, labels: list[bool]) -> list[ExportRange]:
        points = sorted(set(cuts))
        return [
            ExportRange(4 if family == 4 else 6, start, end, {"n": index})
            for index, (start, end, keep) in enumerate(zip(points[::2], points[1::2], labels, strict=False))
            if keep
        ]

    v4 = st.builds(
        build,
        st.lists(st.integers(0, 2**32 - 1), max_size=16),
        st.just(4),
        st.lists(st.booleans(), min_size=8, max_size=8),
    )
    v6 = st.builds(
        build,
        st.lists(st.integers(2**32, 2**128 - 1), max_size=16),
        st.just(6),
        st.lists(st.booleans(), min_size=8, max_size=8),
    )
    return st.builds(
        lambda a, b: a + [ExportRange(r.family, r.start, r.end, {"n": 100 + r.data["n"]}) for r in b], v4, v6
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranges=disjoint_ranges(), probes=st.lists(st.integers(0, 2**128 - 1), max_size=20))
def test_any_disjoint_ranges_answer_like_a_brute_force_scan(
    tmp_path: Path, ranges: list[ExportRange], probes: list[int]
) -> None:
    out = export(tmp_path, ranges)
    edges = [value for item in ranges for value in (item.start, item.end, item.end + 1)]
    with maxminddb.open_database(str(out)) as reader:
        for family, value in [(item.family, edge) for item in ranges for edge in edges] + [
            (6, probe) for probe in probes
        ]:
            # ``end + 1`` of the last address of a family is no address at all
            if (family == 4 and value >= 2**32) or (family == 6 and not 2**32 <= value < 2**128):
                continue
            want = next(
                (
                    dict(item.data)
                    for item in ranges
                    if item.family == family and item.start <= value <= item.end
                ),
                None,
            )
            assert reader.get(address(family, value)) == want


def test_range_blocks_are_the_fewest_aligned_cidrs() -> None:
    assert list(range_blocks(0, 2**128 - 1)) == [(0, 1), (2**127, 1)]
    assert list(range_blocks(1, 6)) == [(1, 128), (2, 127), (4, 127), (6, 128)]


def test_encoding_follows_the_spec_sizes() -> None:
    assert control_bytes(2, 28) == bytes([0x40 | 28])
    assert control_bytes(2, 29) == bytes([0x40 | 29, 0])
    assert control_bytes(2, 285) == bytes([0x40 | 30, 0, 0])
    assert control_bytes(2, 65821) == bytes([0x40 | 31, 0, 0, 0])
    assert control_bytes(11, 2) == bytes([2, 4])  # extended type: array is 11 - 7
    assert pointer_bytes(2047) == bytes([0x27, 0xFF])
    assert pointer_bytes(2048) == bytes([0x28, 0, 0])
    assert pointer_bytes(526336) == bytes([0x30, 0, 0, 0])
    assert pointer_bytes(2**30) == bytes([0x38]) + (2**30).to_bytes(4, "big")


def test_memory_does_not_grow_with_the_ranges(tmp_path: Path) -> None:
    """The writer holds the open path and the distinct records, not the ranges (traced allocations)."""

    def ranges(count: int) -> Iterator[ExportRange]:
        for index in range(count):
            yield ExportRange(4, index * 512, index * 512 + 300, {"cc": "AU", "n": index % 50})

    peaks = []
    for count in (2_000, 10_000):
        tracemalloc.start()
        write_mmdb(ranges(count), tmp_path / f"{count}.mmdb", database_type="t", description={})
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] * 1.5, peaks


def test_one_export_invocations_limit_follows_its_cpu_share_and_time() -> None:
    from loader.pipeline.export_task import EXPORT_CPU_SECONDS_PER_ITEM, max_export_items

    # The default loader function (1,024 MB: 0.58 of a vCPU) with the file's half of 15 minutes
    default = max_export_items(1024, 450)
    assert default == int(450 * 1024 / 1769 / EXPORT_CPU_SECONDS_PER_ITEM)
    assert 4_000_000 < default < 4_500_000  # GeoLite2-City's 3.6 M items fit, DB-IP City's 14.8 M not
    # A whole vCPU (1,769 MB and more) writes 7.3 M; more memory buys no more of one thread
    assert max_export_items(1769, 450) == max_export_items(10_240, 450) > 7_000_000
    # And less time, fewer items
    assert max_export_items(1024, 225) < default
