"""A network dataset's run: check each chosen list, fetch what changed, guard it, and keep it once loaded.

The one path of ``ipmeta update --feed network:aws,tor,...`` and of a ``network``
feed's scheduled run on AWS (the Fetch and RecordRelease states). They differ
only in where the list files live (``ListFiles``): a folder under the data
directory, or the ``feeds/<dataset>/`` prefix of the source bucket
(``loader.store.s3.S3ListFiles``). Either way:

1. ``check_lists``: each chosen list's files (``loader.feeds.catalogue.list_feeds``)
   against the state of the release loaded last (``ListStates``, one conditional
   GET a file). A list is stale when its release changed or its current file is
   missing. None stale: the run ends, nothing is written.
2. ``fetch_lists``: the stale files into ``incoming/`` (verified, streamed); the
   dataset's sources are every list's file, the new ones from ``incoming/``. Each
   renewed list is measured against its current file alone (``guard.moved_too_far``):
   one list moving past its own ``max_change_ratio`` or shrinking under the floor
   holds the dataset's release (``held_by``), however small a share of the
   combined dataset it is.
3. The load (``--overlaps merge``: one piece carries every covering list's fields).
4. ``keep_lists``: once the version is active, held, or found already active, the
   new files replace the current ones and each list's release becomes its state
   (a held release too, so the next run does not load it again). A failed load keeps
   neither: the next run fetches the same releases again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from loader.feeds.catalogue import CATALOGUE, list_feeds, parse_network_lists
from loader.feeds.config import FeedConfig
from loader.feeds.errors import DownloadTruncated
from loader.feeds.fetch import FeedCheck, FetchedRelease, Progress, check_feed, fetch_release
from loader.feeds.http_client import HttpClient
from loader.feeds.url import UrlFeed
from loader.feeds.verify import DirectorySinks, SinkFactory
from loader.formats.network_lists import list_of
from loader.pipeline.guard import DEFAULT_MIN_SIZE_RATIO, list_ranges, moved_too_far
from loader.records import FeedState
from loader.store.feed_states import ListStates

#: Where a run's new files wait until the load that reads them is done.
INCOMING: Final = "incoming"


class ListFiles(Protocol):
    """A network dataset's list files: ``<list>-<n>.<ext>`` current, and a run's new ones in ``incoming/``."""

    def incoming(self) -> SinkFactory: ...

    def has(self, name: str) -> bool:
        """Whether the current file ``name`` exists."""
        ...

    def source(self, name: str, *, renewed: bool) -> str:
        """What a load's sources name: the new file (``renewed``) or the current one."""
        ...

    def readable(self, name: str, *, renewed: bool, scratch: Path) -> Path:
        """A local file to read (a copy in ``scratch`` where the files are remote)."""
        ...

    def promote(self, name: str) -> None:
        """The new file ``name`` becomes the current one."""
        ...


class FolderListFiles:
    """The list files in a folder of the data directory (``ipmeta update``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def incoming(self) -> DirectorySinks:
        return DirectorySinks(self.folder / INCOMING)

    def has(self, name: str) -> bool:
        return (self.folder / name).exists()

    def _path(self, name: str, renewed: bool) -> Path:
        return (self.folder / INCOMING if renewed else self.folder) / name

    def source(self, name: str, *, renewed: bool) -> str:
        return str(self._path(name, renewed))

    def readable(self, name: str, *, renewed: bool, scratch: Path) -> Path:
        return self._path(name, renewed)

    def promote(self, name: str) -> None:
        (self.folder / INCOMING / name).replace(self.folder / name)


@dataclass(frozen=True)
class ListsCheck:
    """The chosen lists' files, and those whose release changed (or whose file is missing)."""

    dataset: str
    parts: tuple[UrlFeed, ...]
    stale: tuple[tuple[UrlFeed, FeedCheck], ...]
    #: Each list's floor (``NetworkList.min_ranges``) where it comes from its owner's URLs; a list
    #: on URLs of its own (a mirror of part of it, a test) has no known size, so none.
    floors: Mapping[str, int] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not self.stale

    @property
    def stale_names(self) -> str:
        return ", ".join(part.name for part, _ in self.stale)


