"""``resolve_partition``: one partition's pieces become items, dealt into write sections.

For a partition (``loader.pipeline.partitions``): read its pieces from every source's
row file (one byte range each), add the claims of the covers that meet its
buckets, resolve overlaps by the policy, coalesce adjacent ranges with equal
data, cut the segments at bucket edges into items, and deal each bucket's
items evenly over the ``sections`` every partition shares: chunk *k* of the
write phase is section *k* of every partition, so each chunk holds every
bucket at its share of the load (the shuffle that keeps writes off one hot
partition). Segments that touch the edge of a run of buckets are reported, so
the write plan can join a range that continues in a neighbouring partition or
cover (``loader.pipeline.plan_writes``).

Values stay as the JSON text the scan wrote until the chunk writer types them:
equal data is equal text, which is how it is interned, coalesced and compared.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from ipmeta.schema import keys
from ipmeta.schema.ips import Family, format_address
from ipmeta.schema.settings import Settings
from loader.formats import stored_bytes, stored_data, typed_value
from loader.options import LoadOptions
from loader.pipeline import normalize, staged
from loader.pipeline.descriptor import LoadDescriptor, PerLoad, read_descriptor
from loader.pipeline.diff import TableBase, diff_partition
from loader.pipeline.partitions import PartitionPlan, PartitionSpec, cover_priority
from loader.store.staging import Staging
from loader.store.table import LoaderTable

#: Edge flags of an item's segment: it starts at its bucket run's first address, ends at its last.
LOW_EDGE: Final = 1
HIGH_EDGE: Final = 2


@dataclass
class PartitionSummary:
    """What one partition resolved, staged as ``resolved/P.json`` for the write plan."""

    partition: int
    items: int = 0
    segments: int = 0
    overlapping_rows: int = 0
    coalesced: int = 0  #: segments merged into a neighbour with equal data
    items_per_bucket: dict[str, int] = field(default_factory=dict)  #: bucket (hex) -> items
    #: Label of the indexed field -> ranges (one per segment; a range continued from a
    #: neighbouring partition counts twice: the shard plan needs sizes, not exact counts)
    value_counts: dict[str, int] = field(default_factory=dict)
    values_too_long: int = 0
    flagged: int = 0
    #: Run -> ``[index entries, flagged]`` its low-edge segment counted above. A range's index
    #: entry goes on its first item only, so where ``plan_writes`` joins that segment to a range
    #: begun before it, the entry counted here is not written (the census leaves it out).
    low_edge_index: dict[str, list[int]] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)  #: byte offset of each section, and the end
    #: A load over a base (``loader.pipeline.diff``): what the diff found, and its sections' offsets.
    delta: dict[str, Any] | None = None
    delta_offsets: list[int] = field(default_factory=list)
    #: ``[run, first_address, last_address, low, high]``; low/high: ``[start, end, key]`` or None
    edges: list[list[Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: DynamoDB's size of the items before the load gives them their index keys (what they
    #: take in write units is counted on the items as written: ``ipmeta plan``'s counted bytes)
    item_bytes: int = 0
    max_item_bytes: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PartitionSummary:
        """A staged summary; fields an older release staged and this one dropped (``write_units``)
        are ignored, so a load in flight across a deploy resumes rather than fails."""
        known = {entry.name for entry in fields(cls)}
        return cls(**{name: value for name, value in json.loads(data).items() if name in known})


@dataclass
class _Rows:
    """A partition's pieces (and cover claims) as parallel lists: compact, and fast to sweep."""

    seqs: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    data: list[int] = field(default_factory=list)  #: index into ``texts``
    origins: list[str] = field(default_factory=list)  #: only under ``reject``
    texts: list[str] = field(default_factory=list)  #: distinct values, as JSON text
    cover_priority: dict[int, int] = field(default_factory=dict)  #: row -> priority, for cover claims
    _ids: dict[str, int] = field(default_factory=dict)

    def add(self, seq: int, start: int, end: int, text: str, origin: str = "") -> None:
        identity = self._ids.get(text)
        if identity is None:
            identity = self._ids[text] = len(self.texts)
            self.texts.append(text)
        self.seqs.append(seq)
        self.starts.append(start)
        self.ends.append(end)
        self.data.append(identity)
        if origin:
            self.origins.append(origin)


