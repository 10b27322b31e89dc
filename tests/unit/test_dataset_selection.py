"""Which datasets a request reads, and how their answers combine: pure logic, no table.

``ipmeta.lookup.catalog`` turns ``?datasets=`` and ``?version=`` into (dataset, version)
pairs; ``ipmeta.lookup.answers`` runs one lookup per pair and merges them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipmeta.lookup.answers import lookup_address
from ipmeta.lookup.catalog import (
    ActiveDatasets,
    DatasetCatalog,
    Target,
    Targets,
    VersionMetaReader,
    precedence,
    select_targets,
)
from ipmeta.schema import keys
from ipmeta.schema.errors import (
    DatasetInvalid,
    DatasetNotFound,
    IpAddressNotFound,
    IpAddressReserved,
    NoDataset,
    VersionInvalid,
    VersionNotFound,
)
from ipmeta.schema.ips import Address, parse_ip
from ipmeta.schema.records import ActiveVersion, VersionMeta, VersionStatus
from ipmeta.shapes import ipmeta_document
from tests.memory_table import InMemoryTable

SNAPSHOT = ActiveDatasets(
    ("city", "asn", "blocklist"), {"city": 4, "asn": 9, "blocklist": None}, ("city", "asn", "blocklist")
)


class Retained:
    """Version metadata where only the versions given are retained."""

    def __init__(self, retained: set[int]) -> None:
        self.retained = retained

    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None:
        return VersionMeta(version, VersionStatus.RETIRED) if version in self.retained else None

    def arrivals(self) -> None:
        return None


def metas(retained: dict[str, set[int]]) -> Any:
    return lambda name: cast(VersionMetaReader, Retained(retained.get(name, set())))


def test_every_active_dataset_answers_by_default_and_the_inactive_ones_are_named() -> None:
    targets = select_targets(SNAPSHOT, metas({}))
    assert targets == Targets((Target("city", 4), Target("asn", 9)), ("blocklist",))


def test_datasets_narrow_but_keep_the_deployments_order() -> None:
    assert select_targets(SNAPSHOT, metas({}), "asn,city").names == ("city", "asn")
    assert select_targets(SNAPSHOT, metas({}), " asn , ").names == ("asn",)
    with pytest.raises(DatasetNotFound, match="'nosuch'"):
        select_targets(SNAPSHOT, metas({}), "asn,nosuch")
    with pytest.raises(DatasetInvalid):
        select_targets(SNAPSHOT, metas({}), "ASN")
    with pytest.raises(NoDataset, match="blocklist"):
        select_targets(SNAPSHOT, metas({}), "blocklist")


@pytest.mark.parametrize(
    ("datasets", "version", "expected"),
    [
        ("city", "v2", (("city", 2),)),
        ("city", "2", (("city", 2),)),
        (None, "city:v2", (("city", 2), ("asn", 9))),
        (None, "city:v2,asn:v7", (("city", 2), ("asn", 7))),
        ("asn,city", "asn:V7", (("city", 4), ("asn", 7))),
    ],
)
def test_versions_are_pinned_per_dataset(
    datasets: str | None, version: str, expected: tuple[tuple[str, int], ...]
) -> None:
    retained = metas({"city": {2}, "asn": {7}})
    chosen = select_targets(SNAPSHOT, retained, datasets, version).versions
    assert [(target.dataset, target.version) for target in chosen] == list(expected)


@pytest.mark.parametrize(
    ("datasets", "version", "error"),
    [
        (None, "v2", VersionInvalid),  # three datasets read: which one?
        ("city", "asn:v7", VersionInvalid),  # asn is not read
        ("city", "city:latest", VersionInvalid),
        ("city", "city:v3", VersionNotFound),  # not retained
        (None, "Bad:v2", DatasetInvalid),
    ],
)
def test_a_version_selector_that_names_nothing_retained_is_refused(
    datasets: str | None, version: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        select_targets(SNAPSHOT, metas({"city": {2}, "asn": {7}}), datasets, version)


class InARegion:
    """A replica region's reads: version metadata as home wrote it, and the region's arrival records."""

    def __init__(self, metas: dict[int, VersionMeta], arrivals: dict[int, str]) -> None:
        self.metas, self.arrived = metas, arrivals

    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None:
        return self.metas.get(version)

    def arrivals(self) -> dict[int, str]:
        return self.arrived


@pytest.mark.parametrize(
    ("arrivals", "readable"),
    [
        ({1: "u1", 2: "u2", 3: "u3"}, True),
        ({1: "u1", 2: "u2"}, False),  # the delta itself has not arrived
        ({2: "u2", 3: "u3"}, False),  # its base has not
        ({1: "u1", 2: "u2", 3: "old"}, False),  # a record of another v3 (before a restore)
    ],
)
def test_a_pinned_version_or_page_token_reads_a_version_only_once_it_arrived_here(
    arrivals: dict[int, str], readable: bool
) -> None:
    # Given v3, a delta over v1, retained in home
    metas = {
        1: VersionMeta(1, VersionStatus.RETIRED, uid="u1"),
        2: VersionMeta(2, VersionStatus.ACTIVE, uid="u2"),
        3: VersionMeta(3, VersionStatus.RETIRED, uid="u3", base=1),
    }
    region = cast(VersionMetaReader, InARegion(metas, arrivals))
    snapshot = ActiveDatasets(("city",), {"city": 2}, ("city",))
    # When a request pins it (a page token carries its version the same way)
    if readable:
        assert select_targets(snapshot, lambda name: region, "city", "v3").versions == (Target("city", 3, 1),)
    else:
        with pytest.raises(VersionNotFound):
            select_targets(snapshot, lambda name: region, "city", "v3")


def test_a_version_being_deleted_is_never_read() -> None:
    metas = {2: VersionMeta(2, VersionStatus.DELETING, uid="u2")}
    home = cast(VersionMetaReader, InARegion(metas, {}))
    home.arrivals = lambda: None  # type: ignore[method-assign]
    with pytest.raises(VersionNotFound):
        select_targets(ActiveDatasets(("city",), {"city": 1}, ("city",)), lambda name: home, "city", "v2")


def test_declared_datasets_come_first_and_are_the_default_list() -> None:
    assert precedence(("blocklist", "city"), ["asn", "city", "extra"]) == (
        "blocklist",
        "city",
        "asn",
        "extra",
    )

    class Pointers:
        def read_dataset_names(self, *, consistent: bool = False) -> list[str]:
            return ["asn", "city", "extra"]

        def read_active_versions(self, datasets: list[str]) -> dict[str, ActiveVersion | None]:
            return dict.fromkeys(datasets, ActiveVersion(1))

    snapshot = DatasetCatalog(Pointers(), 5.0, ["city", "asn"]).get()
    assert snapshot.order == ("city", "asn", "extra")
    # A request without ?datasets= reads the declared ones; the others answer when named
    assert select_targets(snapshot, metas({})).names == ("city", "asn")
    assert select_targets(snapshot, metas({}), "extra").names == ("extra",)


def test_a_dataset_name_is_checked_and_current_is_reserved() -> None:
    for name in ("city", "a", "geolite2-city", "x" * keys.MAX_DATASET_NAME_LENGTH):
        assert keys.check_dataset_name(name) == name
    for name in ("", "City", "1city", "-city", "ci#ty", "ci.ty", "x" * 33, "current"):
        with pytest.raises(keys.DatasetNameInvalid):
            keys.check_dataset_name(name)
    # Prefixes never overlap: no name holds the separator, and default keeps the old layout
    assert keys.key_space().pointer == "meta#pointer"
    assert keys.key_space("city").pointer == "ds#city#meta#pointer"
    assert keys.key_space("city").partition_key(3, 4, 1) == "ds#city#v3#4#1"
    assert not keys.key_space("ci").partition_key(3, 4, 1).startswith(keys.key_space("city").prefix)


# -- one answer from several readers ------------------------------------------------------------


def table_of(dataset: str, rows: list[tuple[str, str, dict[str, Any]]], version: int = 1) -> InMemoryTable:
    """An in-memory dataset: ranges as (start, end, data) in the keys of ``dataset``."""
    space = keys.key_space(dataset)
    items = []
    for start_text, end_text, data in rows:
        start, end = parse_ip(start_text), parse_ip(end_text)
        for piece in keys.split_at_buckets(start.family, start.value, end.value):
            items.append(
                {
                    keys.PARTITION_KEY: space.partition_key(version, piece.family, piece.bucket),
                    keys.SORT_KEY: keys.encode_sort_key_value(piece.family, piece.first),
                    keys.ATTR_START: start_text,
                    keys.ATTR_END: end_text,
                    keys.ATTR_DATA: data,
                }
            )
    table = InMemoryTable(items)
    table.space = space
    return table


CITY = table_of("city", [("1.0.1.0", "1.0.1.255", {"city": "Sydney", "country": "AU"})])
ASN = table_of("asn", [("1.0.0.0", "1.0.3.255", {"asn": 64500, "country": "ZZ"})])
READERS = {"city": CITY, "asn": ASN}


def ask(address: str, order: tuple[str, ...] = ("city", "asn")) -> Any:
    with ThreadPoolExecutor(max_workers=2) as pool:
        targets = Targets(tuple(Target(name, 1) for name in order))
        return lookup_address(READERS.__getitem__, targets, parse_ip(address), pool)


def test_the_first_dataset_in_precedence_wins_a_field_both_have() -> None:
    assert ask("1.0.1.9").merged_data() == {"city": "Sydney", "country": "AU", "asn": 64500}
    assert ask("1.0.1.9", ("asn", "city")).merged_data()["country"] == "ZZ"
    # Each section keeps its own value, and the range is the one both share
    body = ipmeta_document.document(ask("1.0.1.9"))
    assert body["datasets"]["asn"]["data"]["country"] == "ZZ"
    assert (body["range"]["start"], body["range"]["end"]) == ("1.0.1.0", "1.0.1.255")
    assert ipmeta_document.document(ask("1.0.1.9"), {"country"})["data"] == {"country": "AU"}


def test_a_gap_in_one_dataset_is_its_section_not_the_answer() -> None:
    answer = ask("1.0.2.9")
    assert ipmeta_document.document(answer)["datasets"]["city"] == {
        "version": "v1",
        "range": None,
        "data": None,
    }
    assert answer.merged_data() == {"asn": 64500, "country": "ZZ"}
    assert answer.field("asn") == 64500
    with pytest.raises(KeyError):
        answer.field("city")
    with pytest.raises(IpAddressNotFound, match="city v1, asn v1"):
        ask("5.5.5.5")
    with pytest.raises(IpAddressReserved):
        ask("10.0.0.1")


def test_the_etag_changes_with_any_datasets_version() -> None:
    first = ask("1.0.1.9").etag()
    again = ask("1.0.1.9").etag()
    other_range = ask("1.0.0.9").etag()
    narrowed = ask("1.0.1.9", ("city",)).etag()
    assert first == again
    assert len({first, other_range, narrowed}) == 3


addresses = st.integers(min_value=(1 << 24), max_value=(1 << 24) + 4 * 256 - 1).map(
    lambda value: Address(4, value)
)


@settings(max_examples=100, deadline=None)
@given(addresses)
def test_the_merged_view_is_each_field_of_the_first_dataset_that_holds_it(address: Address) -> None:
    sections: dict[str, dict[str, Any] | None] = {}
    for name in READERS:
        with ThreadPoolExecutor(max_workers=1) as pool:
            try:
                sections[name] = lookup_address(
                    READERS.__getitem__, Targets((Target(name, 1),)), address, pool
                ).merged_data()
            except IpAddressNotFound:
                sections[name] = None
    if all(section is None for section in sections.values()):
        with pytest.raises(IpAddressNotFound):
            ask(str(address))
        return
    expected: dict[str, Any] = {}
    for name in ("city", "asn"):
        for field, value in (sections[name] or {}).items():
            expected.setdefault(field, value)
    assert ask(str(address)).merged_data() == expected