@dataclass(frozen=True)
class ListsRelease:
    """A run's new files, fetched into ``incoming/``: the load's sources and options, and what to keep."""

    dataset: str
    sources: tuple[str, ...]
    #: The file names fetched anew (``aws-1.json``), promoted once the load is done.
    renewed: tuple[str, ...]
    fetched: tuple[FetchedRelease, ...]
    #: Why the guard must hold the release (a list moved past its limits), or ``""``.
    held_by: str

    def load_options(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The load's options as an execution spells them: ``base`` (a dataset's ``sourceOptions``)
        under what a network dataset needs (one parser per list, every list's fields merged)."""
        return {
            "min_size_ratio": DEFAULT_MIN_SIZE_RATIO,
            **dict(base or {}),
            "format": "network",
            "overlaps": "merge",
            "held_by": self.held_by,
        }

    def to_event(self) -> dict[str, Any]:
        """What rides along the load to RecordRelease: names and states only."""
        return {
            "feed": f"network:{self.dataset}",
            "dataset": self.dataset,
            "renewed": list(self.renewed),
            "lists": [fetched.to_event() for fetched in self.fetched],
        }


def check_lists(config: FeedConfig, http: HttpClient, states: ListStates, files: ListFiles) -> ListsCheck:
    """Step 1: which of ``config``'s lists changed since their release loaded last."""
    chosen = parse_network_lists(config.edition)
    parts = tuple(part for one in chosen for part in list_feeds(one, http))
    checks = [(part, check_feed(part, states)) for part in parts]
    stale = tuple(
        (part, check) for part, check in checks if not check.unchanged or not files.has(part.file_name)
    )
    floors = {one.entry.name: one.entry.min_ranges for one in chosen if not one.named_urls}
    return ListsCheck(config.dataset_name, parts, stale, floors)


def fetch_lists(
    check: ListsCheck, files: ListFiles, *, workdir: Path | None = None, progress: Progress | None = None
) -> ListsRelease:
    """Step 2: the stale files into ``incoming/``, every list's file as a source, and the guard's verdict."""
    fetched = tuple(
        fetch_release(
            part, release.release, files.incoming(), dataset=check.dataset, workdir=workdir, progress=progress
        )
        for part, release in check.stale
    )
    renewed = tuple(part.file_name for part, _ in check.stale)
    sources = tuple(files.source(part.file_name, renewed=part.file_name in renewed) for part in check.parts)
    refuse_lists_under_floor(check, files, renewed, workdir)
    held_by = lists_moved_too_far(files, renewed, workdir)
    return ListsRelease(check.dataset, sources, renewed, fetched, held_by)


def refuse_lists_under_floor(
    check: ListsCheck, files: ListFiles, renewed: Sequence[str], workdir: Path | None = None
) -> None:
    """Refuse the run when a renewed list from its owner holds fewer ranges than its floor.

    A list's first fetch has no current file to be measured against, so a download cut at a
    line's end would load; the size the owner's list is known to have (its floor, about a
    tenth of a count of it) is the one measure left. Its files are counted together (a list
    of two files is judged whole), the current ones where only the other changed.
    """
    with tempfile.TemporaryDirectory(prefix="ipmeta-floor-", dir=workdir) as folder:
        scratch = Path(folder)
        for name, floor in check.floors.items():
            names = [part.file_name for part in check.parts if list_of(part.file_name) == name]
            if floor <= 0 or not set(names) & set(renewed):
                continue
            ranges = sum(
                len(list_ranges(files.readable(file, renewed=file in renewed, scratch=scratch / file)))
                for file in names
            )
            if ranges < floor:
                raise DownloadTruncated(
                    f"network:{name}: {ranges:,} ranges, under the floor of {floor:,} set for the "
                    "owner's list (about a tenth of its counted size, docs/feeds.md): a cut download; "
                    "refused, nothing loaded"
                )


def lists_moved_too_far(files: ListFiles, renewed: Sequence[str], workdir: Path | None = None) -> str:
    """Why the guard must hold the dataset's release: each renewed list that moved past its limits.

    A list first fetched has nothing to be measured against (the dataset's own floor still holds).
    """
    reasons = []
    with tempfile.TemporaryDirectory(prefix="ipmeta-lists-", dir=workdir) as folder:
        scratch = Path(folder)
        for name in renewed:
            if not files.has(name):
                continue
            before = files.readable(name, renewed=False, scratch=scratch / "current")
            after = files.readable(name, renewed=True, scratch=scratch / INCOMING)
            reasons.append(moved_too_far(before, after, CATALOGUE[list_of(name)]))
    return "; ".join(reason for reason in reasons if reason)


def keep_lists(
    files: ListFiles, renewed: Sequence[str], states: ListStates, kept: Sequence[FeedState]
) -> None:
    """Step 4, once the load is done (active, held, or the same bytes already active)."""
    for name in renewed:
        files.promote(name)
    for state in kept:
        states.put(state)


def keep_event(event: Mapping[str, Any], files: ListFiles, states: ListStates) -> list[FeedState]:
    """``keep_lists`` from ``ListsRelease.to_event`` (RecordRelease's input); the states kept."""
    kept = [FeedState.from_dict(entry["state"]) for entry in event["lists"]]
    keep_lists(files, [str(name) for name in event["renewed"]], states, kept)
    return kept
