"""Dataset routes: every dataset with its retained versions, one dataset, and health."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta.api import dependencies
from ipmeta.api.models import DatasetHealth, DatasetInfo, DatasetList, DatasetSummary, HealthResponse
from ipmeta.api.responses import documented
from ipmeta.lookup.catalog import ActiveDatasets, may_read
from ipmeta.schema import keys
from ipmeta.schema.errors import DatasetInvalid, DatasetNotFound, DatasetStale, NoDataset
from ipmeta.schema.records import VersionMeta

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


def _iso(epoch: int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


def shown_source(source: str, whole: bool) -> str:
    """A source as ``/v1/datasets`` shows it: its file name, unless the deployment shows sources
    whole (``IPMETA_SHOW_SOURCES``). A URL's query, which may carry a token, never shows unless so."""
    if whole:
        return source
    path = urlsplit(source).path if "://" in source else source
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def dataset_info(meta: VersionMeta, active: int | None) -> DatasetInfo:
    """A version as the routes show it: ``active`` when the pointer read here names it (a replica
    region's own pointer may still name an older version than home's), else ``retired``."""
    whole = dependencies.current().api.show_sources
    return DatasetInfo(
        id=keys.format_version(meta.version),
        status="active" if meta.version == active else "retired",
        loaded_at=_iso(meta.created_at or None),
        activated_at=_iso(meta.activated_at),
        source=[shown_source(source, whole) for source in meta.sources],
        checksum=f"sha256:{meta.sha256}" if meta.sha256 else None,
        rows=meta.rows,
        items=meta.items,
        base=keys.format_version(meta.base) if meta.base else None,
    )


def retained_versions(
    metas: list[VersionMeta], arrivals: Mapping[int, str] | None, active: int | None
) -> list[DatasetInfo]:
    """Versions that may be read here (``ipmeta.lookup.catalog.may_read``), newest first."""
    readable = [meta for meta in metas if may_read(meta, arrivals)]
    return [dataset_info(meta, active) for meta in sorted(readable, key=lambda meta: -meta.version)]


def _summary(name: str, snapshot: ActiveDatasets) -> DatasetSummary:
    active = snapshot.versions.get(name)
    reader = dependencies.current().reader(name)
    versions = retained_versions(reader.list_version_metas(), reader.arrivals(), active)
    return DatasetSummary(
        name=name, active=keys.format_version(active) if active is not None else None, versions=versions
    )


def _fresh_snapshot() -> ActiveDatasets:
    """The listing routes are rare and read by people: they show the table as it is now."""
    catalog = dependencies.current().catalog
    catalog.invalidate()
    return catalog.get()


@router.get(
    "/v1/datasets",
    operation_id="listDatasets",
    summary="Every dataset with its retained versions",
    responses=documented("Every dataset, in precedence order", 500),
)
def get_datasets() -> DatasetList:
    snapshot = _fresh_snapshot()
    return DatasetList(datasets=[_summary(name, snapshot) for name in snapshot.order])


@router.get(
    "/v1/datasets/current",
    operation_id="currentDataset",
    summary="The active version of the first active dataset, in precedence order",
    description="Kept from the single-dataset API; `/v1/datasets/{name}` shows one dataset.",
    responses=documented("The active version", 500, 503),
)
def get_current_dataset() -> DatasetInfo:
    snapshot = _fresh_snapshot()
    for name in snapshot.order:
        version = snapshot.versions.get(name)
        meta = dependencies.current().reader(name).get_version_meta(version) if version else None
        if meta is not None and meta.retained:
            return dataset_info(meta, version)
    raise NoDataset("no dataset is active yet; load one with `ipmeta load`")


@router.get(
    "/v1/datasets/<name>",
    operation_id="getDataset",
    summary="One dataset with its retained versions",
    responses=documented("The dataset", 400, 404, 500),
)
def get_dataset(name: str) -> DatasetSummary:
    if not keys.DATASET_NAME.fullmatch(name):
        raise DatasetInvalid(f"{name[:40]!r} is not a dataset name")
    snapshot = _fresh_snapshot()
    if not snapshot.knows(name):
        raise DatasetNotFound(f"no dataset {name!r}; GET /v1/datasets lists them")
    return _summary(name, snapshot)


def dataset_age_seconds(meta: VersionMeta, now: float) -> int:
    """Age of the data: since its load started (activation may be a later rollback)."""
    loaded = meta.created_at or meta.activated_at or 0
    return max(0, int(now - loaded))


def dataset_health(name: str, version: int | None, now: float) -> DatasetHealth:
    deps = dependencies.current()
    limit = deps.api.max_age_of(name)
    meta = deps.reader(name).get_version_meta(version, consistent=False) if version else None
    # The pointer names a version being (or already) deleted: nothing whole answers.
    if version is None or meta is None or not meta.retained:
        return DatasetHealth(status="inactive", version=None, age_seconds=None, max_age_seconds=limit)
    age = dataset_age_seconds(meta, now)
    return DatasetHealth(
        status="stale" if age > limit else "ok",
        version=keys.format_version(version),
        age_seconds=age,
        max_age_seconds=limit,
    )


def overall_health(datasets: dict[str, DatasetHealth]) -> HealthResponse:
    """Healthy when every dataset is; else the first reason: a dataset not active, then a stale one."""
    inactive = [name for name, health in datasets.items() if health.status == "inactive"]
    stale = [name for name, health in datasets.items() if health.status == "stale"]
    if inactive or not datasets:
        failure: NoDataset | DatasetStale = NoDataset(
            f"no active version of {', '.join(inactive)}" if inactive else "no dataset is active"
        )
        status: Literal["ok", "stale", "inactive"] = "inactive"
    elif stale:
        failure = DatasetStale(
            "; ".join(
                f"{name} {datasets[name].version} was loaded {datasets[name].age_seconds} s ago, "
                f"its maximum age is {datasets[name].max_age_seconds} s"
                for name in stale
            )
        )
        status = "stale"
    else:
        return HealthResponse(status="ok", datasets=datasets)
    return HealthResponse(status=status, code=failure.code, message=failure.message, datasets=datasets)


@router.get(
    "/v1/health",
    operation_id="health",
    summary="200 when every dataset is active and fresh enough; 503 with the reason otherwise",
    responses=documented("Healthy", 500, unavailable="NO_DATASET or DATASET_STALE, and each dataset's state"),
)
def get_health() -> Response[dict[str, Any]]:
    snapshot = dependencies.current().catalog.get()
    now = time.time()
    health = overall_health(
        {name: dataset_health(name, snapshot.versions.get(name), now) for name in snapshot.order}
    )
    return Response(
        status_code=HTTPStatus.OK if health.status == "ok" else HTTPStatus.SERVICE_UNAVAILABLE,
        content_type=content_types.APPLICATION_JSON,
        body=health.model_dump(exclude_none=True),
    )
