"""Batch writes: every retry is counted, and a batch that DynamoDB keeps refusing gives up."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from loader.errors import WritesThrottled
from loader.store.batch_writes import MAX_BATCH_ATTEMPTS, BatchWriter, WriteStats

ITEMS = [{"pk": "v1#4#1", "sk": n, "start": "1.0.0.0", "end": "1.0.0.255", "data": {}} for n in range(3)]


class ScriptedClient:
    """Answers BatchWriteItem from a script: a dict response, or an exception to raise."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls = 0

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if answer == "unprocessed":
            return {"UnprocessedItems": RequestItems, "ResponseMetadata": {"RetryAttempts": 0}}
        return dict(answer)


def throttled(sdk_retries: int) -> ClientError:
    response: Any = {
        "Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"},
        "ResponseMetadata": {"RetryAttempts": sdk_retries},
    }
    return ClientError(response, "BatchWriteItem")


def writer_with(client: ScriptedClient) -> BatchWriter:
    return BatchWriter(client, "t", sleep=lambda _: None)  # type: ignore[arg-type]


def test_retries_inside_botocore_are_counted() -> None:
    client = ScriptedClient(throttled(2), {"UnprocessedItems": {}, "ResponseMetadata": {"RetryAttempts": 1}})
    stats = WriteStats()
    writer_with(client).put(ITEMS, stats)
    assert client.calls == 2
    assert stats.items == 3
    # 2 botocore retries before the first error, our own retry, 1 botocore retry on the success
    assert stats.retries == 4
    assert stats.throttles == 4


def test_a_batch_left_unprocessed_gives_up_after_the_attempt_limit() -> None:
    client = ScriptedClient("unprocessed")
    with pytest.raises(WritesThrottled):
        writer_with(client).put(ITEMS)
    assert client.calls == MAX_BATCH_ATTEMPTS


def test_a_throttle_that_never_ends_surfaces_dynamodbs_own_error() -> None:
    client = ScriptedClient(throttled(0))
    with pytest.raises(ClientError) as raised:
        writer_with(client).put(ITEMS)
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert client.calls == MAX_BATCH_ATTEMPTS
