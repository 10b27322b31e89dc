"""Lambda entry points of the load state machine: ``loader.pipeline.handlers.<state>``.

Execution input: ``{"dataset": "city", "source": "s3://bucket/key", "options": {...}}``
(or ``"sources": [...]`` for several files of one dataset; without ``dataset``, the
``default`` one). The dataset travels on in the load id (``city.v7``), so every
later state knows whose keys it writes.

- ``fetch`` (with feeds): ``{"feed": "city"}`` -> ``{"status": "unchanged", ...}``, or the
  new release streamed into the bucket and ``start``'s input: ``{"dataset", "sources",
  "options", "feed": <the release>}`` (``loader.pipeline.fetch``);
- ``start``: unchanged, resumed or new; ``{"status", "load_id", "version",
  "prepared", "scans": [{"load_id", "source"}, ...]}`` (the scan Map's items), and
  a feed's release passed on;
- ``scan``: one source (``{"load_id", "source"}``);
- ``plan_partitions``: ``{"load_id", "partitions", "items": {"bucket", "key"}}``:
  the staged list the resolve Distributed Map reads;
- ``resolve``: partitions, one or a batch (``{"Items": [...]}``);
- ``plan_writes``: ``{"load_id", "status", "chunks", "items": {"bucket", "key"}}``;
- ``write_chunks``: chunks, one or a batch;
- ``export`` (with ``exportMmdb``): ``{"load_id"}`` -> ``{"bucket", "key",
  "format", "bytes", "ranges", "ipv6_left_out", "seconds"}``: the version as
  ``exports/<load id>.mmdb`` (``loader.pipeline.export_task``);
- ``activate``: ``{"load_id", "export"?}``; the change event names the export;
- ``record_release`` (with feeds): ``{"feed": <the release>, "load_id"}`` after activation
  (or when ``start`` found the release's bytes active): the feed's state;
- ``cleanup``: ``{}`` on a schedule (every dataset), or ``{"load_id"}`` after an
  activation (that load's dataset);
- ``abort``: ``{"load_id"?, "error"}`` from every Catch: marks the load failed
  and frees the lock; ``cleanup`` deletes its partial version later. A feed's
  run (``"feed"`` in the state) counts one more failure in a row.

Outside the state machine, in each replica region (``replicaRegions``):

- ``arrive``: ``{}`` on a schedule; the region's own pointers follow home's, each version
  once it has wholly arrived there (``loader.pipeline.arrival``); publishes how long the
  region has been behind (``RegionBehindSeconds``).

Each handler is one call into the task of its state. Every payload is a few
ids: whatever the dataset's size, the state stays far below 256 KB.

Cold start (``bench/cold_start.py``): every function imports this module, and the scan,
resolve and write workers a Distributed Map starts by the hundred are most of them. So the
feeds' clients and the .mmdb writer, which only ``fetch``, ``record_release``, ``export``,
``abort`` and ``cleanup`` (with exports on) run, are imported by those handlers when first
called; and, as in the lookup's handler, the collector is off during the import and
``gc.freeze`` keeps what it built out of later collections.
"""

from __future__ import annotations

import gc

gc.disable()

import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from aws_lambda_powertools import Logger, Metrics  # noqa: E402
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric  # noqa: E402
from aws_lambda_powertools.utilities import parameters  # noqa: E402
from aws_lambda_powertools.utilities.typing import LambdaContext  # noqa: E402

