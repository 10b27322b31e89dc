"""``fetch``: the first state of a feed's run; ``record_release`` once its load is active.

A scheduled run starts with ``{"feed": "city"}``: the name of a feed the
stack deployed (``IPMETA_FEEDS``, each feed's settings and its dataset's
load options; a secret's *name*, never its value). ``fetch_feed`` checks the
vendor's latest release against the state of the one loaded last (one small
request) and either ends the run as ``unchanged``, or streams the release
into the source bucket (``feeds/<dataset>/``, an S3 multipart upload a file,
all aborted on any failed check) and returns the load's input for ``start``:
``{"dataset", "sources", "options", "feed"}``. ``feed`` is the release's
payload (names, checksums and the state to remember, no credential); it
rides along the load until ``record_release`` stores it, after activation
(or when ``start`` found those very bytes already active).

The state lives in the table, one item per dataset (``loader.store.feed_states``),
with the feed's failed runs in a row: ``count_run`` resets it on success and
raises it from ``abort``, and the handlers publish it for the feed's alarm.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ipmeta.schema import keys
from loader.feeds.config import FeedConfig, build_feed, credentials_from_secret
from loader.feeds.errors import FeedConfigInvalid
from loader.feeds.fetch import check_feed, fetch_release
from loader.feeds.http_client import HttpClient
from loader.pipeline.guard import DEFAULT_FEED_MAX_CHANGE_RATIO, DEFAULT_MIN_SIZE_RATIO
from loader.pipeline.network_feed import ListFiles, check_lists, fetch_lists, keep_event
from loader.records import FeedState
from loader.settings import FEEDS_PREFIX
from loader.store.s3 import S3Sinks
from loader.store.table import LoaderTable

#: What ``fetch`` says of a run: nothing new (the run ends), or a release to load.
UNCHANGED, FETCHED = "unchanged", "fetched"


@dataclass(frozen=True)
class DeployedFeed:
    """One feed as the stack deployed it: its settings, and its dataset's load options."""

    config: FeedConfig
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dataset(self) -> str:
        return self.config.dataset_name


def encode_feeds(feeds: Iterable[DeployedFeed]) -> str:
    """``IPMETA_FEEDS``, as the stack writes it: each feed by its dataset (a feed's name in the stack).

    Settings and load options only: a secret is named, its value is read at run time.
    """
    entries = {
        feed.dataset: {"settings": asdict(feed.config), "options": dict(feed.options)} for feed in feeds
    }
    return json.dumps(entries, sort_keys=True, separators=(",", ":"))


def decode_feeds(text: str) -> dict[str, DeployedFeed]:
    entries: dict[str, Any] = json.loads(text or "{}")
    return {
        name: DeployedFeed(FeedConfig.from_dict(entry["settings"]), entry.get("options") or {})
        for name, entry in entries.items()
    }


