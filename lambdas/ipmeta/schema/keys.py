"""The key schema: the one module that knows how items are keyed.

The lookup, the loader, the CDK table construct and the tests all import it.
If two places computed a bucket, one of them would be wrong.

Table layout (one table, ``pk`` String + ``sk`` Number), for each dataset:

==========================  ==================================  ===========================
item                        pk                                  sk
==========================  ==================================  ===========================
range piece                 ``{d}v{version}#{family}#{b}``      offset of the piece's first
                                                                address within bucket ``b``
active-version pointer      ``{d}meta#pointer``                 0
a replica region's pointer  ``{d}meta#pointer#{region}``        0
a version arrived there     ``{d}meta#pointer#{region}``        version number
version metadata            ``{d}meta#versions``                version number
version counter             ``{d}meta#version-counter``         0
cover list of a version     ``{d}meta#covers#v{version}``       page number
loader bookkeeping          ``{d}meta#loads``, ...              (``loader.store``)
the dataset's vendor feed   ``{d}meta#feed``                    0
the datasets' names         ``meta#datasets``                   0 (one item for the table)
==========================  ==================================  ===========================

**Datasets.** A table holds any number of named datasets (``city``, ``asn``,
``blocklist``), each with its own versions, pointer, loads, lock, covers and
index keys. ``{d}`` is the dataset's prefix, ``ds#{name}#``, so two datasets
never share a partition key and never contend for one. The ``default``
dataset's prefix is empty: its keys are exactly those of a table written before
datasets existed, so such a table is served as the ``default`` dataset with no
migration. A name is lower-case letters, digits and ``-`` (``DATASET_NAME``):
no ``#``, so no prefix is another's, and none starts with ``v`` or ``meta``
once prefixed. ``KeySpace`` spells every key of one dataset.

**Replica regions.** With replicas (global tables), home's pointer is what home's
lookups follow and what its loads switch; each replica region has a pointer of its
own, ``{d}meta#pointer#{region}``, that only that region's arrival check writes
(``loader.pipeline.arrival``), once the version home's pointer names has wholly
arrived there, and that only that region's lookups read. The same partition records,
at the version's number, that the version arrived in that region (and, once counted
in the region's GSIs, its index entries: ``indexed``). A region name
(``eu-west-1``) has no ``#``, so the key is no other's; docs/decisions.md says why.

**Buckets.** IPv4 uses the /8 (first octet): 256 partition keys at most, and the
largest bucket of the ASN file (``@ip-location-db/asn``) holds 5.4% of its
412k ranges; 6 ranges cross a /8 and are split.

IPv6 uses the /24 (the first six hex digits), chosen from the 103,197 IPv6
ranges of the same file:

====== ========= ================ ================= ==================
prefix buckets   largest bucket's ranges that split items added by
                 share of items                     splitting
====== ========= ================ ================= ==================
/16        61        17.0%              0                  0
/20       682        14.8%              3                 17
/24     9,305         5.0%             57                581 (0.6%)
/28    45,638         4.4%            272             10,804 (10.5%)
/32   303,778         1.0%         12,902            254,536 (247%)
====== ========= ================ ================= ==================

/24 is the shortest prefix whose largest bucket holds no more than IPv4's
largest /8 does (5%), while splitting adds under 1% items. Shorter prefixes
put a whole RIR block in one key (2001::/16 holds 17% of the items); longer
ones multiply the items of every large allocation. The price is bounded: a
range spanning a whole IPv6 /8 would become 65,536 items.

**Sort key.** A DynamoDB Number holds at most 38 significant digits, and
2**128-1 has 39. The sort key is therefore the address's *offset within its
bucket*: below 2**24 for IPv4 and below 2**104 (32 digits) for IPv6, so every
address of both families fits, ``ffff:ffff:...:ffff`` included.

**Items.** A range piece stores ``start`` and ``end`` (inclusive, IP text) of
the range as the dataset defines it, not cut at the bucket edge, plus a
``data`` map of every metadata column. The lookup needs no second read: the
Query finds the piece starting at or before the address, and the address is
inside the range iff it is ``<= end`` (the piece cannot extend past its bucket,
and the address is in the bucket that was queried).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from ipmeta.schema.ips import Address, Family

PARTITION_KEY = "pk"
SORT_KEY = "sk"
#: DynamoDB attribute types of the key attributes: the CDK table uses these.
PARTITION_KEY_TYPE: Final = "S"
SORT_KEY_TYPE: Final = "N"

ATTR_START = "start"
ATTR_END = "end"
ATTR_DATA = "data"
#: Delta versions only (``ipmeta.lookup.runs``, "Delta versions"): a *gap item* says that its
#: ``start``..``end`` holds no range (where the base has one); every delta item names in
#: ``next`` where the next delta item of its bucket starts; a *marker* at offset 0, with
#: ``next`` alone, names the first one when it does not start at the bucket's first address.
ATTR_GAP = "gap"
ATTR_NEXT = "next"

ADDRESS_BITS: dict[int, int] = {4: 32, 6: 128}
BUCKET_PREFIX_BITS: dict[int, int] = {4: 8, 6: 24}

META_SORT_KEY = 0
#: The one item that names the datasets of the table, in two String Sets: those that serve
#: (activated once: what a lookup fans out to) and those a load ever started (what cleanup visits).
DATASETS_PK: Final = "meta#datasets"
SERVING_DATASETS: Final = "names"
STARTED_DATASETS: Final = "started"
#: The dataset of every command and request that names none, and of tables older than datasets.
DEFAULT_DATASET: Final = "default"
MAX_DATASET_NAME_LENGTH: Final = 32
#: Lower-case letters, digits and ``-``, starting with a letter: safe in keys, URLs and S3 prefixes.
DATASET_NAME: Final = re.compile(rf"[a-z][a-z0-9-]{{0,{MAX_DATASET_NAME_LENGTH - 1}}}")
_DATASET_PREFIX: Final = "ds#"
#: Names a dataset cannot take: ``/v1/datasets/current`` is the active version's route.
RESERVED_DATASET_NAMES: Final = frozenset({"current"})
#: An AWS region's name (``eu-west-1``, ``ap-southeast-1``, ``us-gov-west-1``): what a replica
#: region's pointer key ends with.
REGION_NAME: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def _offset_bits(family: int) -> int:
    return ADDRESS_BITS[family] - BUCKET_PREFIX_BITS[family]


def bucket_of(address: Address) -> int:
    """The bucket number: the address's top ``BUCKET_PREFIX_BITS`` bits."""
    return address.value >> _offset_bits(address.family)


