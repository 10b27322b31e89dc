"""``write_chunk``: one chunk of the load into the table, exactly once.

Chunk *k* is sections ``k·group .. (k+1)·group - 1`` of every partition's item
file (``loader.pipeline.resolve``): one byte range per partition. The writer joins the
ranges that continue across edges (the write plan's patches), types the
values, adds the reverse-index attributes to the first item of each range,
spreads every bucket evenly over the chunk's write order, and writes with
parallel BatchWriteItem calls of 25. The load item's ``done`` set makes a
second run of the same chunk a no-op.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ipmeta.schema import keys
from ipmeta.schema.ips import Family, format_address
from ipmeta.store.dynamodb import serialize_value
from loader import reverse_index
from loader.batching import batched
from loader.errors import LoadNotFound, LoadNotWritable
from loader.formats import stored_data
from loader.item_units import wire_item_units
from loader.options import DEFAULT_WRITE_WORKERS
from loader.pipeline import staged
from loader.pipeline.descriptor import PerLoad
from loader.pipeline.diff import NONE
from loader.pipeline.plan_writes import WritePlan
from loader.pipeline.resolve import HIGH_EDGE, LOW_EDGE
from loader.records import LoadStatus, version_of
from loader.settings import DEFAULT_LOCK_LEASE_SECONDS
from loader.store.batch_writes import BATCH_WRITE_LIMIT, WriteStats
from loader.store.staging import Staging
from loader.store.table import LoaderTable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

Item = dict[str, "AttributeValueTypeDef"]
T = TypeVar("T")


@dataclass(frozen=True)
class _Plan:
    writes: WritePlan
    offsets: list[list[int]]  #: partition -> section offsets
    index: reverse_index.IndexPlan | None


def _read(staging: Staging, load_id: str) -> _Plan:
    writes = WritePlan.from_json(staging.get(load_id, staged.WRITES))
    offsets = staged.read_sections_table(staging.get(load_id, staged.SECTIONS), len(writes.families))
    index = reverse_index.index_plan_from_json(writes.index) if writes.index else None
    return _Plan(writes, offsets, index)


_plans = PerLoad(_read)


def read_write_plan(staging: Staging, load_id: str) -> _Plan:
    """The write plan, read once per container and load."""
    return _plans.get(staging, load_id)


def write_chunk(
    load_id: str,
    index: int,
    table: LoaderTable,
    staging: Staging,
    *,
    workers: int = DEFAULT_WRITE_WORKERS,
    lease_seconds: float = DEFAULT_LOCK_LEASE_SECONDS,
    now: float | None = None,
) -> WriteStats:
    """Write one chunk with parallel BatchWriteItem calls of 25 items, once.

    A chunk already in the load item's ``done`` set is skipped. Writing one
    twice (a crash between the writes and the mark) is harmless anyway: items
    are whole-item puts keyed by (partition, offset).
    """
    version = version_of(load_id)
    table = table.for_load(load_id)
    load = table.loads.get(version)
    if load is None:
        raise LoadNotFound(f"no load {load_id}")
    if load.status != LoadStatus.PREPARED:
        raise LoadNotWritable(f"load {load_id} is {load.status}; chunk {index} is not written")
    if index in load.done:
        return WriteStats()
    # Renewing the lease also proves the lock is still ours.
    table.lock.acquire(load_id, lease_seconds=lease_seconds, now=time.time() if now is None else now)
    items = chunk_items(load_id, index, staging)
    stats = WriteStats()
    # A marked chunk had every item written once, so its items' units are what it wrote.
    units = [wire_item_units(item) for item in items]
    stats.add(
        write_units=sum(unit.total for unit in units), index_write_units=sum(unit.gsi for unit in units)
    )
    with ThreadPoolExecutor(max_workers=workers) as pool:
        batches = batched(items, BATCH_WRITE_LIMIT)
        for _ in pool.map(lambda batch: table.writer.put_serialized(batch, stats), batches):
            pass
    table.loads.mark_chunk_done(version, index, stats.as_dict(), time.time() if now is None else now)
    return stats


def chunk_items(load_id: str, index: int, staging: Staging) -> list[Item]:
    """The chunk's items, ready for BatchWriteItem, in write order (each bucket spread evenly)."""
    plan = read_write_plan(staging, load_id)
    builder = _ItemBuilder(plan.writes, plan.index, keys.key_space(plan.writes.dataset))
    by_bucket: dict[tuple[int, int], list[Item]] = {}
    for family, patches, line in _chunk_lines(plan, load_id, index, staging):
        bucket, item = builder.item(family, line, patches)
        by_bucket.setdefault((family, bucket), []).append(item)
    return spread(by_bucket, random.Random(f"{load_id}:{index}"))


def chunk_buckets(load_id: str, index: int, staging: Staging) -> list[tuple[int, int]]:
    """The (family, bucket) of each of the chunk's items, in the order ``chunk_items`` writes them."""
    plan = read_write_plan(staging, load_id)
    by_bucket: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for family, _, line in _chunk_lines(plan, load_id, index, staging):
        bucket = int(line.split(",", 3)[2])
        by_bucket.setdefault((family, bucket), []).append((family, bucket))
    return spread(by_bucket, random.Random(f"{load_id}:{index}"))


