"""``plan_writes``: from the partitions' summaries, everything the chunk writers and activation need.

- **Ranges that continue across edges.** A range can run on past its
  partition, into the next partition or into cover-only buckets. Each
  partition reported the segments touching the edges of its bucket runs; here
  they are joined, in address order, with the cover-only runs, wherever they
  touch and are the same range (equal data when coalescing, the same row
  otherwise). Each joined range's true bounds go to the writers as patches.
- **Covers.** Each cover-only run becomes an entry of the version's cover list
  (what lookups consult when a bucket has no item) plus one *head item* at
  its first bucket, which carries the range's reverse-index entry.
- **Indexes.** The shard plan of the reverse indexes comes from the partitions'
  value counts (small: one entry per distinct value).
- **Chunks.** A chunk is one or more consecutive sections of every partition,
  grouped so that a chunk holds about ``chunk_size`` items.
- **Bookkeeping.** The manifest, the version's metadata and the load item (now
  ``prepared``), and the report.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipmeta.schema import keys
from ipmeta.schema.records import Cover, VersionMeta, VersionStatus
from loader import reverse_index
from loader.formats import stored_data
from loader.options import LoadOptions
from loader.pipeline import staged
from loader.pipeline.descriptor import LoadDescriptor, read_descriptor
from loader.pipeline.partitions import PartitionPlan
from loader.pipeline.resolve import PartitionSummary, bucket_runs, data_key, read_plan
from loader.records import LoadReport, Manifest
from loader.store.staging import Staging
from loader.store.table import LoaderTable


@dataclass
class WritePlan:
    """Staged as ``plan/writes.json``: what every chunk writer reads once."""

    version: int
    columns: list[str]
    column_types: dict[str, str]
    families: list[int]  #: of each partition
    sections: int
    group: int  #: sections per chunk
    chunks: int
    index: dict[str, Any] | None  #: ``reverse_index.index_plan_to_json``
    #: partition -> run -> ``[start or None, end or None]``: the true bounds of edge segments
    patches: dict[str, dict[str, list[int | None]]] = field(default_factory=dict)
    #: The dataset whose keys the items take (a dry run's id names none).
    dataset: str = keys.DEFAULT_DATASET
    #: Written as a delta over this full version (its items are ``staged.delta_name``'s); 0: full.
    base: int = 0

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_json(cls, data: bytes) -> WritePlan:
        return cls(**json.loads(data))


@dataclass(frozen=True)
class Prepared:
    """What the preparation of a load ends with: the chunks to write and the report."""

    status: str
    load_id: str
    version: int
    chunks: int
    items: int
    report: LoadReport
    done: frozenset[int] = frozenset()  #: chunks already written (a resumed load)
    covers: tuple[Cover, ...] = ()  #: the version's cover list


def plan_writes(
    load_id: str, table: LoaderTable | None, staging: Staging, *, started: float | None = None
) -> Prepared:
    """Stage the write plan; unless this is a dry run, record the version and mark the load prepared."""
    descriptor = read_descriptor(staging, load_id)
    plan = read_plan(staging, load_id)
    summaries = [
        PartitionSummary.from_json(staging.get(load_id, staged.resolved_name(spec.index)))
        for spec in plan.partitions
    ]
    patches, cover_bounds = join_edges(plan, summaries, coalesce=descriptor.options.coalesce)
    covers = _covers(plan, cover_bounds)
    index = _index_plan(descriptor, summaries, covers, plan)
    delta = _delta_decision(descriptor, plan, summaries, covers, table)
    version_covers = covers + delta.gap_covers if delta.written else covers
    per_bucket = _items_per_bucket(plan, summaries, covers, delta=delta.written)
    #: What the chunks write; the covers' head items are written here.
    items = sum(per_bucket.values()) - len(covers)
    group = _group(items, plan.sections, descriptor.options.chunk_size)
    chunks = math.ceil(plan.sections / group)
    writes = WritePlan(
        version=descriptor.version,
        columns=plan.columns,
        column_types=plan.column_types,
        families=[spec.family for spec in plan.partitions],
        sections=plan.sections,
        group=group,
        chunks=chunks,
        index=reverse_index.index_plan_to_json(index) if index else None,
        patches=patches,
        dataset=descriptor.options.dataset,
        base=descriptor.base if delta.written else 0,
    )
    staging.put(load_id, staged.WRITES, writes.to_json())
    offsets = [summary.delta_offsets if delta.written else summary.offsets for summary in summaries]
    staging.put(load_id, staged.SECTIONS, staged.sections_table(offsets))
    listing = [{"load_id": load_id, "chunk": chunk} for chunk in range(chunks)]
    staging.put(load_id, staged.CHUNK_LIST, json.dumps(listing).encode())
    load = _Load(descriptor, plan, summaries, index, per_bucket, version_covers, delta)
    report = _report(load, chunks, started)
    staging.put(load_id, staged.REPORT, report.to_json())
    if table is not None and not descriptor.dry_run:
        _record_version(table.for_load(load_id), load, writes, report, chunk_items=items)
    status = "dry-run" if descriptor.dry_run else "prepared"
    return Prepared(status, load_id, descriptor.version, chunks, items, report, covers=tuple(covers))


# -- ranges that continue across edges ---------------------------------------------------------


@dataclass
class _Element:
    """A stretch of addresses that may continue a range: an edge segment or a cover-only run."""

    start: int
    end: int
    key: str
    joined: list[int] = field(default_factory=list)  #: ``[start, end]`` of the joined range, filled in


def join_edges(
    plan: PartitionPlan, summaries: Sequence[PartitionSummary], *, coalesce: bool
) -> tuple[dict[str, dict[str, list[int | None]]], list[tuple[int, int]]]:
    """The true bounds of every edge segment (as patches) and of every cover-only run."""
    elements: dict[int, list[_Element]] = {4: [], 6: []}
    edges: list[tuple[int, int, _Element | None, _Element | None]] = []
    for spec, summary in zip(plan.partitions, summaries, strict=True):
        for run, _, _, low, high in summary.edges:
            low_element = _Element(*low) if low else None
            high_element = (
                low_element if low and high and low == high else (_Element(*high) if high else None)
            )
            for element in {id(e): e for e in (low_element, high_element) if e is not None}.values():
                elements[spec.family].append(element)
            edges.append((spec.index, run, low_element, high_element))
    covers: list[_Element] = []
    for family, first, last, row in plan.cover_only:
        start, end = keys.bucket_bounds(family, first)[0], keys.bucket_bounds(family, last)[1]
        element = _Element(start, end, _cover_key(plan, row, coalesce=coalesce))
        elements[family].append(element)
        covers.append(element)
    for family_elements in elements.values():
        _join(family_elements)
    patches: dict[str, dict[str, list[int | None]]] = {}
    for partition, run, low, high in edges:
        patch = [low.joined[0] if low else None, high.joined[1] if high else None]
        if patch != [low.start if low else None, high.end if high else None]:
            patches.setdefault(str(partition), {})[str(run)] = patch
    return patches, [(cover.joined[0], cover.joined[1]) for cover in covers]


def _join(elements: list[_Element]) -> None:
    elements.sort(key=lambda element: element.start)
    chain: list[_Element] = []
    for element in elements:
        if chain and (chain[-1].end + 1 != element.start or chain[-1].key != element.key):
            _close(chain)
            chain = []
        chain.append(element)
    if chain:
        _close(chain)


def _close(chain: Sequence[_Element]) -> None:
    for element in chain:
        element.joined = [chain[0].start, chain[-1].end]


def _cover_key(plan: PartitionPlan, row: int, *, coalesce: bool) -> str:
    seq, _, _, _, _, values = plan.cover_rows[row]
    if coalesce:
        return "data:" + data_key(json.dumps(values, separators=(",", ":")))
    return f"seq:{seq}"


# -- a delta, or a full version -------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaDecision:
    """Whether a reload over a base is written as a delta, why, and what its diff counted."""

    written: bool = False
    report: Mapping[str, Any] | None = None
    gap_covers: list[Cover] = field(default_factory=list)


def _delta_decision(
    descriptor: LoadDescriptor,
    plan: PartitionPlan,
    summaries: Sequence[PartitionSummary],
    covers: Sequence[Cover],
    table: LoaderTable | None,
) -> DeltaDecision:
    """A delta when the policy allows it and (``auto``) it holds at most ``delta_threshold`` of its base.

    A load written full whatever it changed, but measured for the guard (``descriptor.measured``),
    reports its share of that version all the same (``written_as: full``).
    """
    if table is not None and not descriptor.base and descriptor.measured:
        return DeltaDecision(report=_measured_report(descriptor, plan, summaries, covers, table))
    if not descriptor.base or table is None:
        return DeltaDecision()
    options, scoped = descriptor.options, table.for_load(descriptor.load_id)
    base = scoped.lookup.get_version_meta(descriptor.base)
    counts = _diff_totals(summaries)
    vacated = _vacated(scoped, descriptor.base, plan, covers)
    # Everything the delta writes: its items (markers included), the covers' heads, its cover list.
    items = counts["items"] + len(covers)
    share = items / max(1, base.items if base else 0)
    written = options.delta == "always" or share <= options.delta_threshold
    reason = (
        "--delta always"
        if options.delta == "always"
        else f"the delta holds {share:.1%} of its base, "
        + ("within" if written else "above")
        + f" the {options.delta_threshold:.0%} threshold"
    )
    report = {
        "base": keys.format_version(descriptor.base),
        "written_as": "delta" if written else "full",
        "reason": reason,
        "items": items,
        "share_of_base": round(share, 4),
        "gap_covers": len(vacated.gap_covers),
        **_change_report(counts, vacated, base),
    }
    return DeltaDecision(written, report, vacated.gap_covers if written else [])


def _measured_report(
    descriptor: LoadDescriptor,
    plan: PartitionPlan,
    summaries: Sequence[PartitionSummary],
    covers: Sequence[Cover],
    table: LoaderTable,
) -> dict[str, Any]:
    """The share of ``descriptor.measured`` the release changed: what a delta over it would write."""
    scoped = table.for_load(descriptor.load_id)
    base = scoped.lookup.get_version_meta(descriptor.measured)
    counts = _diff_totals(summaries)
    vacated = _vacated(scoped, descriptor.measured, plan, covers)
    share = counts["items"] / max(1, base.items if base else 0)
    change = _change_report(counts, vacated, base)
    return {
        "base": keys.format_version(descriptor.measured),
        "written_as": "full",
        "reason": f"{_full_because(descriptor.options)}; measured for the guard, "
        f"{change['change_of_base']:.1%} of it changed",
        "items": counts["items"],
        "share_of_base": round(share, 4),
        **change,
    }


def _change_report(counts: Mapping[str, int], vacated: _Vacated, base: VersionMeta | None) -> dict[str, Any]:
    """What the release changed of its base, for the guard (``loader.pipeline.guard.judge``).

    ``changed``: the ranges it added, replaced (same first address, other bounds or data) and
    removed; removed are the base's stretches it no longer holds inside the buckets it still
    has (``gaps``) and every base item of the buckets it left empty (``vacated``: a dropped
    IPv6 list or region leaves whole buckets empty, which no partition diffs). Over the base's
    items: ``change_of_base``. Markers are bookkeeping, not change; ``share_of_base`` is what a
    delta writes, which the delta threshold reads.
    """
    base_items = base.items if base else 0
    removed = counts["gaps"] + vacated.items
    changed = counts["replaced"] + counts["added"] + removed
    return {
        "base_items": base_items,
        **{name: counts[name] for name in ("unchanged", "replaced", "added", "gaps", "markers")},
        "vacated": vacated.items,
        "removed": removed,
        "changed": changed,
        "change_of_base": round(changed / max(1, base_items), 4),
    }


def _full_because(options: LoadOptions) -> str:
    if options.delta == "never":
        return "--delta never"
    return "a reverse index is built" if options.index_field or options.flag_column else "no delta base"


def _diff_totals(summaries: Sequence[PartitionSummary]) -> dict[str, int]:
    totals = dict.fromkeys(("unchanged", "replaced", "added", "gaps", "markers", "items"), 0)
    for summary in summaries:
        diff = summary.delta or {}
        for name in totals:
            if name != "items":
                totals[name] += int(diff.get(name, 0))
        totals["items"] += sum((diff.get("items_per_bucket") or {}).values())
    return totals


@dataclass(frozen=True)
class _Vacated:
    """The buckets the base holds anything in and the new release holds nothing in."""

    #: Gap covers over them: without, a lookup would fall through to the base and answer its ranges.
    gap_covers: list[Cover]
    #: The base's items there (its manifest's counts), and one per base cover meeting them.
    items: int


def _vacated(table: LoaderTable, base: int, plan: PartitionPlan, covers: Sequence[Cover]) -> _Vacated:
    """What the new release left empty of ``base``: proportional to buckets, never to items.

    Resolve diffs only the buckets the new release has pieces in; the rest is found
    here from the base's manifest and cover list.
    """
    manifest = table.manifests.get(base)
    held: dict[tuple[int, int], int] = {}
    for partition, count in (manifest.items_per_partition if manifest else {}).items():
        parsed = table.space.parse_partition_key(partition)
        if parsed is not None and parsed[0] == base:
            held[parsed[1], parsed[2]] = held.get((parsed[1], parsed[2]), 0) + int(count)
    base_covers = table.lookup.read_covers(base)
    for cover in base_covers:
        for bucket in range(cover.first_bucket, cover.last_bucket + 1):
            held.setdefault((cover.family, bucket), 0)
    kept = {(spec.family, bucket) for spec in plan.partitions for bucket in spec.buckets}
    for cover in covers:
        kept.update((cover.family, bucket) for bucket in range(cover.first_bucket, cover.last_bucket + 1))
    left = set(held) - kept
    items = sum(held[bucket] for bucket in left) + sum(
        1
        for cover in base_covers
        if any((cover.family, bucket) in left for bucket in range(cover.first_bucket, cover.last_bucket + 1))
    )
    gaps: list[Cover] = []
    for family in (4, 6):
        for first, last in bucket_runs(sorted(bucket for owner, bucket in left if owner == family)):
            start, end = keys.bucket_bounds(family, first)[0], keys.bucket_bounds(family, last)[1]
            gaps.append(Cover(family, first, last, start, end, None))
    return _Vacated(gaps, items)


# -- covers, indexes, chunks ---------------------------------------------------------------------


def _covers(plan: PartitionPlan, bounds: Sequence[tuple[int, int]]) -> list[Cover]:
    covers: list[Cover] = []
    for (family, first, last, row), (start, end) in zip(plan.cover_only, bounds, strict=True):
        values = plan.cover_rows[row][5]
        types = [plan.column_types[column] for column in plan.columns]
        data = stored_data(plan.columns, values, types)
        covers.append(Cover(family, first, last, start, end, data))
    return covers


def _index_plan(
    descriptor: LoadDescriptor,
    summaries: Sequence[PartitionSummary],
    covers: Sequence[Cover],
    plan: PartitionPlan,
) -> reverse_index.IndexPlan | None:
    options = descriptor.options
    if not options.index_field and not options.flag_column:
        return None
    counts: dict[str, int] = {}
    for summary in summaries:
        for label, count in summary.value_counts.items():
            counts[label] = counts.get(label, 0) + count
    extra = reverse_index.count_index_values(
        [cover.data for cover in covers if cover.data is not None], options.index_field, options.flag_column
    )
    for label, count in extra.value_counts.items():
        counts[label] = counts.get(label, 0) + count
    totals = reverse_index.IndexCounts(
        counts,
        ranges=sum(summary.segments for summary in summaries) + extra.ranges,
        flagged=sum(summary.flagged for summary in summaries) + extra.flagged,
        values_too_long=sum(summary.values_too_long for summary in summaries) + extra.values_too_long,
    )
    return reverse_index.plan_index(
        totals,
        value_field=options.index_field,
        flag_column=options.flag_column,
        budget=options.shard_budget,
        max_shards=options.max_shards,
    )


def _group(items: int, sections: int, chunk_size: int) -> int:
    """Sections per chunk: enough that a chunk holds about ``chunk_size`` items."""
    per_section = items / sections if sections else 0
    if per_section <= 0:
        return max(1, sections)
    return max(1, min(sections, round(chunk_size / per_section)))


def _items_per_bucket(
    plan: PartitionPlan, summaries: Sequence[PartitionSummary], covers: Sequence[Cover], *, delta: bool
) -> dict[tuple[int, int], int]:
    """Items each bucket will hold: the full items, or a delta's; and a head item per cover."""
    counts: dict[tuple[int, int], int] = {}
    for spec, summary in zip(plan.partitions, summaries, strict=True):
        written = (summary.delta or {}).get("items_per_bucket", {}) if delta else summary.items_per_bucket
        for label, count in written.items():
            counts[spec.family, int(label, 16)] = count
    for cover in covers:  # its head item
        key = (cover.family, cover.first_bucket)
        counts[key] = counts.get(key, 0) + 1
    return counts


