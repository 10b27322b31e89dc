"""A MaxMind DB checked before any reader walks it: its metadata, and every node of its search tree.

``maxminddb`` trusts the tree. A record that points back at an earlier node
makes a loop: its C iterator then writes past a 16-byte address buffer (heap
corruption, the process aborts), and its pure-Python iterator, the one the
loader Lambda runs, recurses until ``RecursionError``. Neither can be caught
from the outside, so the loader walks the tree itself first, in bounded depth
and time, and hands the file to ``maxminddb`` only when the walk proves its
iterators will terminate within the address width:

- the metadata is decoded by ``maxminddb``'s own pure-Python decoder (which
  caps values, depth and payload as the spec recommends) and checked: a map,
  ``record_size`` 24, 28 or 32, ``ip_version`` 4 or 6, a tree that fits before it;
- every node is reached from the root exactly once, at a depth below the
  address width (128 or 32 bits). The one exception is the IPv4 subtree of an
  IPv6 tree (the node at ``::/96``), which aliases such as ``::ffff:0:0/96`` and
  ``2002::/16`` point back at: both iterators skip it when reached from outside
  ``::/96``, so the walk does too. Any other second arrival is a loop or a
  shared subtree, and either makes the iterators' work unbounded;
- every other record is the empty marker (``node_count``) or a pointer into the
  data section (not into the 16-byte separator, not past the metadata).

The walk is iterative (a stack of at most one pending node per level) and marks
nodes in a bitmap of ``node_count`` bits, which the file's size bounds: time and
memory are linear in the tree, never in what its records claim. The data
section is left to the readers, which bound each record's decoding (65,536
values, 512 levels, 2 MiB of strings and bytes: MaxMind's corpus of hostile
files is refused by both, see ``tests/hostile/test_source_files.py``).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from maxminddb.decoder import Decoder

from loader.errors import SourceError

METADATA_MARKER: Final = b"\xab\xcd\xefMaxMind.com"
#: The spec puts the metadata in the file's last 128 KiB.
METADATA_WINDOW: Final = 128 * 1024
DATA_SECTION_SEPARATOR_BYTES: Final = 16
RECORD_SIZES: Final = (24, 28, 32)
ADDRESS_BITS: Final = {4: 32, 6: 128}
#: The IPv4 subtree of an IPv6 tree sits at ``::/96``.
IPV4_SUBTREE_DEPTH: Final = 96

#: The metadata both readers need, and its type (the pure-Python reader takes every one as given).
METADATA_FIELDS: Final[Mapping[str, type]] = {
    "binary_format_major_version": int,
    "binary_format_minor_version": int,
    "build_epoch": int,
    "database_type": str,
    "description": dict,
    "ip_version": int,
    "languages": list,
    "node_count": int,
    "record_size": int,
}

#: A node's two records: ``(left, right)``.
NodeReader = Callable[[int], tuple[int, int]]


@dataclass(frozen=True)
class TreeShape:
    """What the metadata says of the tree, checked against the file."""

    node_count: int
    record_size: int
    ip_version: int
    #: Where the data section ends: the metadata marker's offset.
    data_end: int

    @property
    def tree_bytes(self) -> int:
        return self.node_count * self.record_size // 4

    @property
    def data_bytes(self) -> int:
        return self.data_end - self.tree_bytes - DATA_SECTION_SEPARATOR_BYTES


class DamagedDatabase(ValueError):
    """Why a file is not a MaxMind DB a reader may walk."""


def check_database(path: Path, name: str) -> TreeShape:
    """The file's tree shape, once its metadata and every node passed; ``SourceError`` otherwise."""
    try:
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            shape = tree_shape(buffer)
            walk_tree(buffer, shape)
    except (DamagedDatabase, OSError, ValueError) as error:
        # mmap refuses an empty file with ValueError; a damaged one says why in DamagedDatabase.
        raise SourceError(f"{name}: not a MaxMind DB file, or a damaged one: {error}") from None
    return shape


def tree_shape(buffer: mmap.mmap) -> TreeShape:
    """The metadata's tree fields, checked: a bad marker, record size or node count is refused here."""
    size = len(buffer)
    marker = buffer.rfind(METADATA_MARKER, max(0, size - METADATA_WINDOW))
    if marker < 0:
        raise DamagedDatabase("no metadata marker in its last 128 KiB")
    metadata = _decoded_metadata(buffer, marker + len(METADATA_MARKER))
    for field, kind in METADATA_FIELDS.items():
        if type(metadata.get(field)) is not kind:
            raise DamagedDatabase(
                f"the metadata's {field} is {_shown(metadata.get(field))}, not a {kind.__name__}"
            )
    node_count, record_size, ip_version = (
        metadata[key] for key in ("node_count", "record_size", "ip_version")
    )
    if record_size not in RECORD_SIZES:
        raise DamagedDatabase(f"record_size {record_size}; the format has 24, 28 or 32")
    if ip_version not in ADDRESS_BITS:
        raise DamagedDatabase(f"ip_version {ip_version}; the format has 4 or 6")
    if node_count < 0:
        raise DamagedDatabase(f"node_count {node_count} is not a count")
    shape = TreeShape(node_count, record_size, ip_version, marker)
    if shape.data_bytes < 0:
        raise DamagedDatabase(
            f"node_count {node_count:,} needs a {shape.tree_bytes:,}-byte search tree, "
            f"but the metadata starts at byte {marker:,}"
        )
    return shape


