"""A column of address text parsed as the API parses one address (``ipmeta.schema.ips.parse_ip``).

The usual forms take faster roads to the same answer ``parse_ip`` gives:

- a dotted quad without leading zeros is read by Arrow kernels over the whole chunk;
- IPv6 text of hex digits and colons only (no dotted tail, no zone) is read by
  ``inet_pton``, which accepts exactly such text where ``ipaddress`` does, and an
  IPv4-mapped result folds to IPv4 as ``parse_ip`` folds it.

Every other text (a dotted IPv6 tail, anything ``inet_pton`` refuses, anything
invalid) goes through ``parse_ip`` itself, which decides and words the refusal.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ipmeta.schema.errors import InvalidIpAddress
from ipmeta.schema.ips import parse_ip
from loader.enrich.snapshot import V6_DTYPE

_OCTET: Final = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
DOTTED_QUAD: Final = rf"^{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}$"
HEX_COLONS: Final = r"^[0-9A-Fa-f:]{2,39}$"
#: ``::ffff:0:0/96``'s first twelve bytes: an IPv4-mapped address.
_MAPPED: Final = bytes(10) + b"\xff\xff"
#: Error codes, as the API names them.
INVALID: Final = InvalidIpAddress.code
#: How many invalid rows a report quotes.
QUOTED_ERRORS: Final = 5


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
    family = np.zeros(rows, dtype=np.int8)
    v4 = np.zeros(rows, dtype=np.int64)
    v6 = np.zeros(rows, dtype=V6_DTYPE)
    quad = pc.fill_null(pc.match_substring_regex(text, DOTTED_QUAD), False).to_numpy(zero_copy_only=False)
    if quad.any():
        octets = pc.split_pattern(text.filter(pa.array(quad)), ".")
        numbers = pc.cast(pc.list_flatten(octets), pa.int64()).to_numpy().reshape(-1, 4)
        v4[quad] = (numbers[:, 0] << 24) | (numbers[:, 1] << 16) | (numbers[:, 2] << 8) | numbers[:, 3]
        family[quad] = 4
    parsed = ParsedAddresses(family, v4, v6)
    rest = np.flatnonzero(~quad)
    hexy = np.zeros(rows, dtype=bool)
    if len(rest):
        rest_text = text.take(pa.array(rest))
        hexy[rest] = pc.fill_null(pc.match_substring_regex(rest_text, HEX_COLONS), False).to_numpy(
            zero_copy_only=False
        )
    _parse_v6(parsed, np.flatnonzero(hexy), text)
    others = np.flatnonzero(~quad & ~hexy)
    for at, value in zip(others.tolist(), text.take(pa.array(others)).to_pylist(), strict=True):
        _parse_one(parsed, at, value)
    return parsed


def _parse_v6(parsed: ParsedAddresses, rows: npt.NDArray[np.intp], text: pa.Array) -> None:
    for at, value in zip(rows.tolist(), text.take(pa.array(rows)).to_pylist(), strict=True):
        try:
            packed = socket.inet_pton(socket.AF_INET6, value)
        except OSError:
            _parse_one(parsed, at, value)  # parse_ip words the refusal
            continue
        if packed[:12] == _MAPPED:
            parsed.family[at] = 4
            parsed.v4[at] = int.from_bytes(packed[12:], "big")
        else:
            parsed.family[at] = 6
            parsed.v6[at] = packed


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
