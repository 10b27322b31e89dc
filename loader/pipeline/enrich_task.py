"""The enrich state machine's steps (``stacks/load/enrich_workflow.py``): plan, snapshot, part,
summary, abort.

The execution's input (docs/enrich.md, "Starting it another way")::

    {"input": "s3://in/logs/",              # or "manifest": "s3://…/manifest.json" (S3 Inventory)
                                            #  or "s3://…/objects.csv" (bucket,key,size: Athena)
     "output": "s3://out/enriched/",
     "column": "ip",                        # optional: the address column (a 0-based index for
                                            #  a header-less CSV)
     "datasets": ["city", "asn"],           # optional: as the API takes them
     "versions": {"city": 12},              # optional: pins; otherwise each active version
     "format": "parquet",                   # optional: the output's; default the input's
     "overwrite": false,                    # an output prefix that holds objects is refused
     "part_bytes": 268435456}               # optional: how large a part each child reads

and its output, also written to ``<output>/_SUMMARY.json``: ``{"parts", "rows",
"invalid_rows", "unmatched_rows", "seconds", "versions", "outputs"}``.

Each part runs the same engine as ``ipmeta enrich`` on one machine (``loader.enrich``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from loader.errors import SourceError
from loader.pipeline.enrich_parts import (
    DEFAULT_PART_BYTES,
    MAX_OBJECTS,
    InputObject,
    InventoryManifest,
    Part,
    S3Location,
    inventory_objects,
    listing_objects,
    plan_parts,
)
from loader.settings import ENRICH_PART_MEMORY_MB
from loader.store.enrich_objects import EnrichObjects

#: The state machine's tasks, in the order it runs them (``loader.pipeline.handlers``).
ENRICH_TASKS: Final = ("enrich_plan", "enrich_snapshot", "enrich_part", "enrich_summary", "enrich_abort")
PART_MEMORY_MB: Final = ENRICH_PART_MEMORY_MB
#: Under the loader bucket's staging prefix: each job's parts list, and the map's results.
STAGING_PREFIX: Final = "enrich"
RESULTS_PREFIX: Final = "enrich-results"
#: In the loader's bucket: ``snapshots/<dataset>/v<version>.parquet``, written once per version.
SNAPSHOT_PREFIX: Final = "snapshots"
SUMMARY_NAME: Final = "_SUMMARY.json"
OUTPUT_FORMATS: Final = ("csv", "jsonl", "parquet")
SUMMED: Final = ("rows", "invalid_rows", "unmatched_rows", "seconds")


@dataclass(frozen=True, slots=True)
class EnrichJob:
    output: S3Location
    input: S3Location | None = None
    manifest: S3Location | None = None
    column: str | int | None = None
    datasets: tuple[str, ...] | None = None
    versions: Mapping[str, int] = field(default_factory=dict)
    format: str | None = None
    overwrite: bool = False
    part_bytes: int = DEFAULT_PART_BYTES

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> EnrichJob:
        if ("input" in event) == ("manifest" in event):
            raise SourceError("name the job's objects: either 'input' (an s3:// prefix) or 'manifest'")
        if "output" not in event:
            raise SourceError("name where the job writes: 'output' (an s3:// prefix)")
        output_format = event.get("format")
        if output_format is not None and output_format not in OUTPUT_FORMATS:
            raise SourceError(f"format {output_format!r}: one of {', '.join(OUTPUT_FORMATS)}")
        datasets = event.get("datasets")
        if isinstance(datasets, str):
            datasets = [name for name in datasets.split(",") if name]
        column = event.get("column")
        try:
            versions = {str(name): int(version) for name, version in (event.get("versions") or {}).items()}
            part_bytes = int(event.get("part_bytes", DEFAULT_PART_BYTES))
        except (TypeError, ValueError, AttributeError) as error:
            raise SourceError(f"versions and part_bytes are numbers: {error}") from None
        return cls(
            output=S3Location.parse(str(event["output"])).prefix(),
            input=S3Location.parse(str(event["input"])).prefix() if "input" in event else None,
            manifest=S3Location.parse(str(event["manifest"])) if "manifest" in event else None,
            column=column if isinstance(column, int) or column is None else str(column),
            datasets=tuple(str(name) for name in datasets) if datasets else None,
            versions=versions,
            format=output_format,
            overwrite=bool(event.get("overwrite", False)),
            part_bytes=part_bytes,
        )


@dataclass(frozen=True, slots=True)
class PinnedVersion:
    """A dataset's version, fixed for the whole job, and where its snapshot lives."""

    dataset: str
    version: int

    def snapshot(self, bucket: str) -> S3Location:
        return S3Location(bucket, f"{SNAPSHOT_PREFIX}/{self.dataset}/v{self.version}.parquet")


def _read(store: EnrichObjects, location: S3Location) -> str:
    return store.read_text(location.bucket, location.key)