from ipmeta.schema.settings import ENV_POINTER_REGION, METRICS_NAMESPACE, Settings  # noqa: E402
from loader.options import LoadOptions  # noqa: E402
from loader.pipeline import abort as abort_task  # noqa: E402
from loader.pipeline import activate as activate_task  # noqa: E402
from loader.pipeline import arrival, retention, staged  # noqa: E402
from loader.pipeline import partitions as partitions_task  # noqa: E402
from loader.pipeline import plan_writes as plan_writes_task  # noqa: E402
from loader.pipeline import start as start_task  # noqa: E402
from loader.pipeline import write as write_task  # noqa: E402
from loader.pipeline.resolve import resolve_partition  # noqa: E402
from loader.pipeline.scan import scan_source  # noqa: E402
from loader.records import LoadStatus, dataset_of  # noqa: E402
from loader.settings import (  # noqa: E402
    ARRIVAL_WAIT_SECONDS,
    ENV_EXPORTS_ENABLED,
    ENV_FEEDS,
    ENV_SOURCE_BUCKET,
    FEED_RUN_FAILED,
    FEED_RUN_LOADED,
    FEED_RUN_UNCHANGED,
    LOADER_SERVICE_NAME,
    METRIC_DATASET_ACTIVATED,
    METRIC_DATASET_DIMENSION,
    METRIC_FEED_DIMENSION,
    METRIC_FEED_FAILURES,
    METRIC_FEED_RUNS,
    METRIC_ITEMS_WRITTEN,
    METRIC_LOAD_SECONDS,
    METRIC_REGION_BEHIND,
    METRIC_REGION_DIMENSION,
)
from loader.store import s3  # noqa: E402
from loader.store.batch_writes import WriteStats  # noqa: E402
from loader.store.table import LoaderTable  # noqa: E402

if TYPE_CHECKING:
    from loader.pipeline.fetch import DeployedFeed

gc.freeze()
gc.enable()

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
    _feeds.cache_clear()
    s3.client.cache_clear()


@functools.cache
def _feeds() -> dict[str, DeployedFeed]:
    from loader.pipeline import fetch as fetch_task

    return fetch_task.decode_feeds(os.environ.get(ENV_FEEDS, ""))


def _read_secret(name: str) -> Any:
    """A feed's credentials: the stack grants its feeds' secrets to the fetch function's role alone."""
    value = parameters.get_secret(name)
    try:
        parsed = json.loads(value)
    except ValueError:
        return value  # an IPinfo token may be the secret's whole text
    return parsed if isinstance(parsed, dict) else value


def _publish_feed_run(feed: str, run: str, failures_in_a_row: int) -> None:
    """Every run of a feed that ends says how it ended (``run``: loaded, unchanged, failed; the
    dashboard counts them) and how many of its runs failed in a row (its alarm's metric).

    One line of its own, flushed at once: the handlers that publish it publish nothing
    else, and a plain load's abort publishes nothing at all.
    """
    line = EphemeralMetrics(
        namespace=METRICS_NAMESPACE,
        default_dimensions={"service": LOADER_SERVICE_NAME, METRIC_FEED_DIMENSION: feed},
    )
    line.add_metric(name=METRIC_FEED_FAILURES, unit=MetricUnit.Count, value=failures_in_a_row)
    line.add_metric(name=METRIC_FEED_RUNS[run], unit=MetricUnit.Count, value=1)
    line.flush_metrics()


