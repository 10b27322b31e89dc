"""A pinned version of each dataset, ready to merge: sorted bounds as numpy arrays, data as Arrow.

A dataset's snapshot is its Parquet export (``loader.export.parquet``), read
once: only each range's first bucket row (the export repeats a range once per
bucket), IPv4 bounds as ``int64`` and IPv6 bounds as 16-byte big-endian strings
(numpy ``S16``, which compare as the numbers do), each family sorted by start.
The data columns stay an Arrow table, strings dictionary-encoded, with one row
per range in that order: ``ranges.take(indices)`` gives a chunk's rows.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from loader.enrich.addresses import V6_DTYPE, v4_texts
from loader.export.parquet import LAYOUT_COLUMNS, METADATA_KEY, SnapshotInfo, resolve
from loader.formats.column_types import NATIVE


@dataclass(frozen=True)
class FamilyRanges:
    """One family's ranges of one dataset, sorted by start; ``rows`` index ``DatasetSnapshot.data``."""

    starts: npt.NDArray[Any]
    ends: npt.NDArray[Any]
    rows: npt.NDArray[np.int64]
    #: IPv4: each range's first and last address as the API writes them, written once here (IPv6
    #: text is written per chunk, for the ranges it hits: most of a large database's never are)
    start_text: pa.Array | None = None
    end_text: pa.Array | None = None


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
        return len(self.v4.rows) + len(self.v6.rows)


@dataclass(frozen=True)
class Snapshot:
    """The datasets a job reads, in precedence order (the API's merged view takes fields in this order)."""

    datasets: tuple[DatasetSnapshot, ...]

    def versions(self) -> dict[str, str]:
        return {each.dataset: f"v{each.info.version}" for each in self.datasets}


def load_dataset_snapshot(path: str, filesystem: pafs.FileSystem | None = None) -> DatasetSnapshot:
    """A dataset snapshot from its Parquet export (a local path, or ``s3://bucket/key``)."""
    fs, where = resolve(path, filesystem)
    parquet = pq.ParquetFile(where, filesystem=fs)
    metadata = parquet.schema_arrow.metadata or {}
    if METADATA_KEY not in metadata:
        raise ValueError(f"{path} is not an ipmeta snapshot: its footer has no {METADATA_KEY.decode()} key")
    info = SnapshotInfo.from_json(metadata[METADATA_KEY])
    names = parquet.schema_arrow.names
    strings = [
        f.name for f in parquet.schema_arrow if f.name not in LAYOUT_COLUMNS and pa.types.is_string(f.type)
    ]
    # A range's first bucket row comes first in the file (rows are in bucket order), and those
    # rows are in (family, start) order: keeping them needs no sort of the table.
    ids = parquet.read(columns=["range_id"]).column(0).to_numpy()
    first = np.zeros(len(ids), dtype=bool)
    first[np.unique(ids, return_index=True)[1]] = True
    del ids
    # A row group at a time, so memory holds the kept rows and one group, never the whole file.
    parquet = pq.ParquetFile(where, filesystem=fs, read_dictionary=strings)
    kept, read = [], 0
    for group in range(parquet.num_row_groups):
        rows_of_group = parquet.read_row_group(group)
        kept.append(rows_of_group.filter(pa.array(first[read : read + rows_of_group.num_rows])))
        read += rows_of_group.num_rows
    table = pa.concat_tables(kept) if kept else parquet.schema_arrow.empty_table()
    family = table.column("ip_family").to_numpy()
    rows = np.arange(len(family), dtype=np.int64)
    is4 = family == 4
    starts4 = table.column("ip_start").filter(pa.array(is4)).to_numpy().astype(np.int64)
    ends4 = table.column("ip_end").filter(pa.array(is4)).to_numpy().astype(np.int64)
    v4 = FamilyRanges(starts4, ends4, rows[is4], v4_texts(starts4), v4_texts(ends4))
    starts6 = _hex_to_s16(table.column("ip_start_hex").filter(pa.array(~is4)))
    ends6 = _hex_to_s16(table.column("ip_end_hex").filter(pa.array(~is4)))
    v6 = FamilyRanges(starts6, ends6, rows[~is4])
    data = table.select([name for name in names if name not in LAYOUT_COLUMNS])
    return DatasetSnapshot(info, v4, v6, data.combine_chunks())


def _hex_to_s16(column: pa.ChunkedArray) -> npt.NDArray[Any]:
    """Fixed-width hex text as 16-byte values, in one pass over the text."""
    raw = binascii.unhexlify("".join(column.to_pylist()))
    return np.frombuffer(raw, dtype=V6_DTYPE)
