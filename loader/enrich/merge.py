"""The sort-merge of a chunk's addresses with each dataset's ranges, and the columns each row gets.

``find`` sorts the chunk's addresses of one family (O(n log n) in the chunk),
finds each one's range with one ``searchsorted`` over the dataset's sorted
starts (O(n log r), cache-friendly because the addresses are sorted), keeps it
where the address is within the range's end (else the address is in a gap),
and puts the answers back in the chunk's order.

``annotate`` turns those answers into what ``GET /v1/ip/{ip}`` answers, column
by column (``ipmeta.lookup.answers.CombinedResult`` is the rule, row by row):

- the merged data: each field from the first dataset, in precedence order, that
  holds the address and has the field (a CSV-loaded field always, null or not;
  a MaxMind DB's where the record has it);
- a field that several datasets have also comes from each, as ``<dataset>__<field>``;
- ``ip_range_start``/``ip_range_end``: where every answering dataset agrees (the
  intersection of their ranges), as address text;
- ``ip_bogon``: ``ipmeta.schema.bogons``'s table, vectorized;
- ``ip_error``: ``IP_ADDRESS_INVALID`` for a blank or invalid address, and for
  one no dataset holds ``IP_ADDRESS_NOT_FOUND`` (``IP_ADDRESS_RESERVED`` for a
  bogon), the API's codes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ipmeta.schema.bogons import BOGONS_V4, BOGONS_V6, GLOBAL_EXCEPTIONS_V4, GLOBAL_EXCEPTIONS_V6
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved
from ipmeta.schema.ips import format_address
from loader.enrich.addresses import INVALID, ParsedAddresses
from loader.enrich.snapshot import V6_DTYPE, DatasetSnapshot, FamilyRanges, Snapshot

RANGE_START: Final = "ip_range_start"
RANGE_END: Final = "ip_range_end"
BOGON: Final = "ip_bogon"
ERROR: Final = "ip_error"
#: Between a dataset's name and its field where several datasets have the field.
PREFIX_SEPARATOR: Final = "__"


@dataclass(frozen=True)
class Found:
    """One dataset's answer for each row of a chunk: a row of its data, and its range's bounds."""

    rows: npt.NDArray[np.int64]  #: -1 where the dataset holds no range for the address
    start4: npt.NDArray[np.int64]
    end4: npt.NDArray[np.int64]
    start6: npt.NDArray[Any]
    end6: npt.NDArray[Any]

    @property
    def matched(self) -> npt.NDArray[np.bool_]:
        return self.rows >= 0


def find(dataset: DatasetSnapshot, parsed: ParsedAddresses) -> Found:
    size = len(parsed.family)
    found = Found(
        np.full(size, -1, dtype=np.int64),
        np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=V6_DTYPE),
        np.zeros(size, dtype=V6_DTYPE),
    )
    for family, ranges, values, starts, ends in (
        (4, dataset.v4, parsed.v4, found.start4, found.end4),
        (6, dataset.v6, parsed.v6, found.start6, found.end6),
    ):
        where = np.flatnonzero(parsed.family == family)
        if not len(where) or not len(ranges.rows):
            continue
        at, held = _merge(ranges, values[where])
        hits = where[held]
        found.rows[hits] = ranges.rows[at[held]]
        starts[hits] = ranges.starts[at[held]]
        ends[hits] = ranges.ends[at[held]]
    return found


def _merge(
    ranges: FamilyRanges, values: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each value's candidate range (the last starting at or before it) and whether it holds the value."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    at = np.searchsorted(ranges.starts, ordered, side="right") - 1
    held = at >= 0
    held[held] = ordered[held] <= ranges.ends[at[held]]
    # Back to the chunk's order: the answer of ordered[i] belongs to values[order[i]].
    restored_at = np.empty_like(at)
    restored_held = np.empty_like(held)
    restored_at[order] = at
    restored_held[order] = held
    return restored_at, restored_held


def annotate(snapshot: Snapshot, parsed: ParsedAddresses) -> dict[str, pa.Array]:
    """A chunk's new columns, in order: merged fields, prefixed fields, range, bogon, error."""
    founds = [find(dataset, parsed) for dataset in snapshot.datasets]
    columns = _data_columns(snapshot.datasets, founds)
    any_match = np.zeros(len(parsed.family), dtype=bool)
    for found in founds:
        any_match |= found.matched
    start_text, end_text = _span_text(parsed, founds, any_match)
    bogon = _bogons(parsed)
    columns[RANGE_START] = start_text
    columns[RANGE_END] = end_text
    columns[BOGON] = pa.array(bogon, mask=parsed.invalid)
    columns[ERROR] = _errors(parsed, any_match, bogon)
    return columns


def output_fields(datasets: Sequence[DatasetSnapshot]) -> tuple[list[str], list[tuple[DatasetSnapshot, str]]]:
    """The merged fields in order of first appearance, and the (dataset, field) pairs that get a prefix."""
    merged: list[str] = []
    holders: dict[str, list[DatasetSnapshot]] = {}
    for dataset in datasets:
        for name in dataset.fields:
            if name not in holders:
                merged.append(name)
            holders.setdefault(name, []).append(dataset)
    prefixed = [(each, name) for name in merged if len(holders[name]) > 1 for each in holders[name]]
    return merged, prefixed


