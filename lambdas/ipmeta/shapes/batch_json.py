"""A batch's answer as one JSON object, refused before it outgrows a Lambda response.

Lambda refuses a response over 6 MB (6,291,456 bytes), and the front then answers 502. The
body travels inside the runtime's own JSON response: every quote and backslash escaped, and
(before the Python 3.12 runtime) every other character beyond ASCII as ``\\uXXXX``. So what
counts is the body as a JSON string, and ``MAX_CARRIED_BYTES`` leaves room for the headers.

The answer is written entry by entry and refused (``BatchAnswerTooLarge``, a stable code) the
moment it passes the cap, so a batch never holds more than the cap in memory. An entry whose
value is the very object of an earlier entry (one address spelled several ways: the routes hand
each spelling the same document) is serialized once and counted for each spelling.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ipmeta.schema.errors import BatchAnswerTooLarge
from ipmeta.shapes import exact_json

#: The largest answer body, as the Lambda runtime carries it: under 6 MB with its headers.
MAX_CARRIED_BYTES: Final = 5_800_000


def carried_bytes(text: str) -> int:
    """``text``'s size inside the runtime's JSON response, escaped as the oldest runtime does."""
    return len(json.dumps(text)) - 2


def join(answers: Mapping[str, Any], limit: int = MAX_CARRIED_BYTES) -> str:
    """The JSON object of ``answers``, or ``BatchAnswerTooLarge`` once past ``limit``.

    A mapping, not any iterable: its values stay alive while their ids name what was written."""
    written: dict[int, tuple[str, int]] = {}
    parts: list[str] = []
    size = 2
    for count, (key, value) in enumerate(answers.items(), start=1):
        text, value_size = written.get(id(value)) or _written(value)
        written[id(value)] = (text, value_size)
        key_text = exact_json.dumps(key)
        size += carried_bytes(key_text) + 1 + value_size + (1 if parts else 0)
        if size > limit:
            raise BatchAnswerTooLarge(
                f"the answer passed {limit:,} bytes at item {count}, more than a Lambda response can carry; "
                "send fewer addresses in each batch, or ask for fewer fields (?fields=)"
            )
        parts.append(f"{key_text}:{text}")
    return "{" + ",".join(parts) + "}"


def _written(value: Any) -> tuple[str, int]:
    text = exact_json.dumps(value)
    return text, carried_bytes(text)
