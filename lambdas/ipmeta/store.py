"""Data access: the only module that builds DynamoDB requests.

It speaks the key schema of ``ipmeta.keys`` and turns ``ClientError`` into
domain errors. Writes retry throttling and UnprocessedItems itself (exponential
backoff, full jitter) so the loader can count retries and throttles.
"""

from __future__ import annotations

import json
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import boto3
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import ClientError

from ipmeta import keys
from ipmeta.errors import ActivationConflict, LoadInProgress, WritesThrottled
from ipmeta.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeDefinitionTypeDef,
        AttributeValueTypeDef,
        WriteRequestTypeDef,
    )

#: DynamoDB's limit on the requests of one BatchWriteItem call.
BATCH_WRITE_LIMIT = 25
#: Attempts of one batch before the error goes up to the caller (Step Functions retries the task).
MAX_BATCH_ATTEMPTS = 10
THROTTLING_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]


def _plain(value: Any) -> Any:
    """DynamoDB Numbers come back as Decimal; JSON wants int (or float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list | set):
        return [_plain(inner) for inner in value]
    if isinstance(value, Binary):
        raw: bytes = value.value  # type: ignore[attr-defined]  # the stubs omit it
        return raw
    return value


def _dynamo_value(value: Any) -> Any:
    """boto3 refuses floats (they round); DynamoDB Numbers are decimals."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {key: _dynamo_value(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_dynamo_value(inner) for inner in value]
    return value


def serialize_item(item: Mapping[str, Any]) -> dict[str, AttributeValueTypeDef]:
    return {name: _serializer.serialize(_dynamo_value(value)) for name, value in item.items()}


def deserialize_item(raw: Mapping[str, Any]) -> Item:
    return {name: _plain(_deserializer.deserialize(value)) for name, value in raw.items()}


@dataclass
class WriteStats:
    """What the writes cost: retried requests and throttled calls (thread-safe)."""

    requests: int = 0
    retries: int = 0
    throttles: int = 0
    items: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, *, requests: int = 0, retries: int = 0, throttles: int = 0, items: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.throttles += throttles
            self.items += items

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "throttles": self.throttles,
                "items": self.items,
            }

    def merge(self, other: WriteStats) -> None:
        self.add(requests=other.requests, retries=other.retries, throttles=other.throttles, items=other.items)


def backoff_delay(attempt: int, *, base: float = 0.05, cap: float = 5.0) -> float:
    """Exponential backoff with full jitter (AWS Architecture Blog's recommendation)."""
    return random.uniform(0, min(cap, base * 2**attempt))


def make_client(settings: Settings, *, max_pool_connections: int = 32) -> DynamoDBClient:
    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        max_pool_connections=max_pool_connections,
        connect_timeout=2,
        read_timeout=10,
        tcp_keepalive=True,
    )
    session = boto3.session.Session()
    # dynalite accepts any credentials; a fresh machine has none configured.
    local_secret = "local" if settings.dynamodb_endpoint and session.get_credentials() is None else None
    return session.client(
        "dynamodb",
        endpoint_url=settings.dynamodb_endpoint,
        region_name=session.region_name or "us-east-1",
        config=config,
        aws_access_key_id=local_secret,
        aws_secret_access_key=local_secret,
    )


def _index_attribute_definitions() -> list[AttributeDefinitionTypeDef]:
    definitions: list[AttributeDefinitionTypeDef] = []
    for index in keys.INDEXES:
        definitions.append({"AttributeName": index.partition_key, "AttributeType": index.partition_key_type})  # type: ignore[typeddict-item]
        definitions.append({"AttributeName": index.sort_key, "AttributeType": index.sort_key_type})  # type: ignore[typeddict-item]
    return definitions


