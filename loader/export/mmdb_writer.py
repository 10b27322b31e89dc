"""A streaming MaxMind DB writer: sorted ranges in, a ``.mmdb`` file out, memory bounded by the tree's depth.

The format is MaxMind's (https://maxmind.github.io/MaxMind-DB/): a binary
search tree of nodes, 16 zero bytes, a data section of encoded records, then a
metadata map after ``\\xab\\xcd\\xefMaxMind.com``. ``docs/decisions.md`` says why
this is ours and not the ``mmdb-writer`` package (memory grew with the networks,
and it wrote ``1`` as ``true``).

Two passes over the input, neither holding the tree:

1. Each range is cut into its CIDR blocks; each distinct record is encoded
   once into a temporary data file; the blocks are spooled to a temporary file
   as ``(start, prefix length, data offset)``, and the tree's nodes are counted
   without building them (a block adds one node per bit past the prefix it
   shares with the previous block).
2. The spool is replayed with a stack of at most 128 open nodes. A node is
   numbered when both its subtrees are done, counting down from the last
   number, so the root (done last) is node 0 as the format requires, and nodes
   are written in contiguous runs, highest number first.

Every data type of the spec can be written: strings (repeated ones as
pointers), maps, arrays, booleans, bytes, doubles and integers, each integer
in the smallest unsigned type that holds it (``int32`` for negatives). A
``Typed`` value names its type instead (``Typed("float", 1.5)`` is the 32-bit
``float``, ``Typed("uint64", 1)`` a ``uint64``): no Python value is a
``float`` of the spec, and a fixture may want a small number in a wide type.

IPv4 ranges live in the IPv6 tree at ``::a.b.c.d`` (``::/96``), as the format
specifies. With ``ipv4_aliases``, ``::ffff:0:0/96`` (IPv4-mapped) and
``2002::/16`` (6to4) point at the same subtree, as MaxMind's databases do,
wherever no IPv6 range of the input lies in them.
"""

from __future__ import annotations

import hashlib
import ipaddress
import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Final

METADATA_MARKER: Final = b"\xab\xcd\xefMaxMind.com"
DATA_SECTION_SEPARATOR: Final = b"\x00" * 16
TREE_BITS: Final = 128
IPV4_SPACE_END: Final = (1 << 32) - 1
#: The IPv6 blocks that may alias the IPv4 subtree: (first address, prefix length).
IPV4_ALIASES: Final = ((0xFFFF << 32, 96), (0x2002 << 112, 16))

# Data section types (the spec's numbering).
_POINTER, _STRING, _DOUBLE, _BYTES, _UINT16, _UINT32, _MAP = 1, 2, 3, 4, 5, 6, 7
_INT32, _UINT64, _UINT128, _ARRAY, _BOOLEAN, _FLOAT = 8, 9, 10, 11, 14, 15
#: The numeric types a ``Typed`` value may name: spec number, and bytes for the fixed-size ones.
NUMERIC_TYPES: Final = {
    "double": _DOUBLE,
    "uint16": _UINT16,
    "uint32": _UINT32,
    "int32": _INT32,
    "uint64": _UINT64,
    "uint128": _UINT128,
    "float": _FLOAT,
}
_UNSIGNED_BYTES: Final = {_UINT16: 2, _UINT32: 4, _UINT64: 8, _UINT128: 16}

#: A spooled block: start (two 64-bit halves), prefix length, data offset (or ``_ALIAS``).
_SPOOL: Final = struct.Struct(">QQBI")
_ALIAS: Final = 0xFFFFFFFF
#: Distinct records remembered for reuse; past it the memory is freed and records may repeat.
MAX_REMEMBERED_RECORDS: Final = 1 << 20
#: Strings (keys and short values) written once and then pointed to.
MAX_REMEMBERED_STRINGS: Final = 1 << 16
_MAX_POINTED_STRING_BYTES: Final = 64
_NODES_PER_WRITE: Final = 1 << 12
_PENDING: Final = -1


@dataclass(frozen=True, slots=True)
class Typed:
    """A number written as the named type of the spec (``NUMERIC_TYPES``), not the one its value picks."""

    kind: str
    value: int | float

    def __post_init__(self) -> None:
        if self.kind not in NUMERIC_TYPES:
            known = ", ".join(NUMERIC_TYPES)
            raise ValueError(f"unknown MaxMind DB number type {self.kind!r}; use one of {known}")


@dataclass(frozen=True)
class DatabaseMetadata:
    database_type: str
    description: Mapping[str, str]
    languages: Sequence[str] = ("en",)
    build_epoch: int | None = None  #: default: now


