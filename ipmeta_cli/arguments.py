"""Argument types shared by the commands: bad values fail at parse time with a clear message."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _whole_number_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} {rule}")
        return value

    return parse


positive_int = _whole_number_at_least(1, "must be at least 1")
non_negative_int = _whole_number_at_least(0, "must not be negative")
