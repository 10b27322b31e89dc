"""A stand-in for ``ipmeta.store.dynamodb.Store`` with no DynamoDB: every address lies in its own /24.

One dataset (``default``) with one active version; each Query answers the /24
holding the address, with the same data, after ``query_seconds``. The API
tests drive the real handler over it, and ``bench/handler.py`` times our code
without the data layer's latency.
"""

from __future__ import annotations

import time
from typing import Any

from ipmeta.schema import keys
from ipmeta.schema.records import ActiveVersion, Cover, VersionMeta, VersionStatus


class SlashTwentyFourStore:
    def __init__(self, data: dict[str, Any], version: int = 1, query_seconds: float = 0.0) -> None:
        self.data = data
        self.version = version
        self.query_seconds = query_seconds
        self.queries = 0
        self.space = keys.key_space()

    def for_dataset(self, dataset: str) -> SlashTwentyFourStore:
        return self

    def read_dataset_names(self, *, consistent: bool = False) -> list[str]:
        return [self.space.dataset]

    def read_active_versions(self, datasets: list[str]) -> dict[str, ActiveVersion | None]:
        return {
            name: ActiveVersion(self.version) if name == self.space.dataset else None for name in datasets
        }

    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None:
        return VersionMeta(version, VersionStatus.ACTIVE) if version == self.version else None

    def list_version_metas(self) -> list[VersionMeta]:
        return [VersionMeta(self.version, VersionStatus.ACTIVE)]

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        self.queries += 1
        if self.query_seconds:
            time.sleep(self.query_seconds)
        start = (int(partition_key.rsplit("#", 1)[1]) << 24) | (sort_key & ~0xFF)
        return {"start": _ipv4(start), "end": _ipv4(start + 255), "data": self.data}

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None:
        return None  # no covers: every bucket here has its items


def _ipv4(value: int) -> str:
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))
