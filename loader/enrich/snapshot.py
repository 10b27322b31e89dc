"""A pinned version of each dataset, ready to merge: sorted bounds as numpy arrays, data as Arrow.

A dataset's snapshot is its Parquet export (``loader.export.parquet``), read
once: only each range's first bucket row (the export repeats a range once per
bucket), IPv4 bounds as ``int64`` and IPv6 bounds as 16-byte big-endian strings
(numpy ``S16``, which compare as the numbers do), each family sorted by start.
The data columns stay an Arrow table, strings dictionary-encoded, with one row
per range in that order: ``ranges.take(indices)`` gives a chunk's rows.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from loader.enrich.addresses import V6_DTYPE, v6_halves
from loader.enrich.parts import EnrichInputError
from loader.export.parquet import LAYOUT_COLUMNS, METADATA_KEY, SnapshotInfo, resolve
from loader.formats.column_types import NATIVE


@dataclass(frozen=True)
class FamilyRanges:
    """One family's ranges of one dataset, sorted by start; the range at ``position`` is row
    ``first_row + position`` of ``DatasetSnapshot.data`` (IPv4's rows come first, then IPv6's)."""

    starts: npt.NDArray[Any]
    ends: npt.NDArray[Any]
    first_row: int = 0
    #: IPv6 only: each start's upper and lower 64 bits as integers, which ``merge.find``
    #: searches instead of the 16-byte values (numpy compares those byte by byte: 5 times slower)
    start_halves: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]] | None = field(
        init=False, default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.starts.dtype == V6_DTYPE:
            object.__setattr__(self, "start_halves", v6_halves(self.starts))

    def __len__(self) -> int:
        return len(self.starts)


@dataclass(frozen=True)
class DatasetSnapshot:
    info: SnapshotInfo
    v4: FamilyRanges
    v6: FamilyRanges
    #: the data fields, one row per range
    data: pa.Table

    @property
    def dataset(self) -> str:
        return self.info.dataset

    @property
    def fields(self) -> list[str]:
        return list(self.data.column_names)

    def always_present(self, name: str) -> bool:
        """A CSV-loaded field is in every range's data (null or not); a MaxMind DB's only where non-null."""
        return self.info.column_kinds.get(name) != NATIVE

    @property
    def ranges(self) -> int:
        return len(self.v4) + len(self.v6)


@dataclass(frozen=True)
class Snapshot:
    """The datasets a job reads, in precedence order (the API's merged view takes fields in this order)."""

    datasets: tuple[DatasetSnapshot, ...]

    def versions(self) -> dict[str, str]:
        return {each.dataset: f"v{each.info.version}" for each in self.datasets}


def load_dataset_snapshot(path: str, filesystem: pafs.FileSystem | None = None) -> DatasetSnapshot:
    """A dataset snapshot from its Parquet export (a local path, or ``s3://bucket/key``).

    One pass, a row group at a time: memory holds what is kept (bounds as numpy, data columns
    as Arrow) and one group, never the whole file nor a Python object per range.

    A file that is no readable ipmeta snapshot (not Parquet, another Parquet file, one cut or
    corrupt) is refused as ``EnrichInputError``, naming the file and why; a missing one raises
    ``FileNotFoundError``.
    """
    try:
        return _loaded(path, filesystem)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as error:
        raise EnrichInputError(f"{path}: not a readable ipmeta snapshot ({str(error)[:300]})") from None


def _loaded(path: str, filesystem: pafs.FileSystem | None) -> DatasetSnapshot:
    fs, where = resolve(path, filesystem)
    parquet = pq.ParquetFile(where, filesystem=fs)
    metadata = parquet.schema_arrow.metadata or {}
    if METADATA_KEY not in metadata:
        raise ValueError(f"its footer has no {METADATA_KEY.decode()} key")
    info = SnapshotInfo.from_json(metadata[METADATA_KEY])
    fields = [f for f in parquet.schema_arrow if f.name not in LAYOUT_COLUMNS]
    strings = [f.name for f in fields if pa.types.is_string(f.type)]
    parquet = pq.ParquetFile(where, filesystem=fs, read_dictionary=strings, pre_buffer=False)
    kinds = [parquet.schema_arrow.field(f.name).type for f in fields]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-fold") as folder:
        kept = _Kept({f.name: kind for f, kind in zip(fields, kinds, strict=True)}, folder)
        for group in _row_groups_read_ahead(parquet, fields):
            kept.add(group)
        data = pa.table({f.name: kept.column(f.name) for f in fields})
    starts4, ends4 = _joined(kept.v4, np.int64)
    starts6, ends6 = _joined(kept.v6, V6_DTYPE)
    v4 = FamilyRanges(starts4, ends4)
    v6 = FamilyRanges(starts6, ends6, first_row=len(v4))
    _release_freed_memory()
    return DatasetSnapshot(info, v4, v6, data)


def _row_groups_read_ahead(parquet: pq.ParquetFile, fields: list[pa.Field]) -> Iterator[pa.Table]:
    """The row groups in order, each read on a thread while the one before it is kept: the
    keeping (a filter, the hex bounds, the dictionaries' union) runs on one core, and a group's
    read beside it uses the other (measured on the 5 M-range city synthetic: the load took
    1.7 s instead of 2.1 s, medians of 5 runs each). One group more is in memory."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-read") as reader:
        ahead: Future[pa.Table] | None = None
        for group in range(parquet.num_row_groups + 1):
            read = ahead
            ahead = (
                reader.submit(parquet.read_row_group, group, columns=_columns_of(parquet, group, fields))
                if group < parquet.num_row_groups
                else None
            )
            if read is not None:
                yield read.result()


def _release_freed_memory() -> None:
    """Hand back to the system what loading freed: the groups read and the pieces concatenated
    are freed to the allocators (Arrow's, and glibc's for numpy), which keep it mapped, and the
    job's chunks then grow memory on top of it (measured: 200 MB on a 5 M-range snapshot)."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


#: A family's starts and ends.
_Bounds = tuple[npt.NDArray[Any], npt.NDArray[Any]]


class _Kept:
    """Each range's first bucket row, kept group by group: the export repeats a range once per
    bucket it touches, and puts its first bucket row first (rows in bucket order, ``range_id``
    in (family, start) order), so a row is a range's first when its ``range_id`` is above every
    one before it, and the kept rows come in (family, start) order with no sort.

    Each group brings its own dictionaries: every ``_COMBINE_EVERY`` groups a data column's
    chunks are folded into one array on ``folder`` (one thread, so the folds of a column run in
    order), while the groups after them are read and kept: on the 5 M-range city synthetic the
    load took 1.40 s instead of 1.74 s (medians of 5 fresh processes each), and the memory it
    keeps is about 20 MB more.
    """

    def __init__(self, kinds: dict[str, pa.DataType], folder: ThreadPoolExecutor) -> None:
        self._kinds = kinds
        self._folder = folder
        #: each data column's chunks since its last fold, and that fold
        self._chunks: dict[str, list[pa.Array]] = {name: [] for name in kinds}
        self._folded: dict[str, Future[pa.Array]] = {}
        self._family = 4
        self.v4: list[_Bounds] = []
        self.v6: list[_Bounds] = []
        self._highest = -1

    def add(self, group: pa.Table) -> None:
        ids = group.column("range_id").to_numpy()
        before = np.maximum.accumulate(np.concatenate([[self._highest], ids[:-1]]))
        first = ids > before
        if len(ids):
            self._highest = max(self._highest, int(ids.max()))
        group = group.filter(pa.array(first))
        family = group.column("ip_family").to_numpy()
        if len(family) and (family[0] < self._family or (np.diff(family) < 0).any()):
            raise ValueError("the snapshot's ranges are not in (family, start) order")
        self._family = int(family[-1]) if len(family) else self._family
        is4 = family == 4
        if is4.any():
            v4 = group.select(["ip_start", "ip_end"]).filter(pa.array(is4))
            self.v4.append(
                (
                    v4.column("ip_start").to_numpy().astype(np.int64),
                    v4.column("ip_end").to_numpy().astype(np.int64),
                )
            )
        if not is4.all():
            v6 = group.select(["ip_start_hex", "ip_end_hex"]).filter(pa.array(~is4))
            self.v6.append((_hex_to_s16(v6.column("ip_start_hex")), _hex_to_s16(v6.column("ip_end_hex"))))
        for name, chunks in self._chunks.items():
            chunks.extend(group.column(name).chunks)
            if len(chunks) >= _COMBINE_EVERY:
                self._folded[name] = self._folder.submit(self._fold, self._folded.get(name), chunks[:], name)
                chunks.clear()

    def column(self, name: str) -> pa.Array:
        """A data column's chunks, all folded into one array."""
        return self._fold(self._folded.pop(name, None), self._chunks.pop(name), name)

    def _fold(self, folded: Future[pa.Array] | None, chunks: list[pa.Array], name: str) -> pa.Array:
        return _combined(([folded.result()] if folded is not None else []) + chunks, self._kinds[name])


def _columns_of(parquet: pq.ParquetFile, group: int, fields: list[pa.Field]) -> list[str]:
    """The columns a row group is read for: its families' bounds (by the group's ``ip_family``
    statistics; both where it has none), never ``network_bucket`` (the warehouse's join key).
    An IPv4 range's hex bounds are half the bytes of an IPv4 group and unused."""
    low, high = 4, 6
    meta = parquet.metadata.row_group(group)
    for column in range(meta.num_columns):
        chunk = meta.column(column)
        stats = chunk.statistics
        if chunk.path_in_schema == "ip_family" and stats is not None and stats.has_min_max:
            low, high = int(stats.min), int(stats.max)
    bounds = ["range_id", "ip_family"]
    bounds += ["ip_start", "ip_end"] if low <= 4 else []
    bounds += ["ip_start_hex", "ip_end_hex"] if high >= 6 else []
    return [*bounds, *(f.name for f in fields)]


def _joined(parts: list[_Bounds], dtype: Any) -> _Bounds:
    if not parts:
        return np.zeros(0, dtype), np.zeros(0, dtype)
    return np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts])


