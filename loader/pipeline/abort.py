"""``abort``: the state every Catch leads to. A failed load frees the lock at once."""

from __future__ import annotations

import time
from typing import Final

from ipmeta.schema.records import VersionStatus
from loader.records import LoadStatus, version_of
from loader.store.staging import Staging
from loader.store.table import LoaderTable

#: Errors that mean the sources were refused: nothing of the load was written but its bookkeeping.
REJECTIONS: Final = frozenset({"LoadRejected", "SourceError", "OverlapRejected"})


def fail(load_id: str, error: str, table: LoaderTable, *, now: float | None = None) -> None:
    """Mark a load failed and free the lock; cleanup deletes its partial version after the grace period."""
    version = version_of(load_id)
    table = table.for_load(load_id)
    at = int(time.time() if now is None else now)
    load = table.loads.get(version)
    # An activation may die right after the switch, its load record still ``prepared``: a version
    # the pointer names is live whatever that record says.
    switched = table.lookup.read_active_version(consistent=True) == version
    if switched or (load is not None and load.status == LoadStatus.ACTIVATED):
        # A step after activation failed (a Catch still routes here): the version is live
        # and must stay so; only the lock is ours to free.
        table.lock.release(load_id)
        return
    if load is not None:
        table.loads.set_status(version, LoadStatus.FAILED, at, error=error)
    if table.lookup.get_version_meta(version) is not None:
        table.versions.set_status(version, VersionStatus.FAILED, at)
    table.lock.release(load_id)


def discard(load_id: str, table: LoaderTable, staging: Staging | None = None) -> bool:
    """Forget a load whose sources were refused before it wrote anything: its load item, lock and files.

    Bad input leaves no trace in the table (the caller reports why); a load that
    got further (a version recorded, items written) is ``fail``ed instead, so
    cleanup can find and delete what it wrote. Returns whether it was discarded.
    """
    version = version_of(load_id)
    table = table.for_load(load_id)
    load = table.loads.get(version)
    if load is not None and (
        load.status != LoadStatus.PREPARING or table.lookup.get_version_meta(version) is not None
    ):
        return False
    table.loads.delete(version)
    table.lock.release(load_id)
    if staging is not None:
        staging.delete_load(load_id)
    return True
