"""What each metadata column is stored as: a DynamoDB Number, a String, or the value's own (mmdb) type.

Rules, in the order they apply:

- a declared type wins: ``int``, ``float`` (aliases ``number``, ``decimal``) or
  ``str`` (alias ``string``), from ``--types lat=float,postcode=str``;
- values read from a MaxMind DB keep their own type (``native``): integers of
  any size (uint128 included), doubles and floats (stored as
  ``Decimal(repr(value))``), booleans, strings, bytes and arrays;
- a text column is a Number when every non-empty value is a decimal number,
  plain or in exponent notation: ``13335``, ``-27.4767``, ``0.5``, ``1E+3``,
  ``9.999999747378752e-05`` (how Python writes a float); a leading zero
  (``007``) or a leading ``+`` make it a String, as does any other text. A
  column of numbers and words is *mixed*: a String, and ``ColumnEvidence.mixed``
  names the first row that made it one.

A Number is stored exactly: ``Decimal`` from the text, never through a float.
DynamoDB cannot hold NaN, Infinity, more than 38 significant digits, or a
magnitude outside 1E-130..9.99…E+125. A declared number column rejects such a
row where it is read (``number_problem``); otherwise the value is *evidence*,
and ``ColumnEvidence.problems`` names the first one, with its line, when the
column would be a Number (the load is then rejected). A text column that
merely contains the word ``NaN`` stays a String.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Final

from ipmeta.shapes import exact_json

#: Stored column types: DynamoDB Number, String, or the value's own type (mmdb).
NUMBER: Final = "N"
STRING: Final = "S"
NATIVE: Final = "native"
#: Declared types as ``--types`` spells them, and what each is stored as.
DECLARED_TYPES: Final = {
    "int": NUMBER,
    "float": NUMBER,
    "number": NUMBER,
    "decimal": NUMBER,
    "str": STRING,
    "string": STRING,
}
#: Declared types whose values must be whole numbers.
INTEGER_TYPES: Final = frozenset({"int"})

#: DynamoDB's Number limits.
MAX_SIGNIFICANT_DIGITS: Final = 38
MIN_ADJUSTED_EXPONENT: Final = -130
MAX_ADJUSTED_EXPONENT: Final = 125
_LIMITS: Final = "38 significant digits, magnitude 1E-130 to 9.99E+125"
#: A plain decimal number: no leading zeros (but ``0`` and ``0.x``), no exponent, no ``+``.
PLAIN_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
#: A number as a text column may hold it: a plain decimal, or one with an exponent (``1E+3``).
NUMBER_TEXT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: What a number's text starts with: anything else is text, without a regular expression.
_NUMBER_STARTS: Final = frozenset("-0123456789")
#: How much of a value a message quotes.
_QUOTED_CHARACTERS: Final = 40
_INTEGER_TEXT: Final = re.compile(r"-?[0-9]+")
_NOT_A_NUMBER: Final = frozenset(
    {"nan", "-nan", "+nan", "snan", "-snan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"}
)
#: Exact arithmetic for normalizing: no rounding ever.
_EXACT: Final = Context(prec=1000)
#: Integers below this have no more digits than ``_EXACT`` keeps: ``normalize`` leaves them whole.
_EXACT_DIGITS: Final = 10**1000
#: Magnitudes of doubles that always fit.
_SAFE_MAGNITUDE: Final = (1e-129, 9e125)
#: A plain number this short always fits: at most 38 digits and 1E-36 ≤ |x| < 1E38.
_ALWAYS_FITS: Final = 38
#: Staged JSON has no bytes: a byte string travels as ``{"$bytes": "<base64>"}``. No column
#: value is a map (a reader flattens them), so the one-key map cannot be anything else.
BYTES_KEY: Final = "$bytes"


def staged_bytes(value: bytes | bytearray) -> dict[str, str]:
    """A byte string as staged JSON carries it (``BYTES_KEY``)."""
    return {BYTES_KEY: base64.b64encode(value).decode("ascii")}


def stored_type_of(declared: str) -> str:
    """``N`` or ``S`` for a declared type (``int``, ``float``, ``str`` and their aliases)."""
    kind = DECLARED_TYPES.get(declared.strip().lower())
    if kind is None:
        raise ValueError(f"unknown type {declared!r} (use int, float or str)")
    return kind


def parse_declared_types(text: str) -> dict[str, str]:
    """``--types lat=float,postcode=str``: column -> declared type, checked."""
    declared: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        column, equals, kind = entry.partition("=")
        if not equals or not column.strip() or not kind.strip():
            raise ValueError(f"--types expects column=int|float|str,..., got {entry!r}")
        stored_type_of(kind)
        declared[column.strip()] = kind.strip().lower()
    return declared


def decimal_problem(number: Decimal) -> str | None:
    """Why DynamoDB cannot hold ``number``, or None."""
    if not number.is_finite():
        return "DynamoDB numbers cannot be NaN or Infinity"
    if not number:
        return None
    normal = number.normalize(_EXACT)
    if len(normal.as_tuple().digits) > MAX_SIGNIFICANT_DIGITS:
        return f"a DynamoDB number holds at most {MAX_SIGNIFICANT_DIGITS} significant digits"
    if not MIN_ADJUSTED_EXPONENT <= normal.adjusted() <= MAX_ADJUSTED_EXPONENT:
        return f"a DynamoDB number lies within {_LIMITS}"
    return None


def number_problem(text: str, declared: str) -> str | None:
    """Why ``text`` is not a number of the declared type DynamoDB can hold, or None (empty is fine)."""
    if not text:
        return None
    if declared in INTEGER_TYPES:
        if not _INTEGER_TEXT.fullmatch(text):
            return "not a whole number"
    elif text.strip().lower() in _NOT_A_NUMBER:
        return "DynamoDB numbers cannot be NaN or Infinity"
    try:
        number = Decimal(text)
    except InvalidOperation:
        return "not a number"
    return decimal_problem(number)


def native_problem(value: Any) -> str | None:
    """Why DynamoDB cannot hold a value read from a MaxMind DB, or None.

    Every integer of the format fits: one past 38 digits (a uint128) is kept
    exactly in another form by the data access (``ipmeta.store.dynamodb``).
    """
    if isinstance(value, float):
        return _double_problem(value)
    if isinstance(value, list):
        return next((problem for problem in map(native_problem, value) if problem), None)
    return None


def _double_problem(value: float) -> str | None:
    if not math.isfinite(value):
        return "DynamoDB numbers cannot be NaN or Infinity"
    # A double has at most 17 digits, so only its magnitude can fail; exactly checked near the edges.
    if value == 0 or _SAFE_MAGNITUDE[0] < abs(value) < _SAFE_MAGNITUDE[1]:
        return None
    return decimal_problem(Decimal(repr(value)))


@dataclass(slots=True)
class _Seen:
    """What one column held, as far as its type is concerned (bounded: first sightings only)."""

    numbers: bool = False  #: a decimal number
    native: bool = False  #: a value with its own type (mmdb)
    text: str | None = None  #: origin of the first other text
    unholdable: tuple[str, str, str] | None = None  #: (origin, value, reason) of the first bad number
    number_at: str | None = None  #: origin of the first number
    text_value: str | None = None  #: the first other text, quoted (at most 40 characters)

    def to_json(self) -> dict[str, Any]:
        return {
            "numbers": self.numbers,
            "native": self.native,
            "text": self.text,
            "unholdable": list(self.unholdable) if self.unholdable else None,
            "number_at": self.number_at,
            "text_value": self.text_value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Seen:
        unholdable = data.get("unholdable")
        return cls(
            numbers=bool(data.get("numbers")),
            native=bool(data.get("native")),
            text=data.get("text"),
            unholdable=(str(unholdable[0]), str(unholdable[1]), str(unholdable[2])) if unholdable else None,
            number_at=data.get("number_at"),
            text_value=data.get("text_value"),
        )

    def merge(self, other: _Seen) -> None:
        """``other`` saw later rows (the next file, or the next part of one): first sightings stay."""
        self.numbers = self.numbers or other.numbers
        self.native = self.native or other.native
        if self.text is None:
            self.text, self.text_value = other.text, other.text_value
        self.number_at = self.number_at or other.number_at
        self.unholdable = self.unholdable or other.unholdable


class NativeValues(dict[str, Any]):
    """The values of a row read from a MaxMind DB: they keep their own types, strings included.

    A plain ``dict`` of text is inferred (``"12"`` may become a Number); these are not.
    """

    __slots__ = ()


class ColumnEvidence:
    """What each column held across rows, files and tasks; decides each column's stored type."""

    def __init__(self) -> None:
        self.columns: list[str] = []
        self._seen: dict[str, _Seen] = {}

    def observe(self, values: Mapping[str, Any], origin: str) -> None:
        if not self.columns:
            self.columns = list(values)
        native = isinstance(values, NativeValues)
        for column, value in values.items():
            seen = self._seen.get(column)
            if seen is None:
                seen = self._seen[column] = _Seen()
            if native:
                seen.native = True  # even when empty: the column keeps the database's types
            if value is None or value == "":
                continue
            if native or not isinstance(value, str):
                _observe_native(seen, value, origin)
            elif seen.text is None:
                _observe_text(seen, value, origin)
            elif not seen.numbers and value[0] in _NUMBER_STARTS and NUMBER_TEXT.fullmatch(value):
                # A column with text is a String whatever else it holds: past its first text,
                # only a first number is looked for (whether the column is mixed), cheaply.
                seen.numbers, seen.number_at = True, origin

    def merge(self, other: ColumnEvidence) -> None:
        self.columns = self.columns or list(other.columns)
        for column, seen in other._seen.items():
            self._seen.setdefault(column, _Seen()).merge(seen)

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "seen": {name: seen.to_json() for name, seen in self._seen.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ColumnEvidence:
        evidence = cls()
        evidence.columns = list(data.get("columns", []))
        evidence._seen = {name: _Seen.from_json(seen) for name, seen in (data.get("seen") or {}).items()}
        return evidence

    def column_types(self, declared: Mapping[str, str]) -> dict[str, str]:
        """Column -> ``N``, ``S`` or ``native``; declared types win."""
        return {column: self._type_of(column, declared) for column in self.columns}

    def problems(self, declared: Mapping[str, str]) -> list[str]:
        """One message per column whose values DynamoDB cannot hold as the type it would get."""
        messages = []
        for column in self.columns:
            seen = self._seen.get(column)
            if seen is None or seen.unholdable is None or self._type_of(column, declared) == STRING:
                continue
            origin, value, reason = seen.unholdable
            if seen.native:
                messages.append(f"{origin}: column {column!r} holds {value}: {reason}")
            else:
                messages.append(
                    f"{origin}: column {column!r} holds numbers, but also {value!r}: {reason}; "
                    f"fix the row, or load the column as text with --types {column}=str"
                )
        return messages

    def mixed(self, declared: Mapping[str, str]) -> dict[str, str]:
        """Column -> why it is text though it holds numbers: the first row of text that decided it."""
        mixed = {}
        for column in self.columns:
            seen = self._seen.get(column)
            if column in declared or seen is None or seen.native or not (seen.numbers and seen.text):
                continue
            mixed[column] = (
                f"{seen.text}: column {column!r} holds numbers (the first at {seen.number_at}) and text "
                f"({seen.text_value}): stored as text; declare --types {column}=str to keep it so, "
                "or fix the row"
            )
        return mixed

    def _type_of(self, column: str, declared: Mapping[str, str]) -> str:
        if column in declared:
            return stored_type_of(declared[column])
        seen = self._seen.get(column)
        if seen is None:
            return STRING
        if seen.native:
            return NATIVE
        if seen.numbers and seen.text is None:
            return NUMBER
        return STRING


def _observe_text(seen: _Seen, text: str, origin: str) -> None:
    if text[0] in _NUMBER_STARTS and NUMBER_TEXT.fullmatch(text):
        if not seen.numbers:
            seen.numbers, seen.number_at = True, origin
        # A short plain number always fits; an exponent may not (1e999).
        if seen.unholdable is None and (len(text) > _ALWAYS_FITS or not PLAIN_NUMBER.fullmatch(text)):
            problem = decimal_problem(Decimal(text))
            if problem:
                seen.unholdable = (origin, text, problem)
    elif text.strip().lower() in _NOT_A_NUMBER:
        if seen.unholdable is None:
            seen.unholdable = (origin, text, "DynamoDB numbers cannot be NaN or Infinity")
    else:
        seen.text, seen.text_value = origin, repr(text[:_QUOTED_CHARACTERS])


def _observe_native(seen: _Seen, value: Any, origin: str) -> None:
    seen.native = True
    if seen.unholdable is None and not isinstance(value, str | bool):
        problem = native_problem(value)
        if problem:
            seen.unholdable = (origin, repr(value), problem)


def typed_value(value: Any, column_type: str) -> Any:
    """What is stored: int or exact Decimal for a Number, text for a String, the own type for native.

    An empty cell of a Number column is None, so a column keeps one type.
    """
    if value is None:
        return None
    if type(value) is dict and BYTES_KEY in value:
        value = base64.b64decode(value[BYTES_KEY])
    if column_type == NUMBER:
        return _number(value)
    if column_type == STRING:
        return value if isinstance(value, str) else _as_text(value)
    return _native(value)


def stored_data(columns: Sequence[str], values: Sequence[Any], types: Sequence[str]) -> dict[str, Any]:
    """A row's ``data`` as stored: each value typed; a field a MaxMind DB record lacks is left out.

    The format has no null, so a lookup answers exactly as the ``maxminddb``
    reader does; an empty cell of a text column is kept (``""``, or None in a
    Number column), so every row of a CSV has the same fields.
    """
    data: dict[str, Any] = {}
    for column, value, kind in zip(columns, values, types, strict=True):
        if value is None and kind == NATIVE:
            continue
        data[column] = typed_value(value, kind)
    return data


def _number(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if _INTEGER_TEXT.fullmatch(text) and len(text.lstrip("-")) <= MAX_SIGNIFICANT_DIGITS:
            return int(text)
        number = Decimal(text)
        # More digits than DynamoDB keeps, but only trailing zeros: drop them (exactly).
        return number if len(number.as_tuple().digits) <= MAX_SIGNIFICANT_DIGITS else number.normalize(_EXACT)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, bool):
        return int(value)
    return value


def _native(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, list):
        return [_native(inner) for inner in value]
    if isinstance(value, dict):
        if BYTES_KEY in value:
            return base64.b64decode(value[BYTES_KEY])
        return {key: _native(inner) for key, inner in value.items()}
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, list | dict):
        return exact_json.dumps(_native(value))
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def stored_bytes(value: Any) -> int:
    """What a stored value counts toward a DynamoDB item's size (DynamoDB's published rules).

    Strings are their UTF-8 bytes and binary its bytes; a Number about one byte
    per two significant digits, plus one; a boolean or null one byte; a list or
    map 3 bytes, plus one per element and its names.
    """
    if isinstance(value, dict):
        return 3 + sum(len(str(key).encode()) + stored_bytes(inner) + 1 for key, inner in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(stored_bytes(inner) + 1 for inner in value)
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return _number_bytes(value)
    if isinstance(value, bytes | bytearray):
        return len(value)
    return 1 if isinstance(value, bool) or value is None else len(str(value).encode())


def _number_bytes(value: int | Decimal) -> int:
    if type(value) is int and -_EXACT_DIGITS < value < _EXACT_DIGITS:
        # An integer's significant digits are its decimal digits without the trailing zeros: what
        # ``normalize`` keeps, read off its text at a fraction of the cost (a load sizes every item).
        digits = len(str(abs(value)).rstrip("0")) if value else 1
    else:
        digits = len(Decimal(value).normalize(_EXACT).as_tuple().digits) if value else 1
    if isinstance(value, int) and digits > MAX_SIGNIFICANT_DIGITS:
        return len(str(value))  # the store keeps it as a one-element String Set (ipmeta.store.dynamodb)
    return (digits + 1) // 2 + 1
