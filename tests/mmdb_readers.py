"""Both `maxminddb` readers and their answers in one form: the loader runs the C one, the Lambda the other."""

from __future__ import annotations

from typing import Any

import maxminddb

READERS = {"C extension": maxminddb.open_database, "pure Python": maxminddb.Reader}


def as_read(value: Any) -> Any:
    """A reader's answer with the C extension's ``bytearray`` as ``bytes`` (the pure-Python one's)."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {key: as_read(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [as_read(inner) for inner in value]
    return value
