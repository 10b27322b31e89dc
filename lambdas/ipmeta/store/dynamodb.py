"""Data access for the lookup: the only lookup code that builds DynamoDB requests, and only reads.

It speaks the key schema of ``ipmeta.schema.keys`` and returns typed records
(``ipmeta.schema.records``). Everything that writes (loads, the lock, the pointer
switch) is the loader's, in ``loader.store`` (one class per concern); it reads through this one.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Mapping
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Self, cast

import botocore.session
from botocore.config import Config

from ipmeta.lookup.covers import CoverCatalog
from ipmeta.schema import keys
from ipmeta.schema.records import ActiveVersion, Cover, VersionMeta
from ipmeta.schema.settings import Settings

if TYPE_CHECKING:
    from boto3.dynamodb.types import TypeSerializer
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

Item = dict[str, Any]
#: BatchGetItem's limit on keys a call, and how often unprocessed keys are asked for again.
_BATCH_GET_LIMIT = 100
_BATCH_GET_ATTEMPTS = 5


#: DynamoDB Numbers hold 38 digits; an integer this large or larger (a uint128 of the
#: MaxMind DB spec can have 39) is stored as a String Set of its one decimal text, the
#: one type no stored value takes otherwise (no source has sets): see docs/decisions.md.
BIG_INTEGER: Final = 10**38


def stored_value(raw: Mapping[str, Any]) -> Any:
    """One DynamoDB attribute value as answers use it: whole Numbers as int, others as the exact
    ``Decimal``, binary as ``bytes``, a big integer (``BIG_INTEGER``) whole, other sets as lists.

    Not boto3's ``TypeDeserializer``: it reads a Number through a 38-digit context that traps
    rounding, and DynamoDB answers ``1E+100`` as 101 digits, so a valid stored Number (a whole
    double such as 1e100) would fail every read of its item (boto/boto3#2500).
    """
    ((kind, value),) = raw.items()
    if kind in {"S", "BOOL", "B"}:
        return value
    if kind == "N":
        return _number(value)
    if kind == "M":
        return {key: stored_value(inner) for key, inner in value.items()}
    if kind == "L":
        return [stored_value(inner) for inner in value]
    if kind == "SS" and len(value) == 1:
        return int(value[0])  # a big integer
    return [_number(inner) for inner in value] if kind == "NS" else None if kind == "NULL" else list(value)


def _number(text: str) -> int | Decimal:
    if text.isdigit():
        return int(text)
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else number


def dynamo_value(value: Any) -> Any:
    """boto3 refuses floats (they round); DynamoDB Numbers are decimals of at most 38 digits."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, int) and not isinstance(value, bool) and not -BIG_INTEGER < value < BIG_INTEGER:
        return {str(value)}
    if isinstance(value, dict):
        return {key: dynamo_value(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [dynamo_value(inner) for inner in value]
    return value


@cache
def _serializer() -> TypeSerializer:
    # Only the loader writes. boto3 (and s3transfer with it) is an eighth of the lookup's
    # cold start, which reads with botocore alone: the serializer comes on first write.
    from boto3.dynamodb.types import TypeSerializer

    return TypeSerializer()


def serialize_value(value: Any) -> AttributeValueTypeDef:
    return _serializer().serialize(dynamo_value(value))


def serialize_item(item: Mapping[str, Any]) -> dict[str, AttributeValueTypeDef]:
    return {name: serialize_value(value) for name, value in item.items()}


def deserialize_item(raw: Mapping[str, Any]) -> Item:
    """An item's attributes as answers use them (``stored_value``). A String Set at the top of an
    item is a bookkeeping set (the table's list of datasets), never a big integer: those are values
    inside ``data``."""
    return {name: list(value["SS"]) if "SS" in value else stored_value(value) for name, value in raw.items()}


def make_client(settings: Settings, *, max_pool_connections: int = 32) -> DynamoDBClient:
    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        max_pool_connections=max_pool_connections,
        connect_timeout=2,
        read_timeout=10,
        tcp_keepalive=True,
        # Every request is built by typed code (the stubs check its shape) and DynamoDB validates
        # it again: botocore's own check costs 0.6 ms of each 25-item BatchWriteItem, half the
        # client's CPU per write (docs/decisions.md, "The DynamoDB client skips botocore's check").
        parameter_validation=False,
    )
    # botocore's session, not boto3's: a client is all the lookup needs, and importing boto3
    # costs every cold start (``bench/cold_start.py``). Credentials and region resolve alike.
    session = botocore.session.get_session()
    # dynalite accepts any credentials; a fresh machine has none configured.
    local_secret = "local" if settings.dynamodb_endpoint and session.get_credentials() is None else None
    client = session.create_client(
        "dynamodb",
        endpoint_url=settings.dynamodb_endpoint,
        region_name=session.get_config_variable("region") or "us-east-1",
        config=config,
        aws_access_key_id=local_secret,
        aws_secret_access_key=local_secret,
    )
    return cast("DynamoDBClient", client)


def item_key(partition_key: str, sort_key: int) -> dict[str, AttributeValueTypeDef]:
    return {keys.PARTITION_KEY: {"S": partition_key}, keys.SORT_KEY: {"N": str(sort_key)}}


class Store:
    """The reads of one DynamoDB table laid out as ``ipmeta.schema.keys`` describes, in one dataset's keys."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        space: keys.KeySpace | None = None,
        *,
        pointer_region: str | None = None,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.space = space or keys.key_space()
        #: Whose pointers ``read_active_versions`` reads: home's (None) or a replica region's own.
        self.pointer_region = pointer_region
        #: Each version's cover list, read once per container (a version's covers never change).
        self._covers = CoverCatalog(self.read_covers)
        #: The views of this table in other datasets' keys, shared by every view: one each.
        self._views: dict[str, Store] = {self.space.dataset: self}

    @property
    def dataset(self) -> str:
        return self.space.dataset

    def for_dataset(self, dataset: str) -> Self:
        """The same table and client, in ``dataset``'s keys (``DatasetNameInvalid`` for a bad name).

        One view per dataset and table object, so each dataset's cover lists are read once.
        """
        view = self._views.get(dataset)
        if view is None:
            view = copy.copy(self)
            view.space = keys.key_space(dataset)
            view._covers = CoverCatalog(view.read_covers)
            view = self._views.setdefault(dataset, view)
        return cast(Self, view)

    @classmethod
    def from_settings(cls, settings: Settings, *, max_pool_connections: int = 32) -> Store:
        return cls(
            make_client(settings, max_pool_connections=max_pool_connections),
            settings.table_name,
            pointer_region=settings.pointer_region,
        )

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

    # -- the active-version pointer and version metadata --------------------------

    def read_active_version(self, *, consistent: bool = False) -> int | None:
        item = self._get(self.space.pointer, keys.META_SORT_KEY, consistent=consistent)
        return int(item["version"]) if item else None

    def read_dataset_names(self, *, consistent: bool = False) -> list[str]:
        """The datasets that lookups fan out to (each had an active version), sorted.

        A table older than datasets, or whose datasets are all still on their first
        load, serves ``default`` alone: the keys of the layout before datasets.
        """
        item = self._get(keys.DATASETS_PK, keys.META_SORT_KEY, consistent=consistent)
        names = item.get(keys.SERVING_DATASETS) if item else None
        return sorted(names) if names else [keys.DEFAULT_DATASET]

    def read_active_versions(self, datasets: list[str]) -> dict[str, ActiveVersion | None]:
        """Each dataset's active version and base (None: not active): one BatchGetItem of their pointers.

        In a replica region (``pointer_region``) those are the region's own pointers, which name a
        version only once it has wholly arrived there (``loader.pipeline.arrival``).
        """
        pointers = {keys.key_space(name).pointer_of(self.pointer_region): name for name in datasets}
        found: dict[str, ActiveVersion | None] = dict.fromkeys(datasets)
        requested = [item_key(pointer, keys.META_SORT_KEY) for pointer in pointers]
        for start in range(0, len(requested), _BATCH_GET_LIMIT):
            pending = requested[start : start + _BATCH_GET_LIMIT]
            for attempt in range(_BATCH_GET_ATTEMPTS):
                response = self.client.batch_get_item(RequestItems={self.table_name: {"Keys": pending}})
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    item = deserialize_item(raw)
                    pointer = ActiveVersion(int(item["version"]), int(item.get("base", 0)))
                    found[pointers[item[keys.PARTITION_KEY]]] = pointer
                unprocessed = response.get("UnprocessedKeys", {}).get(self.table_name)
                if not unprocessed:
                    break
                pending = list(unprocessed["Keys"])
                time.sleep(0.01 * 2**attempt)
            else:
                raise RuntimeError("DynamoDB left pointer reads unprocessed after retries")
        return found

    def get_version_meta(self, version: int, *, consistent: bool = True) -> VersionMeta | None:
        item = self._get(self.space.versions, version, consistent=consistent)
        return VersionMeta.from_item(item) if item else None

    def arrivals(self) -> dict[int, str] | None:
        """In a replica region, each version its arrival check recorded as wholly arrived there,
        with that version's ``uid`` (one consistent Query, region-local); None in home.

        The region's pointer shares the partition (at ``META_SORT_KEY``) and is no arrival record.
        """
        return self._arrival_records(indexed=False)

    def indexed_arrivals(self) -> dict[int, str] | None:
        """In a replica region, each arrived version whose index entries the arrival check counted
        in the region's GSIs, with its ``uid`` (one consistent Query, region-local); None in home."""
        return self._arrival_records(indexed=True)

    def _arrival_records(self, *, indexed: bool) -> dict[int, str] | None:
        if self.pointer_region is None:
            return None
        partition = self.space.region_pointer(self.pointer_region)
        return {
            int(item[keys.SORT_KEY]): str(item.get("uid", ""))
            for item in self._query_partition(partition)
            if int(item[keys.SORT_KEY]) != keys.META_SORT_KEY and (item.get("indexed") or not indexed)
        }

    def list_version_metas(self) -> list[VersionMeta]:
        return [VersionMeta.from_item(item) for item in self._query_partition(self.space.versions)]

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None:
        """The cover holding a bucket of ``version``; the first call per version reads its list."""
        return self._covers.get(version).find(family, bucket)

    def read_covers(self, version: int) -> list[Cover]:
        """The version's cover list: a Query of its pages, once per container and version."""
        return [
            Cover.from_item(entry)
            for page in self._query_partition(self.space.covers_partition_key(version))
            for entry in page.get("covers", [])
        ]

    # -- internals --------------------------------------------------------------------

    def _get(self, partition_key: str, sort_key: int, *, consistent: bool) -> Item | None:
        return get_item(self.client, self.table_name, partition_key, sort_key, consistent=consistent)

    def _query_partition(self, partition_key: str) -> Iterator[Item]:
        """Every item of one partition, read consistently."""
        return query_partition(self.client, self.table_name, partition_key)


# -- the two reads every side of the table makes (the loader's concerns too) --------------------


def get_item(
    client: DynamoDBClient, table_name: str, partition_key: str, sort_key: int, *, consistent: bool
) -> Item | None:
    response = client.get_item(
        TableName=table_name, Key=item_key(partition_key, sort_key), ConsistentRead=consistent
    )
    raw = response.get("Item")
    return deserialize_item(raw) if raw else None


def partition_pages(
    client: DynamoDBClient, table_name: str, partition_key: str, **extra: Any
) -> Iterator[Any]:
    """The Query pages of one partition, read consistently unless ``ConsistentRead`` says otherwise;
    ``extra`` adds ``Select``, ``ProjectionExpression`` and their names."""
    names = {"#pk": keys.PARTITION_KEY, **extra.pop("ExpressionAttributeNames", {})}
    consistent = extra.pop("ConsistentRead", True)
    return iter(
        client.get_paginator("query").paginate(
            TableName=table_name,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":pk": {"S": partition_key}},
            ConsistentRead=consistent,
            **extra,
        )
    )


def query_partition(
    client: DynamoDBClient, table_name: str, partition_key: str, *, consistent: bool = True
) -> Iterator[Item]:
    """Every item of one partition in ascending sort-key order, a page at a time."""
    for page in partition_pages(client, table_name, partition_key, ConsistentRead=consistent):
        for raw in page.get("Items", []):
            yield deserialize_item(raw)
