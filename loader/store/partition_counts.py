"""A version's items and index entries counted a batch of partitions at a time, the progress saved.

A version of 15 M networks has thousands of partitions, each read whole by its
``Select=COUNT`` Queries: more than one task may take (Lambda: 15 minutes). So both
counts of a version, home's before activation (``loader.pipeline.activate.verify``)
and each replica region's before it serves it (``loader.pipeline.arrival``), count
``COUNT_BATCH`` partitions at a time, save what they found, and stop once their time
is up (``until``, checked between batches; a call counts one batch at least, so every
call moves on). The next call (the state machine's retried Activate, the region's
next scheduled run) reads what was saved and counts only the rest.

- **Items**: a partition whose consistent count equals its manifest's is complete for
  good, since a version's items never change once written: it is never counted again.
  A partition found short is counted again on the next call.
- **Index entries**: the manifest names each index's partition keys and the entries
  they hold in all (``records.IndexCensus``), not each key's share. An index entry of
  a version never leaves while the version is read, so a count of a GSI partition is
  a lower bound of what it will hold: a pass that has counted every partition and adds
  up to the total is the index caught up. A pass that adds up to less starts a new pass
  (its number saved), whose partitions are all counted again: which one lagged is not
  known. Each pass saves as it goes, like the items' count.

The progress of one version in one place (home, or one replica region) is one item
(``keys.KeySpace.counted``; sk: the version) naming the version's ``uid``: progress of
another version of that number (one from before a point-in-time restore) is none of
this one's. Each save is a PutItem (the one write a region's role may make) on the
condition that the item holds the saves it read; a save that lost a race reads again
and merges, so two runs counting at once lose nothing.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_item
from loader.batching import batched
from loader.reverse_index import IndexCensus
from loader.store.dataset_items import DatasetItems, condition_failed
from loader.store.partition_items import PartitionItems

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: Partitions counted between two saves of the progress (and two looks at the time).
COUNT_BATCH: Final = 64
T = TypeVar("T")

#: Saves that lost a race to another run, read again and merged, before giving up.
SAVE_ATTEMPTS: Final = 8


@dataclass(frozen=True)
class Progress:
    """What the counts of one version (its ``uid``) found so far in one place.

    Positions are a partition's place in the version's sorted manifest (items), and in its
    census, index by index in ``keys.INDEXES`` order (index entries).
    """

    uid: str
    #: Item partitions found holding their manifest's count.
    complete: frozenset[int] = frozenset()
    #: The index count's pass, and the entries each partition held when this pass counted it.
    index_pass: int = 0
    index_found: Mapping[int, int] = field(default_factory=dict)
    saves: int = 0

    def merged(self, other: Progress) -> Progress:
        """``other``'s findings added to these (saved ones): a newer pass replaces an older."""
        if other.index_pass > self.index_pass:
            index_pass, found = other.index_pass, dict(other.index_found)
        elif other.index_pass < self.index_pass:
            index_pass, found = self.index_pass, dict(self.index_found)
        else:
            index_pass, found = self.index_pass, dict(self.index_found)
            for position, entries in other.index_found.items():
                found[position] = max(entries, found.get(position, 0))
        return Progress(self.uid, self.complete | other.complete, index_pass, found, self.saves)

    def encode(self) -> bytes:
        found = sorted(self.index_found.items())
        document = {"complete": sorted(self.complete), "pass": self.index_pass, "found": found}
        return zlib.compress(json.dumps(document, separators=(",", ":")).encode())

    @classmethod
    def decode(cls, uid: str, saves: int, data: bytes) -> Progress:
        document = json.loads(zlib.decompress(data))
        found = {int(position): int(entries) for position, entries in document["found"]}
        return cls(uid, frozenset(document["complete"]), int(document["pass"]), found, saves)


class CountProgress(DatasetItems):
    """Read and save the progress of a version's counts in home (``region`` None) or a replica region."""

    def read(self, region: str | None, version: int, uid: str) -> Progress:
        item = self._get(self.space.counted(region), version)
        if item is None or str(item.get("uid", "")) != uid:
            return Progress(uid)
        return Progress.decode(uid, int(item["saves"]), bytes(item["progress"]))

    def save(self, region: str | None, version: int, found: Progress) -> Progress:
        """Merge ``found`` into the saved progress of its version; the progress as saved."""
        partition_key = self.space.counted(region)
        for _ in range(SAVE_ATTEMPTS):
            item = self._get(partition_key, version)
            saved = Progress(found.uid)
            if item is not None and str(item.get("uid", "")) == found.uid:
                saved = Progress.decode(found.uid, int(item["saves"]), bytes(item["progress"]))
            merged = replace(saved.merged(found), saves=int(item["saves"]) + 1 if item else 1)
            if self._put(partition_key, version, merged, read=int(item["saves"]) if item else None):
                return merged
        raise RuntimeError(f"{partition_key} {version}: {SAVE_ATTEMPTS} saves of the count lost a race")

    def forget(self, version: int, regions: Iterable[str | None]) -> None:
        """Delete the saved progress of ``version``'s counts in home (None) and ``regions``: cleanup,
        once the version is deleted (a global table's delete reaches each region's copy)."""
        for region in regions:
            self.client.delete_item(
                TableName=self.table_name, Key=item_key(self.space.counted(region), version)
            )

    def _put(self, partition_key: str, version: int, progress: Progress, *, read: int | None) -> bool:
        item = {
            keys.PARTITION_KEY: partition_key,
            keys.SORT_KEY: version,
            "uid": progress.uid,
            "saves": progress.saves,
            "progress": progress.encode(),
        }
        condition: dict[str, Any] = {
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": keys.PARTITION_KEY},
        }
        if read is not None:
            condition = {
                "ConditionExpression": "#saves = :saves",
                "ExpressionAttributeNames": {"#saves": "saves"},
                "ExpressionAttributeValues": {":saves": {"N": str(read)}},
            }
        try:
            self.client.put_item(TableName=self.table_name, Item=serialize_item(item), **condition)
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True


