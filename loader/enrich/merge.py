"""The sort-merge of a chunk's addresses with each dataset's ranges, and the columns each row gets.

``find`` sorts the chunk's addresses of one family (O(n log n) in the chunk),
finds each one's range with one ``searchsorted`` over the dataset's sorted
starts (O(n log r), cache-friendly because the addresses are sorted), keeps it
where the address is within the range's end (else the address is in a gap),
and puts the answers back in the chunk's order.

``annotate`` turns those answers into what ``GET /v1/ip/{ip}`` answers, column
by column, through the API's own rule (``ipmeta.lookup.merging``, given arrays
here: ``COLUMNS`` for numpy conditions and Arrow values, ``BOUNDS`` for numpy
bounds):

- the merged data: each field from the first dataset, in precedence order, that
  holds the address and has the field (a CSV-loaded field always, null or not;
  a MaxMind DB's where the record has it);
- a field that several datasets have also comes from each, as ``<dataset>__<field>``;
- ``ip_range_start``/``ip_range_end``: where every answering dataset agrees (the
  intersection of their ranges), written as the API writes addresses
  (``loader.enrich.addresses``);
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

from ipmeta.lookup import merging
from ipmeta.schema.bogons import BOGONS_V4, BOGONS_V6, GLOBAL_EXCEPTIONS_V4, GLOBAL_EXCEPTIONS_V6
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved
from loader.enrich.addresses import INVALID, V6_DTYPE, ParsedAddresses, v4_texts, v6_halves, v6_texts
from loader.enrich.snapshot import DatasetSnapshot, FamilyRanges, Snapshot

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
        order = np.argsort(values[where])
        families[family] = SortedFamily(where, order, values[where][order])
    return families


def find(dataset: DatasetSnapshot, chunk: dict[int, SortedFamily], size: int) -> Found:
    found = Found(np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int64))
    for family, ranges in ((4, dataset.v4), (6, dataset.v6)):
        part = chunk[family]
        if not len(part.where) or not len(ranges):
            continue
        at = _range_positions(ranges, part.ordered)
        held = at >= 0
        held[held] = part.ordered[held] <= ranges.ends[at[held]]
        # Back to the chunk's order: ordered[i] is the address of row where[order[i]].
        hits = part.where[part.order[held]]
        found.positions[hits] = at[held]
        found.rows[hits] = ranges.first_row + at[held]
    return found


def _range_positions(ranges: FamilyRanges, values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The position of the last range starting at or below each value (-1 where none): one
    ``searchsorted`` over IPv4's integers; for IPv6, one over the starts' upper 64 bits, then
    the lower 64 bits where a start shares a value's upper bits, and the 16-byte values only
    where several starts share them (ranges narrower than a /64)."""
    if ranges.start_halves is None:
        return np.searchsorted(ranges.starts, values, side="right") - 1
    highs, lows = ranges.start_halves
    if not len(highs):
        return np.full(len(values), -1, dtype=np.intp)
    high, low = v6_halves(values)
    # The last start whose upper bits are at most the value's: below it only when it shares them
    at = np.searchsorted(highs, high, side="right") - 1
    safe = np.maximum(at, 0)
    above = (at >= 0) & (highs[safe] == high) & (lows[safe] > low)
    at[above] -= 1
    # Then the one before it is the answer, unless it shares the upper bits too
    safe = np.maximum(at, 0)
    shared = above & (at >= 0) & (highs[safe] == high)
    if shared.any():
        at[shared] = np.searchsorted(ranges.starts, values[shared], side="right") - 1
    return at


def annotate(snapshot: Snapshot, parsed: ParsedAddresses) -> dict[str, pa.Array]:
    """A chunk's new columns, in order: merged fields, prefixed fields, range, bogon, error."""
    chunk = sort_chunk(parsed)
    size = len(parsed.family)
    founds = [find(dataset, chunk, size) for dataset in snapshot.datasets]
    columns = _data_columns(snapshot.datasets, founds, _address_order(chunk, size))
    any_match = np.zeros(size, dtype=bool)
    for found in founds:
        any_match |= found.matched
    start_text, end_text = _span_text(snapshot.datasets, chunk, founds, size)
    bogon = _bogons(chunk, size)
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