def bucket_of_value(family: int, value: int) -> int:
    """``bucket_of`` an address given as family and integer."""
    return value >> _offset_bits(family)


def bucket_label(family: int, bucket: int) -> str:
    """How a bucket is spelled in a partition key: decimal octet for v4, hex for v6."""
    if family == 4:
        return str(bucket)
    return format(bucket, f"0{BUCKET_PREFIX_BITS[6] // 4}x")


def bucket_bounds(family: int, bucket: int) -> tuple[int, int]:
    """First and last address (as integers) of a bucket."""
    bits = _offset_bits(family)
    first = bucket << bits
    return first, first + (1 << bits) - 1


def encode_sort_key(address: Address) -> int:
    """The address's offset within its bucket: always fits a DynamoDB Number."""
    return encode_sort_key_value(address.family, address.value)


def encode_sort_key_value(family: int, value: int) -> int:
    """``encode_sort_key`` of an address given as family and integer."""
    return value & ((1 << _offset_bits(family)) - 1)


def decode_sort_key(family: int, bucket: int, sort_key: int) -> int:
    return (bucket << _offset_bits(family)) | sort_key


def format_version(version: int) -> str:
    return f"v{version}"


@dataclass(frozen=True, slots=True)
class BucketPiece:
    """The part of a range that lies inside one bucket."""

    family: int
    bucket: int
    first: int
    last: int


def split_at_buckets(family: int, start: int, end: int) -> Iterator[BucketPiece]:
    """Cut ``start..end`` at bucket boundaries, so each bucket stands alone (an item a bucket)."""
    bits = _offset_bits(family)
    for bucket in range(start >> bits, (end >> bits) + 1):
        first, last = bucket_bounds(family, bucket)
        yield BucketPiece(family, bucket, max(start, first), min(end, last))


def bucket_name(family: int, bucket: int) -> str:
    """A bucket without its version (``4#1``, ``6#200100``): how reports name buckets."""
    return f"{family}#{bucket_label(family, bucket)}"


