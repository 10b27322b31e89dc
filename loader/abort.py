"""``abort``: the state every Catch leads to. A failed load frees the lock at once."""

from __future__ import annotations

import time

from ipmeta.records import VersionStatus
from loader.records import LoadStatus, version_of
from loader.table import LoaderTable


def fail(load_id: str, error: str, table: LoaderTable, *, now: float | None = None) -> None:
    """Mark a load failed and free the lock; cleanup deletes its partial version after the grace period."""
    version = version_of(load_id)
    at = int(time.time() if now is None else now)
    load = table.get_load(version)
    if load is not None and load.status == LoadStatus.ACTIVATED:
        # A step after activation failed (a Catch still routes here): the version is live
        # and must stay so; only the lock is ours to free.
        table.release_lock(load_id)
        return
    if load is not None:
        table.set_load_status(version, LoadStatus.FAILED, at, error=error)
    if table.get_version_meta(version) is not None:
        table.set_version_status(version, VersionStatus.FAILED, at)
    table.release_lock(load_id)
