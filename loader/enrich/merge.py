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
from loader.enrich.addresses import INVALID, ParsedAddresses
from loader.enrich.snapshot import V6_DTYPE, DatasetSnapshot, Snapshot, v6_text

RANGE_START: Final = "ip_range_start"
RANGE_END: Final = "ip_range_end"
BOGON: Final = "ip_bogon"
ERROR: Final = "ip_error"
#: Between a dataset's name and its field where several datasets have the field.
PREFIX_SEPARATOR: Final = "__"


@dataclass(frozen=True)
class Found:
    """One dataset's answer for each row of a chunk: a row of its data, and its range's position."""

    rows: npt.NDArray[np.int64]  #: -1 where the dataset holds no range for the address
    #: the range's index in its family's ``FamilyRanges`` (-1 where none)
    positions: npt.NDArray[np.int64]

    @property
    def matched(self) -> npt.NDArray[np.bool_]:
        matched: npt.NDArray[np.bool_] = self.rows >= 0
        return matched


@dataclass(frozen=True)
class SortedFamily:
    """A chunk's addresses of one family, sorted once for every dataset: rows, order, values."""

    where: npt.NDArray[np.intp]
    order: npt.NDArray[np.intp]
    ordered: npt.NDArray[Any]


def sort_chunk(parsed: ParsedAddresses) -> dict[int, SortedFamily]:
    families = {}
    for family, values in ((4, parsed.v4), (6, parsed.v6)):
        where = np.flatnonzero(parsed.family == family)
        order = np.argsort(values[where], kind="stable")
        families[family] = SortedFamily(where, order, values[where][order])
    return families


def find(dataset: DatasetSnapshot, chunk: dict[int, SortedFamily], size: int) -> Found:
    found = Found(np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int64))
    for family, ranges in ((4, dataset.v4), (6, dataset.v6)):
        part = chunk[family]
        if not len(part.where) or not len(ranges.rows):
            continue
        at = np.searchsorted(ranges.starts, part.ordered, side="right") - 1
        held = at >= 0
        held[held] = part.ordered[held] <= ranges.ends[at[held]]
        # Back to the chunk's order: ordered[i] is the address of row where[order[i]].
        hits = part.where[part.order[held]]
        found.positions[hits] = at[held]
        found.rows[hits] = ranges.rows[at[held]]
    return found


def annotate(snapshot: Snapshot, parsed: ParsedAddresses) -> dict[str, pa.Array]:
    """A chunk's new columns, in order: merged fields, prefixed fields, range, bogon, error."""
    chunk = sort_chunk(parsed)
    size = len(parsed.family)
    founds = [find(dataset, chunk, size) for dataset in snapshot.datasets]
    columns = _data_columns(snapshot.datasets, founds)
    any_match = np.zeros(size, dtype=bool)
    for found in founds:
        any_match |= found.matched
    start_text, end_text = _span_text(snapshot.datasets, chunk, founds, size, snapshot.v6_texts)
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
    datasets: Sequence[DatasetSnapshot],
    chunk: dict[int, SortedFamily],
    founds: Sequence[Found],
    size: int,
    known: dict[bytes, str],
) -> tuple[pa.Array, pa.Array]:
    """Where every answering dataset agrees, the latest start and the earliest end, as text.

    IPv4 texts are the snapshots' (written once per range); IPv6 texts are written here for the
    distinct bounds of the chunk. Both are then taken per row."""
    v4_start, v4_end, v4_texts = _v4_span(datasets, chunk[4], founds, size)
    v6_start, v6_end, v6_hit = _v6_span(datasets, chunk[6], founds)
    where6 = chunk[6].where[v6_hit]
    columns = []
    for at4, bounds6, texts4 in ((v4_start, v6_start, v4_texts[0]), (v4_end, v6_end, v4_texts[1])):
        unique, inverse = np.unique(bounds6[v6_hit], return_inverse=True)
        at = at4.copy()
        at[where6] = len(texts4) + inverse
        texts = pa.concat_arrays([texts4, v6_text(unique, known)])
        columns.append(texts.take(pa.array(at, mask=at < 0)))
    return columns[0], columns[1]


def _v4_span(
    datasets: Sequence[DatasetSnapshot], part: SortedFamily, founds: Sequence[Found], size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], tuple[pa.Array, pa.Array]]:
    """Each IPv4 row's latest start and earliest end, as indices into the datasets' bound texts."""
    start_at = np.full(size, -1, dtype=np.int64)
    end_at = np.full(size, -1, dtype=np.int64)
    best_start = np.full(len(part.where), -1, dtype=np.int64)
    best_end = np.full(len(part.where), 1 << 40, dtype=np.int64)
    starts_text, ends_text = [], []
    offset = 0
    for dataset, found in zip(datasets, founds, strict=True):
        ranges = dataset.v4
        assert ranges.start_text is not None
        assert ranges.end_text is not None
        starts_text.append(ranges.start_text)
        ends_text.append(ranges.end_text)
        positions = found.positions[part.where]
        hit = positions >= 0
        if len(ranges.rows) and hit.any():
            safe = np.where(hit, positions, 0)
            later = hit & (ranges.starts[safe] > best_start)
            earlier = hit & (ranges.ends[safe] < best_end)
            best_start = np.where(later, ranges.starts[safe], best_start)
            best_end = np.where(earlier, ranges.ends[safe], best_end)
            start_at[part.where[later]] = offset + positions[later]
            end_at[part.where[earlier]] = offset + positions[earlier]
        offset += len(ranges.rows)
    texts = (pa.concat_arrays(starts_text), pa.concat_arrays(ends_text))
    return start_at, end_at, texts


def _v6_span(
    datasets: Sequence[DatasetSnapshot], part: SortedFamily, founds: Sequence[Found]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """Each IPv6 row's latest start and earliest end (16-byte values), and whether any dataset held it."""
    best_start = np.zeros(len(part.where), dtype=V6_DTYPE)
    best_end = np.full(len(part.where), b"\xff" * 16, dtype=V6_DTYPE)
    any_hit = np.zeros(len(part.where), dtype=bool)
    for dataset, found in zip(datasets, founds, strict=True):
        ranges = dataset.v6
        positions = found.positions[part.where]
        hit = positions >= 0
        if len(ranges.rows) and hit.any():
            safe = np.where(hit, positions, 0)
            best_start = np.where(hit & (ranges.starts[safe] > best_start), ranges.starts[safe], best_start)
            best_end = np.where(hit & (ranges.ends[safe] < best_end), ranges.ends[safe], best_end)
            any_hit |= hit
    return best_start, best_end, any_hit


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