# -- the report and the bookkeeping ------------------------------------------------------------


@dataclass(frozen=True)
class _Load:
    """What the write plan learned about the load, for its report and its bookkeeping."""

    descriptor: LoadDescriptor
    plan: PartitionPlan
    summaries: Sequence[PartitionSummary]
    index: reverse_index.IndexPlan | None
    per_bucket: Mapping[tuple[int, int], int]
    covers: Sequence[Cover]
    delta: DeltaDecision


def _report(load: _Load, chunks: int, started: float | None) -> LoadReport:
    descriptor, plan, summaries, index = load.descriptor, load.plan, load.summaries, load.index
    per_bucket, covers = load.per_bucket, load.covers
    named = {keys.bucket_name(family, bucket): count for (family, bucket), count in per_bucket.items()}
    total = sum(named.values())
    hottest = max(named, key=lambda name: named[name]) if named else None
    index_report = index.report() if index else {}
    resolve_seconds = max((summary.seconds for summary in summaries), default=0.0)
    return LoadReport(
        load_id=descriptor.load_id,
        sources=tuple(source.uri for source in descriptor.sources),
        sha256=descriptor.sha256,
        rows_read=plan.rows_read,
        rows_rejected=plan.rows_rejected,
        rejected=tuple(plan.rejected),
        overlap_policy=descriptor.options.overlaps,
        overlaps_resolved=sum(summary.overlapping_rows for summary in summaries),
        segments=sum(summary.segments for summary in summaries)
        + sum(1 for cover in covers if cover.data is not None),
        coalesced=sum(summary.coalesced for summary in summaries),
        splits=plan.splits,
        covers=len(covers),
        partitions=len(plan.partitions),
        items=total,
        chunks=chunks,
        column_types=plan.column_types,
        mixed_columns=plan.mixed_columns,
        item_bytes=sum(summary.item_bytes for summary in summaries),
        max_item_bytes=max((summary.max_item_bytes for summary in summaries), default=0),
        items_per_bucket=dict(sorted(named.items(), key=lambda entry: -entry[1])),
        buckets=len(named),
        hottest_bucket=hottest,
        hottest_bucket_share=round(named[hottest] / total, 4) if hottest else 0.0,
        value_index=index_report.get("value_index"),
        flag_index=index_report.get("flag_index"),
        delta=load.delta.report,
        phases={
            "scan": {"seconds": plan.scan_seconds, "rows": plan.rows_read},
            "resolve": {"seconds": resolve_seconds, "partitions": len(summaries)},
        },
        prepare_seconds=round(time.time() - started, 3) if started else None,
    )


