"""The rule that makes one record of several datasets' answers for an address, written once.

- **Data:** each field comes from the first dataset, in precedence order, that
  holds the address and has the field (``merged_field``).
- **Range:** where every dataset that holds the address agrees: the latest
  start and the earliest end of their ranges (``span``).

The rule is written over ``Choices``: how to pick between two values where a
condition holds, and how to compare two bounds. ``ONE`` is one address with
Python values (``CombinedResult``, which every API answer goes through);
``loader.enrich.merge`` gives the same functions arrays, one row per address of
a chunk, so a file's rows and the API's answers come from the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

Condition = TypeVar("Condition")
Value = TypeVar("Value")


class Choices(Protocol, Generic[Condition, Value]):
    def pick(self, where: Condition, value: Value, otherwise: Value) -> Value:
        """``value`` where ``where`` holds, else ``otherwise``."""
        ...

    def below(self, value: Value, than: Value) -> Condition:
        """Where ``value`` is below ``than``."""
        ...

    def both(self, first: Condition, second: Condition) -> Condition: ...


def merged_field(
    holders: Sequence[tuple[Condition, Value]], choices: Choices[Condition, Value], absent: Value
) -> Value:
    """A field's value from ``holders``, (has the field and holds the address, value) of each
    dataset in precedence order: the first holder's, or ``absent`` where none has it."""
    value = absent
    for holds, candidate in reversed(holders):
        value = choices.pick(holds, candidate, value)
    return value


def span(
    bounds: Sequence[tuple[Condition, Value, Value]],
    choices: Choices[Condition, Value],
    widest: tuple[Value, Value],
) -> tuple[Value, Value]:
    """The range from ``bounds``, (holds the address, start, end) of each dataset: the latest
    start and the earliest end of those that hold it (``widest`` where none does)."""
    start, end = widest
    for holds, first, last in bounds:
        start = choices.pick(choices.both(holds, choices.below(start, first)), first, start)
        end = choices.pick(choices.both(holds, choices.below(last, end)), last, end)
    return start, end


class _One:
    """One address: Python values, ``bool`` conditions."""

    def pick(self, where: bool, value: Any, otherwise: Any) -> Any:
        return value if where else otherwise

    def below(self, value: Any, than: Any) -> bool:
        return bool(value < than)

    def both(self, first: bool, second: bool) -> bool:
        return first and second


ONE: Choices[bool, Any] = _One()
