"""Reverse lookups: the ranges of one value, and the flagged ranges, in (family, start) order.

A value's entries are spread over several shards (``loader.reverse_index``
explains how many). One page queries the shards concurrently and merges them
k-way: an entry is emitted only while every shard that may hold more has a
known next entry, so no shard's unseen entries can sort before it. Each shard's
position travels in the ``next`` token as the last sort key emitted from it.

Tokens are signed (HMAC-SHA256) and bound to the version and the question, so
a page never mixes versions, and an altered token is refused, not obeyed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import threading
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol

from ipmeta.schema import keys
from ipmeta.schema.errors import (
    FieldNotIndexed,
    FlagsNotIndexed,
    InvalidToken,
    ValueInvalid,
    ValueMissing,
)
from ipmeta.schema.ips import address_value, format_address, range_cidrs
from ipmeta.schema.records import VersionMeta

#: Each shard is asked for its share of a page plus this margin, so a page rarely needs a second round.
_SHARE_MARGIN = 1.25

Item = dict[str, Any]
#: A DynamoDB Number has at most 38 significant digits; a longer integer is in no Number column.
_MAX_NUMBER_DIGITS = 38


class IndexReader(Protocol):
    """What a reverse lookup needs from the data layer (``ipmeta.store.dynamodb.Store`` provides it)."""

    def query_index(
        self, index: keys.IndexSchema, partition_key: str, *, prefix: str, after: str | None, limit: int
    ) -> tuple[list[Item], bool]: ...


# -- what a version's metadata says about its indexes ------------------------------------


@dataclass(frozen=True)
class ValueIndex:
    field: str
    column_type: str
    own_shards: Mapping[str, int]  #: by value hash; by value in a version loaded before packing
    pack_starts: Sequence[int] | None  #: None in a version loaded before rare values were packed

    def label(self, value: str) -> str:
        """The value as the loader spelled it.

        In a Number column ``013335``, `` 13335`` and ``AS13335`` all find 13335: the
        ``AS`` prefix is how AS numbers are usually written, and a Number column holds
        no letters, so accepting it cannot make one value look like another. Text is
        matched verbatim, spaces included, because the loader keeps it so.
        """
        if self.column_type != "N":
            if not keys.is_indexable_value(value):
                raise ValueInvalid(
                    f"value is longer than the {keys.MAX_INDEXED_VALUE_BYTES} bytes the index holds"
                )
            return keys.value_label(value)
        text = value.strip()
        digits = text[2:] if text[:2].upper() == "AS" else text
        unsigned = digits.removeprefix("-")
        if not (unsigned.isascii() and unsigned.isdigit()) or len(unsigned) > _MAX_NUMBER_DIGITS:
            raise ValueInvalid(f"{self.field} holds integers, optionally written AS13335; got {text[:64]!r}")
        return keys.value_label(int(digits))

    def keys_of(self, space: keys.KeySpace, version: int, label: str) -> keys.ValueKeys:
        if self.pack_starts is None:  # loaded before packing: every value has keys of its own
            return space.value_keys(version, self.field, label, int(self.own_shards.get(label, 1)), ())
        own = self.own_shards.get(keys.value_hash_text(label))
        return space.value_keys(version, self.field, label, own, self.pack_starts)


@dataclass(frozen=True)
class FlagIndex:
    column: str
    shards: int


@dataclass(frozen=True)
class ReverseIndexes:
    values: ValueIndex | None
    flags: FlagIndex | None

    @classmethod
    def from_version_meta(cls, meta: VersionMeta | None) -> ReverseIndexes:
        value_meta = meta.value_index if meta else None
        flag_meta = meta.flag_index if meta else None
        values = None
        if value_meta and value_meta.packs is not None:
            values = ValueIndex(
                value_meta.field,
                value_meta.column_type,
                keys.decode_own_shards(value_meta.own_shards) if value_meta.own_shards else {},
                keys.decode_pack_starts(value_meta.packs),
            )
        elif value_meta and value_meta.legacy_shards is not None:
            # Loaded before packing: shard counts by value, only those above one.
            counts = keys.decode_own_shards(value_meta.legacy_shards)
            values = ValueIndex(value_meta.field, value_meta.column_type, counts, None)
        flags = FlagIndex(flag_meta.column, flag_meta.shards) if flag_meta else None
        return cls(values, flags)


class IndexCatalog:
    """Each version's index metadata, read once per container: it never changes after prepare."""

    def __init__(self, read_meta: Callable[[int], VersionMeta | None], size: int = 16) -> None:
        self._read_meta = read_meta
        self._size = size
        self._known: dict[int, ReverseIndexes] = {}
        self._lock = threading.Lock()

    def get(self, version: int) -> ReverseIndexes:
        with self._lock:
            known = self._known.get(version)
        if known is not None:
            return known
        indexes = ReverseIndexes.from_version_meta(self._read_meta(version))
        with self._lock:
            if len(self._known) >= self._size:
                self._known.pop(next(iter(self._known)))
            self._known[version] = indexes
        return indexes


