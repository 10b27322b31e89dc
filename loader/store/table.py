"""The loader's data access: every DynamoDB write, and the reads only the loader makes.

``LoaderTable`` extends the lookup's read-only ``ipmeta.store.dynamodb.Store`` with the
range writes (batched, with retries the loader counts), the loader's
bookkeeping items (load, lock, manifest, a dataset's feed state), the version
pointer switch, and the table's creation for local runs. It speaks the records of ``ipmeta.schema.records``
and ``loader.records``; no other module builds DynamoDB requests.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.schema.ips import format_address
from ipmeta.schema.records import Cover, VersionMeta, VersionStatus
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import (
    Store,
    deserialize_item,
    item_key,
    make_client,
    serialize_item,
    serialize_value,
    stored_value,
)
from loader.batching import batched
from loader.errors import ActivationConflict, LoadInProgress, WritesThrottled
from loader.records import LoadItem, LoadReport, LoadStatus, LockItem, Manifest, dataset_of
from loader.reverse_index import IndexPlan

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeDefinitionTypeDef,
        AttributeValueTypeDef,
        WriteRequestTypeDef,
    )

#: DynamoDB's limit on the requests of one BatchWriteItem call.
BATCH_WRITE_LIMIT: Final = 25
#: Attempts of one batch before the error goes up to the caller (Step Functions retries the task).
MAX_BATCH_ATTEMPTS: Final = 10
THROTTLING_CODES: Final = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)

# The loader's bookkeeping items live beside the version metadata, under each dataset's
# ``meta#`` keys (``KeySpace.meta``), so two datasets load without touching each other.
#: One load item per load (sk = its version): chunk progress, counters, status.
LOADS: Final = "loads"
#: The dataset's single lock item (sk = 0).
LOCK: Final = "lock"
#: Per-version manifest (sk = version): expected items per partition, for verify and cleanup.
MANIFESTS: Final = "manifests"
#: Attributes of the feed item: the release loaded last (a map of strings), and the
#: feed's failed runs in a row (what its alarm watches).
FEED_RELEASE: Final = "release"
FEED_FAILURES: Final = "failures_in_a_row"
#: Covers per item of a version's cover list: far below 400 KB with the data of a city database.
COVERS_PER_PAGE: Final = 200
#: The attribute that records when a version entered each status.
_STATUS_TIMES: Final[Mapping[VersionStatus, str]] = {
    VersionStatus.ACTIVE: "activated_at",
    VersionStatus.RETIRED: "retired_at",
    VersionStatus.FAILED: "failed_at",
    VersionStatus.DELETED: "deleted_at",
}


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


def _condition_failed(error: ClientError) -> bool:
    return error.response["Error"]["Code"] == "ConditionalCheckFailedException"


class LoaderTable(Store):
    """The table as the loader uses it: the lookup's reads plus every write."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        space: keys.KeySpace | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client, table_name, space)
        self._sleep = sleep

    @classmethod
    def from_settings(cls, settings: Settings, *, max_pool_connections: int = 32) -> LoaderTable:
        table = cls(make_client(settings, max_pool_connections=max_pool_connections), settings.table_name)
        table.settings = settings
        return table

    #: How the table was reached, when from settings: what a pool worker reaches it by again.
    settings: Settings | None = None

    def for_load(self, load_id: str) -> LoaderTable:
        """The table in the keys of the dataset ``load_id`` writes (``loader.records.load_id_of``)."""
        return self.for_dataset(dataset_of(load_id))

    # -- the pointer, the version counter and version metadata ----------------------

    def activate_version(self, version: int, *, expected_current: int | None, base: int = 0) -> None:
        """Point lookups at ``version``, only if the pointer still names ``expected_current``.

        A delta's ``base`` is on the pointer too, so a lookup learns both from the one read.
        """
        pointer = {
            keys.PARTITION_KEY: self.space.pointer,
            keys.SORT_KEY: keys.META_SORT_KEY,
            "version": version,
            "previous": expected_current if expected_current is not None else 0,
            "activated_at": int(time.time()),
        }
        if base:
            pointer["base"] = base
        if expected_current is None:
            condition: dict[str, Any] = {
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": keys.PARTITION_KEY},
            }
        else:
            condition = {
                "ConditionExpression": "#version = :expected",
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": {":expected": {"N": str(expected_current)}},
            }
        try:
            self.client.put_item(TableName=self.table_name, Item=serialize_item(pointer), **condition)
        except ClientError as error:
            if _condition_failed(error):
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
            Key=item_key(self.space.version_counter, keys.META_SORT_KEY),
            UpdateExpression="ADD #n :one",
            ExpressionAttributeNames={"#n": "last"},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["last"]["N"])

    def register_dataset(self, *, serving: bool) -> None:
        """Name this dataset in the table's list: as started (cleanup visits it) or serving (lookups read it).

        A table may already serve ``default`` (written before datasets existed, or
        loaded without ``--dataset``): while it is active, every activation names
        it too, so the first named dataset does not hide it.
        """
        names = {self.dataset}
        if serving and self.dataset != keys.DEFAULT_DATASET:
            default = self.for_dataset(keys.DEFAULT_DATASET)
            if default.read_active_version(consistent=True) is not None:
                names.add(keys.DEFAULT_DATASET)
        attribute = keys.SERVING_DATASETS if serving else keys.STARTED_DATASETS
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(keys.DATASETS_PK, keys.META_SORT_KEY),
            UpdateExpression="ADD #names :names",
            ExpressionAttributeNames={"#names": attribute},
            ExpressionAttributeValues={":names": {"SS": sorted(names)}},
        )

    def read_started_datasets(self) -> list[str]:
        """Every dataset a load ever started, sorted (``default`` always): what cleanup visits."""
        item = self._get(keys.DATASETS_PK, keys.META_SORT_KEY, consistent=True) or {}
        started = (*item.get(keys.STARTED_DATASETS, []), *item.get(keys.SERVING_DATASETS, []))
        return sorted({keys.DEFAULT_DATASET, *started})

    def put_version_meta(self, meta: VersionMeta) -> None:
        item = {**meta.to_item(), keys.PARTITION_KEY: self.space.versions, keys.SORT_KEY: meta.version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def set_version_status(self, version: int, status: VersionStatus, at: int) -> None:
        """A version's new status, stamped with when it changed (``activated_at``, ``retired_at``...)."""
        fields: dict[str, Any] = {"status": str(status)}
        if status in _STATUS_TIMES:
            fields[_STATUS_TIMES[status]] = at
        self._update(self.space.versions, version, fields)

    # -- range items ----------------------------------------------------------------

    def batch_write(self, items: Sequence[Mapping[str, Any]], stats: WriteStats | None = None) -> None:
        """Put up to 25 items with one BatchWriteItem, retrying what DynamoDB hands back."""
        if len(items) > BATCH_WRITE_LIMIT:
            raise ValueError(f"BatchWriteItem takes at most {BATCH_WRITE_LIMIT} items, got {len(items)}")
        self._batch_requests([{"PutRequest": {"Item": serialize_item(item)}} for item in items], stats)

    def batch_put_serialized(
        self, items: Sequence[Mapping[str, AttributeValueTypeDef]], stats: WriteStats | None = None
    ) -> None:
        """``batch_write`` of items already in DynamoDB's attribute-value form (the chunk writer's)."""
        if len(items) > BATCH_WRITE_LIMIT:
            raise ValueError(f"BatchWriteItem takes at most {BATCH_WRITE_LIMIT} items, got {len(items)}")
        self._batch_requests([{"PutRequest": {"Item": dict(item)}} for item in items], stats)

    def count_partition(self, partition_key: str) -> int:
        return sum(int(page["Count"]) for page in self._partition_pages(partition_key, Select="COUNT"))

    def delete_partition(self, partition_key: str, stats: WriteStats | None = None) -> int:
        """Delete every item of one partition (keys-only Query, then batched deletes)."""
        deleted = 0
        pages = self._partition_pages(
            partition_key, ProjectionExpression="#pk, #sk", ExpressionAttributeNames={"#sk": keys.SORT_KEY}
        )
        for page in pages:
            for batch in batched(page.get("Items", []), BATCH_WRITE_LIMIT):
                self._batch_requests([{"DeleteRequest": {"Key": key}} for key in batch], stats)
                deleted += len(batch)
        return deleted

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

    # -- loads: progress, lock, manifests ----------------------------------------------

    def put_load(self, load: LoadItem) -> None:
        item = {**load.to_item(), keys.PARTITION_KEY: self.space.meta(LOADS), keys.SORT_KEY: load.version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get_load(self, version: int) -> LoadItem | None:
        """The load item, read with ConsistentRead: it is the progress pointer of a load."""
        item = self._get(self.space.meta(LOADS), version, consistent=True)
        return LoadItem.from_item(item) if item is not None else None

    def delete_load(self, version: int) -> None:
        self.client.delete_item(TableName=self.table_name, Key=item_key(self.space.meta(LOADS), version))

    def list_loads(self) -> list[LoadItem]:
        return [LoadItem.from_item(item) for item in self._query_partition(self.space.meta(LOADS))]

    def set_load_status(
        self,
        version: int,
        status: LoadStatus,
        at: int,
        *,
        report: LoadReport | None = None,
        error: str | None = None,
    ) -> None:
        fields: dict[str, Any] = {"status": str(status), "updated_at": at}
        if report is not None:
            fields["report"] = report.summary()
        if error is not None:
            fields["error"] = error[:1000]
        self._update(self.space.meta(LOADS), version, fields)

    def mark_prepared(self, version: int, *, chunks: int, items: int, report: LoadReport, at: int) -> None:
        """The load's chunks are planned: it may be written, and resumed."""
        fields = {"status": str(LoadStatus.PREPARED), "chunks": chunks, "items": items, "updated_at": at}
        self._update(self.space.meta(LOADS), version, {**fields, "report": report.summary()})

    def previous_of(self, version: int) -> int:
        """The version that was active when a load started (0 for none)."""
        load = self.get_load(version)
        return load.previous if load is not None else 0

    # -- cover lists -------------------------------------------------------------------

    def put_covers(self, version: int, covers: Sequence[Cover]) -> int:
        """The version's cover list in pages of at most ``COVERS_PER_PAGE``; returns the pages written."""
        partition = self.space.covers_partition_key(version)
        pages = [
            {
                keys.PARTITION_KEY: partition,
                keys.SORT_KEY: page,
                "covers": [cover.to_item() for cover in group],
            }
            for page, group in enumerate(batched(covers, COVERS_PER_PAGE))
        ]
        for group in batched(pages, BATCH_WRITE_LIMIT):
            self.batch_write(group)
        return len(pages)

    def put_cover_heads(self, version: int, covers: Sequence[Cover], index: IndexPlan | None) -> None:
        """One item at the first bucket of each cover run: it answers there, and carries the index entry.

        A delta's gap covers have none: its Query finds nothing in their buckets, and the cover answers.
        """
        heads = []
        for cover in covers:
            if cover.data is None:
                continue
            first = keys.bucket_bounds(cover.family, cover.first_bucket)[0]
            item: dict[str, Any] = {
                keys.PARTITION_KEY: self.space.partition_key(version, cover.family, cover.first_bucket),
                keys.SORT_KEY: 0,
                keys.ATTR_START: format_address(cover.family, cover.start),
                keys.ATTR_END: format_address(cover.family, cover.end),
                keys.ATTR_DATA: cover.data,
            }
            if index is not None and first == cover.start:
                item.update(index.attributes(self.space, version, cover.family, cover.start, cover.data))  # type: ignore[arg-type]
            heads.append(item)
        for group in batched(heads, BATCH_WRITE_LIMIT):
            self.batch_write(group)

    def mark_chunk_done(self, version: int, chunk: int, stats: Mapping[str, int], now: float) -> bool:
        """Record a written chunk once: its index joins ``done`` and its counts add up.

        The condition makes a second completion of the same chunk (a retried
        Map iteration, a resumed load) a no-op, so the counters stay exact.
        """
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=item_key(self.space.meta(LOADS), version),
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
            if _condition_failed(error):
                return False
            raise
        return True

    def acquire_lock(self, owner: str, *, lease_seconds: float, now: float) -> None:
        """Take (or renew) the load lock: free, expired, or already ours."""
        lock = {
            keys.PARTITION_KEY: self.space.meta(LOCK),
            keys.SORT_KEY: keys.META_SORT_KEY,
            "owner": owner,
            "expires_at": int(now + lease_seconds),
            "renewed_at": int(now),
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize_item(lock),
                ConditionExpression="attribute_not_exists(#pk) OR #owner = :owner OR #expires < :now",
                ExpressionAttributeNames={
                    "#pk": keys.PARTITION_KEY,
                    "#owner": "owner",
                    "#expires": "expires_at",
                },
                ExpressionAttributeValues={":owner": {"S": owner}, ":now": {"N": str(int(now))}},
            )
        except ClientError as error:
            if not _condition_failed(error):
                raise
            holder = self.read_lock() or LockItem("?", 0)
            until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(holder.expires_at))
            raise LoadInProgress(
                f"load {holder.owner} holds the load lock until {until}; "
                f"resume it with `ipmeta load --resume {holder.owner}` or wait for its lease"
            ) from error

    def release_lock(self, owner: str) -> bool:
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key=item_key(self.space.meta(LOCK), keys.META_SORT_KEY),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def read_lock(self) -> LockItem | None:
        item = self._get(self.space.meta(LOCK), keys.META_SORT_KEY, consistent=True)
        return LockItem.from_item(item) if item is not None else None

    def put_manifest(self, version: int, manifest: Manifest) -> None:
        item = {
            keys.PARTITION_KEY: self.space.meta(MANIFESTS),
            keys.SORT_KEY: version,
            "partitions": manifest.encode(),
        }
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def get_manifest(self, version: int) -> Manifest | None:
        item = self._get(self.space.meta(MANIFESTS), version, consistent=True)
        return Manifest.decode(item["partitions"]) if item is not None else None

    def delete_manifest(self, version: int) -> None:
        self.client.delete_item(TableName=self.table_name, Key=item_key(self.space.meta(MANIFESTS), version))

    # -- the dataset's vendor feed (``keys.KeySpace.feed_state``) ------------------------
    # The store keeps the feed's state as plain strings: ``loader.store`` may not import
    # ``loader.feeds``, whose ``FeedState`` the pipeline's adapter builds from them.

    def read_feed_state(self) -> dict[str, str] | None:
        """The release of this dataset's feed loaded last, read consistently; None before the first."""
        item = self._get(self.space.feed_state, keys.META_SORT_KEY, consistent=True) or {}
        state = item.get(FEED_RELEASE)
        return {str(name): str(value) for name, value in state.items()} if state else None

    def put_feed_state(self, state: Mapping[str, str]) -> None:
        """The release just loaded (or found active): the next run compares with it. A success: 0 failures."""
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(self.space.feed_state, keys.META_SORT_KEY),
            UpdateExpression="SET #release = :release, #failures = :zero",
            ExpressionAttributeNames={"#release": FEED_RELEASE, "#failures": FEED_FAILURES},
            ExpressionAttributeValues={
                ":release": serialize_value(dict(state)),
                ":zero": {"N": "0"},
            },
        )

    def count_feed_run(self, *, failed: bool) -> int:
        """Count a run of this dataset's feed; returns its failed runs in a row (0 after a success)."""
        update = "ADD #failures :one" if failed else "SET #failures = :zero"
        response = self.client.update_item(
            TableName=self.table_name,
            Key=item_key(self.space.feed_state, keys.META_SORT_KEY),
            UpdateExpression=update,
            ExpressionAttributeNames={"#failures": FEED_FAILURES},
            ExpressionAttributeValues={":one": {"N": "1"}} if failed else {":zero": {"N": "0"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"][FEED_FAILURES]["N"])

    # -- internals --------------------------------------------------------------------

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
        values: dict[str, AttributeValueTypeDef] = {
            f":v{index}": serialize_value(value) for index, value in enumerate(fields.values())
        }
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(partition_key, sort_key),
            UpdateExpression="SET " + ", ".join(f"#f{index} = :v{index}" for index in range(len(fields))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    # -- export ---------------------------------------------------------------------------

    def iter_partition(self, partition_key: str, *, consistent: bool = True) -> Iterator[dict[str, Any]]:
        """Every item of one partition in ascending sort-key order, a page at a time.

        Numbers stay exact (``deserialize_item``: an export writes them back out), binary as ``bytes``.
        """
        for page in self._partition_pages(partition_key, ConsistentRead=consistent):
            for raw in page.get("Items", []):
                yield deserialize_item(raw)


def canonical_data(data: Mapping[str, Any]) -> Any:
    """``data`` as a read of the item holding it gives it back (``iter_partition``): what two
    versions compare, so that ``1.5`` and ``Decimal("1.50")``, written alike, compare equal."""
    return stored_value(serialize_value(dict(data)))


def _index_attribute_definitions() -> list[AttributeDefinitionTypeDef]:
    definitions: list[AttributeDefinitionTypeDef] = []
    for index in keys.INDEXES:
        definitions.append({"AttributeName": index.partition_key, "AttributeType": index.partition_key_type})  # type: ignore[typeddict-item]
        definitions.append({"AttributeName": index.sort_key, "AttributeType": index.sort_key_type})  # type: ignore[typeddict-item]
    return definitions
