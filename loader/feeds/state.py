"""Where the release loaded last of each feed is remembered, between scheduled runs.

``FeedStateStore`` (``loader.feeds.feed``) is two calls, ``get`` and ``put``.
Here are the two the library needs itself: in memory (tests) and a JSON file.
``ipmeta update`` and the Fetch state keep the state in the table instead
(``loader.pipeline.fetch.TableFeedStates``): ``loader.store`` may not import the
feeds, so it keeps ``FeedState.to_dict()`` as plain strings and the pipeline adapts it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from loader.feeds.errors import FeedConfigInvalid
from loader.feeds.feed import FeedState


class MemoryFeedStates:
    def __init__(self, *states: FeedState) -> None:
        self._states = {state.feed: state for state in states}

    def get(self, feed: str) -> FeedState | None:
        return self._states.get(feed)

    def put(self, state: FeedState) -> None:
        self._states[state.feed] = state


class JsonFileFeedStates:
    """One JSON object of feed name -> state, replaced atomically on every ``put``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, feed: str) -> FeedState | None:
        entry = self._read().get(feed)
        return FeedState.from_dict(entry) if entry is not None else None

    def put(self, state: FeedState) -> None:
        states = self._read()
        states[state.feed] = state.to_dict()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A run killed mid-write leaves the previous file whole: write aside, then rename.
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(states, out, indent=2, sort_keys=True)
        Path(temporary).replace(self.path)

    def _read(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise FeedConfigInvalid(f"{self.path}: not the feeds' state file ({error})") from error
        if not isinstance(data, dict):
            raise FeedConfigInvalid(f"{self.path}: not the feeds' state file (not a JSON object)")
        return data
