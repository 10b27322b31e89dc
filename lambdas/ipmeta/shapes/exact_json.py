"""JSON text in which every value keeps its exact value: the form of every answer that carries data.

- A ``Decimal`` (a DynamoDB Number that is not whole) is written as its own
  digits (``-27.4767``, ``9.999999747378752E-5``): a JSON number, never through
  a float, which keeps 17 significant digits of the 38 a Number may have.
- An ``int`` of any size is written whole (a uint128 has 39 digits).
- ``bytes`` are a base64 string (RFC 4648, with padding): JSON has no bytes.

Python's ``json`` cannot do the first: ``default`` must return something it
knows, and a float rounds while a string is no number. Nor can powertools'
response validation, which serializes with pydantic (a ``Decimal`` becomes a
string). The routes that answer data therefore write their body here.

The output is what ``json.dumps`` writes for the same plain values, ASCII
only, compact (``separators=(",", ":")``), or indented with ``indent``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

#: The C string encoder ``json.dumps`` uses (``ensure_ascii``): the same escapes.
_string: Final[Callable[[str], str]] = json.encoder.encode_basestring_ascii


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text, numbers exact, bytes in base64."""
    if indent is None:
        return _text(value)
    return _indented(value, " " * indent, "\n")


def plain_text(value: Any) -> str:
    """A value as the plain-text answer of one field: text as it is, bytes in base64, numbers exact."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return _decimal(value)
    return _text(value)


def _text(value: Any) -> str:
    # One lookup of the exact type: the common case of the hot path (``type(True)`` is not int).
    write = _WRITERS.get(type(value))
    return write(value) if write is not None else _text(_plain_type(value))


def _map(value: dict[Any, Any]) -> str:
    return "{" + ",".join([_key(key) + ":" + _text(inner) for key, inner in value.items()]) + "}"


def _array(value: list[Any] | tuple[Any, ...]) -> str:
    return "[" + ",".join([_text(inner) for inner in value]) + "]"


def _float(value: float) -> str:
    return json.dumps(value, allow_nan=False)


def _indented(value: Any, step: str, newline: str) -> str:
    inner = newline + step
    if type(value) is dict and value:
        pairs = [_key(key) + ": " + _indented(item, step, inner) for key, item in value.items()]
        return "{" + inner + ("," + inner).join(pairs) + newline + "}"
    if type(value) in (list, tuple) and value:
        items = [_indented(item, step, inner) for item in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return _text(value)


def _key(key: Any) -> str:
    return _string(key if type(key) is str else str(key))


def _decimal(value: Decimal) -> str:
    if not value.is_finite():
        raise ValueError(f"JSON has no {value}")
    # str() of a finite Decimal is a JSON number: "-27.4767", "1.5E-7", "1E+3", "0E-7".
    return str(value)


_WRITERS: Final[dict[type[Any], Callable[[Any], str]]] = {
    str: _string,
    int: int.__repr__,
    Decimal: _decimal,
    dict: _map,
    list: _array,
    tuple: _array,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _: "null",
    float: _float,
}


def _plain_type(value: Any) -> Any:
    """A subclass (an enum, a set of the store) as the plain type it stands for."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, bool):
        return bool(value)
    plain: type[Any]
    for plain in (str, int, float, dict, list):
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")
