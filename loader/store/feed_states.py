"""The state of a dataset's vendor feed: the release loaded last, and the feed's failed runs in a row.

One item per dataset (``keys.KeySpace.feed_state``, sort key 0), read with
ConsistentRead: ``release``, the ``loader.records.FeedState`` as a map of
strings, and ``failures_in_a_row``, which a feed's alarm watches. The store
keeps the state as plain strings: ``loader.store`` may not import
``loader.feeds``, whose ``FeedState`` the pipeline's adapter builds from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_value
from loader.store.dataset_items import DatasetItems

#: Attributes of the feed item: the release loaded last (a map of strings), and the
#: feed's failed runs in a row (what its alarm watches).
FEED_RELEASE: Final = "release"
FEED_FAILURES: Final = "failures_in_a_row"


class FeedStates(DatasetItems):
    """The state of the feed that keeps this dataset current."""

    def read(self) -> dict[str, str] | None:
        """The release of this dataset's feed loaded last, read consistently; None before the first."""
        item = self._get(self.space.feed_state, keys.META_SORT_KEY) or {}
        state = item.get(FEED_RELEASE)
        return {str(name): str(value) for name, value in state.items()} if state else None

    def put(self, state: Mapping[str, str]) -> None:
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

    def count_run(self, *, failed: bool) -> int:
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
