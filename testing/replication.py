"""A global table on local DynamoDBs: each write in one region applied in the others, item by item.

The stand-in for DynamoDB global tables that ``bench/replication.py`` and
``tests/integration/test_replicas.py`` drive, since no AWS is reachable here.
What it keeps of the real thing:

- **Writes are captured where the product makes them**: a botocore ``after-call``
  hook on a region's client, for every PutItem, BatchWriteItem, UpdateItem and
  DeleteItem that succeeded (a BatchWriteItem's unprocessed items were not
  written, so they are not replicated). Each write becomes whole-item versions,
  as global tables ship them: a put's item, a delete's tombstone, an update's
  item read back from the region that took it.
- **Item by item, in no order:** each version is delivered to every other
  region after its own random delay (``Delays``: mostly milliseconds, a share
  of them seconds), so a version's items, its pointer and its deletes arrive in
  any order, and some very late.
- **Its replicas are the table's:** ``DescribeTable`` through a region's client
  lists the other regions under ``Replicas``, as it does for a global table, so
  the product learns its replica regions from the table itself.
- **The last writer wins:** each version carries the time its write was captured;
  a region applies it only if it is newer than what that region last took for
  the item, from anywhere, itself included.

- **Global secondary indexes lag their table:** an item applied in a replica
  region enters that region's GSIs only after a delay of its own
  (``index_delays``; ``hold_indexes()`` keeps it out until ``release_indexes()``),
  as DynamoDB updates a GSI asynchronously: a Query of an index (``Select=COUNT``
  included) does not see the entries not propagated yet. dynalite updates its
  indexes with the write, so the lag is applied where indexes are read (a
  botocore hook on each client of the region). A region's own writes enter its
  indexes at once, unless ``own_index_delays`` says how late (or ``hold_indexes(
  own_writes=True)`` holds them): a GSI lags in home too.

``hold(predicate)`` keeps back the versions a test names until ``release()``,
so a test can stop a version half-arrived on purpose; ``on_delete`` sees every
delete a region takes (its own, or replicated) before it is applied, which is
how the simulation counts items deleted while a region still served them.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import make_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

WRITES: Final = frozenset({"PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem"})
Key = tuple[str, str]
Image = dict[str, Any]
#: Items one applied BatchWriteItem carries, as DynamoDB allows.
BATCH: Final = 25


@dataclass(frozen=True)
class Delays:
    """How long an item version takes to reach another region: exponential around ``typical_seconds``,
    and ``long_share`` of them between ``long_seconds`` apart (a slow link, a busy partition)."""

    typical_seconds: float = 0.02
    long_share: float = 0.02
    long_seconds: tuple[float, float] = (0.5, 3.0)

    def draw(self, rng: random.Random) -> float:
        if rng.random() < self.long_share:
            return rng.uniform(*self.long_seconds)
        return rng.expovariate(1 / self.typical_seconds) if self.typical_seconds > 0 else 0.0


@dataclass(frozen=True)
class ItemVersion:
    """One item as one write left it (``image`` None: deleted), stamped when the write was captured."""

    key: Key
    image: Image | None
    stamp: tuple[int, int]
    origin: str


@dataclass(order=True)
class _Due:
    due: float
    order: int
    version: ItemVersion = field(compare=False)


def key_of(item: Mapping[str, Any]) -> Key:
    return str(item[keys.PARTITION_KEY]["S"]), str(item[keys.SORT_KEY]["N"])


class _Applier:
    """One thread applying one share of the items bound for one region, each when it is due."""

    def __init__(self, table: GlobalTable, region: str) -> None:
        self.table = table
        self.region = region
        self.queue: list[_Due] = []
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"replicate-{region}")
        self.thread.start()

    def put(self, entry: _Due) -> None:
        with self.ready:
            heapq.heappush(self.queue, entry)
            self.ready.notify()

    def _run(self) -> None:
        while True:
            with self.ready:
                while not self.table.closed and (not self.queue or self.queue[0].due > time.monotonic()):
                    self.ready.wait(self.queue[0].due - time.monotonic() if self.queue else None)
                if self.table.closed:
                    return
                due: dict[Key, ItemVersion] = {}
                while self.queue and self.queue[0].due <= time.monotonic() and len(due) < BATCH:
                    version = heapq.heappop(self.queue).version
                    if version.key not in due or due[version.key].stamp < version.stamp:
                        if version.key in due:
                            self.table.done(1)
                        due[version.key] = version
                    else:
                        self.table.done(1)
            self.table.apply(self.region, list(due.values()))


class GlobalTable:
    """One table in several regions (a local DynamoDB each), replicating as global tables do."""

    def __init__(
        self,
        table_name: str,
        endpoints: Mapping[str, str],
        *,
        delays: Delays = Delays(),
        seed: int = 0,
        appliers: int = 4,
        on_delete: Callable[[str, Key], None] | None = None,
        index_delays: Delays | None = None,
        own_index_delays: Delays | None = None,
    ) -> None:
        self.table_name = table_name
        self.endpoints = dict(endpoints)
        self.delays = delays
        self.on_delete = on_delete
        self.closed = False
        self.replicated = 0
        self.superseded = 0
        self._rng = random.Random(seed)
        self._orders = itertools.count()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._stamps: dict[str, dict[Key, tuple[int, int]]] = {region: {} for region in self.endpoints}
        self._held: list[tuple[str, ItemVersion]] = []
        self._hold: Callable[[str, ItemVersion], bool] | None = None
        self.index_delays = index_delays
        #: When each applied item's index entries become visible in a region (``time.monotonic``).
        self._indexed_at: dict[str, dict[Key, float]] = {region: {} for region in self.endpoints}
        self._indexes_held = False
        self.own_index_delays = own_index_delays
        self._own_indexes_held = False
        self._raw = {region: self._plain_client(region) for region in self.endpoints}
        self._appliers = {
            region: [_Applier(self, region) for _ in range(appliers)] for region in self.endpoints
        }

    # -- what the product is handed ------------------------------------------------------------

    def client(self, region: str) -> DynamoDBClient:
        """A client of ``region`` whose successful writes reach every other region, in time."""
        client = self._plain_client(region)
        client.meta.events.register("before-parameter-build.dynamodb", _remember_params)
        client.meta.events.register("before-parameter-build.dynamodb", self._own_writes(region))
        self._lag_indexes(client, region)
        client.meta.events.register("after-call.dynamodb", self._captured(region))
        client.meta.events.register("after-call.dynamodb.DescribeTable", self._described(region))
        return client

    def plain(self, region: str) -> DynamoDBClient:
        """A client of ``region`` that replicates nothing (reads, and a region's own checks)."""
        return self._raw[region]

    # -- control --------------------------------------------------------------------------------

    def hold(self, predicate: Callable[[str, ItemVersion], bool]) -> None:
        """Keep back, until ``release``, every version bound for a region that ``predicate`` names."""
        with self._lock:
            self._hold = predicate

    def hold_indexes(self, *, own_writes: bool = False) -> None:
        """Keep the index entries of every item applied from now on out of its region's GSIs; with
        ``own_writes``, of every item a region's client writes there itself too."""
        with self._lock:
            self._indexes_held = True
            self._own_indexes_held = own_writes

    def release_indexes(self) -> None:
        """Every held index entry becomes visible now."""
        now = time.monotonic()
        with self._lock:
            self._indexes_held = self._own_indexes_held = False
            for entries in self._indexed_at.values():
                for key, at in entries.items():
                    entries[key] = min(at, now)

    def release(self) -> None:
        with self._lock:
            held, self._held, self._hold = self._held, [], None
        for region, version in held:
            self._send(region, version, 0.0)

    def settle(self, timeout: float = 120.0) -> None:
        """Wait until every version sent has been applied (held ones aside)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                if not self._idle.wait(deadline - time.monotonic()):
                    raise TimeoutError(f"{self._pending} item versions still in flight")

    def close(self) -> None:
        self.closed = True
        for appliers in self._appliers.values():
            for applier in appliers:
                with applier.ready:
                    applier.ready.notify_all()

    # -- capture --------------------------------------------------------------------------------

    def _described(self, region: str) -> Callable[..., None]:
        """``DescribeTable`` names the table's other replicas, as it does for a global table."""

        def described(parsed: Any, **_: Any) -> None:
            table = parsed.get("Table")
            if table is not None and table.get("TableName") == self.table_name:
                table["Replicas"] = [
                    {"RegionName": other, "ReplicaStatus": "ACTIVE"}
                    for other in sorted(self.endpoints)
                    if other != region
                ]

        return described

    def _plain_client(self, region: str) -> DynamoDBClient:
        client = make_client(Settings(self.table_name, self.endpoints[region], 0.0))
        self._lag_indexes(client, region)
        return client

    # -- index lag --------------------------------------------------------------------------------

    def _lag_indexes(self, client: DynamoDBClient, region: str) -> None:
        """An index Query on ``client`` leaves out the entries not yet propagated in ``region``."""
        client.meta.events.register("before-parameter-build.dynamodb.Query", _index_query_params)
        client.meta.events.register("after-call.dynamodb.Query", self._visible_entries(region))

    def _visible_entries(self, region: str) -> Callable[..., None]:
        def visible(parsed: Any, context: Any, **_: Any) -> None:
            asked = context.get("index_query")
            if asked is None or "Items" not in parsed:
                return
            now = time.monotonic()
            with self._lock:
                pending = self._indexed_at[region]
                items = [item for item in parsed["Items"] if pending.get(key_of(item), 0.0) <= now]
            limit = asked["limit"]
            if limit is not None and len(items) > limit:
                items = items[:limit]
                parsed["LastEvaluatedKey"] = {name: items[-1][name] for name in asked["key_names"]}
            parsed["Count"] = len(items)
            if asked["count"]:
                parsed.pop("Items")
            else:
                parsed["Items"] = items

        return visible

    def _index_entries_applied(self, region: str, versions: list[ItemVersion], *, own: bool = False) -> None:
        """When each applied (or, ``own``, written) item's index entries show in ``region``'s GSIs
        (a delete's, at once)."""
        delays, held = self.index_delays, self._indexes_held
        if own:
            delays, held = self.own_index_delays, self._own_indexes_held
        if delays is None and not held:
            return
        now = time.monotonic()
        with self._lock:
            entries = self._indexed_at[region]
            for version in versions:
                indexed = version.image is not None and any(
                    index.partition_key in version.image for index in keys.INDEXES
                )
                if not indexed:
                    entries.pop(version.key, None)
                elif held:
                    entries[version.key] = float("inf")
                else:
                    assert delays is not None
                    entries[version.key] = now + delays.draw(self._rng)

    def _own_writes(self, region: str) -> Callable[..., None]:
        """A region's own puts enter its GSIs late too, when asked: marked before they are sent."""

        def written(params: Any, model: Any, **_: Any) -> None:
            if self.own_index_delays is None and not self._own_indexes_held:
                return
            if model.name == "PutItem":
                images = [params["Item"]]
            elif model.name == "BatchWriteItem":
                requests = params["RequestItems"].get(self.table_name, [])
                images = [request["PutRequest"]["Item"] for request in requests if "PutRequest" in request]
            else:
                return
            stamp = (time.time_ns(), 0)
            versions = [ItemVersion(key_of(image), image, stamp, region) for image in images]
            self._index_entries_applied(region, versions, own=True)

        return written

    def _captured(self, region: str) -> Callable[..., None]:
        def captured(http_response: Any, parsed: Any, model: Any, context: Any, **_: Any) -> None:
            if model.name not in WRITES or http_response.status_code >= 300:
                return
            versions = self._versions(region, model.name, context["replicated_params"], parsed)
            for version in versions:
                if version.image is None and self.on_delete is not None:
                    self.on_delete(region, version.key)
                with self._lock:
                    self._stamps[region][version.key] = version.stamp
                for target in self.endpoints:
                    if target != region:
                        self._send(target, version, self.delays.draw(self._rng))

        return captured

    def _versions(
        self, region: str, operation: str, params: Mapping[str, Any], parsed: Any
    ) -> list[ItemVersion]:
        if operation == "PutItem":
            images: list[tuple[Key, Image | None]] = [(key_of(params["Item"]), params["Item"])]
        elif operation == "DeleteItem":
            images = [(key_of(params["Key"]), None)]
        elif operation == "UpdateItem":
            key = params["Key"]
            found = self._raw[region].get_item(TableName=self.table_name, Key=key, ConsistentRead=True)
            images = [(key_of(key), found.get("Item"))]
        else:
            images = _batch_images(params, parsed, self.table_name)
        return [
            ItemVersion(key, image, (time.time_ns(), next(self._orders)), region) for key, image in images
        ]

    def _send(self, target: str, version: ItemVersion, delay: float) -> None:
        with self._lock:
            if self._hold is not None and self._hold(target, version):
                self._held.append((target, version))
                return
            self._pending += 1
        appliers = self._appliers[target]
        applier = appliers[hash(version.key) % len(appliers)]
        applier.put(_Due(time.monotonic() + delay, next(self._orders), version))

    # -- apply ----------------------------------------------------------------------------------

    def done(self, count: int) -> None:
        with self._idle:
            self._pending -= count
            if not self._pending:
                self._idle.notify_all()

    def apply(self, region: str, versions: list[ItemVersion]) -> None:
        """Apply what is due in ``region`` unless a newer version of the same item got there first."""
        with self._lock:
            newer = [v for v in versions if self._stamps[region].get(v.key, (0, 0)) < v.stamp]
            for version in newer:
                self._stamps[region][version.key] = version.stamp
            self.superseded += len(versions) - len(newer)
        for version in newer:
            if version.image is None and self.on_delete is not None:
                self.on_delete(region, version.key)
        requests: list[Any] = [
            {"PutRequest": {"Item": v.image}}
            if v.image is not None
            else {
                "DeleteRequest": {
                    "Key": {keys.PARTITION_KEY: {"S": v.key[0]}, keys.SORT_KEY: {"N": v.key[1]}}
                }
            }
            for v in newer
        ]
        # Marked before the write: an entry must never show between the write and its mark.
        self._index_entries_applied(region, newer)
        while requests:
            response = self._raw[region].batch_write_item(RequestItems={self.table_name: requests})
            requests = list(response.get("UnprocessedItems", {}).get(self.table_name, []))
        with self._lock:
            self.replicated += len(newer)
        self.done(len(versions))


def _remember_params(params: Any, context: Any, model: Any, **_: Any) -> None:
    """The request's parameters, for the ``after-call`` hook, which is not given them."""
    if model.name in WRITES:
        context["replicated_params"] = params


def _index_query_params(params: Any, context: Any, **_: Any) -> None:
    """An index Query asks for every entry with the keys (a count, or a page past ``Limit``, is
    worked out once the entries not propagated are left out: ``GlobalTable._visible_entries``)."""
    index_name = params.get("IndexName")
    if index_name is None:
        return
    (index,) = [index for index in keys.INDEXES if index.name == index_name]
    count = params.pop("Select", None) == "COUNT"
    names = (keys.PARTITION_KEY, keys.SORT_KEY, index.partition_key, index.sort_key)
    if count:
        aliases = {f"#lag{position}": name for position, name in enumerate(names)}
        params["ExpressionAttributeNames"] = {**params.get("ExpressionAttributeNames", {}), **aliases}
        params["ProjectionExpression"] = ", ".join(aliases)
    context["index_query"] = {"count": count, "limit": params.pop("Limit", None), "key_names": names}


def _batch_images(params: Mapping[str, Any], parsed: Any, table_name: str) -> list[tuple[Key, Image | None]]:
    """A BatchWriteItem's written items: its requests, less those DynamoDB left unprocessed."""
    unprocessed = {
        key_of(request["PutRequest"]["Item"] if "PutRequest" in request else request["DeleteRequest"]["Key"])
        for request in parsed.get("UnprocessedItems", {}).get(table_name, [])
    }
    images: list[tuple[Key, Image | None]] = []
    for request in params["RequestItems"].get(table_name, []):
        if "PutRequest" in request:
            item = request["PutRequest"]["Item"]
            images.append((key_of(item), item))
        else:
            images.append((key_of(request["DeleteRequest"]["Key"]), None))
    return [(key, image) for key, image in images if key not in unprocessed]
