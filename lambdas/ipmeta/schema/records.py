"""The records the lookup reads: a dataset version's metadata, typed.

The loader writes these items and the lookup reads them; both go through
these classes, never through string keys. Frozen dataclasses, not pydantic
models: the lookup imports this module at every cold start, and a dataclass
costs a fraction of a millisecond to define where a pydantic model costs
about two (``bench/cold_start.py``). The loader's own records (the load item,
its report, the manifest) live in ``loader.records``: the lookup never needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class VersionStatus(StrEnum):
    """Where a dataset version is in its life: loading → active → retired → deleting → deleted, or failed.

    ``deleting`` is cleanup's first phase (``loader.pipeline.retention``): a conditional write that
    only a version nobody may read again passes; from then on nothing reads it, and nothing can
    make it active again, while its items go.
    """

    LOADING = "loading"
    ACTIVE = "active"
    RETIRED = "retired"
    FAILED = "failed"
    DELETING = "deleting"
    DELETED = "deleted"


#: Statuses of a version whose items are still in the table and may answer.
RETAINED_STATUSES = frozenset({VersionStatus.ACTIVE, VersionStatus.RETIRED})


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _binary(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


@dataclass(frozen=True, slots=True)
class ValueIndexMeta:
    """How the ``ranges-by-value`` index of a version is keyed (``loader.reverse_index``)."""

    field: str
    column_type: str  #: "N" or "S": the type of the indexed column
    own_shards: bytes | None  #: ``keys.encode_own_shards``; None in versions loaded before packing
    packs: bytes | None  #: ``keys.encode_pack_starts``; None in versions loaded before packing
    legacy_shards: bytes | None = None  #: shard counts by value, in versions loaded before packing
    values: int = 0
    target: int = 0

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ValueIndexMeta:
        return cls(
            field=str(item["field"]),
            column_type=str(item.get("type", "S")),
            own_shards=_binary(item.get("own_shards")),
            packs=_binary(item.get("packs")),
            legacy_shards=_binary(item.get("shards")),
            values=int(item.get("values", 0)),
            target=int(item.get("target", 0)),
        )

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "field": self.field,
            "type": self.column_type,
            "values": self.values,
            "target": self.target,
        }
        for name, value in (("own_shards", self.own_shards), ("packs", self.packs)):
            if value is not None:
                item[name] = value
        if self.legacy_shards is not None:
            item["shards"] = self.legacy_shards
        return item


@dataclass(frozen=True, slots=True)
class FlagIndexMeta:
    """The ``flagged-ranges`` index of a version: its column and shard count."""

    column: str
    shards: int
    items: int = 0

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> FlagIndexMeta:
        return cls(str(item["column"]), int(item["shards"]), int(item.get("items", 0)))

    def to_item(self) -> dict[str, Any]:
        return {"column": self.column, "shards": self.shards, "items": self.items}


@dataclass(frozen=True, slots=True)
class Cover:
    """A run of whole buckets that one range owns with no item of its own (``loader.pipeline.scan``).

    A lookup whose Query finds nothing in a bucket answers from the cover
    holding that bucket, if any: ``::/0`` is one cover, not 16.7 M items.
    In a delta version a cover may be a *gap cover* (``data`` None): buckets its
    base has ranges in and the new release has nothing in, answered "not found".
    """

    family: int
    first_bucket: int
    last_bucket: int
    start: int  #: the whole range, which may begin and end outside these buckets
    end: int
    data: dict[str, Any] | None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Cover:
        return cls(
            int(item["family"]),
            int(item["first"]),
            int(item["last"]),
            int(item["start"]),
            int(item["end"]),
            None if item.get("gap") else dict(item.get("data") or {}),
        )

    def to_item(self) -> dict[str, Any]:
        # Bounds as decimal text: an IPv6 address does not fit a DynamoDB Number.
        item: dict[str, Any] = {
            "family": self.family,
            "first": self.first_bucket,
            "last": self.last_bucket,
            "start": str(self.start),
            "end": str(self.end),
        }
        if self.data is None:
            item["gap"] = True
        else:
            item["data"] = self.data
        return item


@dataclass(frozen=True, slots=True)
class VersionMeta:
    """One dataset version, as ``GET /v1/datasets`` and ``?version=`` see it."""

    version: int
    status: VersionStatus
    load_id: str = ""
    sha256: str = ""
    fingerprint: str | None = None
    sources: tuple[str, ...] = ()
    column_types: Mapping[str, str] = field(default_factory=dict)
    previous: int = 0
    created_at: int = 0
    items: int = 0
    chunks: int = 0
    rows: int | None = None  #: rows read from the sources
    covers: int = 0  #: entries of the version's cover list
    activated_at: int | None = None
    retired_at: int | None = None
    failed_at: int | None = None
    deleted_at: int | None = None
    value_index: ValueIndexMeta | None = None
    flag_index: FlagIndexMeta | None = None
    #: A delta version's base: the full version whose ranges answer wherever this one holds
    #: none (``ipmeta.lookup.runs``, "Delta versions"); 0 for a full version.
    base: int = 0
    #: The generation of home's pointer (``loader.records.Pointer``) that stopped naming this
    #: version, as its version or as its base: a replica region whose own pointer follows that
    #: generation or a later one can never serve it again (``loader.pipeline.retention``).
    released_generation: int | None = None
    #: Random, drawn when the version's metadata is first written: a version number can come back
    #: (a point-in-time restore rewinds the counter), this never does. A replica region's arrival
    #: record names it, so a record of an older version of the same number never counts.
    uid: str = ""

    @property
    def retained(self) -> bool:
        return self.status in RETAINED_STATUSES

    @property
    def is_delta(self) -> bool:
        return self.base != 0

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> VersionMeta:
        """From a stored item; versions loaded before ``rows`` existed keep it in their report."""
        rows = item.get("rows", (item.get("report") or {}).get("rows_read"))
        return cls(
            version=int(item["version"]),
            status=VersionStatus(item.get("status", VersionStatus.LOADING)),
            load_id=str(item.get("load_id", "")),
            sha256=str(item.get("sha256", "")),
            fingerprint=item.get("fingerprint"),
            sources=tuple(str(source) for source in item.get("sources", ())),
            column_types=dict(item.get("column_types") or {}),
            previous=int(item.get("previous", 0)),
            created_at=int(item.get("created_at", 0)),
            items=int(item.get("items", 0)),
            chunks=int(item.get("chunks", 0)),
            rows=_optional_int(rows),
            covers=int(item.get("covers", 0)),
            activated_at=_optional_int(item.get("activated_at")),
            retired_at=_optional_int(item.get("retired_at")),
            failed_at=_optional_int(item.get("failed_at")),
            deleted_at=_optional_int(item.get("deleted_at")),
            value_index=ValueIndexMeta.from_item(item["value_index"]) if item.get("value_index") else None,
            flag_index=FlagIndexMeta.from_item(item["flag_index"]) if item.get("flag_index") else None,
            base=int(item.get("base", 0)),
            released_generation=_optional_int(item.get("released_generation")),
            uid=str(item.get("uid", "")),
        )

    def to_item(self) -> dict[str, Any]:
        """The stored attributes (keys aside); unset optional ones are left out."""
        item: dict[str, Any] = {
            "version": self.version,
            "status": str(self.status),
            "load_id": self.load_id,
            "sha256": self.sha256,
            "sources": list(self.sources),
            "column_types": dict(self.column_types),
            "previous": self.previous,
            "created_at": self.created_at,
            "items": self.items,
            "chunks": self.chunks,
            "covers": self.covers,
        }
        optional = {
            "fingerprint": self.fingerprint,
            "rows": self.rows,
            "activated_at": self.activated_at,
            "retired_at": self.retired_at,
            "failed_at": self.failed_at,
            "deleted_at": self.deleted_at,
            "value_index": self.value_index.to_item() if self.value_index else None,
            "flag_index": self.flag_index.to_item() if self.flag_index else None,
            "base": self.base or None,
            "released_generation": self.released_generation,
            "uid": self.uid or None,
        }
        item.update({name: value for name, value in optional.items() if value is not None})
        return item


@dataclass(frozen=True, slots=True)
class ActiveVersion:
    """What a dataset's pointer names: the active version, and its base when it is a delta (else 0)."""

    version: int
    base: int = 0