def job_objects(job: EnrichJob, store: EnrichObjects) -> list[InputObject]:
    """The objects of the job: under its prefix, or listed by its manifest."""
    if job.input is not None:
        prefix = job.input
        return [
            InputObject(prefix.bucket, key, size)
            for key, size in store.list_objects(prefix.bucket, prefix.key, MAX_OBJECTS)
        ]
    assert job.manifest is not None
    if job.manifest.key.endswith("manifest.json"):
        manifest = InventoryManifest.parse(_read(store, job.manifest), job.manifest)
        import csv
        import io

        found: list[InputObject] = []
        for data_file in manifest.data_files:
            rows = csv.reader(io.StringIO(_read(store, data_file)))
            found.extend(inventory_objects(rows, manifest.columns))
    else:
        found = list(listing_objects(_read(store, job.manifest), job.manifest))
    if len(found) > MAX_OBJECTS:
        raise SourceError(f"{job.manifest.uri} lists more than {MAX_OBJECTS:,} objects")
    return found


def plan_job(
    job: EnrichJob,
    store: EnrichObjects,
    *,
    pin: Callable[[Sequence[str] | None, Mapping[str, int]], Sequence[PinnedVersion]],
    row_groups: Callable[[InputObject], Sequence[int]] | None,
    staging: S3Location,
) -> dict[str, Any]:
    """Pin the versions, list and cut the input, stage the parts list: the map's ItemReader reads it.

    Refuses an output prefix that already holds objects (unless ``overwrite``), an input with no
    object, and a dataset or version that does not exist (``pin`` raises), before anything is written.
    """
    if not job.overwrite and store.any_object(job.output.bucket, job.output.key):
        raise SourceError(f"{job.output.uri} already holds objects: choose another output, or overwrite")
    pinned = list(pin(job.datasets, job.versions))
    objects = job_objects(job, store)
    if not objects:
        raise SourceError(f"{(job.input or job.manifest or job.output).uri}: no object to enrich")
    parts = plan_parts(
        objects, job.output, part_bytes=job.part_bytes, output_format=job.format, row_groups=row_groups
    )
    job_id = uuid.uuid4().hex
    shared = {
        "column": job.column,
        "format": job.format,
        "output": job.output.uri,
        "versions": [
            {"dataset": v.dataset, "version": v.version, "snapshot": v.snapshot(staging.bucket).uri}
            for v in pinned
        ],
    }
    listing = S3Location(staging.bucket, f"{staging.prefix().key}{STAGING_PREFIX}/{job_id}/parts.json")
    store.put_json(listing.bucket, listing.key, [{"part": part.to_item(), "job": shared} for part in parts])
    return {
        "job_id": job_id,
        "output": job.output.uri,
        "started": time.time(),
        "versions": shared["versions"],
        "snapshots": shared["versions"],
        "parts": {"bucket": listing.bucket, "key": listing.key, "count": len(parts)},
    }


def map_results(results: Mapping[str, Any], store: EnrichObjects) -> list[dict[str, Any]]:
    """Each child's output, from the Distributed Map's ResultWriter manifest (``ResultWriterDetails``)."""
    manifest = store.read_json(str(results["Bucket"]), str(results["Key"]))
    files = manifest.get("ResultFiles", {})
    bucket = str(manifest.get("DestinationBucket") or results["Bucket"])
    failed = [
        child for entry in files.get("FAILED", []) for child in store.read_json(bucket, str(entry["Key"]))
    ]
    if failed or files.get("PENDING"):
        first = failed[0] if failed else {}
        raise SourceError(
            f"{len(failed)} parts failed (the first: {first.get('Error')}: {first.get('Cause')}); "
            f"the map's results: s3://{bucket}/{results['Key']}"
        )
    outputs = []
    for entry in files.get("SUCCEEDED", []):
        for child in store.read_json(bucket, str(entry["Key"])):
            outputs.append(_child_output(child))
    return outputs


def _child_output(child: Mapping[str, Any]) -> dict[str, Any]:
    import json

    output = child.get("Output")
    parsed = json.loads(output) if isinstance(output, str) else output
    if not isinstance(parsed, dict):
        raise SourceError(f"a child of the map returned {type(parsed).__name__}, not a part's summary")
    return parsed


def summarize(
    plan: Mapping[str, Any], outputs: Iterable[Mapping[str, Any]], store: EnrichObjects
) -> dict[str, Any]:
    """The job's summary from its parts' summaries, written beside them as ``_SUMMARY.json``."""
    parts = sorted(outputs, key=lambda summary: int(summary["index"]))
    expected = int(plan["parts"]["count"])
    if len(parts) != expected:
        raise SourceError(f"{len(parts)} parts reported, {expected} planned")
    totals: dict[str, Any] = {name: sum(part.get(name, 0) for part in parts) for name in SUMMED}
    summary = {
        "job_id": plan["job_id"],
        "parts": len(parts),
        **totals,
        "seconds": round(totals["seconds"], 3),
        "elapsed_seconds": round(time.time() - float(plan["started"]), 3),
        "versions": plan["versions"],
        "outputs": [part["output"] for part in parts],
    }
    output = S3Location.parse(str(plan["output"]))
    store.put_json(output.bucket, f"{output.key}{SUMMARY_NAME}", summary)
    return summary