# -- reverse-lookup indexes -------------------------------------------------------------
# Two global secondary indexes answer the questions that go the other way. Both are
# sparse: an item has an index's attributes only when it belongs in that index, and
# only the first piece of a range (the one holding its start) carries them, so a
# range that crosses a bucket edge is listed once.
#
# ``ranges-by-value`` (write-sharded)
#   a frequent value, its own keys:     gsi1pk ``v{version}#{field}#{value}#{shard}``
#                                       gsi1sk ``{family}#{start as 32 hex digits}``
#   a rare value, in a shared pack:     gsi1pk ``v{version}#{field}##{pack}``
#                                       gsi1sk ``{value hash, 16 hex digits}#{family}#{start}``
# ``flagged-ranges``  (sparse)          gsi2pk ``v{version}#{column}#{shard}``
#                                       gsi2sk ``{family}#{start}``
#
# The dataset's prefix and the version lead every index partition key, so answers never
# mix datasets or versions. The
# sort key is a String: the start of an IPv6 range does not fit a Number's 38
# digits, and fixed-width hex sorts bytewise exactly as (family, start) does.
# In a pack, the value's hash leads the sort key, so one value's entries are
# contiguous and ``begins_with`` reads exactly them, in (family, start) order.
# A pack key's value slot is empty: a blank value is never indexed, so no value's
# own key can be a pack's. ``loader.reverse_index`` explains which values pack.

RANGES_BY_VALUE_INDEX: Final = "ranges-by-value"
FLAGGED_INDEX: Final = "flagged-ranges"
GSI1_PARTITION_KEY: Final = "gsi1pk"
GSI1_SORT_KEY: Final = "gsi1sk"
GSI2_PARTITION_KEY: Final = "gsi2pk"
GSI2_SORT_KEY: Final = "gsi2sk"
INDEX_KEY_TYPE: Final = "S"
#: What both indexes project besides the keys: everything an answer shows, nothing more.
INDEX_PROJECTED_ATTRIBUTES: Final = (ATTR_START, ATTR_END, ATTR_DATA)


@dataclass(frozen=True, slots=True)
class IndexSchema:
    """One global secondary index: the stack, the local table and the queries read it."""

    name: str
    partition_key: str
    sort_key: str
    partition_key_type: str = INDEX_KEY_TYPE
    sort_key_type: str = INDEX_KEY_TYPE
    projected: tuple[str, ...] = INDEX_PROJECTED_ATTRIBUTES


RANGES_BY_VALUE: Final = IndexSchema(RANGES_BY_VALUE_INDEX, GSI1_PARTITION_KEY, GSI1_SORT_KEY)
FLAGGED: Final = IndexSchema(FLAGGED_INDEX, GSI2_PARTITION_KEY, GSI2_SORT_KEY)
INDEXES: Final = (RANGES_BY_VALUE, FLAGGED)

_HEX_DIGITS = ADDRESS_BITS[6] // 4


def index_sort_key(family: int, start: int, prefix: str = "") -> str:
    """``4#000…0a000000``: orders by (family, start) as a String, for both families.

    ``prefix`` is a packed value's ``value_sort_key_prefix``, empty on a value's own keys.
    """
    return f"{prefix}{family}#{start:0{_HEX_DIGITS}x}"


def decode_index_sort_key(sort_key: str) -> tuple[int, int]:
    """(family, start) of an index sort key, with or without a packed value's prefix."""
    family, start = sort_key.rsplit("#", 2)[-2:]
    return int(family), int(start, 16)


#: The longest value (in UTF-8) the ``ranges-by-value`` index holds. With the version, field
#: and shard around it, the key stays far below DynamoDB's 2,048-byte partition-key limit,
#: which would otherwise fail a whole batch of writes on AWS (dynalite does not enforce it).
MAX_INDEXED_VALUE_BYTES: Final = 1024

#: A page of a reverse listing (``ipmeta.lookup.reverse``): ranges by default and at most.
#: Here, with the other limits the routes declare, so that ``ipmeta.api.routes.range_routes`` can
#: declare them without importing the listing at every cold start of the lookup.
DEFAULT_PAGE_LIMIT: Final = 100
MAX_PAGE_LIMIT: Final = 1000
#: Longer ``next`` tokens are refused before any decoding. 256 shards at random IPv6 starts (the
#: worst case) take 7.8 KB; real cursors sit near one another in the order and compress far better.
MAX_PAGE_TOKEN_LENGTH: Final = 8192


