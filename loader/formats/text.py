"""Bytes to text lines: gzip by extension, a UTF-8 BOM dropped, each bad line named."""

from __future__ import annotations

import codecs
import gzip
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, cast

from loader.errors import SourceError


def open_binary(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def text_lines(binary: Iterable[bytes], name: str) -> Iterator[str]:
    """Decoded lines (line endings kept, so the csv module sees quoted newlines and CRLF)."""
    lines = iter(binary)
    number = 0
    while True:
        number += 1
        try:
            raw = next(lines)
        except StopIteration:
            return
        except (OSError, EOFError) as error:  # a truncated or corrupt gzip stream
            raise SourceError(f"{name}: line {number}: cannot read: {error}") from None
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(f"{name}: line {number}: not valid UTF-8 text") from None
