"""Lambda entry points of the load state machine: ``loader.handlers.<state>``.

Execution input: ``{"source": "s3://bucket/key", "options": {...}}``.

- ``fetch_source``: downloads ``IPMETA_SOURCE_URL`` into the source bucket and
  returns the execution input for ``prepare``;
- ``prepare``: ``{"status": "prepared"|"unchanged"|"dry-run", "load_id",
  "version", "chunks": [{"load_id", "chunk"}, ...]}``, the Map state's items;
- ``write_chunk``: one ``{"load_id", "chunk"}``;
- ``activate``: ``{"load_id"}``;
- ``cleanup``: ``{}`` on a schedule, or ``{"load_id"}`` after an activation;
- ``abort``: ``{"load_id"?, "error"}`` from every Catch: marks the load failed
  and frees the lock; ``cleanup`` deletes its partial version later.

Each handler is one call into the task of its state; chunks are staged in the
source bucket under ``IPMETA_CHUNK_PREFIX``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.settings import METRICS_NAMESPACE, Settings
from loader import abort as abort_task
from loader import activate as activate_task
from loader import prepare as prepare_task
from loader import retention, s3
from loader import write as write_task
from loader.options import LoadOptions
from loader.settings import (
    ENV_SOURCE_BUCKET,
    ENV_SOURCE_KEY,
    ENV_SOURCE_URL,
    LOADER_SERVICE_NAME,
    METRIC_DATASET_ACTIVATED,
)
from loader.table import LoaderTable

logger = Logger(service=LOADER_SERVICE_NAME)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=LOADER_SERVICE_NAME)


@functools.cache
def _table() -> LoaderTable:
    return LoaderTable.from_settings(Settings.from_environment())


@functools.cache
def _staging() -> s3.S3Staging:
    return s3.S3Staging.from_environment()


def reset() -> None:
    """Forget the cached clients (tests change the environment between cases)."""
    _table.cache_clear()
    _staging.cache_clear()
    s3.client.cache_clear()


@logger.inject_lambda_context
def fetch_source(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    url = os.environ[ENV_SOURCE_URL]
    bucket = os.environ[ENV_SOURCE_BUCKET]
    key = os.environ.get(ENV_SOURCE_KEY) or f"sources/{url.rstrip('/').rsplit('/', 1)[-1]}"
    with tempfile.TemporaryDirectory() as folder:
        download = Path(folder) / "source"
        with urllib.request.urlopen(url, timeout=60) as response, download.open("wb") as target:
            shutil.copyfileobj(response, target, 1 << 20)
        s3.upload(download, bucket, key)
    logger.info("source fetched", extra={"url": url, "key": key})
    return {"source": f"s3://{bucket}/{key}", "options": event.get("options", {})}


@logger.inject_lambda_context
def prepare(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    options = LoadOptions.from_event(event.get("options"))
    prepared = prepare_task.prepare([event["source"]], options, _table(), _staging())
    logger.info(
        "prepared", extra={"status": prepared.status, "load_id": prepared.load_id, "items": prepared.items}
    )
    return prepared.to_event()


@logger.inject_lambda_context
def write_chunk(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    stats = write_task.write_chunk(event["load_id"], int(event["chunk"]), _table(), _staging())
    return {"load_id": event["load_id"], "chunk": event["chunk"], **stats.as_dict()}


@logger.inject_lambda_context
@metrics.log_metrics
def activate(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outcome = activate_task.activate(event["load_id"], _table(), _staging())
    # The data-age alarm fires when no activation arrived within the allowed age.
    metrics.add_metric(name=METRIC_DATASET_ACTIVATED, unit=MetricUnit.Count, value=1)
    # The per-bucket table stays in the saved report; Step Functions payloads are small.
    report = outcome.report.summary()
    logger.info("activated", extra={"load_id": event["load_id"], "report": report})
    return {
        "load_id": event["load_id"],
        "version": outcome.version,
        "status": str(outcome.status),
        "report": report,
    }


@logger.inject_lambda_context
def cleanup(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outcome = retention.cleanup(_table(), _staging())
    logger.info("cleanup", extra=outcome)
    return outcome


@logger.inject_lambda_context
def abort(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    error = event.get("error")
    message = error if isinstance(error, str) else json.dumps(error)
    load_id = event.get("load_id")
    if not load_id:
        logger.error("load failed before it had an id", extra={"error": message})
        return {"aborted": None, "error": message}
    abort_task.fail(load_id, message, _table())
    logger.error("load aborted", extra={"load_id": load_id, "error": message})
    return {"aborted": load_id, "error": message}