def value_label(value: object) -> str:
    """How a metadata value is spelled in a key: integers in decimal, text verbatim.

    Verbatim, spaces included: the loader keeps values as the CSV has them
    (``"PhotoShelter, Inc. "``), so a query must not trim them either.
    """
    return str(value)


def is_blank(value: object) -> bool:
    """Whether a cell counts as empty for both indexes: missing, empty or only whitespace."""
    return value is None or not str(value).strip()


def is_indexable_value(value: object) -> bool:
    return not is_blank(value) and len(value_label(value).encode()) <= MAX_INDEXED_VALUE_BYTES


def value_hash(label: str) -> int:
    """A packed value's place in the hash order: its pack, and its sort-key prefix."""
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "big")


def value_hash_text(label: str) -> str:
    """The value's hash, fixed width: it names a value in sort keys and in the version's metadata."""
    return f"{value_hash(label):016x}"


def value_sort_key_prefix(label: str) -> str:
    """What leads the sort keys of a packed value's entries: its hash."""
    return value_hash_text(label) + "#"


def last_sort_key_of_prefix(prefix: str) -> str:
    """A bound above every sort key that starts with ``prefix``: "~" sorts after the
    digits, a-f and "#" that the ``{family}#{start}`` tail is made of."""
    return prefix + "~"


def pack_of(label: str, pack_starts: Sequence[int]) -> int:
    """The pack holding ``label``: the last pack whose first hash is at or below the value's."""
    return max(0, bisect.bisect_right(pack_starts, value_hash(label)) - 1)


