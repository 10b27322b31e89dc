"""What each column holds, learned while scanning and merged across sources: its stored type.

Until ``loader.formats`` lands: a column is a Number when every non-empty value
is a plain integer (``007`` stays a String); declared types win.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")


class ColumnEvidence:
    def __init__(self) -> None:
        self.columns: list[str] = []
        self.not_integer: set[str] = set()

    def observe(self, values: Mapping[str, Any], origin: str) -> None:
        if not self.columns:
            self.columns = list(values)
        for column, value in values.items():
            if column not in self.not_integer and value and not _INTEGER.fullmatch(str(value)):
                self.not_integer.add(column)

    def merge(self, other: ColumnEvidence) -> None:
        self.columns = self.columns or other.columns
        self.not_integer |= other.not_integer

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "not_integer": sorted(self.not_integer)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ColumnEvidence:
        evidence = cls()
        evidence.columns = list(data.get("columns", []))
        evidence.not_integer = set(data.get("not_integer", []))
        return evidence

    def column_types(self, declared: Mapping[str, str]) -> dict[str, str]:
        kinds = {"int": "N", "number": "N", "str": "S", "string": "S"}
        return {
            column: kinds.get(declared.get(column, ""), "S" if column in self.not_integer else "N")
            for column in self.columns
        }

    def problems(self, declared: Mapping[str, str]) -> list[str]:
        return []


def typed_value(value: Any, column_type: str) -> Any:
    """Numbers as int; an empty cell of a Number column is null, so a column keeps one type."""
    if column_type != "N" or not isinstance(value, str):
        return value
    return int(value) if value else None