def fetch_feed(
    name: str,
    feeds: Mapping[str, DeployedFeed],
    table: LoaderTable,
    sinks: Callable[[str], S3Sinks],
    *,
    read_secret: Callable[[str], Any],
    http: HttpClient,
    workdir: Path | None = None,
    list_files: Callable[[str], ListFiles] | None = None,
) -> dict[str, Any]:
    """The Fetch state: ``{"status": "unchanged", ...}``, or the input of ``start`` for the new release.

    A ``network`` feed's lists take ``ipmeta update``'s path (``network_feed``), their files in
    ``list_files(prefix)``.
    """
    deployed = feeds.get(name)
    if deployed is None:
        raise FeedConfigInvalid(f"no feed {name[:40]!r} is deployed; known: {', '.join(sorted(feeds))}")
    config = deployed.config
    if config.vendor == "network":
        if list_files is None:
            raise FeedConfigInvalid(f"feed {name}: network lists need their files' place")
        files = list_files(f"{FEEDS_PREFIX}/{deployed.dataset}")
        return _fetch_lists(name, deployed, table, files, http=http, workdir=workdir)
    credentials = credentials_from_secret(config, read_secret(config.secret)) if config.secret else None
    feed = build_feed(config, http, credentials)
    dataset_table = table.for_dataset(deployed.dataset)
    check = check_feed(feed, dataset_table.feed_states)
    if check.unchanged:
        return {
            "status": UNCHANGED,
            "feed": name,
            "dataset": deployed.dataset,
            "release": check.release.release_id,
            "failures_in_a_row": dataset_table.feed_states.count_run(failed=False),
        }
    folder = sinks(f"{FEEDS_PREFIX}/{deployed.dataset}")
    fetched = fetch_release(feed, check.release, folder, dataset=deployed.dataset, workdir=workdir)
    # The guard's defaults, under any the dataset's sourceOptions set (docs/feeds.md, The guard).
    guard = {"max_change_ratio": DEFAULT_FEED_MAX_CHANGE_RATIO, "min_size_ratio": DEFAULT_MIN_SIZE_RATIO}
    options = {**guard, **deployed.options, "format": fetched.load_format}
    if fetched.locations:
        options["locations"] = folder.uri(fetched.locations)
    return {
        "status": FETCHED,
        "dataset": deployed.dataset,
        "sources": [folder.uri(source) for source in fetched.sources],
        "options": options,
        "feed": fetched.to_event(),
    }


def _fetch_lists(
    name: str,
    deployed: DeployedFeed,
    table: LoaderTable,
    files: ListFiles,
    *,
    http: HttpClient,
    workdir: Path | None,
) -> dict[str, Any]:
    states = table.for_dataset(deployed.dataset).list_states
    check = check_lists(deployed.config, http, states, files)
    if check.unchanged:
        return {
            "status": UNCHANGED,
            "feed": name,
            "dataset": deployed.dataset,
            "release": f"{len(check.parts)} files unchanged",
            "failures_in_a_row": states.count_run(failed=False),
        }
    release = fetch_lists(check, files, workdir=workdir)
    return {
        "status": FETCHED,
        "dataset": deployed.dataset,
        "sources": list(release.sources),
        "options": release.load_options(deployed.options),
        "feed": release.to_event(),
    }


def record_release(
    release: Mapping[str, Any], table: LoaderTable, list_files: Callable[[str], ListFiles] | None = None
) -> FeedState:
    """The release a load just activated (or found active) becomes its feed's state; the run succeeded.

    A network dataset's (``lists`` in the release): its new files replace the current ones, and each
    list's release becomes its state (``network_feed.keep_lists``); the state returned names them all.
    """
    if "lists" in release:
        if list_files is None:
            raise FeedConfigInvalid(f"{release['feed']}: network lists need their files' place")
        dataset = str(release["dataset"])
        files = list_files(f"{FEEDS_PREFIX}/{dataset}")
        kept = keep_event(release, files, table.for_dataset(dataset).list_states)
        return FeedState(str(release["feed"]), ", ".join(f"{s.feed}@{s.release_id}" for s in kept))
    state = FeedState.from_dict(release["state"])
    table.for_dataset(release["dataset"]).feed_states.put(state)
    return state


def feed_of(event: Mapping[str, Any]) -> str | None:
    """The feed a run is for, by its dataset: the input names it before ``fetch``, the release after it."""
    feed = event.get("feed")
    if isinstance(feed, Mapping):
        feed = feed.get("dataset")
    if not isinstance(feed, str):
        return None
    try:
        return keys.check_dataset_name(feed)
    except keys.DatasetNameInvalid:
        return None


def count_failure(event: Mapping[str, Any], table: LoaderTable) -> tuple[str, int] | None:
    """A failed run of a feed (``abort``): its dataset and its failed runs in a row; None for a plain load."""
    dataset = feed_of(event)
    if dataset is None:
        return None
    return dataset, table.for_dataset(dataset).feed_states.count_run(failed=True)