@dataclass
class WrittenDatabase:
    """What a write produced."""

    ranges: int = 0
    networks: int = 0  #: CIDR blocks in the tree, aliases not counted
    records: int = 0  #: records in the data section
    node_count: int = 0
    record_size: int = 0
    data_bytes: int = 0
    file_bytes: int = 0
    #: IPv6 ranges (or parts) in ``::/96`` dropped because that space holds the IPv4 tree
    ipv6_in_ipv4_space: int = 0
    aliases: list[str] = field(default_factory=list)  #: alias blocks written
    seconds: float = 0.0


class DataSection:
    """Encodes records into the data section; a string seen before becomes a pointer to it."""

    def __init__(self, sink: IO[bytes]) -> None:
        self._sink = sink
        self.size = 0
        self.records = 0
        self._strings: dict[str, int] = {}
        self._known: dict[bytes, int] = {}

    def add(self, record: Mapping[str, Any]) -> int:
        """The offset of ``record`` in the data section, writing it unless it is already there."""
        # repr tells True, 1, 1.0 and Decimal('1') apart: equal in Python, not in the file.
        identity = hashlib.blake2b(repr(record).encode(), digest_size=16).digest()
        offset = self._known.get(identity)
        if offset is not None:
            return offset
        if len(self._known) >= MAX_REMEMBERED_RECORDS:
            self._known.clear()
        buffer = bytearray()
        self._encode(record, buffer)
        offset = self._known[identity] = self.size
        self._sink.write(buffer)
        self.size += len(buffer)
        self.records += 1
        return offset

    def _encode(self, value: Any, out: bytearray) -> None:
        if isinstance(value, str):
            self._encode_string(value, out)
        elif isinstance(value, Mapping):
            present = [(key, inner) for key, inner in value.items() if inner is not None]
            out += control_bytes(_MAP, len(present))
            for key, inner in present:
                self._encode_string(str(key), out)
                self._encode(inner, out)
        elif isinstance(value, list | tuple):
            present_items = [inner for inner in value if inner is not None]
            out += control_bytes(_ARRAY, len(present_items))
            for inner in present_items:
                self._encode(inner, out)
        else:
            out += encode_scalar(value)

    def _encode_string(self, text: str, out: bytearray) -> None:
        raw = text.encode()
        if len(raw) > _MAX_POINTED_STRING_BYTES:
            out += control_bytes(_STRING, len(raw)) + raw
            return
        known = self._strings.get(text)
        if known is not None:
            pointer = pointer_bytes(known)
            if len(pointer) <= len(raw):
                out += pointer
                return
        if len(self._strings) < MAX_REMEMBERED_STRINGS:
            self._strings[text] = self.size + len(out)
        out += control_bytes(_STRING, len(raw)) + raw


def encode_scalar(value: Any) -> bytes:
    """A boolean, number or byte string in the data section's encoding."""
    if isinstance(value, Typed):
        return encode_typed(NUMERIC_TYPES[value.kind], value.value)
    if isinstance(value, bool):
        return control_bytes(_BOOLEAN, int(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} cannot be stored in a MaxMind DB")
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, int):
        return _encode_integer(value)
    if isinstance(value, float):
        return encode_typed(_DOUBLE, value)
    if isinstance(value, bytes | bytearray):
        return control_bytes(_BYTES, len(value)) + bytes(value)
    raise TypeError(f"a MaxMind DB cannot hold a {type(value).__name__}: {value!r}")


def encode_typed(kind: int, value: int | float) -> bytes:
    """``value`` as the numeric type ``kind``; a value that type cannot hold is refused."""
    if kind == _DOUBLE:
        return control_bytes(_DOUBLE, 8) + struct.pack(">d", value)
    if kind == _FLOAT:
        return control_bytes(_FLOAT, 4) + struct.pack(">f", value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"an integer type holds integers, not {value!r}")
    if kind == _INT32:
        if not -(1 << 31) <= value < 1 << 31:
            raise ValueError(f"{value} does not fit an int32")
        # Shorter than 4 bytes is always positive (the spec): a negative takes all four.
        size = 4 if value < 0 else (value.bit_length() + 7) // 8
        return control_bytes(_INT32, size) + value.to_bytes(size, "big", signed=value < 0)
    limit = _UNSIGNED_BYTES[kind]
    if not 0 <= value < 1 << (8 * limit):
        raise ValueError(f"{value} does not fit a uint{8 * limit}")
    size = (value.bit_length() + 7) // 8
    return control_bytes(kind, size) + value.to_bytes(size, "big")