class Store:
    """One DynamoDB table laid out as ``ipmeta.keys`` describes."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self._sleep = sleep

    @classmethod
    def from_settings(cls, settings: Settings, *, max_pool_connections: int = 32) -> Store:
        return cls(make_client(settings, max_pool_connections=max_pool_connections), settings.table_name)

    # -- lookups -----------------------------------------------------------------

    def find_range_piece(self, partition_key: str, sort_key: int) -> Item | None:
        """The piece starting at or before ``sort_key`` in one bucket: one Query.

        Limit counts items read before any filter, so this Query must never carry
        a FilterExpression: containment is decided by the caller from ``end``.
        """
        response = self.client.query(
            TableName=self.table_name,
            KeyConditionExpression="#pk = :pk AND #sk <= :sk",
            ExpressionAttributeNames={"#pk": keys.PARTITION_KEY, "#sk": keys.SORT_KEY},
            ExpressionAttributeValues={":pk": {"S": partition_key}, ":sk": {"N": str(sort_key)}},
            ScanIndexForward=False,
            Limit=1,
        )
        items = response.get("Items", [])
        return deserialize_item(items[0]) if items else None

    def query_index(
        self,
        index: keys.IndexSchema,
        partition_key: str,
        *,
        prefix: str = "",
        after: str | None,
        limit: int,
    ) -> tuple[list[Item], bool]:
        """Up to ``limit`` entries of one index partition whose sort key follows ``after``.

        Returns the items and whether the partition may hold more. A cursor is the
        last sort key seen (``>`` it, not ExclusiveStartKey): index sort keys are
        unique within a partition, and a sort key is all a page token must carry.
        ``prefix`` narrows a pack to one value's entries (``after`` then includes it).
        """
        names = {"#pk": index.partition_key}
        values: dict[str, AttributeValueTypeDef] = {":pk": {"S": partition_key}}
        condition = "#pk = :pk"
        if after is None and prefix:
            condition += " AND begins_with(#sk, :prefix)"
            values[":prefix"] = {"S": prefix}
        elif after is not None and prefix:
            # One condition per sort key: BETWEEN keeps to the value, and includes ``after``
            # itself, which is dropped below (hence one more item asked for).
            condition += " AND #sk BETWEEN :after AND :last"
            values[":after"] = {"S": after}
            values[":last"] = {"S": keys.last_sort_key_of_prefix(prefix)}
        elif after is not None:
            condition += " AND #sk > :after"
            values[":after"] = {"S": after}
        if len(values) > 1:
            names["#sk"] = index.sort_key
        inclusive = after is not None and bool(prefix)
        response = self.client.query(
            TableName=self.table_name,
            IndexName=index.name,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            Limit=limit + 1 if inclusive else limit,
        )
        items = [deserialize_item(raw) for raw in response.get("Items", [])]
        more = "LastEvaluatedKey" in response
        if inclusive:
            items = [item for item in items if item[index.sort_key] != after]
            more = more or len(items) > limit
            items = items[:limit]
        return items, more

    def scan_index(self, index: keys.IndexSchema) -> Iterator[Item]:
        """Every entry of an index (benchmarks and tests check what the index really holds)."""
        for page in self._pages(self.client.scan, {"TableName": self.table_name, "IndexName": index.name}):
            for raw in page.get("Items", []):
                yield deserialize_item(raw)

    # -- the active-version pointer and version metadata --------------------------

    def read_active_version(self, *, consistent: bool = False) -> int | None:
        item = self._get(keys.POINTER_PK, keys.META_SORT_KEY, consistent=consistent)
        return int(item["version"]) if item else None

    def activate_version(self, version: int, *, expected_current: int | None) -> None:
        """Point lookups at ``version``, only if the pointer still names ``expected_current``."""
        condition = "attribute_not_exists(#pk)" if expected_current is None else "#version = :expected"
        values: dict[str, AttributeValueTypeDef] = {}
        if expected_current is not None:
            values[":expected"] = {"N": str(expected_current)}
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(
                    {
                        keys.PARTITION_KEY: keys.POINTER_PK,
                        keys.SORT_KEY: keys.META_SORT_KEY,
                        "version": version,
                        "previous": expected_current if expected_current is not None else 0,
                        "activated_at": int(time.time()),
                    }
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#pk": keys.PARTITION_KEY}
                if expected_current is None
                else {"#version": "version"},
                **({"ExpressionAttributeValues": values} if values else {}),  # type: ignore[arg-type]
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise ActivationConflict(
                    f"the active version changed since this load started (expected "
                    f"{keys.format_version(expected_current) if expected_current else 'none'}); "
                    "another load activated first"
                ) from error
            raise

    def allocate_version(self) -> int:
        """A new, never-used version number (atomic counter)."""
        response = self.client.update_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": keys.VERSION_COUNTER_PK}, keys.SORT_KEY: {"N": "0"}},
            UpdateExpression="ADD #n :one",
            ExpressionAttributeNames={"#n": "last"},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["last"]["N"])

    def put_version_meta(self, version: int, meta: Mapping[str, Any]) -> None:
        item = {**meta, keys.PARTITION_KEY: keys.VERSIONS_PK, keys.SORT_KEY: version, "version": version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get_version_meta(self, version: int, *, consistent: bool = True) -> Item | None:
        return self._get(keys.VERSIONS_PK, version, consistent=consistent)

    def list_version_metas(self) -> list[Item]:
        return list(self._query_partition(keys.VERSIONS_PK, consistent=True))

    # -- range items ----------------------------------------------------------------

    def batch_write(self, items: Sequence[Mapping[str, Any]], stats: WriteStats | None = None) -> None:
        """Put up to 25 items with one BatchWriteItem, retrying what DynamoDB hands back."""
        if len(items) > BATCH_WRITE_LIMIT:
            raise ValueError(f"BatchWriteItem takes at most {BATCH_WRITE_LIMIT} items, got {len(items)}")
        self._batch_requests([{"PutRequest": {"Item": serialize_item(item)}} for item in items], stats)

    def count_partition(self, partition_key: str) -> int:
        request = self._partition_request(partition_key, consistent=True, Select="COUNT")
        return sum(int(page["Count"]) for page in self._pages(self.client.query, request))

    # -- table lifecycle (local runs; in AWS the CDK stack owns the table) -----------

    def create_table_if_missing(self) -> bool:
        """Create the table from the key schema; False if it already existed."""
        try:
            self.client.create_table(
                TableName=self.table_name,
                KeySchema=[
                    {"AttributeName": keys.PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": keys.SORT_KEY, "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": keys.PARTITION_KEY, "AttributeType": keys.PARTITION_KEY_TYPE},
                    {"AttributeName": keys.SORT_KEY, "AttributeType": keys.SORT_KEY_TYPE},
                    *_index_attribute_definitions(),
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": index.name,
                        "KeySchema": [
                            {"AttributeName": index.partition_key, "KeyType": "HASH"},
                            {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                        ],
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": list(index.projected),
                        },
                    }
                    for index in keys.INDEXES
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceInUseException":
                raise
            return False
        self.client.get_waiter("table_exists").wait(
            TableName=self.table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        return True

    # -- loads: progress, lock, manifests (the loader's bookkeeping) -------------------

    def put_load(self, version: int, load: Mapping[str, Any]) -> None:
        partition, sort = keys.load_item_key(version)
        item = {**load, keys.PARTITION_KEY: partition, keys.SORT_KEY: sort, "version": version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get_load(self, version: int) -> Item | None:
        """The load item, read with ConsistentRead: it is the progress pointer of a load."""
        partition, sort = keys.load_item_key(version)
        item = self._get(partition, sort, consistent=True)
        if item is not None:
            item["done"] = sorted(int(index) for index in item.get("done", []))
        return item

    def list_loads(self) -> list[Item]:
        loads = list(self._query_partition(keys.LOADS_PK, consistent=True))
        for load in loads:
            load["done"] = sorted(int(index) for index in load.get("done", []))
        return loads

    def update_load(self, version: int, **fields: Any) -> None:
        self._update(*keys.load_item_key(version), fields)

    def update_version_meta(self, version: int, **fields: Any) -> None:
        self._update(keys.VERSIONS_PK, version, fields)

    def mark_chunk_done(self, version: int, chunk: int, stats: Mapping[str, int], now: float) -> bool:
        """Record a written chunk once: its index joins ``done`` and its counts add up.

        The condition makes a second completion of the same chunk (a retried
        Map iteration, a resumed load) a no-op, so the counters stay exact.
        """
        partition, sort = keys.load_item_key(version)
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={keys.PARTITION_KEY: {"S": partition}, keys.SORT_KEY: {"N": str(sort)}},
                UpdateExpression=(
                    "ADD #done :chunk, #items :items, #retries :retries, #throttles :throttles "
                    "SET #updated = :now"
                ),
                ConditionExpression="attribute_exists(#pk) AND NOT contains(#done, :index)",
                ExpressionAttributeNames={
                    "#pk": keys.PARTITION_KEY,
                    "#done": "done",
                    "#items": "items_written",
                    "#retries": "retries",
                    "#throttles": "throttles",
                    "#updated": "updated_at",
                },
                ExpressionAttributeValues={
                    ":chunk": {"NS": [str(chunk)]},
                    ":index": {"N": str(chunk)},
                    ":items": {"N": str(stats.get("items", 0))},
                    ":retries": {"N": str(stats.get("retries", 0))},
                    ":throttles": {"N": str(stats.get("throttles", 0))},
                    ":now": {"N": str(int(now))},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def acquire_lock(self, owner: str, *, lease_seconds: float, now: float) -> None:
        """Take (or renew) the load lock: free, expired, or already ours."""
        partition, sort = keys.lock_item_key()
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(
                    {
                        keys.PARTITION_KEY: partition,
                        keys.SORT_KEY: sort,
                        "owner": owner,
                        "expires_at": int(now + lease_seconds),
                        "renewed_at": int(now),
                    }
                ),
                ConditionExpression="attribute_not_exists(#pk) OR #owner = :owner OR #expires < :now",
                ExpressionAttributeNames={
                    "#pk": keys.PARTITION_KEY,
                    "#owner": "owner",
                    "#expires": "expires_at",
                },
                ExpressionAttributeValues={":owner": {"S": owner}, ":now": {"N": str(int(now))}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            holder = self.read_lock() or {}
            raise LoadInProgress(
                f"load {holder.get('owner', '?')} holds the load lock until "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(int(holder.get('expires_at', 0))))}; "
                f"resume it with `ipmeta load --resume {holder.get('owner', '?')}` or wait for its lease"
            ) from error

    def release_lock(self, owner: str) -> bool:
        partition, sort = keys.lock_item_key()
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key={keys.PARTITION_KEY: {"S": partition}, keys.SORT_KEY: {"N": str(sort)}},
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def read_lock(self) -> Item | None:
        return self._get(*keys.lock_item_key(), consistent=True)

    def put_manifest(self, version: int, items_per_partition: Mapping[str, int]) -> None:
        """Expected items per partition, compressed: IPv6 data has thousands of partitions."""
        partition, sort = keys.manifest_item_key(version)
        body = zlib.compress(json.dumps(dict(items_per_partition), separators=(",", ":")).encode())
        self.client.put_item(
            TableName=self.table_name,
            Item={
                keys.PARTITION_KEY: {"S": partition},
                keys.SORT_KEY: {"N": str(sort)},
                "partitions": {"B": body},
            },
        )

    def get_manifest(self, version: int) -> dict[str, int] | None:
        partition, sort = keys.manifest_item_key(version)
        response = self.client.get_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": partition}, keys.SORT_KEY: {"N": str(sort)}},
            ConsistentRead=True,
        )
        raw = response.get("Item")
        if raw is None:
            return None
        counts: dict[str, int] = json.loads(zlib.decompress(raw["partitions"]["B"]))
        return counts

    def delete_manifest(self, version: int) -> None:
        partition, sort = keys.manifest_item_key(version)
        self.client.delete_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": partition}, keys.SORT_KEY: {"N": str(sort)}},
        )

    def delete_partition(self, partition_key: str, stats: WriteStats | None = None) -> int:
        """Delete every item of one partition (keys-only Query, then batched deletes)."""
        deleted = 0
        request = self._partition_request(partition_key, consistent=True, ProjectionExpression="#pk, #sk")
        request["ExpressionAttributeNames"]["#sk"] = keys.SORT_KEY
        for page in self._pages(self.client.query, request):
            found = page.get("Items", [])
            for offset in range(0, len(found), BATCH_WRITE_LIMIT):
                batch = found[offset : offset + BATCH_WRITE_LIMIT]
                self._batch_requests([{"DeleteRequest": {"Key": key}} for key in batch], stats)
                deleted += len(batch)
        return deleted

    def delete_item(self, partition_key: str, sort_key: int) -> None:
        self.client.delete_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": partition_key}, keys.SORT_KEY: {"N": str(sort_key)}},
        )

    def _batch_requests(self, requests: list[WriteRequestTypeDef], stats: WriteStats | None) -> None:
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

    def _update(self, partition_key: str, sort_key: int, fields: Mapping[str, Any]) -> None:
        names = {f"#f{index}": name for index, name in enumerate(fields)}
        values = {
            f":v{index}": _serializer.serialize(_dynamo_value(value))
            for index, value in enumerate(fields.values())
        }
        self.client.update_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": partition_key}, keys.SORT_KEY: {"N": str(sort_key)}},
            UpdateExpression="SET " + ", ".join(f"#f{index} = :v{index}" for index in range(len(fields))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    # -- internals --------------------------------------------------------------------

    def _get(self, partition_key: str, sort_key: int, *, consistent: bool) -> Item | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key={keys.PARTITION_KEY: {"S": partition_key}, keys.SORT_KEY: {"N": str(sort_key)}},
            ConsistentRead=consistent,
        )
        raw = response.get("Item")
        return deserialize_item(raw) if raw else None

    def _query_partition(self, partition_key: str, *, consistent: bool) -> Iterator[Item]:
        for page in self._pages(
            self.client.query, self._partition_request(partition_key, consistent=consistent)
        ):
            for raw in page.get("Items", []):
                yield deserialize_item(raw)

    def _partition_request(self, partition_key: str, *, consistent: bool, **extra: Any) -> dict[str, Any]:
        """A Query of one whole partition; ``extra`` adds Select, ProjectionExpression..."""
        return {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": keys.PARTITION_KEY},
            "ExpressionAttributeValues": {":pk": {"S": partition_key}},
            "ConsistentRead": consistent,
            **extra,
        }

    @staticmethod
    def _pages(operation: Callable[..., Any], request: dict[str, Any]) -> Iterator[Any]:
        """Every page of a Query or Scan, following LastEvaluatedKey."""
        request = dict(request)
        while True:
            response = operation(**request)
            yield response
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