def _address_order(chunk: dict[int, SortedFamily], size: int) -> tuple[npt.NDArray[np.intp], pa.Array]:
    """The chunk's rows in address order (IPv4's, IPv6's, then the invalid ones), and each row's
    place in that order."""
    ordered = [part.where[part.order] for part in chunk.values()]
    invalid = np.ones(size, dtype=bool)
    for rows in ordered:
        invalid[rows] = False
    order = np.concatenate([*ordered, np.flatnonzero(invalid)])
    place = np.empty(size, dtype=np.int64)
    place[order] = np.arange(size)
    return order, pa.array(place)


def _data_columns(
    datasets: Sequence[DatasetSnapshot],
    founds: Sequence[Found],
    address_order: tuple[npt.NDArray[np.intp], pa.Array],
) -> dict[str, pa.Array]:
    """Each field's values for the chunk's rows: taken from the snapshot in address order (the
    snapshot's rows are in that order too, so the reads sweep it once instead of jumping about
    it: half the time on the city synthetic's 5 M ranges), then put back in the chunk's order
    by a second take within the chunk."""
    merged_names, prefixed = output_fields(datasets)
    order, place = address_order
    values: dict[tuple[str, str], pa.Array] = {}
    for dataset, found in zip(datasets, founds, strict=True):
        indices = pa.array(found.rows[order], mask=~found.matched[order])
        for name in dataset.fields:
            taken = dataset.data.column(name).take(indices).combine_chunks()
            values[dataset.dataset, name] = taken.take(place)
    columns: dict[str, pa.Array] = {}
    for name in merged_names:
        columns[name] = _merged(name, datasets, founds, values)
    for dataset, name in prefixed:
        columns[f"{dataset.dataset}{PREFIX_SEPARATOR}{name}"] = values[dataset.dataset, name]
    return columns