_plans = PerLoad(lambda staging, load_id: PartitionPlan.from_json(staging.get(load_id, staged.PARTITIONS)))


def read_plan(staging: Staging, load_id: str) -> PartitionPlan:
    """The partition plan, read once per container and load."""
    return _plans.get(staging, load_id)


def resolve_partition(
    load_id: str,
    partition: int,
    staging: Staging,
    *,
    workdir: Path | None = None,
    table: LoaderTable | Settings | None = None,
) -> PartitionSummary:
    """Resolve one partition and stage its items and summary (idempotent).

    A load over a base (``LoadDescriptor.base``) also diffs the partition
    against it and stages the delta's items; ``table`` (or the settings that
    reach it, from a pool worker) is where the base is read.
    """
    if staging.exists(load_id, staged.resolved_name(partition)):
        return PartitionSummary.from_json(staging.get(load_id, staged.resolved_name(partition)))
    started = time.monotonic()
    descriptor = read_descriptor(staging, load_id)
    plan = read_plan(staging, load_id)
    spec = plan.partitions[partition]
    rows = _read_rows(load_id, spec, staging, keep_origin=descriptor.options.overlaps == "reject")
    summary = PartitionSummary(partition)
    segments = _segments(rows, spec, plan, descriptor.options, summary)
    space = keys.key_space(descriptor.options.dataset)
    sizes = _ItemSizes(plan, space.partition_key(descriptor.version, spec.family, 0), rows.texts)
    low_edges: dict[int, int] = {}
    items = _items(
        segments, spec, rows, summary, sizes, low_edges=low_edges, coalesce=descriptor.options.coalesce
    )
    _count_index_values(segments, rows, plan, descriptor.options, summary, low_edges=low_edges)
    with tempfile.TemporaryDirectory(prefix="ipmeta-resolve-", dir=workdir) as folder:
        path = Path(folder) / "items"
        summary.offsets = _write_sections(path, _deal(items, plan.sections, descriptor, partition))
        staging.put_file(load_id, staged.items_name(partition), path)
        if descriptor.base:
            base = TableBase(_opened(table).for_load(load_id), descriptor.base)
            _stage_delta(
                items,
                base,
                descriptor=descriptor,
                plan=plan,
                spec=spec,
                summary=summary,
                staging=staging,
                path=path,
            )
        elif descriptor.measured:
            # Written full whatever it changed: measured for the guard, its delta not kept.
            base = TableBase(_opened(table).for_load(load_id), descriptor.measured)
            _measure(items, base, plan=plan, spec=spec, summary=summary)
    summary.seconds = round(time.monotonic() - started, 3)
    # The summary last: its presence says the partition is resolved (a killed task reruns).
    staging.put(load_id, staged.resolved_name(partition), summary.to_json())
    return summary


def _stage_delta(
    items: list[_Item],
    base: TableBase,
    *,
    descriptor: LoadDescriptor,
    plan: PartitionPlan,
    spec: PartitionSpec,
    summary: PartitionSummary,
    staging: Staging,
    path: Path,
) -> None:
    """The partition diffed against the base: its delta's items, dealt into sections like the full ones."""
    delta = _measure(items, base, plan=plan, spec=spec, summary=summary)
    summary.delta_offsets = _write_sections(path, _deal(delta, plan.sections, descriptor, spec.index))
    staging.put_file(descriptor.load_id, staged.delta_name(spec.index), path)


def _measure(
    items: list[_Item],
    base: TableBase,
    *,
    plan: PartitionPlan,
    spec: PartitionSpec,
    summary: PartitionSummary,
) -> list[_Item]:
    """What the partition changed from ``base`` (its counts in ``summary.delta``), and the delta's items."""
    family: Family = 4 if spec.family == 4 else 6
    delta, counts = diff_partition(
        family, items, spec.buckets, base, columns=plan.columns, column_types=plan.column_types
    )
    summary.delta = asdict(counts)
    return delta


def _opened(table: LoaderTable | Settings | None) -> LoaderTable:
    if table is None:
        raise ValueError("a load over a base reads the base: resolve needs the table")
    return _table_of(table) if isinstance(table, Settings) else table


@functools.lru_cache(maxsize=4)
def _table_of(settings: Settings) -> LoaderTable:
    """One table client per pool worker and table."""
    return LoaderTable.from_settings(settings)


