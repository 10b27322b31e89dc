"""An in-memory table with DynamoDB's Query semantics for the lookup, fed by staged items and covers.

``find_range_piece`` answers ``pk = :pk AND sk <= :sk``, descending, Limit 1,
as ``ipmeta.store.dynamodb.Store`` does; ``find_cover`` answers from the version's cover
list. So a unit test runs the real ``ipmeta.lookup.runs`` over what the loader's own
pipeline stages (``tests.pipeline``), without AWS.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ipmeta.lookup.covers import CoverIndex
from ipmeta.schema import keys
from ipmeta.schema.records import ActiveVersion, Cover


class InMemoryTable:
    def __init__(
        self, items: Sequence[dict[str, Any]], active: int | None = 1, covers: Sequence[Cover] = ()
    ) -> None:
        self.space = keys.key_space()
        self.active = active
        self.pointer_reads = 0
        self.queries = 0
        self.cover_reads = 0
        self.covers = CoverIndex(covers)
        partitions: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for item in items:
            partitions[item[keys.PARTITION_KEY]].append((int(item[keys.SORT_KEY]), item))
        self.partitions = {
            pk: sorted(entries, key=lambda entry: entry[0]) for pk, entries in partitions.items()
        }

    def read_dataset_names(self, *, consistent: bool = False) -> list[str]:
        return [self.space.dataset]

    def read_active_versions(self, datasets: list[str]) -> dict[str, ActiveVersion | None]:
        self.pointer_reads += 1
        active = ActiveVersion(self.active) if self.active is not None else None
        return {name: active if name == self.space.dataset else None for name in datasets}

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        self.queries += 1
        entries = self.partitions.get(partition_key, [])
        position = bisect.bisect_right([entry[0] for entry in entries], sort_key)
        return entries[position - 1][1] if position else None

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None:
        self.cover_reads += 1
        return self.covers.find(family, bucket)
