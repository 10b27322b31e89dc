"""The rows of one source file, streamed: a ``Header``, then a ``SourceRow`` or ``RowError`` per record.

Until ``loader.formats`` (the MaxMind DB and vendor CSV readers) lands, this is
the CSV reader of ``loader.source`` behind the interface the scan consumes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loader.options import LoadOptions
from loader.source import RowError, SourceRow, _Header, open_binary, parse_rows, text_lines

__all__ = ["Header", "RowError", "SourceRow", "open_rows"]


@dataclass(frozen=True, slots=True)
class Header:
    columns: list[str]


def open_rows(path: Path, name: str, options: LoadOptions) -> Iterator[Header | SourceRow | RowError]:
    with open_binary(path) as handle:
        for entry in parse_rows(text_lines(handle, name), name, options.columns, options.types):
            yield Header(entry.metadata) if isinstance(entry, _Header) else entry