def _read_rows(load_id: str, spec: PartitionSpec, staging: Staging, *, keep_origin: bool) -> _Rows:
    rows = _Rows()
    for source, start, end in spec.ranges:
        data = staging.get_range(load_id, staged.rows_name(source), start, end)
        for line in staged.decode_lines(data):
            if keep_origin:
                seq, first, last, values, origin = json.loads(line)
                rows.add(seq, first, last, json.dumps(values, separators=(",", ":")), origin)
            else:
                # ``[seq,first,last,[values...]]``: the numbers hold no commas, the rest is the values' text.
                seq_text, first_text, last_text, rest = line.split(",", 3)
                rows.add(int(seq_text[1:]), int(first_text), int(last_text), rest[:-1])
    return rows


def _segments(
    rows: _Rows, spec: PartitionSpec, plan: PartitionPlan, options: LoadOptions, summary: PartitionSummary
) -> list[normalize.Segment]:
    _add_cover_claims(rows, spec, plan, options.overlaps == "reject")
    bits = keys.ADDRESS_BITS[spec.family]
    claims: list[normalize.Claim] = []
    for index in range(len(rows.seqs)):
        claims.extend(_claims_of(rows, index, options.overlaps, bits))
    if options.overlaps == "merge":
        covered, overlapped = normalize.sweep_merged(claims)
        made: dict[tuple[int, ...], int] = {}
        spans = [(start, end, _merged_row(rows, covering, made)) for start, end, covering in covered]
    else:
        spans, overlapped = normalize.sweep(claims)
    if options.overlaps == "reject" and overlapped:
        normalize.raise_first_overlap(claims, rows.seqs, lambda index: rows.origins[index])
    summary.overlapping_rows = len(overlapped)
    segments = [normalize.Segment(spec.family, start, end, row) for start, end, row in spans]  # type: ignore[arg-type]
    # Pieces of one row in neighbouring buckets are one range again.
    segments = normalize.coalesce(segments, lambda row: rows.seqs[row])
    if options.coalesce:
        merged = normalize.coalesce(segments, lambda row: rows.data[row])
        summary.coalesced = len(segments) - len(merged)
        segments = merged
    summary.segments = len(segments)
    return segments


def _merged_row(rows: _Rows, covering: tuple[int, ...], merged: dict[tuple[int, ...], int]) -> int:
    """The row of a stretch several rows cover (``merge``): their fields as one, added once per row set."""
    if len(covering) == 1:
        return covering[0]
    row = merged.get(covering)
    if row is None:
        values = normalize.merge_fields([json.loads(rows.texts[rows.data[index]]) for index in covering])
        # The latest covering row's position: the merged row sorts with it wherever seq orders rows.
        seq = max(rows.seqs[index] for index in covering)
        row = merged[covering] = len(rows.seqs)
        first, last = min(rows.starts[i] for i in covering), max(rows.ends[i] for i in covering)
        rows.add(seq, first, last, json.dumps(values, separators=(",", ":")))
    return row


def _claims_of(rows: _Rows, index: int, policy: str, bits: int) -> list[normalize.Claim]:
    """A piece's claim (its CIDR blocks under most-specific); a cover claim carries its own priority."""
    start, end, seq = rows.starts[index], rows.ends[index], rows.seqs[index]
    if index in rows.cover_priority:
        return [(start, end, rows.cover_priority[index], index)]
    if policy != "most-specific":
        return [(start, end, seq, index)]
    return [
        (first, last, prefix * normalize.PREFIX_WEIGHT + seq, index)
        for first, last, prefix in normalize.cidr_blocks(start, end, bits)
    ]


def _add_cover_claims(rows: _Rows, spec: PartitionSpec, plan: PartitionPlan, keep_origin: bool) -> None:
    """Each cover block meeting this partition claims the partition's buckets it covers, run by run."""
    for block_index in spec.covers:
        block = plan.cover_blocks[block_index]
        seq, _, _, _, origin, values = plan.cover_rows[block.row]
        text = json.dumps(values, separators=(",", ":"))
        for run_first, run_last in bucket_runs(spec.buckets):
            first, last = max(run_first, block.first), min(run_last, block.last)
            if first <= last:
                rows.cover_priority[len(rows.seqs)] = cover_priority(block, int(seq))
                start, end = (
                    keys.bucket_bounds(spec.family, first)[0],
                    keys.bucket_bounds(spec.family, last)[1],
                )
                rows.add(int(seq), start, end, text, origin if keep_origin else "")