def unwritten_index_entries(load: _Load, patches: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """Value entries and flagged ranges counted once per segment (resolve) or per cover (``_index_plan``)
    that no item carries: a range's index entry goes on its first item only, so a low-edge segment
    or a cover run joined to a range begun before it writes none. The census must count what the
    GSIs will hold, or home's activation and every region's check would wait for entries forever."""
    entries = flagged = 0
    for spec, summary in zip(load.plan.partitions, load.summaries, strict=True):
        runs = patches.get(str(spec.index), {})
        lows = {str(run): low for run, _, _, low, _ in summary.edges if low}
        for run, (entry, flag) in summary.low_edge_index.items():
            patch = runs.get(run)
            if patch is not None and patch[0] is not None and patch[0] != lows[run][0]:
                entries, flagged = entries + entry, flagged + flag
    options = load.descriptor.options
    continued = [
        cover.data
        for cover in load.covers
        if cover.data is not None and keys.bucket_bounds(cover.family, cover.first_bucket)[0] != cover.start
    ]
    counted = reverse_index.count_index_values(continued, options.index_field, options.flag_column)
    return entries + sum(counted.value_counts.values()), flagged + counted.flagged


def _record_version(
    table: LoaderTable, load: _Load, writes: WritePlan, report: LoadReport, *, chunk_items: int
) -> None:
    descriptor, plan, index, per_bucket, covers = (
        load.descriptor,
        load.plan,
        load.index,
        load.per_bucket,
        load.covers,
    )
    version = descriptor.version
    manifest = {
        table.space.partition_key(version, family, bucket): count
        for (family, bucket), count in per_bucket.items()
    }
    if covers:
        manifest[table.space.covers_partition_key(version)] = table.covers.put(version, covers)
        table.covers.put_heads(version, covers, index)
    unwritten = unwritten_index_entries(load, writes.patches) if index else (0, 0)
    census = index.census(table.space, version, unwritten=unwritten) if index else {}
    table.manifests.put(version, Manifest(manifest, census))
    items = sum(per_bucket.values())
    written = table.lookup.get_version_meta(version)
    table.versions.put_meta(
        VersionMeta(
            version=version,
            status=VersionStatus.LOADING,
            load_id=descriptor.load_id,
            sha256=descriptor.sha256,
            fingerprint=descriptor.fingerprint,
            sources=tuple(source.uri for source in descriptor.sources),
            column_types=plan.column_types,
            previous=table.loads.previous_of(version),
            created_at=int(descriptor.created_at),
            items=items,
            chunks=writes.chunks,
            rows=plan.rows_read,
            covers=len(covers),
            value_index=index.value_index_meta(plan.column_types) if index else None,
            flag_index=index.flag_index_meta() if index else None,
            base=writes.base,
            # A retried state keeps the uid a replica region may already have recorded.
            uid=written.uid if written is not None and written.uid else secrets.token_hex(16),
        )
    )
    table.loads.mark_prepared(
        version, chunks=writes.chunks, items=chunk_items, report=report, at=int(time.time())
    )