@dataclass(frozen=True)
class ItemCount:
    """What one call of ``PartitionCounts.items`` found."""

    #: Partitions it counted that do not hold their manifest's count: (expected, found).
    short: Mapping[str, tuple[int, int]]
    #: Partitions neither found complete before nor counted by this call: its time was up.
    uncounted: int
    #: Partitions this call counted.
    counted: int

    @property
    def whole(self) -> bool:
        return not self.short and not self.uncounted


@dataclass(frozen=True)
class IndexCount:
    """What one call of ``PartitionCounts.index_entries`` found."""

    wanted: int
    #: Entries the present pass found so far (every partition's, when ``uncounted`` is 0).
    found: int
    #: Partitions the present pass has not counted yet: the call's time was up.
    uncounted: int
    counted: int

    @property
    def whole(self) -> bool:
        return not self.uncounted and self.found == self.wanted

    @property
    def missing(self) -> int:
        """Entries not found, or 1 while a pass is unfinished and has found them all so far."""
        return max(self.wanted - self.found, 0 if self.whole else 1)


class PartitionCounts:
    """The one count of a version's items (and of its index entries), resumable, in one place."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, space: keys.KeySpace, partitions: PartitionItems
    ) -> None:
        self.progress = CountProgress(client, table_name, space)
        self.partitions = partitions
        #: Partitions counted between two saves of the progress, and two looks at the time.
        self.batch = COUNT_BATCH

    def items(
        self,
        region: str | None,
        version: int,
        uid: str,
        expected: Mapping[str, int],
        *,
        until: float | None = None,
        now: Callable[[], float] = time.time,
        workers: int = 16,
    ) -> ItemCount:
        """Count (consistently) the partitions of ``expected`` not found complete before, until ``until``."""
        saved = self.progress.read(region, version, uid)
        todo = [(at, pk) for at, pk in enumerate(sorted(expected)) if at not in saved.complete]
        short: dict[str, tuple[int, int]] = {}
        counted = 0
        for batch, found in self._batches(
            todo, self.partitions.count, size=self.batch, until=until, now=now, workers=workers
        ):
            complete = set()
            for (at, pk), got in zip(batch, found, strict=True):
                if got == expected[pk]:
                    complete.add(at)
                else:
                    short[pk] = (expected[pk], got)
            counted += len(batch)
            if complete:
                self.progress.save(region, version, Progress(uid, complete=frozenset(complete)))
        return ItemCount(short, len(todo) - counted, counted)

    def index_entries(
        self,
        region: str | None,
        version: int,
        uid: str,
        census: Mapping[str, IndexCensus],
        *,
        until: float | None = None,
        now: Callable[[], float] = time.time,
        workers: int = 16,
    ) -> IndexCount:
        """Count this pass's GSI partitions not counted yet, until ``until``; a pass that ended short
        is saved as over, so the next call begins the next one."""
        order = [
            (index, pk)
            for index in keys.INDEXES
            if (entries := census.get(index.name)) is not None
            for pk in entries.partition_keys
        ]
        wanted = sum(entries.entries for entries in census.values())
        saved = self.progress.read(region, version, uid)
        found = dict(saved.index_found)
        todo = [(at, where) for at, where in enumerate(order) if at not in found]

        def count(where: tuple[keys.IndexSchema, str]) -> int:
            return self.partitions.index_count(*where)

        counted = 0
        for batch, got_entries in self._batches(
            todo, count, size=self.batch, until=until, now=now, workers=workers
        ):
            new = {at: got for (at, _), got in zip(batch, got_entries, strict=True)}
            found.update(new)
            counted += len(batch)
            self.progress.save(region, version, Progress(uid, index_pass=saved.index_pass, index_found=new))
        total = sum(found.values())
        uncounted = len(todo) - counted
        if not uncounted and total != wanted:
            self.progress.save(region, version, Progress(uid, index_pass=saved.index_pass + 1))
        return IndexCount(wanted, total, uncounted, counted)

    @staticmethod
    def _batches(
        todo: Iterable[tuple[int, T]],
        /,
        count: Callable[[T], int],
        *,
        size: int,
        until: float | None,
        now: Callable[[], float],
        workers: int,
    ) -> Iterable[tuple[tuple[tuple[int, T], ...], list[int]]]:
        """Each batch of ``todo`` with its counts, in parallel; none begun after ``until`` but the first."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for number, batch in enumerate(batched(todo, size)):
                if number and until is not None and now() >= until:
                    return
                yield batch, list(pool.map(count, (where for _, where in batch)))
