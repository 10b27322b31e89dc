"""Address text to integer keys and back, a whole chunk at a time, as the API parses and writes one.

**Parsing** (``parse_addresses``) gives what ``ipmeta.schema.ips.parse_ip``
gives for each row; the usual forms take faster roads to the same answer:

- a dotted quad without leading zeros is read by Arrow kernels over the whole chunk;
- IPv6 text of hex digits and colons only (no dotted tail, no zone) is read by
  ``inet_pton``, which accepts exactly such text where ``ipaddress`` does, into
  one buffer of 16-byte values (no per-row numpy write); an IPv4-mapped result
  folds to IPv4 as ``parse_ip`` folds it.

Every other row (a dotted IPv6 tail, a zone, whitespace, anything invalid)
goes through ``parse_ip`` itself, which decides and words the refusal. (A numpy
parser over a fixed-width byte matrix was measured too: slower than these
kernels on both families, so it is not here.)

**Writing** (``v4_texts``, ``v6_texts``) gives ``format_address``'s text:
dotted quads and RFC 5952 for IPv6 (lowercase, no leading zeros, the first
longest run of two or more zero groups as ``::``), both joined by an Arrow
kernel from texts taken from tables (an IPv4 address's two halves, an IPv6
address's eight groups: 65,536 texts each). IPv6 values in ``::/80``
(where Python writes some with a dotted tail) are written by
``format_address`` itself.
"""

from __future__ import annotations

import functools
import socket
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import format_address, parse_ip

#: numpy's form of an IPv6 value: 16 bytes, big-endian, compared as bytes (as the numbers compare).
V6_DTYPE: Final = np.dtype("S16")
#: Error codes, as the API names them.
INVALID: Final = InvalidIpAddress.code
#: How many invalid rows a report quotes.
QUOTED_ERRORS: Final = 5
_OCTET: Final = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
DOTTED_QUAD: Final = rf"^{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}$"
HEX_COLONS: Final = r"^[0-9A-Fa-f:]{2,39}$"


@dataclass
class ParsedAddresses:
    """One chunk's addresses: ``family`` 0 where the row is blank or invalid."""

    family: npt.NDArray[np.int8]
    v4: npt.NDArray[np.int64]
    v6: npt.NDArray[Any]
    #: (row in chunk, message) of the first invalid rows
    problems: list[tuple[int, str]] = field(default_factory=list)

    @property
    def invalid(self) -> npt.NDArray[np.bool_]:
        invalid: npt.NDArray[np.bool_] = self.family == 0
        return invalid


def parse_addresses(column: pa.Array | pa.ChunkedArray) -> ParsedAddresses:
    text = _as_text(column)
    rows = len(text)
    parsed = ParsedAddresses(
        np.zeros(rows, dtype=np.int8), np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=V6_DTYPE)
    )
    quad = pc.fill_null(pc.match_substring_regex(text, DOTTED_QUAD), False).to_numpy(zero_copy_only=False)
    if quad.any():
        octets = pc.split_pattern(text.filter(pa.array(quad)), ".")
        numbers = pc.cast(pc.list_flatten(octets), pa.int64()).to_numpy().reshape(-1, 4)
        parsed.v4[quad] = (numbers[:, 0] << 24) | (numbers[:, 1] << 16) | (numbers[:, 2] << 8) | numbers[:, 3]
        parsed.family[quad] = 4
    rest = np.flatnonzero(~quad)
    others = rest
    if len(rest):
        rest_text = text.take(pa.array(rest))
        hexy = pc.fill_null(pc.match_substring_regex(rest_text, HEX_COLONS), False).to_numpy(
            zero_copy_only=False
        )
        taken, packed = _packed_v6(rest_text.filter(pa.array(hexy)).to_pylist())
        _store_v6(parsed, rest[hexy][taken], packed)
        others = np.sort(np.concatenate([rest[~hexy], rest[hexy][~taken]]))
    for at, value in zip(others.tolist(), text.take(pa.array(others)).to_pylist(), strict=True):
        _parse_one(parsed, at, value)
    return parsed


#: ``inet_pton`` of IPv6 text, called by ``map`` without a Python frame per value.
_PTON_V6: Final = functools.partial(socket.inet_pton, socket.AF_INET6)


def _packed_v6(texts: list[str]) -> tuple[npt.NDArray[np.bool_], bytes]:
    """Which ``texts`` ``inet_pton`` reads, and their 16-byte values, joined. All of them on the
    usual road (one ``map``, no Python frame per value: a third of the time of a loop); where one
    is refused, each one on its own (``parse_ip`` words the refusal)."""
    try:
        return np.ones(len(texts), dtype=bool), b"".join(map(_PTON_V6, texts))
    except OSError:
        pass
    packed: list[bytes | None] = []
    for text in texts:
        try:
            packed.append(_PTON_V6(text))
        except OSError:
            packed.append(None)
    return np.array([value is not None for value in packed], dtype=bool), b"".join(filter(None, packed))


