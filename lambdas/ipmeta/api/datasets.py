"""Dataset routes: the retained versions, the active one, and health."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta import keys
from ipmeta.api import dependencies
from ipmeta.api.models import DatasetInfo, DatasetList, HealthResponse
from ipmeta.api.responses import documented
from ipmeta.errors import DatasetStale, NoDataset
from ipmeta.records import VersionMeta

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


def _iso(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


def dataset_info(meta: VersionMeta) -> DatasetInfo:
    return DatasetInfo(
        id=keys.format_version(meta.version),
        status=meta.status.value,  # type: ignore[arg-type]  # a retained version is active or retired
        loaded_at=_iso(meta.created_at or None),
        activated_at=_iso(meta.activated_at),
        source=list(meta.sources),
        checksum=f"sha256:{meta.sha256}" if meta.sha256 else None,
        rows=meta.rows,
        items=meta.items,
    )


def retained_datasets(metas: list[VersionMeta]) -> list[DatasetInfo]:
    """Versions whose items can still answer, newest first."""
    retained = [meta for meta in metas if meta.retained]
    return [dataset_info(meta) for meta in sorted(retained, key=lambda meta: -meta.version)]


@router.get(
    "/v1/datasets",
    operation_id="listDatasets",
    summary="The retained dataset versions",
    responses=documented("Retained versions", 500),
)
def get_datasets() -> DatasetList:
    store = dependencies.current().store
    active = store.read_active_version()
    return DatasetList(
        active=keys.format_version(active) if active is not None else None,
        datasets=retained_datasets(store.list_version_metas()),
    )


@router.get(
    "/v1/datasets/current",
    operation_id="currentDataset",
    summary="The active dataset version",
    responses=documented("The active version", 500, 503),
)
def get_current_dataset() -> DatasetInfo:
    store = dependencies.current().store
    active = store.read_active_version()
    meta = store.get_version_meta(active, consistent=False) if active is not None else None
    if meta is None:
        raise NoDataset("no dataset is active yet; load one with `ipmeta load`")
    return dataset_info(meta)


def dataset_age_seconds(meta: VersionMeta, now: float) -> int:
    """Age of the data: since its load started (activation may be a later rollback)."""
    loaded = meta.created_at or meta.activated_at or 0
    return max(0, int(now - loaded))


@router.get(
    "/v1/health",
    operation_id="health",
    summary="200 when a dataset is active and fresh enough; 503 with the reason otherwise",
    responses=documented("Healthy", 500, unavailable="NO_DATASET or DATASET_STALE"),
)
def get_health() -> HealthResponse:
    deps = dependencies.current()
    active = deps.store.read_active_version()
    meta = deps.store.get_version_meta(active, consistent=False) if active is not None else None
    if active is None or meta is None:
        raise NoDataset("no dataset is active")
    age = dataset_age_seconds(meta, time.time())
    limit = deps.api.health_max_dataset_age_seconds
    if age > limit:
        raise DatasetStale(
            f"dataset {keys.format_version(active)} was loaded {age} s ago; the maximum age is {limit} s"
        )
    return HealthResponse(
        status="ok", dataset=keys.format_version(active), age_seconds=age, max_age_seconds=limit
    )
