"""Bytes to text lines: gzip by extension, a UTF-8 BOM dropped, each bad line named, every line bounded.

A line is read with a limit, never whole: a 1 MB ``.csv.gz`` can inflate to one
line of a gibibyte, which a plain ``readline`` (and the csv module after it)
would hold in memory several times over. So is a *record*: a quoted field left
open makes the csv module gather lines until the file ends, each of them short.
``MAX_RECORD_BYTES`` bounds both; the csv reader tells ``TextLines`` where each
record ends (``end_record``).
"""

from __future__ import annotations

import codecs
import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final, cast

from loader.errors import SourceError

#: The longest line, or record over several lines, a source may have. An item holds at most
#: 400 KB (DynamoDB's limit), which as CSV text with every quote doubled stays under 1 MiB.
MAX_RECORD_BYTES: Final = 1 << 20


def open_binary(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


class TextLines(Iterator[str]):
    """Decoded lines (line endings kept, so the csv module sees quoted newlines and CRLF), each bounded.

    ``number`` is the last line read. ``peek`` shows the first line without taking it.
    """

    def __init__(self, handle: IO[bytes], name: str, limit: int = MAX_RECORD_BYTES) -> None:
        self._handle, self._name, self._limit = handle, name, limit
        self.number = 0
        self._record_bytes = 0
        self._record_first_line = 1
        self._peeked: str | None = None

    def peek(self) -> str | None:
        if self._peeked is None:
            self._peeked = next(self, None)
        return self._peeked

    def end_record(self) -> None:
        """The csv reader finished a record: the next line starts a new one."""
        self._record_bytes = 0
        self._record_first_line = self.number + 1

    def __next__(self) -> str:
        if self._peeked is not None:
            line, self._peeked = self._peeked, None
            return line
        raw = self._read()
        if not raw:
            raise StopIteration
        self.number += 1
        if self.number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(f"{self._name}: line {self.number}: not valid UTF-8 text") from None

    def _read(self) -> bytes:
        try:
            raw = self._handle.readline(self._limit + 1)
        except (OSError, EOFError) as error:  # a truncated or corrupt gzip stream
            raise SourceError(f"{self._where()}: cannot read: {error}") from None
        if len(raw) > self._limit:
            raise SourceError(f"{self._where()}: line longer than {self._limit} bytes; refused")
        self._record_bytes += len(raw)
        if self._record_bytes > self._limit:
            raise SourceError(
                f"{self._where()}: the record that starts at line {self._record_first_line} is longer "
                f"than {self._limit} bytes (a quoted field left open?); refused"
            )
        return raw

    def _where(self) -> str:
        """The line being read, for an error: spelled only then, not once per line read."""
        return f"{self._name}: line {self.number + 1}"