def _shown(value: Any) -> str:
    """A metadata value in a message: its start only, as the file may hold anything there."""
    return "missing" if value is None else repr(value)[:40]


def _decoded_metadata(buffer: mmap.mmap, start: int) -> Mapping[str, Any]:
    try:
        metadata, _ = Decoder(buffer, start).decode(start)
    except Exception as error:
        # Whatever the pure-Python decoder raises on these bytes, they are no metadata map.
        raise DamagedDatabase(f"unreadable metadata ({error})") from None
    if not isinstance(metadata, dict):
        raise DamagedDatabase(f"the metadata is a {type(metadata).__name__}, not a map")
    return metadata


def walk_tree(buffer: mmap.mmap, shape: TreeShape) -> None:
    """Reach every node once, in bounded depth, as the readers' iterators will; else ``DamagedDatabase``.

    The hot loop of a MaxMind DB load's first seconds, so it is flat: a stack entry is one
    integer (``node << 9 | depth << 1 | path all zeros so far``), left and right are spelled out.
    """
    node_count = shape.node_count
    if node_count == 0:
        return
    read = node_reader(buffer, shape.record_size)
    last_depth = ADDRESS_BITS[shape.ip_version] - 1
    alias = _ipv4_subtree(read, node_count) if shape.ip_version == 6 else -1
    # A record past the empty marker points into the data section, after the separator.
    lowest_data = node_count + DATA_SECTION_SEPARATOR_BYTES
    past_data = lowest_data + shape.data_bytes
    seen = bytearray((node_count >> 3) + 1)
    seen[0] = 1
    stack = [1]  # the root: node 0, depth 0, inside ::/96
    push, pop = stack.append, stack.pop
    while stack:
        entry = pop()
        node, depth, zeros = entry >> 9, (entry >> 1) & 0xFF, entry & 1
        left, right = read(node)
        below = (depth + 1) << 1
        # Right pushed first, so the left subtree is walked first, as the readers walk it. A path
        # stays inside ::/96 (zeros) while its first 96 bits are 0: aliases of the IPv4 subtree
        # met outside it are skipped by both readers, and so by the walk.
        inside = zeros if depth >= IPV4_SUBTREE_DEPTH else 0
        if right < node_count:
            if right != alias or inside:
                if seen[right >> 3] & (1 << (right & 7)) or depth >= last_depth:
                    raise DamagedDatabase(_bad_arrival(node, right, depth, shape.ip_version))
                seen[right >> 3] |= 1 << (right & 7)
                push((right << 9) | below | inside)
        elif right != node_count and not lowest_data <= right < past_data:
            raise DamagedDatabase(_bad_record(node, right))
        if left < node_count:
            if left != alias or zeros:
                if seen[left >> 3] & (1 << (left & 7)) or depth >= last_depth:
                    raise DamagedDatabase(_bad_arrival(node, left, depth, shape.ip_version))
                seen[left >> 3] |= 1 << (left & 7)
                push((left << 9) | below | zeros)
        elif left != node_count and not lowest_data <= left < past_data:
            raise DamagedDatabase(_bad_record(node, left))


def _bad_arrival(node: int, record: int, depth: int, ip_version: int) -> str:
    bits = ADDRESS_BITS[ip_version]
    if depth >= bits - 1:
        return f"node {node} at bit {depth} points to node {record}, past the {bits}-bit address"
    return (
        f"node {node} points to node {record}, which was reached before: the search tree loops back "
        "or shares a subtree"
    )


def _bad_record(node: int, record: int) -> str:
    return (
        f"node {node} holds record {record}: neither a node, the empty marker nor a place in the data section"
    )


def _ipv4_subtree(read: NodeReader, node_count: int) -> int:
    """The node at ``::/96`` (what IPv4 lookups start from), or -1 when that is no node."""
    node = 0
    for _ in range(IPV4_SUBTREE_DEPTH):
        if node >= node_count:
            return -1
        node = read(node)[0]
    return node if node < node_count else -1


def node_reader(buffer: mmap.mmap, record_size: int) -> NodeReader:
    """A node's two records, by the format's layout of each record size (one slice per node)."""
    if record_size == 24:

        def read24(node: int) -> tuple[int, int]:
            value = int.from_bytes(buffer[node * 6 : node * 6 + 6], "big")
            return value >> 24, value & 0xFFFFFF

        return read24
    if record_size == 28:

        def read28(node: int) -> tuple[int, int]:
            # The middle byte's high nibble tops the left record, its low nibble the right.
            value = int.from_bytes(buffer[node * 7 : node * 7 + 7], "big")
            middle = (value >> 24) & 0xFF
            return ((middle >> 4) << 24) | (value >> 32), ((middle & 0x0F) << 24) | (value & 0xFFFFFF)

        return read28

    def read32(node: int) -> tuple[int, int]:
        value = int.from_bytes(buffer[node * 8 : node * 8 + 8], "big")
        return value >> 32, value & 0xFFFFFFFF

    return read32