def abort_job(state: Mapping[str, Any], store: EnrichObjects) -> dict[str, Any]:
    """A failed job leaves nothing half-written: every planned output part is deleted."""
    plan = state.get("plan")
    if not isinstance(plan, Mapping) or "parts" not in plan:
        return {"deleted": 0}  # failed before a part was planned: nothing was written
    listing = store.read_json(str(plan["parts"]["bucket"]), str(plan["parts"]["key"]))
    parts = [Part.from_item(entry["part"]) for entry in listing]
    output = S3Location.parse(str(plan["output"]))
    deleted = store.delete_keys(
        output.bucket, [*(part.output for part in parts), f"{output.key}{SUMMARY_NAME}"]
    )
    return {"deleted": deleted}


def pin_versions(datasets: Sequence[str] | None, versions: Mapping[str, int]) -> list[PinnedVersion]:
    """The versions a lookup with ``?datasets=`` and ``?version=`` reads now, as the API selects them
    (``ipmeta.lookup.catalog.select_targets``): an unknown dataset or a version not retained is refused."""
    from ipmeta.lookup.catalog import DatasetCatalog, select_targets
    from ipmeta.schema.settings import ApiSettings, Settings
    from ipmeta.store.dynamodb import Store

    store = Store.from_settings(Settings.from_environment())
    catalog = DatasetCatalog(store, 0, ApiSettings.from_environment().datasets)
    selector = ",".join(f"{name}:v{version}" for name, version in versions.items()) or None
    targets = select_targets(
        catalog.get(), store.for_dataset, ",".join(datasets) if datasets else None, selector
    )
    return [PinnedVersion(target.dataset, target.version) for target in targets.versions]


# --- the engine, on one snapshot or one part (``loader.enrich``) ------------------------------


def parquet_row_groups(source: InputObject, filesystem: Any = None) -> list[int]:
    """A Parquet object's row groups' sizes, from its footer (a few ranged reads, not the object)."""
    import pyarrow.parquet as pq

    from loader.export.parquet import resolve

    fs, path = resolve(f"s3://{source.bucket}/{source.key}", filesystem)
    metadata = pq.ParquetFile(path, filesystem=fs).metadata
    return [metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups)]


def ensure_snapshot(pinned: Mapping[str, Any], table: Any, filesystem: Any = None) -> dict[str, Any]:
    """The pinned version's snapshot, exported from ``table`` unless it exists: a version never changes,
    so every later job on it reads this file and not the table."""
    import pyarrow.fs as pafs

    from loader.export.parquet import resolve
    from loader.export.snapshots import export_snapshot

    uri = str(pinned["snapshot"])
    fs, path = resolve(uri, filesystem)
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        return {**pinned, "written": False}
    dataset = table.for_dataset(str(pinned["dataset"]))
    meta = dataset.lookup.get_version_meta(int(pinned["version"]))
    if meta is None or not meta.retained:
        raise SourceError(f"{pinned['dataset']} v{pinned['version']} is no longer retained")
    stats = export_snapshot(dataset, meta, uri, filesystem)
    return {**pinned, "written": True, "ranges": getattr(stats, "ranges", None)}


def run_part(item: Mapping[str, Any], filesystem: Any = None) -> dict[str, Any]:
    """One child's item (``{"part", "job"}``): its part enriched by the engine, and the part's summary."""
    from loader.enrich.job import Output, enrich_part
    from loader.enrich.memory import tune_allocators
    from loader.enrich.parts import Part as EnginePart
    from loader.enrich.snapshot import Snapshot, load_dataset_snapshot

    tune_allocators()  # this container runs parts and nothing else
    part = Part.from_item(item["part"])
    job = item["job"]
    column = job.get("column")
    source = EnginePart(
        f"s3://{part.bucket}/{part.key}",
        column="ip" if column is None else str(column),
        format=part.format,
        byte_range=part.byte_range,
        row_groups=range(*part.row_groups) if part.row_groups else None,
        filesystem=filesystem,
    )
    snapshot = Snapshot(
        tuple(load_dataset_snapshot(str(pinned["snapshot"]), filesystem) for pinned in job["versions"])
    )
    output_bucket = S3Location.parse(str(job["output"])).bucket
    # A retried child rewrites its own part: the plan refused an output that held anything.
    output = Output(f"s3://{output_bucket}/{part.output}", job.get("format") or part.format, True, filesystem)
    summary = enrich_part(source, snapshot, output)
    return {
        "index": part.index,
        "output": output.uri,
        **{name: getattr(summary, name) for name in SUMMED},
        "problems": summary.problems,
    }