class _Columns:
    """``merging``'s choices over a chunk: numpy conditions, Arrow values."""

    def pick(self, where: npt.NDArray[np.bool_], value: pa.Array, otherwise: pa.Array) -> pa.Array:
        return pc.if_else(pa.array(where), value, otherwise)

    def below(self, value: pa.Array, than: pa.Array) -> npt.NDArray[np.bool_]:
        below: npt.NDArray[np.bool_] = pc.less(value, than).to_numpy(zero_copy_only=False)
        return below

    def both(self, first: npt.NDArray[np.bool_], second: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return first & second


class _Bounds:
    """``merging``'s choices over bounds: a numpy array of one bound (int64 or S16) per row."""

    def pick(
        self, where: npt.NDArray[np.bool_], value: npt.NDArray[Any], otherwise: npt.NDArray[Any]
    ) -> npt.NDArray[Any]:
        return np.where(where, value, otherwise)

    def below(self, value: npt.NDArray[Any], than: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        below: npt.NDArray[np.bool_] = value < than
        return below

    def both(self, first: npt.NDArray[np.bool_], second: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return first & second


COLUMNS: Final[merging.Choices[Any, Any]] = _Columns()
BOUNDS: Final[merging.Choices[Any, Any]] = _Bounds()


def _merged(
    name: str,
    datasets: Sequence[DatasetSnapshot],
    founds: Sequence[Found],
    values: dict[tuple[str, str], pa.Array],
) -> pa.Array:
    """``merging.merged_field`` over the chunk: a dataset has the field where it holds the address
    and, for a MaxMind DB's field, where the record has it (non-null)."""
    holders = [
        (dataset, found) for dataset, found in zip(datasets, founds, strict=True) if name in dataset.fields
    ]
    if len(holders) == 1:
        return values[holders[0][0].dataset, name]
    kind = _common_type([values[dataset.dataset, name].type for dataset, _ in holders])
    columns = []
    for dataset, found in holders:
        value = _decoded(values[dataset.dataset, name], kind)
        present = found.matched
        if not dataset.always_present(name):
            present = present & value.is_valid().to_numpy(zero_copy_only=False)
        columns.append((present, value))
    merged: pa.Array = merging.merged_field(columns, COLUMNS, pa.nulls(len(founds[0].rows), kind))
    return merged


def _common_type(types: Sequence[pa.DataType]) -> pa.DataType:
    plain = [t.value_type if pa.types.is_dictionary(t) else t for t in types]
    return plain[0] if all(t == plain[0] for t in plain) else pa.string()


def _decoded(array: pa.Array, kind: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array if array.type == kind else pc.cast(array, kind)


#: Bounds no range reaches, for ``merging.span`` to narrow.
_WIDEST: Final = {4: (-1, 1 << 40), 6: (b"", b"\xff" * 16)}


def _span_text(
    datasets: Sequence[DatasetSnapshot], chunk: dict[int, SortedFamily], founds: Sequence[Found], size: int
) -> tuple[pa.Array, pa.Array]:
    """Each row's range (``merging.span``: where every answering dataset agrees) as address text.

    Each side is a dictionary array: the dictionary holds the text of each run's bound (a run:
    rows in address order that every dataset answers with the same range), written here for
    this chunk only (memory holds no text of the whole snapshot), the indices point each row
    at its run's text. Parquet writes the dictionary
    once per row group and the rows as small integers.
    """
    texts: dict[str, list[pa.Array]] = {"start": [], "end": []}
    at = {side: np.full(size, -1, dtype=np.int32) for side in texts}
    written = dict.fromkeys(texts, 0)
    for family in (4, 6):
        part = chunk[family]
        # The rows in address order: a range's rows are then one run.
        rows = part.where[part.order]
        hits, held = [], np.zeros(len(rows), dtype=bool)
        for dataset, found in zip(datasets, founds, strict=True):
            ranges = dataset.v4 if family == 4 else dataset.v6
            positions = found.positions[rows]
            hit = positions >= 0
            if len(ranges) and hit.any():
                hits.append((ranges, positions, hit))
                held |= hit
        if not hits:
            continue
        # Only the rows some dataset holds get a range. In address order, rows that every
        # dataset answers with the same range form a run, and a run has one span: it is
        # narrowed (``merging.span``) and written once, from the run's first row.
        answers = [(ranges, positions[held], hit[held]) for ranges, positions, hit in hits]
        first = np.zeros(len(answers[0][1]), dtype=bool)
        first[0] = True
        for _, positions, _ in answers:
            first[1:] |= positions[1:] != positions[:-1]
        run = (np.cumsum(first) - 1).astype(np.int32)
        bounds = []
        for ranges, positions, hit in answers:
            safe = np.where(hit[first], positions[first], 0)
            bounds.append((hit[first], ranges.starts[safe], ranges.ends[safe]))
        runs = int(first.sum())
        low, high = _WIDEST[family]
        kind = bounds[0][1].dtype
        widest = (np.full(runs, low, kind), np.full(runs, high, kind))
        for side, chosen in zip(texts, merging.span(bounds, BOUNDS, widest), strict=True):
            texts[side].append(v4_texts(chosen) if family == 4 else v6_texts(chosen))
            at[side][rows[held]] = written[side] + run
            written[side] += runs
    return tuple(
        pa.DictionaryArray.from_arrays(
            pa.array(at[side], mask=at[side] < 0),
            pa.concat_arrays(texts[side]) if texts[side] else pa.array([], pa.string()),
        )
        for side in texts
    )


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


def _bogons(chunk: dict[int, SortedFamily], size: int) -> npt.NDArray[np.bool_]:
    """``is_bogon`` of each row, vectorized over the same table (``ipmeta.schema.bogons``), on the
    chunk's sorted addresses (``searchsorted`` runs fastest on sorted needles)."""
    bogon = np.zeros(size, dtype=bool)
    for family, part in chunk.items():
        blocks, exceptions = _BOGONS[family]
        bogon[part.where[part.order]] = _inside(part.ordered, blocks) & ~_inside(part.ordered, exceptions)
    return bogon


def _errors(
    parsed: ParsedAddresses, any_match: npt.NDArray[np.bool_], bogon: npt.NDArray[np.bool_]
) -> pa.Array:
    codes = np.zeros(len(parsed.family), dtype=np.int8)  # an index into _ERROR_CODES: none
    unmatched = ~any_match & ~parsed.invalid
    codes[unmatched & bogon] = _ERROR_CODES.index(IpAddressReserved.code)
    codes[unmatched & ~bogon] = _ERROR_CODES.index(IpAddressNotFound.code)
    codes[parsed.invalid] = _ERROR_CODES.index(INVALID)
    return pa.array(_ERROR_CODES, pa.string()).take(pa.array(codes))


#: ``ip_error``'s values: none (the first), then the API's codes.
_ERROR_CODES: Final = (None, IpAddressReserved.code, IpAddressNotFound.code, INVALID)