def _data_columns(datasets: Sequence[DatasetSnapshot], founds: Sequence[Found]) -> dict[str, pa.Array]:
    merged_names, prefixed = output_fields(datasets)
    values: dict[tuple[str, str], pa.Array] = {}
    for dataset, found in zip(datasets, founds, strict=True):
        indices = pa.array(found.rows, mask=~found.matched)
        for name in dataset.fields:
            values[dataset.dataset, name] = dataset.data.column(name).take(indices).combine_chunks()
    columns: dict[str, pa.Array] = {}
    for name in merged_names:
        columns[name] = _merged(name, datasets, founds, values)
    for dataset, name in prefixed:
        columns[f"{dataset.dataset}{PREFIX_SEPARATOR}{name}"] = values[dataset.dataset, name]
    return columns


def _merged(
    name: str,
    datasets: Sequence[DatasetSnapshot],
    founds: Sequence[Found],
    values: dict[tuple[str, str], pa.Array],
) -> pa.Array:
    """The field from the first dataset, in precedence order, that holds the address and has the field."""
    holders = [
        (dataset, found) for dataset, found in zip(datasets, founds, strict=True) if name in dataset.fields
    ]
    if len(holders) == 1:
        return values[holders[0][0].dataset, name]
    result: pa.Array | None = None
    kind = _common_type([values[dataset.dataset, name].type for dataset, _ in holders])
    for dataset, found in reversed(holders):
        value = _decoded(values[dataset.dataset, name], kind)
        present = found.matched
        if not dataset.always_present(name):
            present = present & value.is_valid().to_numpy(zero_copy_only=False)
        result = value if result is None else pc.if_else(pa.array(present), value, result)
    assert result is not None
    return result


def _common_type(types: Sequence[pa.DataType]) -> pa.DataType:
    plain = [t.value_type if pa.types.is_dictionary(t) else t for t in types]
    return plain[0] if all(t == plain[0] for t in plain) else pa.string()


def _decoded(array: pa.Array, kind: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array if array.type == kind else pc.cast(array, kind)


def _span_text(
    parsed: ParsedAddresses, founds: Sequence[Found], any_match: npt.NDArray[np.bool_]
) -> tuple[pa.Array, pa.Array]:
    """Where every answering dataset agrees: the latest start and the earliest end, as text."""
    size = len(parsed.family)
    start4 = np.zeros(size, dtype=np.int64)
    end4 = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    start6 = np.zeros(size, dtype=V6_DTYPE)
    end6 = np.full(size, b"\xff" * 16, dtype=V6_DTYPE)
    for found in founds:
        hit = found.matched
        start4 = np.where(hit & (found.start4 > start4), found.start4, start4)
        end4 = np.where(hit & (found.end4 < end4), found.end4, end4)
        start6 = np.where(hit & (found.start6 > start6), found.start6, start6)
        end6 = np.where(hit & (found.end6 < end6), found.end6, end6)
    is4 = parsed.family == 4
    texts = []
    for v4, v6 in ((start4, start6), (end4, end6)):
        text = np.full(size, None, dtype=object)
        text[is4 & any_match] = _v4_text(v4[is4 & any_match])
        is6 = (parsed.family == 6) & any_match
        text[is6] = _v6_text(v6[is6])
        texts.append(pa.array(text, type=pa.string()))
    return texts[0], texts[1]


def _v4_text(values: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
    unique, inverse = np.unique(values, return_inverse=True)
    return np.array([format_address(4, int(value)) for value in unique.tolist()], dtype=object)[inverse]


def _v6_text(values: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    unique, inverse = np.unique(values, return_inverse=True)
    texts = [format_address(6, int.from_bytes(bytes(value).ljust(16, b"\0"), "big")) for value in unique]
    return np.array(texts, dtype=object)[inverse]


def _intervals(blocks: Sequence[str], family: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    networks = sorted(ipaddress.ip_network(block) for block in blocks)
    if family == 4:
        return (
            np.array([int(n.network_address) for n in networks], dtype=np.int64),
            np.array([int(n.broadcast_address) for n in networks], dtype=np.int64),
        )
    return (
        np.array([n.network_address.packed for n in networks], dtype=V6_DTYPE),
        np.array([n.broadcast_address.packed for n in networks], dtype=V6_DTYPE),
    )


_BOGONS: Final = {
    4: (_intervals([block for block, _ in BOGONS_V4], 4), _intervals(GLOBAL_EXCEPTIONS_V4, 4)),
    6: (_intervals([block for block, _ in BOGONS_V6], 6), _intervals(GLOBAL_EXCEPTIONS_V6, 6)),
}


def _inside(values: npt.NDArray[Any], intervals: tuple[npt.NDArray[Any], ...]) -> npt.NDArray[np.bool_]:
    starts, ends = intervals
    at = np.searchsorted(starts, values, side="right") - 1
    inside = at >= 0
    inside[inside] = values[inside] <= ends[at[inside]]
    return inside


def _bogons(parsed: ParsedAddresses) -> npt.NDArray[np.bool_]:
    """``is_bogon`` of each row, vectorized over the same table (``ipmeta.schema.bogons``)."""
    bogon = np.zeros(len(parsed.family), dtype=bool)
    for family, values in ((4, parsed.v4), (6, parsed.v6)):
        where = parsed.family == family
        blocks, exceptions = _BOGONS[family]
        bogon[where] = _inside(values[where], blocks) & ~_inside(values[where], exceptions)
    return bogon


def _errors(
    parsed: ParsedAddresses, any_match: npt.NDArray[np.bool_], bogon: npt.NDArray[np.bool_]
) -> pa.Array:
    codes = np.full(len(parsed.family), None, dtype=object)
    unmatched = ~any_match & ~parsed.invalid
    codes[unmatched & bogon] = IpAddressReserved.code
    codes[unmatched & ~bogon] = IpAddressNotFound.code
    codes[parsed.invalid] = INVALID
    return pa.array(codes, type=pa.string())