# -- the questions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """One question against one version: which index, and its partition key per shard."""

    index: keys.IndexSchema
    version: int
    scope: str  #: what a token is bound to, e.g. ``value:asn=13335``
    partition_keys: tuple[str, ...]
    sort_key_prefix: str = ""  #: a packed value's, which its key shares with other values
    dataset: str = keys.DEFAULT_DATASET  #: whose version this is: a token is bound to it too


def ranges_of_value(
    indexes: ReverseIndexes, space: keys.KeySpace, version: int, field: str | None, value: str | None
) -> Listing:
    name = f"dataset {space.dataset} {keys.format_version(version)}"
    if indexes.values is None:
        raise FieldNotIndexed(f"{name} has no value index; load it with --index-field FIELD")
    if not field or field.strip().lower() != indexes.values.field:
        raise FieldNotIndexed(
            f"field must be {indexes.values.field!r}, the field {name} is indexed by"
            + (f" (got {field[:64]!r})" if field else "")
        )
    if value is None or keys.is_blank(value):
        raise ValueMissing("value is required: the value of the field whose ranges to list")
    label = indexes.values.label(value)
    where = indexes.values.keys_of(space, version, label)
    return Listing(
        keys.RANGES_BY_VALUE,
        version,
        f"value:{indexes.values.field}={label}",
        where.partition_keys,
        where.sort_key_prefix,
        space.dataset,
    )


def flagged_ranges(indexes: ReverseIndexes, space: keys.KeySpace, version: int) -> Listing:
    if indexes.flags is None:
        raise FlagsNotIndexed(
            f"dataset {space.dataset} {keys.format_version(version)} was loaded without --flag-column; "
            "nothing is flagged"
        )
    column = indexes.flags.column
    return Listing(
        keys.FLAGGED,
        version,
        f"flag:{column}",
        tuple(space.flagged_partition_key(version, column, shard) for shard in range(indexes.flags.shards)),
        dataset=space.dataset,
    )


# -- pages: the k-way merge ------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """Where each shard stands: the last sort key emitted from it, and which shards are done."""

    positions: Mapping[int, str]
    done: frozenset[int]


@dataclass(frozen=True)
class Page:
    items: list[Item]
    cursor: Cursor | None  #: None when the listing is complete