def _encode_integer(value: int) -> bytes:
    """The smallest unsigned type that holds ``value``; int32 for negatives; else the double that spells it.

    No signed type is wider than 32 bits and none wider than 128: a whole
    number beyond them (a whole double, once stored as a Number) is written as
    the double whose shortest decimal is that number, and refused otherwise.
    """
    size = (value.bit_length() + 7) // 8
    if -(1 << 31) <= value < 0:
        return encode_typed(_INT32, value)
    kind = (
        next((kind for kind, limit in _UNSIGNED_BYTES.items() if size <= limit), None) if value >= 0 else None
    )
    if kind is not None:
        return encode_typed(kind, value)
    double = float(value)
    if Decimal(repr(double)) == value:
        return encode_typed(_DOUBLE, double)
    raise ValueError(f"{value} is beyond the integers a MaxMind DB holds (int32 to uint128), and no double")


def control_bytes(kind: int, size: int) -> bytes:
    """The control byte(s) of a field: type in the top 3 bits (0 = extended), then the size."""
    if size < 29:
        head, tail = size, b""
    elif size < 285:
        head, tail = 29, bytes([size - 29])
    elif size < 65821:
        head, tail = 30, (size - 285).to_bytes(2, "big")
    else:
        head, tail = 31, (size - 65821).to_bytes(3, "big")
    if kind <= _MAP:
        return bytes([(kind << 5) | head]) + tail
    return bytes([head, kind - 7]) + tail


def pointer_bytes(offset: int) -> bytes:
    """A pointer to ``offset`` in the data section, in the fewest bytes (the spec's four sizes)."""
    if offset < 1 << 11:
        return bytes([0x20 | (offset >> 8), offset & 0xFF])
    if offset < (1 << 19) + 2048:
        value = offset - 2048
        return bytes([0x28 | (value >> 16)]) + (value & 0xFFFF).to_bytes(2, "big")
    if offset < (1 << 27) + 526336:
        value = offset - 526336
        return bytes([0x30 | (value >> 24)]) + (value & 0xFFFFFF).to_bytes(3, "big")
    return b"\x38" + offset.to_bytes(4, "big")


def range_blocks(start: int, end: int) -> Iterator[tuple[int, int]]:
    """The fewest CIDR blocks covering ``start..end`` of the 128-bit tree: ``(first, prefix length)``.

    Never ``/0``: the root of the tree is a node, so the whole space is two ``/1`` blocks.
    """
    while start <= end:
        size_bits = (start & -start).bit_length() - 1 if start else TREE_BITS - 1
        while start + (1 << size_bits) - 1 > end:
            size_bits -= 1
        yield start, TREE_BITS - size_bits
        start += 1 << size_bits


