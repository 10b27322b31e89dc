"""A batch's answer is written as the JSON the routes always wrote, and refused past the limit."""

from __future__ import annotations

import json

import pytest

from ipmeta.schema.errors import BatchAnswerTooLarge
from ipmeta.shapes import batch_json


def test_the_answer_is_the_json_of_its_entries_sizes_counted_as_the_runtime_escapes_them() -> None:
    shared = {"city": "Zürich", "quote": 'a "b"'}
    answers = {"1.1.1.1": shared, "::ffff:1.1.1.1": shared, "nope": {"error": {"code": "X"}}}
    text = batch_json.join(answers)
    assert json.loads(text) == answers
    assert batch_json.carried_bytes("Zürich") == len("Z\\u00fcrich")
    assert batch_json.carried_bytes('"') == 2


def test_past_the_limit_the_answer_is_refused_and_every_spelling_counts() -> None:
    record = {"names": "x" * 1_000}
    one = len(batch_json.join({"a": record}))
    spelled = {f"spelling-{number}": record for number in range(10)}
    with pytest.raises(BatchAnswerTooLarge) as refused:
        batch_json.join(spelled, limit=5 * one)
    assert refused.value.code == "BATCH_ANSWER_TOO_LARGE"
    assert "item 5" in refused.value.message
    assert json.loads(batch_json.join(spelled, limit=20 * one)) == spelled