def shard_of(family: int, start: int, shards: int) -> int:
    """The shard of a range: a hash of its start, so a reload puts it in the same shard.

    blake2b, not ``hash()``: Python salts string hashes per process.
    """
    if shards <= 1:
        return 0
    digest = hashlib.blake2b(f"{family}:{start:x}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def encode_own_shards(shards: Mapping[str, int]) -> bytes:
    """Shard counts of the values with keys of their own, by value hash, compressed.

    By hash, not by value: the values with their own keys are bounded by the key
    budget, and their hashes by 16 characters each, so the map fits a metadata
    item's 400 KB however long the values are.
    """
    by_hash = {value_hash_text(label): count for label, count in shards.items()}
    return zlib.compress(json.dumps(by_hash, separators=(",", ":"), sort_keys=True).encode())


def decode_own_shards(data: bytes) -> dict[str, int]:
    """Shard counts by ``value_hash_text`` (by value, in versions loaded before packing)."""
    counts: dict[str, int] = json.loads(zlib.decompress(data))
    return counts


def encode_pack_starts(starts: Sequence[int]) -> bytes:
    """The first value hash of every pack, ascending: 8 bytes each, compressed."""
    return zlib.compress(b"".join(start.to_bytes(8, "big") for start in starts))


def decode_pack_starts(data: bytes) -> list[int]:
    raw = zlib.decompress(data)
    return [int.from_bytes(raw[offset : offset + 8], "big") for offset in range(0, len(raw), 8)]


# -- datasets ------------------------------------------------------------------------------


class DatasetNameInvalid(ValueError):
    """A dataset name outside ``DATASET_NAME``."""


def check_dataset_name(name: str) -> str:
    if not DATASET_NAME.fullmatch(name):
        raise DatasetNameInvalid(
            f"{name[:40]!r} is not a dataset name: lower-case letters, digits and '-', "
            f"starting with a letter, at most {MAX_DATASET_NAME_LENGTH} characters"
        )
    if name in RESERVED_DATASET_NAMES:
        raise DatasetNameInvalid(f"{name!r} is reserved: /v1/datasets/{name} has a meaning of its own")
    return name


class RegionNameInvalid(ValueError):
    """A region name outside ``REGION_NAME``."""


def check_region_name(region: str) -> str:
    if not REGION_NAME.fullmatch(region):
        raise RegionNameInvalid(f"{region[:40]!r} is not an AWS region name such as eu-west-1")
    return region


@dataclass(frozen=True, slots=True)
class ValueKeys:
    """Where one value's entries are: its partition keys (shards), and their sort-key prefix."""

    partition_keys: tuple[str, ...]
    sort_key_prefix: str


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Every partition key of one dataset: its prefix (empty for ``default``) before the layout above."""

    dataset: str
    prefix: str

    @property
    def pointer(self) -> str:
        return self.meta("pointer")

    def region_pointer(self, region: str) -> str:
        """A replica region's own pointer (sk 0) and its arrived versions (sk: the version)."""
        return self.meta(f"pointer#{check_region_name(region)}")

    def counted(self, region: str | None) -> str:
        """What counts of a version's items and index entries found so far, in home (None) or in a
        replica region (sk: the version): beside that region's pointer, whose writer it shares."""
        return f"{self.pointer_of(region)}#counted"

    def pointer_of(self, region: str | None) -> str:
        """The pointer a lookup in ``region`` follows: home's (None) or that replica region's."""
        return self.pointer if region is None else self.region_pointer(region)

    @property
    def versions(self) -> str:
        """One partition holds every version's metadata, so listing versions is one Query."""
        return self.meta("versions")

    @property
    def version_counter(self) -> str:
        return self.meta("version-counter")

    def meta(self, name: str) -> str:
        """A bookkeeping partition of this dataset (the loader's ``loads``, ``lock``, ...)."""
        return f"{self.prefix}meta#{name}"

    @property
    def feed_state(self) -> str:
        """The vendor feed that keeps this dataset current (``loader.feeds``): one item, sk 0.

        Keyed by the dataset, not by the feed's name: each feed loads into a dataset
        of its own, and a feed name (``url:https://…``) is no key material. The item
        holds the release loaded last and the feed's failed runs in a row.
        """
        return self.meta("feed")

    def version_key(self, version: int) -> str:
        """What leads every key of one version of this dataset: unique across the table."""
        return f"{self.prefix}{format_version(version)}"

    def partition_key(self, version: int, family: int, bucket: int) -> str:
        return f"{self.version_key(version)}#{family}#{bucket_label(family, bucket)}"

    def covers_partition_key(self, version: int) -> str:
        """The partition of a version's cover list (``ipmeta.schema.records.Cover``); sk = page number."""
        return self.meta(f"covers#{format_version(version)}")

    def lookup_key(self, version: int, address: Address) -> tuple[str, int]:
        """The (pk, sk) a lookup of ``address`` queries with ``sk <= offset``."""
        return self.partition_key(version, address.family, bucket_of(address)), encode_sort_key(address)

    def parse_partition_key(self, partition: str) -> tuple[int, Family, int] | None:
        """``{d}v7#6#200100`` -> (7, 6, 0x200100); None for any other key (a cover list's)."""
        if not partition.startswith(self.prefix):
            return None
        version, _, rest = partition.removeprefix(self.prefix).partition("#")
        family_text, _, label = rest.partition("#")
        if version[:1] != "v" or not version[1:].isdigit() or family_text not in ("4", "6") or not label:
            return None
        family: Family = 4 if family_text == "4" else 6
        return int(version[1:]), family, int(label, 10 if family == 4 else 16)

    def value_partition_key(self, version: int, field: str, value: object, shard: int) -> str:
        return f"{self.version_key(version)}#{field}#{value_label(value)}#{shard}"

    def pack_partition_key(self, version: int, field: str, pack: int) -> str:
        """The key that rare values of ``field`` share: ``v7#asn##12``, an empty value slot."""
        return f"{self.version_key(version)}#{field}##{pack}"

    def value_keys(
        self, version: int, field: str, label: str, own_shards: int | None, pack_starts: Sequence[int]
    ) -> ValueKeys:
        """The loader writes a value's entries here, and a query reads them from here.

        ``own_shards`` is how many keys of its own the value has, None when it is packed.
        """
        if own_shards is None:
            pack = self.pack_partition_key(version, field, pack_of(label, pack_starts))
            return ValueKeys((pack,), value_sort_key_prefix(label))
        return ValueKeys(
            tuple(self.value_partition_key(version, field, label, shard) for shard in range(own_shards)), ""
        )

    def flagged_partition_key(self, version: int, column: str, shard: int) -> str:
        return f"{self.version_key(version)}#{column}#{shard}"


@lru_cache(maxsize=256)
def key_space(dataset: str = DEFAULT_DATASET) -> KeySpace:
    """The keys of ``dataset``; raises ``DatasetNameInvalid`` for a name outside ``DATASET_NAME``."""
    check_dataset_name(dataset)
    return KeySpace(dataset, "" if dataset == DEFAULT_DATASET else f"{_DATASET_PREFIX}{dataset}#")