def write_database(
    ranges: Iterable[tuple[int, int, int, Mapping[str, Any]]],
    out: Path,
    metadata: DatabaseMetadata,
    *,
    ipv4_aliases: bool = False,
    workdir: Path | None = None,
) -> WrittenDatabase:
    """Write ``(family, start, end, record)`` ranges, sorted by (family, start) and disjoint, to ``out``.

    Records are maps; ``None`` values are left out (the format has no null).
    """
    started = time.monotonic()
    stats = WrittenDatabase()
    with tempfile.TemporaryDirectory(prefix="ipmeta-mmdb-", dir=workdir) as folder:
        data_path, spool_path = Path(folder) / "data", Path(folder) / "spool"
        with data_path.open("wb") as data_file, spool_path.open("wb") as spool_file:
            data = DataSection(data_file)
            blocks = _tree_blocks(ranges, data, stats, ipv4_aliases)
            node_count = _spool(blocks, spool_file)
        stats.node_count = max(node_count, 1)
        stats.records, stats.data_bytes = data.records, data.size
        stats.record_size = record_size_for(stats.node_count + len(DATA_SECTION_SEPARATOR) + data.size)
        with out.open("wb") as sink:
            with spool_path.open("rb") as spool:
                _write_tree(_read_spool(spool), sink, stats.node_count, stats.record_size)
            sink.seek(stats.node_count * stats.record_size // 4)
            sink.write(DATA_SECTION_SEPARATOR)
            with data_path.open("rb") as data_file:
                shutil.copyfileobj(data_file, sink, 1 << 20)
            sink.write(METADATA_MARKER + _metadata_map(metadata, stats.node_count, stats.record_size))
    stats.file_bytes = out.stat().st_size
    stats.seconds = round(time.monotonic() - started, 3)
    return stats


def record_size_for(largest_record_value: int) -> int:
    for bits in (24, 28, 32):
        if largest_record_value < 1 << bits:
            return bits
    raise ValueError("the database would exceed 4 GiB, the largest a MaxMind DB can address")


def _tree_blocks(
    ranges: Iterable[tuple[int, int, int, Mapping[str, Any]]],
    data: DataSection,
    stats: WrittenDatabase,
    ipv4_aliases: bool,
) -> Iterator[tuple[int, int, int]]:
    """``(start, prefix length, data offset or _ALIAS)`` in tree order, checking the order as it goes."""
    last_end, has_ipv4 = -1, False
    aliases: list[tuple[int, int]] | None = None  # set when the IPv6 part starts
    for family, start, end, record in ranges:
        if family == 6 and has_ipv4 and start <= IPV4_SPACE_END:
            # ::/96 is where the tree keeps IPv4: IPv6 there would answer IPv4 lookups.
            stats.ipv6_in_ipv4_space += 1
            if end <= IPV4_SPACE_END:
                continue
            start = IPV4_SPACE_END + 1  # noqa: PLW2901  # the part above ::/96 stays
        if start <= last_end or start > end:
            shown = f"IPv{family} {start:#x}..{end:#x}"
            raise ValueError(f"ranges must be sorted by (family, start) and disjoint; {shown} is not")
        has_ipv4 = has_ipv4 or family == 4
        if family == 6 and aliases is None:
            aliases = _alias_blocks(has_ipv4 and ipv4_aliases)
        yield from _aliases_up_to(aliases or [], start, end, stats)
        last_end = end
        offset = data.add(record)
        stats.ranges += 1
        for first, prefix in range_blocks(start, end):
            stats.networks += 1
            yield first, prefix, offset
    if aliases is None:
        aliases = _alias_blocks(has_ipv4 and ipv4_aliases)
    yield from _aliases_up_to(aliases, 1 << TREE_BITS, 1 << TREE_BITS, stats)


def _alias_blocks(wanted: bool) -> list[tuple[int, int]]:
    return [(first, prefix) for first, prefix in IPV4_ALIASES] if wanted else []


def _aliases_up_to(
    aliases: list[tuple[int, int]], start: int, end: int, stats: WrittenDatabase
) -> Iterator[tuple[int, int, int]]:
    """The alias blocks that begin before ``end``: those wholly before ``start``, in order.

    An alias that an IPv6 range overlaps is left out: the data wins its own addresses.
    """
    while aliases and aliases[0][0] <= end:
        first, prefix = aliases.pop(0)
        if first + (1 << (TREE_BITS - prefix)) - 1 < start:
            stats.aliases.append(f"{ipaddress.IPv6Address(first)}/{prefix}")
            yield first, prefix, _ALIAS


def _spool(blocks: Iterable[tuple[int, int, int]], spool: IO[bytes]) -> int:
    """Spool the blocks and count the tree's nodes: one per bit a block does not share with the previous."""
    nodes, previous = 0, -1
    pack = _SPOOL.pack
    for start, prefix, offset in blocks:
        if previous < 0:
            nodes += prefix
        else:
            nodes += prefix - (TREE_BITS - (previous ^ start).bit_length()) - 1
        previous = start
        spool.write(pack(start >> 64, start & 0xFFFFFFFFFFFFFFFF, prefix, offset))
    return nodes


def _read_spool(spool: IO[bytes]) -> Iterator[tuple[int, int, int]]:
    while chunk := spool.read(_SPOOL.size * 8192):
        for high, low, prefix, offset in _SPOOL.iter_unpack(chunk):
            yield (high << 64) | low, prefix, offset


class _NodeSink:
    """Nodes arrive numbered downwards; each run of them is written in one piece."""

    def __init__(self, sink: IO[bytes], node_count: int, record_size: int) -> None:
        self._sink = sink
        self._node_bytes = record_size // 4
        self._pack = _node_packer(record_size)
        self._pending: list[bytes] = []
        self.next_number = node_count - 1

    def add(self, left: int, right: int) -> int:
        number = self.next_number
        self.next_number -= 1
        self._pending.append(self._pack(left, right))
        if len(self._pending) >= _NODES_PER_WRITE:
            self.flush()
        return number

    def flush(self) -> None:
        if self._pending:
            self._sink.seek((self.next_number + 1) * self._node_bytes)
            self._sink.write(b"".join(reversed(self._pending)))
            self._pending.clear()


def _write_tree(blocks: Iterator[tuple[int, int, int]], sink: IO[bytes], node_count: int, size: int) -> None:
    """Replay the spooled blocks into nodes, holding only the open path (at most 128 nodes)."""
    tree = _OpenPath(_NodeSink(sink, node_count, size), node_count)
    for start, prefix, offset in blocks:
        tree.add(start, prefix, offset)
    tree.finish()


class _OpenPath:
    """The nodes from the root to the last block, each ``[left, right]``; finished ones are written."""

    def __init__(self, nodes: _NodeSink, node_count: int) -> None:
        self.nodes = nodes
        self.node_count = node_count
        self.empty = node_count  #: the record value of "no data"
        self.path: list[list[int]] = []
        self.previous = 0  #: start of the last block: its bits say which way the path goes
        self.ipv4_root = _PENDING  #: the record value of ::/96, which aliases point to

    def add(self, start: int, prefix: int, offset: int) -> None:
        first_new = 0
        if self.path:
            shared = TREE_BITS - (self.previous ^ start).bit_length()
            # Close the previous path first: an alias needs the IPv4 subtree done and numbered.
            self._close_below(shared + 1)
            first_new = shared + 1
        data = self.node_count + len(DATA_SECTION_SEPARATOR) + offset
        value = self.ipv4_root if offset == _ALIAS else data
        if start == 0 and prefix == TREE_BITS - 32:
            self.ipv4_root = value  # one block for all of IPv4: the aliases point at its record
        if self.path:
            # The previous block went left at the depth where they part; this one goes right.
            self.path[first_new - 1][1] = value if prefix == first_new else _PENDING
        for depth in range(first_new, prefix):
            child = value if depth == prefix - 1 else _PENDING
            goes_right = (start >> (TREE_BITS - 1 - depth)) & 1
            self.path.append([self.empty, child] if goes_right else [child, _PENDING])
        self.previous = start

    def finish(self) -> None:
        if not self.path:
            self.path.append([self.empty, _PENDING])  # no ranges: a root with nothing under it
        self._close_below(0)
        self.nodes.flush()
        if self.nodes.next_number != -1:
            written = self.node_count - self.nodes.next_number - 1
            raise AssertionError(f"counted {self.node_count} nodes but wrote {written}")

    def _close_below(self, depth: int) -> None:
        """Write the open nodes at ``depth`` and deeper, deepest first."""
        path, previous = self.path, self.previous
        while len(path) > depth:
            left, right = path.pop()
            number = self.nodes.add(
                self.empty if left == _PENDING else left, self.empty if right == _PENDING else right
            )
            at = len(path)
            if at == TREE_BITS - 32 and previous >> 32 == 0:
                self.ipv4_root = number  # the node of ::/96: where IPv4 lookups start
            if path:
                path[-1][(previous >> (TREE_BITS - at)) & 1] = number


def _node_packer(record_size: int) -> Any:
    if record_size == 24:
        return lambda left, right: left.to_bytes(3, "big") + right.to_bytes(3, "big")
    if record_size == 28:
        # The middle byte holds the top four bits of the left record, then those of the right.
        return lambda left, right: (
            (left & 0xFFFFFF).to_bytes(3, "big")
            + bytes([((left >> 24) << 4) | (right >> 24)])
            + (right & 0xFFFFFF).to_bytes(3, "big")
        )
    return lambda left, right: left.to_bytes(4, "big") + right.to_bytes(4, "big")


def _metadata_map(metadata: DatabaseMetadata, node_count: int, record_size: int) -> bytes:
    """The metadata map, each number in the exact type the spec names (libmaxminddb checks them)."""
    build_epoch = metadata.build_epoch if metadata.build_epoch is not None else int(time.time())
    fields: list[tuple[str, bytes]] = [
        ("binary_format_major_version", _unsigned(_UINT16, 2)),
        ("binary_format_minor_version", _unsigned(_UINT16, 0)),
        ("build_epoch", _unsigned(_UINT64, build_epoch)),
        ("database_type", _text(metadata.database_type)),
        (
            "description",
            control_bytes(_MAP, len(metadata.description))
            + b"".join(_text(key) + _text(text) for key, text in metadata.description.items()),
        ),
        ("ip_version", _unsigned(_UINT16, 6)),
        (
            "languages",
            control_bytes(_ARRAY, len(metadata.languages)) + b"".join(map(_text, metadata.languages)),
        ),
        ("node_count", _unsigned(_UINT32, node_count)),
        ("record_size", _unsigned(_UINT16, record_size)),
    ]
    return control_bytes(_MAP, len(fields)) + b"".join(_text(key) + value for key, value in fields)


def _unsigned(kind: int, value: int) -> bytes:
    size = (value.bit_length() + 7) // 8
    return control_bytes(kind, size) + value.to_bytes(size, "big")


def _text(text: str) -> bytes:
    raw = text.encode()
    return control_bytes(_STRING, len(raw)) + raw