def bucket_runs(buckets: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive bucket numbers."""
    runs: list[tuple[int, int]] = []
    for bucket in buckets:
        if runs and runs[-1][1] + 1 == bucket:
            runs[-1] = (runs[-1][0], bucket)
        else:
            runs.append((bucket, bucket))
    return runs


#: An item as staged: (bucket, line). The line is ``[run,flags,bucket,first,start,end,values]``.
_Item = tuple[int, str]


def _items(
    segments: Sequence[normalize.Segment],
    spec: PartitionSpec,
    rows: _Rows,
    summary: PartitionSummary,
    sizes: _ItemSizes,
    *,
    low_edges: dict[int, int],
    coalesce: bool,
) -> list[_Item]:
    """Segments cut at bucket edges, each piece with its run, edge flags and whole segment bounds;
    ``low_edges`` gets each run's low-edge segment (its place in ``segments``) and run."""
    family = spec.family
    runs = bucket_runs(spec.buckets)
    run_of = {bucket: index for index, (first, last) in enumerate(runs) for bucket in range(first, last + 1)}
    # Each run's first and last address, once: the loop below runs once per segment (a million).
    run_bounds = [
        (keys.bucket_bounds(family, first)[0], keys.bucket_bounds(family, last)[1]) for first, last in runs
    ]
    edges: dict[int, list[Any]] = {}
    items: list[_Item] = []
    per_bucket: dict[int, int] = {}
    for place, segment in enumerate(segments):
        start, end = segment.start, segment.end
        first_bucket = keys.bucket_of_value(family, start)
        run = run_of[first_bucket]
        run_first, run_last = run_bounds[run]
        flags = (LOW_EDGE if start == run_first else 0) | (HIGH_EDGE if end == run_last else 0)
        if flags & LOW_EDGE:
            low_edges[place] = run
        if flags:
            key = edge_key(rows, segment.row, coalesce=coalesce)
            _note_edge(edges, (run, run_first, run_last), segment, flags, key)
        identity = rows.data[segment.row]
        text = rows.texts[identity]
        bounds = sizes.bounds(start, end)
        # Nearly every segment lies in one bucket: it is its own piece, with no split to make.
        pieces = (
            ((first_bucket, start),)
            if keys.bucket_of_value(family, end) == first_bucket
            else [(piece.bucket, piece.first) for piece in keys.split_at_buckets(family, start, end)]
        )
        for bucket, first in pieces:
            items.append((bucket, f"[{run},{flags},{bucket},{first},{start},{end},{text}]"))
            sizes.add(summary, identity, bucket, first, bounds)
            per_bucket[bucket] = per_bucket.get(bucket, 0) + 1
    for bucket, count in per_bucket.items():
        label = format(bucket, "x")
        summary.items_per_bucket[label] = summary.items_per_bucket.get(label, 0) + count
    summary.items = len(items)
    summary.edges = [edges[run] for run in sorted(edges)]
    return items


class _ItemSizes:
    """Each item's size as DynamoDB counts it: what ``ipmeta plan`` costs a load's writes and storage by.

    A distinct record's data is typed and measured once; the key and the bounds per item.
    """

    def __init__(self, plan: PartitionPlan, sample_key: str, texts: Sequence[str]) -> None:
        """``sample_key``: the partition key of the partition's first bucket, whose length a
        bucket's own key differs from by the bucket's digits only."""
        self.columns = plan.columns
        self.types = [plan.column_types[column] for column in plan.columns]
        self.family = 4 if sample_key.rsplit("#", 2)[-2] == "4" else 6
        self.key_head = len(sample_key.rsplit("#", 1)[0]) + 1
        self.texts = texts
        self._data: dict[int, int] = {}
        self._keys: dict[int, int] = {}

    def bounds(self, start: int, end: int) -> int:
        ends = (format_address(self.family, start), format_address(self.family, end))
        return len(keys.ATTR_START) + len(keys.ATTR_END) + sum(map(len, ends))

    def add(self, summary: PartitionSummary, identity: int, bucket: int, first: int, bounds: int) -> None:
        data = self._data.get(identity)
        if data is None:
            values = stored_data(self.columns, json.loads(self.texts[identity]), self.types)
            data = self._data[identity] = len(keys.ATTR_DATA) + stored_bytes(values)
        key = self._keys.get(bucket)
        if key is None:
            label = len(keys.bucket_label(self.family, bucket))
            key = self._keys[bucket] = len(keys.PARTITION_KEY) + self.key_head + label + len(keys.SORT_KEY)
        size = key + stored_bytes(keys.encode_sort_key_value(self.family, first)) + bounds + data
        summary.item_bytes += size
        summary.max_item_bytes = max(summary.max_item_bytes, size)


def _note_edge(
    edges: dict[int, list[Any]], run: tuple[int, int, int], segment: normalize.Segment, flags: int, key: str
) -> None:
    entry = edges.setdefault(run[0], [*run, None, None])
    described = [segment.start, segment.end, key]
    if flags & LOW_EDGE:
        entry[3] = described
    if flags & HIGH_EDGE:
        entry[4] = described


def edge_key(rows: _Rows, row: int, *, coalesce: bool) -> str:
    """What makes two touching segments one range: equal data when coalescing, else the same row."""
    return "data:" + data_key(rows.texts[rows.data[row]]) if coalesce else f"seq:{rows.seqs[row]}"


def data_key(text: str) -> str:
    """A short, stable name of some values' JSON text (equal text, equal key, in every task)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _count_index_values(
    segments: Sequence[normalize.Segment],
    rows: _Rows,
    plan: PartitionPlan,
    options: LoadOptions,
    summary: PartitionSummary,
    *,
    low_edges: Mapping[int, int],
) -> None:
    """The indexed field's value per range, and the flagged ranges: what the shard plan sizes;
    and what each run's low-edge segment counted (``PartitionSummary.low_edge_index``)."""
    if not options.index_field and not options.flag_column:
        return
    columns = plan.columns
    decoded: dict[int, list[Any]] = {}
    for place, segment in enumerate(segments):
        identity = rows.data[segment.row]
        values = decoded.get(identity)
        if values is None:
            values = decoded[identity] = json.loads(rows.texts[identity])
        entry = flagged = 0
        if options.index_field:
            at = columns.index(options.index_field)
            value = typed_value(values[at], plan.column_types[options.index_field])
            if keys.is_indexable_value(value):
                label = keys.value_label(value)
                summary.value_counts[label] = summary.value_counts.get(label, 0) + 1
                entry = 1
            elif not keys.is_blank(value):
                summary.values_too_long += 1
        if options.flag_column and not keys.is_blank(values[columns.index(options.flag_column)]):
            summary.flagged += 1
            flagged = 1
        if place in low_edges:
            summary.low_edge_index[str(low_edges[place])] = [entry, flagged]


def _deal(items: list[_Item], sections: int, descriptor: LoadDescriptor, partition: int) -> list[list[str]]:
    """The partition's items in ``sections`` equal slices, each bucket spread evenly (a stratified shuffle).

    The k-th of a bucket's n items (after shuffling them) is placed at
    ``(k + u) / n``, ``u`` uniform; cut in order into equal slices, every slice
    holds each bucket's share of the items, give or take one. Seeded by the
    sources' checksum and the partition, so a rerun stages the very same sections.
    """
    rng = random.Random(f"{descriptor.sha256}:{partition}")
    by_bucket: dict[int, list[str]] = {}
    for bucket, line in items:
        by_bucket.setdefault(bucket, []).append(line)
    placed: list[tuple[float, str]] = []
    for bucket in sorted(by_bucket):
        lines = by_bucket[bucket]
        rng.shuffle(lines)
        count = len(lines)
        placed.extend(((position + rng.random()) / count, line) for position, line in enumerate(lines))
    placed.sort(key=lambda entry: entry[0])
    total = len(placed)
    bounds = [total * section // sections for section in range(sections + 1)]
    return [
        [line for _, line in placed[bounds[section] : bounds[section + 1]]] for section in range(sections)
    ]


def _write_sections(path: Path, sections: Sequence[Sequence[str]]) -> list[int]:
    offsets = [0]
    with path.open("wb") as out:
        for lines in sections:
            member = staged.encode_text_member(lines)
            out.write(member)
            offsets.append(offsets[-1] + len(member))
    return offsets
