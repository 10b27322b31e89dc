"""A retained version written as its Parquet snapshot: what ``ipmeta export --format parquet`` and
``ipmeta enrich`` (and the enrich job on AWS) read the table through, once per version."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loader.export.parquet import SnapshotInfo, write_parquet
from loader.export.version_ranges import ranges_of_version

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow.fs as pafs

    from ipmeta.schema.records import VersionMeta
    from loader.export.files import ExportRange, ExportStats
    from loader.store.table import LoaderTable


def export_snapshot(
    table: LoaderTable,
    meta: VersionMeta,
    out: str,
    filesystem: pafs.FileSystem | None = None,
    progress: Callable[[Iterator[ExportRange]], Iterator[ExportRange]] | None = None,
) -> ExportStats:
    """``meta``'s version of ``table``'s dataset (a delta's combined view) as Parquet at ``out``."""
    ranges = ranges_of_version(table, meta)
    ranges = progress(ranges) if progress else ranges
    return write_parquet(ranges, out, snapshot_info(table.dataset, meta), filesystem)


def snapshot_info(dataset: str, meta: VersionMeta) -> SnapshotInfo:
    """What a snapshot's footer says of the version it holds."""
    return SnapshotInfo(dataset, meta.version, meta.base, dict(meta.column_types))