@logger.inject_lambda_context
def fetch(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """A feed's run, ``{"feed": "city"}``: unchanged, or the new release in the bucket, ``start``'s input."""
    from loader.feeds.http_client import HttpClient, HttpSettings
    from loader.pipeline import fetch as fetch_task

    bucket = os.environ[ENV_SOURCE_BUCKET]
    outcome = fetch_task.fetch_feed(
        str(event["feed"]),
        _feeds(),
        _table(),
        lambda prefix: s3.S3Sinks(s3.client(), bucket, prefix),
        read_secret=_read_secret,
        http=HttpClient(HttpSettings(deadline_seconds=_download_deadline(context))),
        workdir=Path(tempfile.gettempdir()),
        list_files=_list_files,
    )
    if outcome["status"] == fetch_task.UNCHANGED:
        _publish_feed_run(outcome["dataset"], FEED_RUN_UNCHANGED, outcome["failures_in_a_row"])
    logger.info("feed checked", extra={"feed": event["feed"], "status": outcome["status"]})
    return outcome


def _list_files(prefix: str) -> s3.S3ListFiles:
    """A network feed's list files, under ``prefix`` of the source bucket."""
    return s3.S3ListFiles(s3.client(), os.environ[ENV_SOURCE_BUCKET], prefix)


#: Kept back from the function's timeout: a stalled vendor ends as a FeedTimeout the state
#: machine retries, not as the function's own timeout.
FETCH_DEADLINE_MARGIN_SECONDS = 60.0


def _download_deadline(context: LambdaContext) -> float:
    seconds_left = context.get_remaining_time_in_millis() / 1000
    return max(FETCH_DEADLINE_MARGIN_SECONDS, seconds_left - FETCH_DEADLINE_MARGIN_SECONDS)


@logger.inject_lambda_context
def record_release(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """``{"feed": <the release>, "load_id"}``, once the load is active: what the feed's next run compares."""
    from loader.pipeline import fetch as fetch_task

    state = fetch_task.record_release(event["feed"], _table(), _list_files)
    # RecordUnchangedRelease: Start found the release's bytes active already; RecordRelease: loaded.
    _publish_feed_run(event["feed"]["dataset"], event.get("run", FEED_RUN_LOADED), 0)
    logger.info(
        "feed release recorded",
        extra={"feed": state.feed, "release": state.release_id, "load_id": event.get("load_id")},
    )
    return {"feed": state.feed, "release": state.release_id}


def execution_options(event: dict[str, Any]) -> dict[str, Any]:
    """The load options of an execution, with its ``dataset`` (input key or option) among them."""
    options = dict(event.get("options") or {})
    if event.get("dataset"):
        options["dataset"] = event["dataset"]
    return options


@logger.inject_lambda_context
def start(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    options = LoadOptions.from_event(execution_options(event))
    sources = event.get("sources") or [event["source"]]
    started = start_task.start(sources, options, _table(), _staging())
    logger.info("started", extra={"status": started.status, "load_id": started.load_id})
    # A feed's release rides along to RecordRelease, which remembers it once the load is active.
    release = {"feed": event["feed"]} if isinstance(event.get("feed"), dict) else {}
    # A resumed load that was prepared goes straight to WriteChunks, which reads this list.
    return {
        **started.to_event(),
        "writes": {"items": _staging().location(started.load_id, staged.CHUNK_LIST)},
        **release,
    }


@logger.inject_lambda_context
def scan(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    summary = scan_source(event["load_id"], int(event["source"]), _staging())
    return {"load_id": event["load_id"], "source": summary.source, "rows": summary.rows_read}


@logger.inject_lambda_context
def plan_partitions(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    plan = partitions_task.plan_partitions(event["load_id"], _staging())
    return {
        "load_id": event["load_id"],
        "partitions": len(plan.partitions),
        "items": _staging().location(event["load_id"], staged.PARTITION_LIST),
    }


def _batch(event: dict[str, Any]) -> list[dict[str, Any]]:
    """A Distributed Map child gets its items batched (``Items``); a plain call, one item."""
    items: list[dict[str, Any]] = event.get("Items") or [event]
    return items


@logger.inject_lambda_context
def resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    done = [
        resolve_partition(item["load_id"], int(item["partition"]), _staging(), table=_table()).partition
        for item in _batch(event)
    ]
    return {"resolved": done}


@logger.inject_lambda_context
def plan_writes(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    prepared = plan_writes_task.plan_writes(event["load_id"], _table(), _staging())
    return {
        "load_id": event["load_id"],
        "status": prepared.status,
        "chunks": prepared.chunks,
        "items": _staging().location(event["load_id"], staged.CHUNK_LIST),
    }


@logger.inject_lambda_context
def write_chunks(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    totals = WriteStats()
    for item in _batch(event):
        totals.merge(write_task.write_chunk(item["load_id"], int(item["chunk"]), _table(), _staging()))
    return totals.as_dict()


#: The share of the Export invocation its count of the version may take; the file gets the rest.
EXPORT_CHECK_SHARE = 0.5


@logger.inject_lambda_context
def export(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from loader.pipeline import export_task

    # The check may take this share of the invocation, the file the rest: past it, VerificationPending,
    # and the retried Export counts on from the saved progress.
    left = context.get_remaining_time_in_millis() / 1000
    exported = export_task.export_version(
        event["load_id"],
        _table(),
        os.environ[ENV_SOURCE_BUCKET],
        workdir=Path(tempfile.gettempdir()),
        until=time.time() + left * EXPORT_CHECK_SHARE,
        # The limit is what a whole invocation leaves the file, not this one's remaining time: a
        # retry after VerificationPending starts with the count done and writes the file then.
        max_items=export_task.max_export_items(
            int(context.memory_limit_in_mb), export_task.EXPORT_INVOCATION_SECONDS * (1 - EXPORT_CHECK_SHARE)
        ),
    )
    logger.info("exported", extra={"load_id": event["load_id"], **exported.to_event()})
    return exported.to_event()


#: Kept back from Activate's timeout for what follows the verification: the switch, the report.
ACTIVATE_TIMEOUT_MARGIN_SECONDS = 60.0


@logger.inject_lambda_context
@metrics.log_metrics
def activate(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Verification stops short of the timeout (VerificationPending); the retried Activate resumes it.
    until = time.time() + context.get_remaining_time_in_millis() / 1000 - ACTIVATE_TIMEOUT_MARGIN_SECONDS
    outcome = activate_task.activate(
        event["load_id"], _table(), _staging(), export=event.get("export"), until=until
    )
    if outcome.status == LoadStatus.HELD:
        # Held by the guard (its own ReleaseHeld metric is out): nothing was activated.
        logger.warning("held", extra={"load_id": event["load_id"]})
        return {"load_id": event["load_id"], "version": outcome.version, "status": str(outcome.status)}
    # Each dataset's data-age alarm fires when no activation of it arrived within its allowed age.
    metrics.add_dimension(name=METRIC_DATASET_DIMENSION, value=dataset_of(event["load_id"]))
    metrics.add_metric(name=METRIC_DATASET_ACTIVATED, unit=MetricUnit.Count, value=1)
    # The dashboard's loads, in the same line: what this one wrote, and how long it took.
    if outcome.report.items_written is not None:
        metrics.add_metric(
            name=METRIC_ITEMS_WRITTEN, unit=MetricUnit.Count, value=outcome.report.items_written
        )
    if outcome.report.duration_seconds is not None:
        metrics.add_metric(
            name=METRIC_LOAD_SECONDS, unit=MetricUnit.Seconds, value=outcome.report.duration_seconds
        )
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
    """After an activation, the dataset of that load; on the schedule, every dataset of the table."""
    table = _table()
    load_id = event.get("load_id")
    names = [dataset_of(load_id)] if load_id else table.versions.started_datasets()
    outcomes = []
    for name in names:
        # The replica regions to hold versions for are the table's own (``RegionPointers.replicas``).
        outcome = retention.cleanup(table.for_dataset(name), _staging(), also_delete=_export_deleter(name))
        logger.info("cleanup", extra=outcome)
        outcomes.append(outcome)
    return {"datasets": outcomes}


#: Kept back from the function's timeout: a run counts until then, and the next run counts the rest.
ARRIVAL_TIMEOUT_MARGIN_SECONDS = 60.0


@logger.inject_lambda_context
def arrive(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """A replica region's scheduled check: its pointers follow home's, each version once it arrived."""
    region = os.environ[ENV_POINTER_REGION]
    left = context.get_remaining_time_in_millis() / 1000 - ARRIVAL_TIMEOUT_MARGIN_SECONDS
    wait = max(0.0, min(ARRIVAL_WAIT_SECONDS, left))
    outcomes = arrival.follow_home(_table(), region, wait_seconds=wait, count_seconds=max(0.0, left))
    behind = max((outcome.behind_seconds for outcome in outcomes), default=0)
    with single_metric(
        name=METRIC_REGION_BEHIND,
        unit=MetricUnit.Seconds,
        value=behind,
        namespace=METRICS_NAMESPACE,
        default_dimensions={"service": LOADER_SERVICE_NAME, METRIC_REGION_DIMENSION: region},
    ):
        pass
    for outcome in outcomes:
        logger.info("arrival", extra=outcome.to_dict())
    return {"region": region, "behind_seconds": behind, "datasets": [o.to_dict() for o in outcomes]}


def _export_deleter(dataset: str) -> Callable[[int], None] | None:
    """With exports on, a deleted version's file goes with it: it would answer for data no longer served."""
    if os.environ.get(ENV_EXPORTS_ENABLED) != "true":
        return None
    from loader.pipeline import export_task

    bucket = os.environ[ENV_SOURCE_BUCKET]
    return lambda version: s3.delete(bucket, export_task.export_key(version, dataset))


@logger.inject_lambda_context
def abort(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from loader.pipeline import fetch as fetch_task

    outcome = _abort_load(event)
    # A feed's failed run counts towards its alarm, whether the fetch or the load failed.
    failure = fetch_task.count_failure(event, _table())
    if failure is not None:
        dataset, failures_in_a_row = failure
        _publish_feed_run(dataset, FEED_RUN_FAILED, failures_in_a_row)
    return outcome


def _abort_load(event: dict[str, Any]) -> dict[str, Any]:
    error = event.get("error")
    message = error if isinstance(error, str) else json.dumps(error)
    load_id = event.get("load_id")
    if not load_id:
        logger.error("load failed before it had an id", extra={"error": message})
        return {"aborted": None, "error": message}
    kind = error.get("Error") if isinstance(error, dict) else None
    if kind in abort_task.REJECTIONS and abort_task.discard(load_id, _table(), _staging()):
        logger.error("sources refused; load discarded", extra={"load_id": load_id, "error": message})
        return {"aborted": load_id, "discarded": True, "error": message}
    abort_task.fail(load_id, message, _table())
    logger.error("load aborted", extra={"load_id": load_id, "error": message})
    return {"aborted": load_id, "error": message}


# --- ipmeta enrich on AWS (``stacks/load/enrich_workflow.py``) ------------------------------------
# Imported when first called: the load's functions never pay for pyarrow, which only these
# functions' layer carries.


@logger.inject_lambda_context
def enrich_plan(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The execution's input (``loader.pipeline.enrich_task``) -> the pinned versions and the parts list."""
    from loader.pipeline import enrich_task
    from loader.pipeline.enrich_parts import S3Location

    job = enrich_task.EnrichJob.from_event(event)
    plan = enrich_task.plan_job(
        job,
        _enrich_objects(),
        pin=enrich_task.pin_versions,
        row_groups=functools.partial(enrich_task.parquet_row_groups, filesystem=_enrich_filesystem()),
        staging=S3Location(os.environ[ENV_SOURCE_BUCKET], f"{_staging().prefix}/"),
    )
    logger.info("enrich planned", extra={"job_id": plan["job_id"], "parts": plan["parts"]["count"]})
    return plan


@logger.inject_lambda_context
def enrich_snapshot(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One pinned version (``{"dataset", "version", "snapshot"}``): its Parquet snapshot, written once."""
    from loader.pipeline import enrich_task

    written = enrich_task.ensure_snapshot(event, _table(), _enrich_filesystem())
    logger.info("snapshot", extra=written)
    return written


@logger.inject_lambda_context
def enrich_part(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One child of EnrichParts (``{"part", "job"}``): the part enriched, and its summary."""
    from loader.pipeline import enrich_task

    summary = enrich_task.run_part(event, _enrich_filesystem())
    logger.info("part enriched", extra={key: summary[key] for key in ("index", "rows", "seconds")})
    return summary


@logger.inject_lambda_context
def enrich_summary(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """``{"plan", "results"}``: the parts' summaries added up, and written beside them."""
    from loader.pipeline import enrich_task

    store = _enrich_objects()
    outputs = enrich_task.map_results(event["results"], store)
    summary = enrich_task.summarize(event["plan"], outputs, store)
    logger.info("enrich done", extra={key: summary[key] for key in ("job_id", "parts", "rows")})
    return summary


@logger.inject_lambda_context
def enrich_abort(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """From every Catch: the job's written parts deleted, so a failed job leaves no output."""
    from loader.pipeline import enrich_task

    outcome = enrich_task.abort_job(event, _enrich_objects())
    logger.error("enrich failed", extra={**outcome, "error": json.dumps(event.get("error"))})
    return outcome


def _enrich_filesystem() -> Any:
    """How the engine reaches S3: None, pyarrow's own S3 file system (tests hand it their stand-in)."""
    return None


def _enrich_objects() -> Any:
    from loader.store.enrich_objects import EnrichObjects

    return EnrichObjects(s3.client())
