"""The state of a dataset's vendor feed: the release loaded last, and the feed's failed runs in a row.

One item per dataset (``keys.KeySpace.feed_state``, sort key 0), read with
ConsistentRead: ``release``, the ``loader.records.FeedState`` as a map of
strings, and ``failures_in_a_row``, which a feed's alarm watches. ``ipmeta
update`` and the Fetch state both keep it here, so a deployed table's feeds and
the CLI pointed at it (``--table``) agree on what was loaded. ``FeedStates`` is
the ``FeedStateStore`` the feeds ask (``loader.feeds.fetch.check_feed``).
"""

from __future__ import annotations

from typing import Final

from ipmeta.schema import keys
from ipmeta.store.dynamodb import item_key, serialize_value
from loader.records import FeedState
from loader.store.dataset_items import DatasetItems

#: Attributes of the feed item: the release loaded last (a map of strings), and the
#: feed's failed runs in a row (what its alarm watches).
FEED_RELEASE: Final = "release"
FEED_FAILURES: Final = "failures_in_a_row"


class FeedStates(DatasetItems):
    """The state of the feed that keeps this dataset current."""

    def get(self, feed: str) -> FeedState | None:
        """The release of ``feed`` loaded last; None before the first.

        A state recorded by another feed (the dataset's feed was changed) is no
        state of this one: its first run fetches.
        """
        item = self._get(self.space.feed_state, keys.META_SORT_KEY) or {}
        release = item.get(FEED_RELEASE)
        if not release or release.get("feed") != feed:
            return None
        return FeedState.from_dict({str(name): str(value) for name, value in release.items()})

    def put(self, state: FeedState) -> None:
        """The release just loaded (or found active): the next run compares with it. A success: 0 failures."""
        self.client.update_item(
            TableName=self.table_name,
            Key=item_key(self.space.feed_state, keys.META_SORT_KEY),
            UpdateExpression="SET #release = :release, #failures = :zero",
            ExpressionAttributeNames={"#release": FEED_RELEASE, "#failures": FEED_FAILURES},
            ExpressionAttributeValues={
                ":release": serialize_value(state.to_dict()),
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


#: The network lists' releases, by feed name (``network:aws``), on the dataset's feed item.
LIST_RELEASES: Final = "lists"


class ListStates(FeedStates):
    """The states of the several feeds of one dataset (the public network lists): one release each.

    Kept beside the dataset's own feed state, in a map by feed name, so each
    list's next run compares with its own release.
    """

    def get(self, feed: str) -> FeedState | None:
        item = self._get(self.space.feed_state, keys.META_SORT_KEY) or {}
        release = (item.get(LIST_RELEASES) or {}).get(feed)
        if not release:
            return None
        return FeedState.from_dict({str(name): str(value) for name, value in release.items()})

    def put(self, state: FeedState) -> None:
        key = item_key(self.space.feed_state, keys.META_SORT_KEY)
        # A document path needs its map: made once, then each list's entry is set alone.
        self.client.update_item(
            TableName=self.table_name,
            Key=key,
            UpdateExpression="SET #lists = if_not_exists(#lists, :empty), #failures = :zero",
            ExpressionAttributeNames={"#lists": LIST_RELEASES, "#failures": FEED_FAILURES},
            ExpressionAttributeValues={":empty": {"M": {}}, ":zero": {"N": "0"}},
        )
        self.client.update_item(
            TableName=self.table_name,
            Key=key,
            UpdateExpression="SET #lists.#feed = :release",
            ExpressionAttributeNames={"#lists": LIST_RELEASES, "#feed": state.feed},
            ExpressionAttributeValues={":release": serialize_value(state.to_dict())},
        )