def _store_v6(parsed: ParsedAddresses, rows: npt.NDArray[np.intp], packed: bytes) -> None:
    values = np.frombuffer(packed, dtype=V6_DTYPE)
    high, low = v6_halves(values)
    mapped = (high == 0) & (low >> np.uint64(32) == 0xFFFF)  # ::ffff:0:0/96
    parsed.family[rows[mapped]] = 4
    parsed.v4[rows[mapped]] = (low[mapped] & np.uint64(0xFFFFFFFF)).astype(np.int64)
    parsed.family[rows[~mapped]] = 6
    parsed.v6[rows[~mapped]] = values[~mapped]


def v6_halves(values: npt.NDArray[Any]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """16-byte big-endian values (``V6_DTYPE``) as their upper and lower 64 bits, native
    integers: numpy compares those at once, and 16-byte values byte by byte."""
    halves = np.ascontiguousarray(values, dtype=V6_DTYPE).view(">u8").reshape(-1, 2)
    return halves[:, 0].astype(np.uint64), halves[:, 1].astype(np.uint64)


def _parse_one(parsed: ParsedAddresses, at: int, value: str | None) -> None:
    if not value:
        _problem(parsed, at, "the address is blank")
        return
    try:
        address = parse_ip(value)
    except InvalidIpAddress as error:
        _problem(parsed, at, str(error))
        return
    parsed.family[at] = address.family
    if address.family == 4:
        parsed.v4[at] = address.value
    else:
        parsed.v6[at] = address.value.to_bytes(16, "big")


def _problem(parsed: ParsedAddresses, at: int, message: str) -> None:
    if len(parsed.problems) < QUOTED_ERRORS:
        parsed.problems.append((at, message))


def _as_text(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if not pa.types.is_string(array.type):
        array = pc.cast(array, pa.string())
    return array


# -- writing -------------------------------------------------------------------------------------


def v4_texts(values: npt.NDArray[np.int64]) -> pa.Array:
    """Dotted quads, as ``format_address`` writes them: each half's text taken from a table of
    the 65,536 ``a.b`` texts, and the halves joined."""
    halves = _V4_HALVES()
    return pc.binary_join_element_wise(
        halves.take(pa.array(values >> 16)), halves.take(pa.array(values & 0xFFFF)), "."
    )


def v6_texts(values: npt.NDArray[Any]) -> pa.Array:
    """RFC 5952 text of 16-byte values, as ``format_address`` writes it.

    Each group's text (lowercase hex, no leading zeros) is taken from a table of the 65,536, and
    the eight are joined with ``:``; the first longest run of two or more zero groups is left
    out (nulls, which the join skips), its first group standing for ``::`` (an empty text between
    two separators; ``:`` or ``::`` where the run starts or ends the address).
    """
    count = len(values)
    hextets = np.ascontiguousarray(values, dtype=V6_DTYPE).view(">u2").reshape(count, 8)
    zero = hextets == 0
    run = np.zeros((count, 9), dtype=np.int8)  # the zero groups from each group on
    for at in range(7, -1, -1):
        run[:, at] = np.where(zero[:, at], run[:, at + 1] + 1, 0)
    longest = run[:, :8].max(axis=1)
    squeezed = longest >= 2
    gap = np.where(squeezed, np.argmax(run[:, :8], axis=1), 8)  # the first longest run
    gap_end = np.where(squeezed, gap + longest, 8)
    marker = _GAP_TEXT + (gap == 0).astype(np.int32) + (gap_end == 8)
    table = _V6_GROUPS()
    groups = []
    for at in range(8):
        index = hextets[:, at].astype(np.int32)
        starts_gap = gap == at
        index[starts_gap] = marker[starts_gap]
        groups.append(table.take(pa.array(index, mask=(gap < at) & (at < gap_end))))
    texts = pc.binary_join_element_wise(*groups, ":", null_handling="skip")
    low = (hextets[:, :5] == 0).all(axis=1)  # ::/80, where Python may write a dotted tail
    if not low.any():
        return texts
    listed = texts.to_pylist()
    written: dict[bytes, str] = {}
    for at in np.flatnonzero(low).tolist():
        value = bytes(values[at])
        if value not in written:
            written[value] = format_address(6, int.from_bytes(value.ljust(16, b"\0"), "big"))
        listed[at] = written[value]
    return pa.array(listed, type=pa.string())


#: In ``_V6_GROUPS``, past the 65,536 groups: the texts of a zero run's first group, inside the
#: address, at one end, at both.
_GAP_TEXT: Final = 1 << 16


@functools.cache
def _V4_HALVES() -> pa.Array:  # noqa: N802 - a table, built once
    return pa.array([f"{high}.{low}" for high in range(256) for low in range(256)], pa.string())


@functools.cache
def _V6_GROUPS() -> pa.Array:  # noqa: N802 - a table, built once
    return pa.array([f"{group:x}" for group in range(1 << 16)] + ["", ":", "::"], pa.string())
