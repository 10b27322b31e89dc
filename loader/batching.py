"""``batched``: the one way the loader and the CLI cut a sequence into fixed-size groups."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

if sys.version_info >= (3, 12):  # the Lambda runtime (3.13)
    from itertools import batched as _batched

    def batched(items: Iterable[T], size: int) -> Iterator[tuple[T, ...]]:
        return _batched(items, size)

else:  # 3.11, supported locally

    def batched(items: Iterable[T], size: int) -> Iterator[tuple[T, ...]]:
        """Tuples of ``size`` items in order; the last may be shorter (as ``itertools.batched``)."""
        if size < 1:
            raise ValueError("size must be at least 1")
        iterator = iter(items)
        while group := tuple(islice(iterator, size)):
            yield group