def list_page(
    reader: IndexReader, listing: Listing, limit: int, cursor: Cursor | None, executor: Executor
) -> Page:
    """Up to ``limit`` entries in (family, start) order, after ``cursor``."""
    cursor = cursor or Cursor({}, frozenset())
    sort_key, prefix = listing.index.sort_key, listing.sort_key_prefix
    shards = [shard for shard in range(len(listing.partition_keys)) if shard not in cursor.done]
    # A cursor's positions are (family, start) sort keys; a packed value's carry its prefix.
    positions: dict[int, str] = {shard: prefix + position for shard, position in cursor.positions.items()}
    fetched_to: dict[int, str | None] = {shard: positions.get(shard) for shard in shards}
    buffers: dict[int, deque[Item]] = {shard: deque() for shard in shards}
    exhausted: set[int] = set()

    def refill(empty: Sequence[int], wanted: int) -> None:
        share = min(keys.MAX_PAGE_LIMIT + 1, int(wanted * _SHARE_MARGIN / max(1, len(shards))) + 2)

        def fetch(shard: int) -> tuple[list[Item], bool]:
            return reader.query_index(
                listing.index,
                listing.partition_keys[shard],
                prefix=prefix,
                after=fetched_to[shard],
                limit=share,
            )

        for shard, (items, more) in zip(empty, executor.map(fetch, empty), strict=True):
            buffers[shard].extend(items)
            if items:
                fetched_to[shard] = items[-1][sort_key]
            if not more:
                exhausted.add(shard)

    emitted: list[Item] = []
    while len(emitted) < limit:
        # A shard that may hold more must show its next entry before anything is emitted.
        empty = [shard for shard in shards if not buffers[shard] and shard not in exhausted]
        if empty:
            refill(empty, limit - len(emitted))
            continue
        ready = [shard for shard in shards if buffers[shard]]
        if not ready:
            break
        shard = min(ready, key=lambda candidate: buffers[candidate][0][sort_key])
        item = buffers[shard].popleft()
        positions[shard] = item[sort_key]
        emitted.append(item)
    done = cursor.done | {shard for shard in shards if shard in exhausted and not buffers[shard]}
    if len(done) == len(listing.partition_keys):
        return Page(emitted, None)
    remaining = {shard: positions[shard].removeprefix(prefix) for shard in positions if shard not in done}
    return Page(emitted, Cursor(remaining, done))


def range_entry(item: Mapping[str, Any], sort_key: str) -> dict[str, Any]:
    """An index entry as the API shows it."""
    family, start = keys.decode_index_sort_key(item[sort_key])
    end_text = item[keys.ATTR_END]
    end = address_value(family, end_text)
    return {
        "start": format_address(family, start),
        "end": end_text,
        "cidrs": list(range_cidrs(family, start, end)),
        "data": item.get(keys.ATTR_DATA, {}),
    }


# -- tokens ----------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()[:16]


def _compact(sort_key: str) -> str:
    family, start = keys.decode_index_sort_key(sort_key)
    return f"{family}:{start:x}"


def _expand(position: str) -> str:
    family, start = position.split(":")
    if family not in ("4", "6"):
        raise ValueError(family)
    return keys.index_sort_key(int(family), int(start, 16))


def encode_token(listing: Listing, cursor: Cursor, key: bytes) -> str:
    body: dict[str, Any] = {
        "v": listing.version,
        "q": listing.scope,
        "p": {str(shard): _compact(position) for shard, position in sorted(cursor.positions.items())},
        "d": sorted(cursor.done),
    }
    if listing.dataset != keys.DEFAULT_DATASET:  # tokens of the default dataset stay as they were
        body["s"] = listing.dataset
    payload = zlib.compress(json.dumps(body, separators=(",", ":")).encode())
    return f"{_b64(payload)}.{_b64(_signature(key, payload))}"


@dataclass(frozen=True)
class Token:
    version: int
    scope: str
    cursor: Cursor
    dataset: str = keys.DEFAULT_DATASET


def decode_token(text: str, key: bytes) -> Token:
    """The token's version, question and cursor, or ``InvalidToken`` for anything else."""
    if len(text) > keys.MAX_PAGE_TOKEN_LENGTH or text.count(".") != 1:
        raise InvalidToken("next is not a page token of this API")
    payload_text, signature_text = text.split(".")
    try:
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except (binascii.Error, ValueError) as error:
        raise InvalidToken("next is not a page token of this API") from error
    if not hmac.compare_digest(signature, _signature(key, payload)):
        raise InvalidToken("next was altered or signed by another key; start again without it")
    try:
        body = json.loads(zlib.decompress(payload))
        positions = {int(shard): _expand(str(position)) for shard, position in body["p"].items()}
        done = frozenset(int(shard) for shard in body["d"])
        dataset = str(body.get("s", keys.DEFAULT_DATASET))
        return Token(int(body["v"]), str(body["q"]), Cursor(positions, done), dataset)
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as error:
        raise InvalidToken("next is not a page token of this API") from error
