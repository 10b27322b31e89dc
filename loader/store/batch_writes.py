"""Batched writes: BatchWriteItem with the retries DynamoDB asks for, each one counted.

``BatchWriter`` is what puts range items (``loader.pipeline.write``), cover
lists and cover heads (``cover_lists``), and deletes a partition's items
(``partition_items``). ``WriteStats`` is what those writes cost, which the
load report shows.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from botocore.exceptions import ClientError

from ipmeta.store.dynamodb import serialize_item
from loader.errors import WritesThrottled

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, WriteRequestTypeDef

#: DynamoDB's limit on the requests of one BatchWriteItem call.
BATCH_WRITE_LIMIT: Final = 25
#: Attempts of one batch before the error goes up to the caller (Step Functions retries the task).
MAX_BATCH_ATTEMPTS: Final = 10
THROTTLING_CODES: Final = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)


@dataclass
class WriteStats:
    """What the writes cost: retried requests and throttled calls, and the write units of the
    items written (index keys included) and of their GSI entries, which the writer that built
    the items counts (``loader.item_units``) (thread-safe)."""

    requests: int = 0
    retries: int = 0
    throttles: int = 0
    items: int = 0
    write_units: int = 0  #: the items' and their GSI entries' together
    index_write_units: int = 0  #: the GSI entries' part of ``write_units``
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self,
        *,
        requests: int = 0,
        retries: int = 0,
        throttles: int = 0,
        items: int = 0,
        write_units: int = 0,
        index_write_units: int = 0,
    ) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.throttles += throttles
            self.items += items
            self.write_units += write_units
            self.index_write_units += index_write_units

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "throttles": self.throttles,
                "items": self.items,
                "write_units": self.write_units,
                "index_write_units": self.index_write_units,
            }

    def merge(self, other: WriteStats) -> None:
        self.add(**other.as_dict())


def backoff_delay(attempt: int, *, base: float = 0.05, cap: float = 5.0) -> float:
    """Exponential backoff with full jitter (AWS Architecture Blog's recommendation)."""
    return random.uniform(0, min(cap, base * 2**attempt))


class BatchWriter:
    """Puts and deletes of the table, 25 to a BatchWriteItem call."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.client = client
        self.table_name = table_name
        self._sleep = sleep

    def put(self, items: Sequence[Mapping[str, Any]], stats: WriteStats | None = None) -> None:
        """Put up to 25 items with one BatchWriteItem, retrying what DynamoDB hands back."""
        _check_batch_size(len(items))
        self._send([{"PutRequest": {"Item": serialize_item(item)}} for item in items], stats)

    def put_serialized(
        self, items: Sequence[Mapping[str, AttributeValueTypeDef]], stats: WriteStats | None = None
    ) -> None:
        """``put`` of items already in DynamoDB's attribute-value form (the chunk writer's)."""
        _check_batch_size(len(items))
        self._send([{"PutRequest": {"Item": dict(item)}} for item in items], stats)

    def delete(
        self, item_keys: Sequence[Mapping[str, AttributeValueTypeDef]], stats: WriteStats | None
    ) -> None:
        """Delete up to 25 items by their keys (attribute-value form, as a Query projects them)."""
        _check_batch_size(len(item_keys))
        self._send([{"DeleteRequest": {"Key": dict(key)}} for key in item_keys], stats)

    def _send(self, requests: list[WriteRequestTypeDef], stats: WriteStats | None) -> None:
        """One BatchWriteItem of puts or deletes, retrying throttles and UnprocessedItems.

        botocore retries a throttled call itself before raising; its
        ``RetryAttempts`` are counted too, so the report shows every retry. After
        ``MAX_BATCH_ATTEMPTS`` the batch gives up loudly rather than outlive its
        Lambda: the state machine's Retry, with its own backoff, takes over.
        """
        stats = stats if stats is not None else WriteStats()
        pending = requests
        for attempt in range(1, MAX_BATCH_ATTEMPTS + 1):
            stats.add(requests=1)
            try:
                response = self.client.batch_write_item(RequestItems={self.table_name: pending})
            except ClientError as error:
                sdk_retries = int(error.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
                stats.add(throttles=sdk_retries, retries=sdk_retries)
                if error.response["Error"]["Code"] not in THROTTLING_CODES:
                    raise
                stats.add(throttles=1)
                if attempt == MAX_BATCH_ATTEMPTS:
                    raise
            else:
                sdk_retries = int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
                stats.add(throttles=sdk_retries, retries=sdk_retries)
                written = len(pending)
                unprocessed = response.get("UnprocessedItems", {}).get(self.table_name, [])
                pending = cast("list[WriteRequestTypeDef]", unprocessed)
                stats.add(items=written - len(pending))
                if not pending:
                    return
            if attempt < MAX_BATCH_ATTEMPTS:
                stats.add(retries=1)
                self._sleep(backoff_delay(attempt))
        raise WritesThrottled(
            f"{len(pending)} items still unprocessed after {MAX_BATCH_ATTEMPTS} BatchWriteItem attempts"
        )


def _check_batch_size(size: int) -> None:
    if size > BATCH_WRITE_LIMIT:
        raise ValueError(f"BatchWriteItem takes at most {BATCH_WRITE_LIMIT} items, got {size}")