#: Groups' chunks of a data column kept before they are combined into one.
_COMBINE_EVERY: Final = 8


def _combined(chunks: list[pa.Array], kind: pa.DataType) -> pa.Array:
    """One array of a column's chunks (``take`` on one array is fastest); text stays
    dictionary-encoded, over the union of the groups' dictionaries."""
    if not chunks:
        return pa.array([], kind)
    if pa.types.is_dictionary(kind):
        unified = pa.chunked_array(chunks, kind).unify_dictionaries()
        return pa.concat_arrays(unified.chunks) if unified.num_chunks > 1 else unified.chunk(0)
    return pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]


#: The value of each hex digit's byte (lower and upper case), for ``_hex_to_s16``.
_NIBBLE: Final = np.zeros(256, dtype=np.uint8)
for _digit, _value in zip(b"0123456789abcdef", range(16), strict=True):
    _NIBBLE[_digit] = _value
    _NIBBLE[ord(chr(_digit).upper())] = _value


def _hex_to_s16(column: pa.ChunkedArray) -> npt.NDArray[Any]:
    """The export's fixed-width hex text (32 digits) as 16-byte values, by numpy over the text's
    own buffer: no Python object per value."""
    text = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not len(text):
        return np.zeros(0, dtype=V6_DTYPE)
    if text.null_count:
        raise ValueError("an IPv6 range of the snapshot has no hex bound")
    _, offsets_buffer, data_buffer = text.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[text.offset : text.offset + len(text) + 1]
    if not (np.diff(offsets) == 32).all():
        raise ValueError("an IPv6 bound of the snapshot is not 32 hex digits")
    digits = _NIBBLE[np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0] : offsets[-1]]].reshape(-1, 16, 2)
    values = (digits[:, :, 0] << 4) | digits[:, :, 1]
    return np.ascontiguousarray(values).view(V6_DTYPE).ravel()
