"""A dataset's versions: the pointer lookups follow, the version counter, each version's metadata.

Also the table's list of datasets (``keys.DATASETS_PK``): which ones a load
started (cleanup visits them) and which ones serve (lookups fan out to them).
The reads of the pointer and of version metadata are the lookup's own
(``ipmeta.store.dynamodb.Store``, ``LoaderTable.lookup``); these are the writes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from ipmeta.schema import keys
from ipmeta.schema.records import VersionMeta, VersionStatus
from ipmeta.store.dynamodb import deserialize_item, item_key, serialize_item
from loader.errors import ActivationConflict
from loader.records import Pointer, PointerMove
from loader.store.dataset_items import DatasetItems, condition_failed

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

#: The pointer's count of its own writes (``loader.records.Pointer.generation``).
POINTER_GENERATION: Final = "generation"
#: The attribute that records when a version entered each status.
_STATUS_TIMES: Final[Mapping[VersionStatus, str]] = {
    VersionStatus.ACTIVE: "activated_at",
    VersionStatus.RETIRED: "retired_at",
    VersionStatus.FAILED: "failed_at",
    VersionStatus.DELETING: "deleting_at",
    VersionStatus.DELETED: "deleted_at",
}


class Versions(DatasetItems):
    """The pointer switch, new version numbers, version metadata and the list of datasets."""

    def activate(self, version: int, *, expected_current: int | None, base: int = 0) -> PointerMove:
        """Point lookups at ``version``, only if the pointer still names ``expected_current``.

        A delta's ``base`` is on the pointer too, so a lookup learns both from the one read.
        Each write adds one to the pointer's ``generation``, which replica regions copy when
        they follow (``loader.pipeline.arrival``) and cleanup compares (``retention``).
        """
        at = int(time.time())
        names = {"#version": "version", "#previous": "previous", "#at": "activated_at"}
        names |= {"#generation": POINTER_GENERATION, "#base": "base"}
        values: dict[str, AttributeValueTypeDef] = {
            ":version": {"N": str(version)},
            ":previous": {"N": str(expected_current or 0)},
            ":at": {"N": str(at)},
            ":one": {"N": "1"},
        }
        update = "SET #version = :version, #previous = :previous, #at = :at"
        if base:
            update += ", #base = :base"
            values[":base"] = {"N": str(base)}
        update += " ADD #generation :one" + ("" if base else " REMOVE #base")
        if expected_current is None:
            condition = "attribute_not_exists(#pk)"
            names["#pk"] = keys.PARTITION_KEY
        else:
            condition = "#version = :expected"
            values[":expected"] = {"N": str(expected_current)}
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=item_key(self.space.pointer, keys.META_SORT_KEY),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
            )
        except ClientError as error:
            if condition_failed(error):
                raise ActivationConflict(
                    f"the active version changed since this load started (expected "
                    f"{keys.format_version(expected_current) if expected_current else 'none'}); "
                    "another load activated first"
                ) from error
            raise
        old = response.get("Attributes")
        previous = Pointer.from_item(deserialize_item(old)) if old else None
        generation = (previous.generation if previous else 0) + 1
        return PointerMove(previous, Pointer(version, base, generation, at))

    def release(self, move: PointerMove) -> None:
        """Stamp each version ``move`` stopped reading with the generation that stopped reading it.

        Only a version's existing metadata is stamped. A crash before this leaves a version
        unstamped, and cleanup then waits for every region to follow home's present generation.
        """
        for version in sorted(move.released):
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=item_key(self.space.versions, version),
                    UpdateExpression="SET #released = :generation",
                    ConditionExpression="attribute_exists(#pk)",
                    ExpressionAttributeNames={"#released": "released_generation", "#pk": keys.PARTITION_KEY},
                    ExpressionAttributeValues={":generation": {"N": str(move.current.generation)}},
                )
            except ClientError as error:
                if not condition_failed(error):
                    raise

    def allocate(self) -> int:
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
        names = {self.space.dataset}
        if serving and self.space.dataset != keys.DEFAULT_DATASET:
            default_pointer = keys.key_space(keys.DEFAULT_DATASET).pointer
            if self._get(default_pointer, keys.META_SORT_KEY) is not None:
                names.add(keys.DEFAULT_DATASET)
        attribute = keys.SERVING_DATASETS if serving else keys.STARTED_DATASETS
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(keys.DATASETS_PK, keys.META_SORT_KEY),
            UpdateExpression="ADD #names :names",
            ExpressionAttributeNames={"#names": attribute},
            ExpressionAttributeValues={":names": {"SS": sorted(names)}},
        )

    def started_datasets(self) -> list[str]:
        """Every dataset a load ever started, sorted (``default`` always): what cleanup visits."""
        item = self._get(keys.DATASETS_PK, keys.META_SORT_KEY) or {}
        started = (*item.get(keys.STARTED_DATASETS, []), *item.get(keys.SERVING_DATASETS, []))
        return sorted({keys.DEFAULT_DATASET, *started})

    def put_meta(self, meta: VersionMeta) -> None:
        item = {**meta.to_item(), keys.PARTITION_KEY: self.space.versions, keys.SORT_KEY: meta.version}
        self.client.put_item(TableName=self.table_name, Item=serialize_item(item))

    def set_status(self, version: int, status: VersionStatus, at: int) -> None:
        """A version's new status, stamped with when it changed (``activated_at``, ``retired_at``...)."""
        fields: dict[str, Any] = {"status": str(status)}
        if status in _STATUS_TIMES:
            fields[_STATUS_TIMES[status]] = at
        self._update(self.space.versions, version, fields)

    # -- the two claims on a version's metadata, which cleanup and activation race for -------------

    def claim_active(self, version: int, *, allowed: frozenset[VersionStatus], at: int) -> bool:
        """Mark ``version`` active before the pointer names it, only from an ``allowed`` status.

        Cleanup marks a version ``deleting`` with a write on the same item (``mark_deleting``),
        so of a rollback (or an activation) and a cleanup, exactly one wins: a version never
        becomes active while its items go, nor goes while it is active.
        """
        return self._claim(version, VersionStatus.ACTIVE, allowed, at)

    def withdraw_claim(self, version: int, at: int) -> None:
        """An activation that claimed ``version`` lost the pointer to another load: the version is a
        failed load, never activated, which cleanup may delete."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=item_key(self.space.versions, version),
                UpdateExpression="SET #status = :failed, #failed_at = :at REMOVE #activated",
                ConditionExpression="#status = :active",
                ExpressionAttributeNames={
                    "#status": "status",
                    "#failed_at": _STATUS_TIMES[VersionStatus.FAILED],
                    "#activated": _STATUS_TIMES[VersionStatus.ACTIVE],
                },
                ExpressionAttributeValues={
                    ":failed": {"S": str(VersionStatus.FAILED)},
                    ":active": {"S": str(VersionStatus.ACTIVE)},
                    ":at": {"N": str(at)},
                },
            )
        except ClientError as error:
            if not condition_failed(error):
                raise

    def mark_deleting(self, version: int, *, allowed: frozenset[VersionStatus], at: int) -> bool:
        """Cleanup's first phase: ``deleting``, only from an ``allowed`` status.

        A failed or abandoned load (``loading``, ``failed``) is marked only if it was never
        activated: a pointer that once named it makes it a retired version, kept by retention
        and by the regions, whatever its load record says. Metadata a load died before writing
        is created, so nothing activates that version later either.
        """
        unserved = bool(allowed & {VersionStatus.LOADING, VersionStatus.FAILED})
        return self._claim(version, VersionStatus.DELETING, allowed, at, never_activated=unserved)

    def _claim(
        self,
        version: int,
        status: VersionStatus,
        allowed: frozenset[VersionStatus],
        at: int,
        *,
        never_activated: bool = False,
    ) -> bool:
        names = {"#status": "status", "#at": _STATUS_TIMES[status], "#version": "version"}
        values: dict[str, AttributeValueTypeDef] = {
            ":status": {"S": str(status)},
            ":at": {"N": str(at)},
            ":version": {"N": str(version)},
        }
        options = []
        for index, name in enumerate(sorted(allowed)):
            values[f":allowed{index}"] = {"S": str(name)}
            options.append(f":allowed{index}")
        condition = f"#status IN ({', '.join(options)})"
        if never_activated:
            condition = f"({condition}) AND attribute_not_exists(#activated)"
            names["#activated"] = _STATUS_TIMES[VersionStatus.ACTIVE]
            condition = f"attribute_not_exists(#pk) OR ({condition})"
            names["#pk"] = keys.PARTITION_KEY
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=item_key(self.space.versions, version),
                UpdateExpression="SET #status = :status, #at = :at, #version = :version",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if condition_failed(error):
                return False
            raise
        return True