def _chunk_lines(
    plan: _Plan, load_id: str, index: int, staging: Staging
) -> Iterator[tuple[Family, Mapping[str, Sequence[int | None]], str]]:
    """Every staged line of chunk ``index``: one byte range of each partition's item file."""
    writes = plan.writes
    first_section = index * writes.group
    last_section = min(writes.sections, first_section + writes.group)
    for partition, offsets in enumerate(plan.offsets):
        start, end = offsets[first_section], offsets[last_section]
        if start == end:
            continue
        family: Family = writes.families[partition]  # type: ignore[assignment]
        patches = writes.patches.get(str(partition), {})
        name = staged.delta_name(partition) if writes.base else staged.items_name(partition)
        for line in staged.decode_lines(staging.get_range(load_id, name, start, end)):
            yield family, patches, line


def spread(by_bucket: Mapping[Any, list[T]], rng: random.Random) -> list[T]:
    """A stratified shuffle: the k-th of a bucket's n items at position (k + u) / n."""
    keyed: list[tuple[float, int, T]] = []
    for group in by_bucket.values():
        count = len(group)
        keyed.extend(
            ((position + rng.random()) / count, id(item), item) for position, item in enumerate(group)
        )
    keyed.sort(key=lambda entry: entry[0])
    return [item for _, _, item in keyed]


class _ItemBuilder:
    """Staged lines to DynamoDB items; the values of a distinct record are typed and serialized once."""

    def __init__(
        self, writes: WritePlan, index: reverse_index.IndexPlan | None, space: keys.KeySpace
    ) -> None:
        self.space = space
        self.version = writes.version
        #: A delta's lines carry ``next`` after ``end``, and gaps and markers (``loader.pipeline.diff``).
        self.delta = bool(writes.base)
        self.columns = writes.columns
        self.types = [writes.column_types[column] for column in writes.columns]
        self.index = index
        self._records: dict[str, tuple[dict[str, Any], AttributeValueTypeDef]] = {}

    def _record(self, text: str) -> tuple[dict[str, Any], AttributeValueTypeDef]:
        found = self._records.get(text)
        if found is None:
            values = json.loads(text)
            data = stored_data(self.columns, values, self.types)
            found = self._records[text] = (data, serialize_value(data))
        return found

    def item(
        self, family: Family, line: str, patches: Mapping[str, Sequence[int | None]]
    ) -> tuple[int, Item]:
        if self.delta:
            return self._delta_item(family, line, patches)
        # ``[run,flags,bucket,first,start,end,[values...]]``: numbers first, then the values' text.
        run, flags, bucket, first, start, end, rest = line.split(",", 6)
        start_value, end_value = _patched(run[1:], int(flags), int(start), int(end), patches)
        data, serialized = self._record(rest[:-1])
        bucket_number, first_value = int(bucket), int(first)
        item: Item = {
            keys.PARTITION_KEY: {"S": self.space.partition_key(self.version, family, bucket_number)},
            keys.SORT_KEY: {"N": str(keys.encode_sort_key_value(family, first_value))},
            keys.ATTR_START: {"S": format_address(family, start_value)},
            keys.ATTR_END: {"S": format_address(family, end_value)},
            keys.ATTR_DATA: serialized,
        }
        if self.index is not None and first_value == start_value:
            for name, value in self.index.attributes(
                self.space, self.version, family, start_value, data
            ).items():
                item[name] = {"S": value}
        return bucket_number, item

    def _delta_item(
        self, family: Family, line: str, patches: Mapping[str, Sequence[int | None]]
    ) -> tuple[int, Item]:
        """``[run,flags,bucket,first,start,end,next,values]``: a range, a gap (values ``null``), a marker."""
        head, following, rest = line.rsplit(",", 2) if line.endswith(",null]") else _split_delta(line)
        bucket_number, item = self.item_without_next(family, head + "," + rest, patches)
        if int(following) != NONE:
            item[keys.ATTR_NEXT] = {"N": str(int(following))}
        return bucket_number, item

    def item_without_next(
        self, family: Family, line: str, patches: Mapping[str, Sequence[int | None]]
    ) -> tuple[int, Item]:
        run, flags, bucket, first, start, end, rest = line.split(",", 6)
        bucket_number, first_value = int(bucket), int(first)
        item: Item = {
            keys.PARTITION_KEY: {"S": self.space.partition_key(self.version, family, bucket_number)},
            keys.SORT_KEY: {"N": str(keys.encode_sort_key_value(family, first_value))},
        }
        if int(start) == NONE:  # a marker: where the bucket's first delta item starts, nothing more
            return bucket_number, item
        start_value, end_value = _patched(run[1:], int(flags), int(start), int(end), patches)
        item[keys.ATTR_START] = {"S": format_address(family, start_value)}
        item[keys.ATTR_END] = {"S": format_address(family, end_value)}
        if rest == "null]":
            item[keys.ATTR_GAP] = {"BOOL": True}
        else:
            item[keys.ATTR_DATA] = self._record(rest[:-1])[1]
        return bucket_number, item


def _split_delta(line: str) -> tuple[str, str, str]:
    """A delta range's line: six numbers, ``next``, then the values' text (which may hold commas)."""
    *numbers, following, rest = line.split(",", 7)
    return ",".join(numbers), following, rest


def _patched(
    run: str, flags: int, start: int, end: int, patches: Mapping[str, Sequence[int | None]]
) -> tuple[int, int]:
    """A segment's true bounds: at a run's edge, those of the range it joins (``plan_writes``)."""
    patch = patches.get(run)
    if patch is not None:
        if flags & LOW_EDGE and patch[0] is not None:
            start = patch[0]
        if flags & HIGH_EDGE and patch[1] is not None:
            end = patch[1]
    return start, end
