"""`ipmeta update`: keep vendor databases current, as geoipupdate does, each in a dataset of its own.

The feeds are a ``GeoIP.conf``'s EditionIDs (``--config``, geoipupdate's default
path), or ``--feed [DATASET=]VENDOR:EDITION`` (repeatable). For each feed:
its vendor's latest release is checked against the release loaded last (the
table's feed state, so ``--table`` works as for every command). Unchanged: one
small request, a line saying so, nothing written. Changed: the release is
fetched into ``<data-dir>/feeds/<dataset>/`` and verified, loaded into its
dataset as one version, and remembered once that version is active. A feed
that fails does not stop the others; the exit status is 1 if any failed.

Each download has a deadline (``--download-deadline``): a server that trickles its
bytes fails that feed with ``FEED_TIMEOUT``. SIGTERM unwinds the run as Ctrl-C
does, so a killed update leaves no scratch archive and no partial file behind.

Credentials: MaxMind's from the ``GeoIP.conf``, else ``GEOIPUPDATE_ACCOUNT_ID``
and ``GEOIPUPDATE_LICENSE_KEY``; IPinfo's token from ``IPINFO_TOKEN``; a URL's
headers from the environment variables ``--header NAME=VARIABLE`` names. None is
ever printed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final, NoReturn, TextIO

from ipmeta.schema.errors import IpmetaError
from ipmeta.schema.settings import Settings
from ipmeta_cli.arguments import positive_float
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.loading import load_files
from loader.errors import LoadError

if TYPE_CHECKING:
    from tqdm import tqdm

    from loader.feeds.config import Credentials, FeedConfig, GeoIPConf
    from loader.feeds.credentials import MaxMindAccount
    from loader.feeds.http_client import HttpClient
    from loader.store.table import LoaderTable

ACCOUNT_ID_VARIABLE: Final = "GEOIPUPDATE_ACCOUNT_ID"
LICENSE_KEY_VARIABLE: Final = "GEOIPUPDATE_LICENSE_KEY"
IPINFO_TOKEN_VARIABLE: Final = "IPINFO_TOKEN"
#: Each feed's files, under the data directory: ``feeds/<dataset>/``.
FEEDS_DIR: Final = "feeds"
#: Exit statuses of a run stopped by a signal, as a shell reports them (128 + the signal).
EXIT_INTERRUPTED: Final = 128 + signal.SIGINT
EXIT_TERMINATED: Final = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so every ``with`` removes its scratch files as Ctrl-C's does.

    A ``KeyboardInterrupt`` on purpose: a load it stops is left resumable, as Ctrl-C leaves it.
    """


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the run lasts, SIGTERM unwinds it (its default ends the process with no cleanup at all)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; a caller on another one keeps the default
        return

    def unwind(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class PlannedFeed:
    """A feed to update and the credentials its vendor is sent."""

    config: FeedConfig
    credentials: Credentials = None


def feed_argument(text: str) -> FeedConfig:
    """``[DATASET=]VENDOR:EDITION``: ``city=maxmind:GeoLite2-City``, ``dbip:city-lite``, ``url:https://…``."""
    from loader.feeds.config import parse_feed_spec
    from loader.feeds.errors import FeedConfigInvalid

    head, equals, rest = text.partition("=")
    dataset, spec = (head, rest) if equals and ":" not in head else ("", text)
    try:
        return parse_feed_spec(spec.strip(), dataset.strip())
    except FeedConfigInvalid as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def header_argument(text: str) -> tuple[str, str]:
    """``NAME=VARIABLE``: the header's value is read from the environment, never from the command line."""
    name, equals, variable = text.partition("=")
    if not equals or not name.strip() or not variable.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=ENVIRONMENT_VARIABLE")
    return name.strip(), variable.strip()


def planned_feeds(
    feeds: Sequence[FeedConfig],
    config_path: Path | None,
    headers: Sequence[tuple[str, str]] = (),
    environment: Mapping[str, str] = os.environ,
    *,
    host: str = "",
) -> list[PlannedFeed]:
    """The ``--feed``s (``host`` their vendor's base URL), or the GeoIP.conf's editions, with credentials.

    One dataset each: two feeds into one dataset would replace each other's versions.
    """
    from loader.feeds.errors import FeedConfigInvalid

    conf = _geoip_conf(feeds, config_path)
    if feeds:
        configs = [dataclasses.replace(feed, host=host) if host else feed for feed in feeds]
    else:
        configs = conf.feeds() if conf is not None else []
    planned = [PlannedFeed(*_with_credentials(config, conf, headers, environment)) for config in configs]
    datasets = [feed.config.dataset_name for feed in planned]
    twice = sorted({name for name in datasets if datasets.count(name) > 1})
    if twice:
        raise FeedConfigInvalid(
            f"two feeds load into dataset {twice[0]}; name each feed's dataset (--feed NAME=vendor:edition)"
        )
    return planned


def _geoip_conf(feeds: Sequence[FeedConfig], config_path: Path | None) -> GeoIPConf | None:
    """The GeoIP.conf named, or geoipupdate's: the feeds without ``--feed``, MaxMind's account with it."""
    from loader.feeds.config import DEFAULT_GEOIP_CONF, read_geoip_conf

    if config_path is not None or not feeds:
        return read_geoip_conf(config_path or DEFAULT_GEOIP_CONF)
    wants_account = any(feed.vendor == "maxmind" for feed in feeds)
    return read_geoip_conf(DEFAULT_GEOIP_CONF) if wants_account and DEFAULT_GEOIP_CONF.exists() else None


def _with_credentials(
    config: FeedConfig,
    conf: GeoIPConf | None,
    headers: Sequence[tuple[str, str]],
    environment: Mapping[str, str],
) -> tuple[FeedConfig, Credentials]:
    from loader.feeds.credentials import Secret

    if config.vendor == "maxmind":
        if conf is not None:
            return dataclasses.replace(config, host=config.host or conf.host), conf.account
        return config, _account_from(environment)
    if config.vendor == "ipinfo":
        return config, Secret(_variable(environment, IPINFO_TOKEN_VARIABLE, f"ipinfo:{config.edition}"))
    if config.vendor == "url" and headers:
        what = f"url feed {config.edition}"
        return config, {name: Secret(_variable(environment, variable, what)) for name, variable in headers}
    return config, None


def _account_from(environment: Mapping[str, str]) -> MaxMindAccount:
    from loader.feeds.credentials import MaxMindAccount, Secret
    from loader.feeds.errors import FeedConfigInvalid

    account = environment.get(ACCOUNT_ID_VARIABLE, "").strip()
    key = environment.get(LICENSE_KEY_VARIABLE, "").strip()
    if not account.isdigit() or int(account) <= 0 or not key:
        raise FeedConfigInvalid(
            f"maxmind feeds need an account: --config GeoIP.conf, or {ACCOUNT_ID_VARIABLE} and "
            f"{LICENSE_KEY_VARIABLE} in the environment"
        )
    return MaxMindAccount(int(account), Secret(key))


def _variable(environment: Mapping[str, str], name: str, what: str) -> str:
    from loader.feeds.errors import FeedConfigInvalid

    value = environment.get(name, "").strip()
    if not value:
        raise FeedConfigInvalid(f"{what}: set the environment variable {name}")
    return value


class DownloadBar:
    """The feeds' ``Progress`` as a tqdm bar of bytes, one per download (on stderr: off when no terminal)."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.bar: tqdm[NoReturn] | None = None
        self._file = file

    def begin(self, feed: str, total_bytes: int | None) -> None:
        from tqdm import tqdm

        self.close()
        self.bar = tqdm(
            total=total_bytes,
            desc=f"fetching {feed}",
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            file=self._file,
            disable=None if self._file is None else False,
        )

    def advance(self, size: int) -> None:
        if self.bar is not None:
            self.bar.update(size)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> DownloadBar:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class UpdateRun:
    """What every feed of one ``ipmeta update`` shares."""

    settings: Settings
    table: LoaderTable
    http: HttpClient
    data_dir: Path
    dry_run: bool = False


def update_feed(feed: PlannedFeed, run: UpdateRun) -> str:
    """Check one feed; fetch, load and record what changed. Returns the line to print."""
    from loader.feeds.config import build_feed
    from loader.feeds.fetch import check_feed, fetch_release, record_loaded
    from loader.feeds.verify import DirectorySinks
    from loader.options import LoadOptions
    from loader.pipeline.guard import DEFAULT_FEED_MAX_CHANGE_RATIO, DEFAULT_MIN_SIZE_RATIO

    if feed.config.vendor == "network":
        return update_network(feed.config, run)
    built = build_feed(feed.config, run.http, feed.credentials)
    dataset = feed.config.dataset_name
    states = run.table.for_dataset(dataset).feed_states
    check = check_feed(built, states)
    if check.unchanged:
        return check.describe()
    if run.dry_run:
        return f"{check.describe()}; into dataset {dataset}"
    folder = run.data_dir / FEEDS_DIR / dataset
    with DownloadBar() as bar:
        fetched = fetch_release(
            built, check.release, DirectorySinks(folder), dataset=dataset, workdir=run.data_dir, progress=bar
        )
    locations = str(folder / fetched.locations) if fetched.locations else None
    options = LoadOptions(
        dataset=dataset,
        format=fetched.load_format,
        # A geofeed refines a block with narrower entries (RFC 8805's own example does).
        overlaps="most-specific" if fetched.load_format == "geofeed" else "last-wins",
        locations=locations,
        max_change_ratio=DEFAULT_FEED_MAX_CHANGE_RATIO,
        min_size_ratio=DEFAULT_MIN_SIZE_RATIO,
    )
    sources = [folder / name for name in fetched.sources]
    outcome = load_files(run.settings, sources, None, run.data_dir, options=options)
    # load_files returns once the version is active, held, or the same bytes already were; a failure
    # raises. A held release is remembered too, so the next run does not load it again and again.
    record_loaded(states, fetched)
    _raise_if_held(built.name, outcome)
    edge = f"\n{outcome['edge']}" if outcome["edge"] else ""
    return (
        f"{built.name}: loaded {check.release.describe()} into dataset {dataset}: "
        f"{outcome['version']} {outcome['status']} ({outcome['items']:,} items){edge}"
    )


def update_network(config: FeedConfig, run: UpdateRun) -> str:
    """The public network lists ``config`` names, into one dataset with ``--overlaps merge``.

    The one path a ``network`` feed's scheduled run takes too (``loader.pipeline.network_feed``):
    changed (or missing) files are fetched into ``incoming/``; the dataset loads from every
    list's current file; only then do new files replace old ones and become state.
    """
    from loader.options import LoadOptions
    from loader.pipeline.network_feed import FolderListFiles, check_lists, fetch_lists, keep_lists

    dataset = config.dataset_name
    states = run.table.for_dataset(dataset).list_states
    files = FolderListFiles(run.data_dir / FEEDS_DIR / dataset)
    check = check_lists(config, run.http, states, files)
    if check.unchanged:
        return f"network:{dataset}: unchanged ({len(check.parts)} files)"
    if run.dry_run:
        return f"network:{dataset}: would fetch {check.stale_names}; into dataset {dataset}"
    with DownloadBar() as bar:
        release = fetch_lists(check, files, workdir=run.data_dir, progress=bar)
    options = LoadOptions.from_event({**release.load_options(), "dataset": dataset})
    sources = [Path(source) for source in release.sources]
    outcome = load_files(run.settings, sources, None, run.data_dir, options=options)
    keep_lists(files, release.renewed, states, [fetched.state() for fetched in release.fetched])
    _raise_if_held(f"network:{dataset}", outcome)
    return (
        f"network:{dataset}: loaded {check.stale_names} into dataset {dataset}: "
        f"{outcome['version']} {outcome['status']} ({outcome['items']:,} items)"
    )


def _raise_if_held(feed: str, outcome: Mapping[str, Any]) -> None:
    from loader.errors import ReleaseHeld

    if outcome["status"] == "held":
        version, why = outcome["version"], outcome["report"].get("held")
        raise ReleaseHeld(
            f"{feed}: {version} loaded but held by the guard ({why}), not activated; "
            f"`ipmeta versions` shows it, `ipmeta activate {version}` serves it"
        )


def _one_line(feed: PlannedFeed, error: Exception) -> str:
    """The error as one line that names the feed (a feed's own errors already do)."""
    message = str(error)
    name = f"{feed.config.vendor}:"
    # A network feed's edition is its lists and their URLs: its dataset names it shorter.
    edition = feed.config.dataset_name if feed.config.vendor == "network" else feed.config.edition
    return message if message.startswith(name) else f"{feed.config.vendor}:{edition}: {message}"


def command_update(args: argparse.Namespace) -> int:
    feeds = planned_feeds(args.feed, args.config, args.header, host=args.host)
    try:
        with terminate_as_interrupt():
            failed = _update_all(feeds, args)
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        signal_name = "SIGTERM" if terminated else "SIGINT"
        print(f"ipmeta update: stopped by {signal_name}; nothing partial kept", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    if failed:
        summary = f"{len(failed)} of {len(feeds)} feeds failed: {', '.join(failed)}"
        print(f"ipmeta update: {summary}", file=sys.stderr)
    return 1 if failed else 0


def _update_all(feeds: Sequence[PlannedFeed], args: argparse.Namespace) -> list[str]:
    """Each feed in turn; returns the datasets of those that failed."""
    from loader.feeds.http_client import HttpClient, HttpSettings
    from loader.store.table import LoaderTable

    failed = []
    http = HttpClient(HttpSettings(deadline_seconds=args.download_deadline))
    with backend(args) as settings:
        run = UpdateRun(
            settings, LoaderTable.from_settings(settings), http, Path(args.data_dir), args.dry_run
        )
        for feed in feeds:
            try:
                print(update_feed(feed, run), flush=True)
            except (LoadError, IpmetaError, OSError) as error:
                code = f" ({error.code})" if isinstance(error, LoadError | IpmetaError) else ""
                print(f"ipmeta update: {_one_line(feed, error)}{code}", file=sys.stderr, flush=True)
                failed.append(feed.config.dataset_name)
    return failed


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from loader.feeds.config import DEFAULT_GEOIP_CONF
    from loader.feeds.http_client import HttpSettings

    update = commands.add_parser(
        "update",
        help="fetch each vendor feed's new release (MaxMind, DB-IP, IPinfo, a URL) into its dataset",
    )
    add_backend_arguments(update)
    update.add_argument(
        "--config",
        type=Path,
        help=f"a geoipupdate GeoIP.conf: its EditionIDs are the feeds (default {DEFAULT_GEOIP_CONF})",
    )
    update.add_argument(
        "--feed",
        type=feed_argument,
        action="append",
        default=[],
        metavar="[DATASET=]VENDOR:EDITION",
        help="a feed instead of the GeoIP.conf's editions, e.g. maxmind:GeoLite2-City, city=dbip:city-lite, "
        "ipinfo:ipinfo_lite, url:https://host/file.mmdb, network:aws,tor=URL,apple-relay (the public "
        "network lists, into one dataset; repeatable; dataset: the edition's name, or network)",
    )
    update.add_argument(
        "--host",
        default="",
        metavar="URL",
        help="the --feed vendors' base URL: a mirror or a test server (default: each vendor's own; "
        "a GeoIP.conf's feeds use its Host)",
    )
    update.add_argument(
        "--header",
        type=header_argument,
        action="append",
        default=[],
        metavar="NAME=VARIABLE",
        help="url feeds: send header NAME with the value of environment variable VARIABLE (repeatable)",
    )
    update.add_argument(
        "--download-deadline",
        type=positive_float,
        default=HttpSettings.deadline_seconds,
        metavar="SECONDS",
        help="each download (and each metadata answer) must end within this long, retries included; "
        "a server that trickles its bytes fails the feed with FEED_TIMEOUT (default %(default)g)",
    )
    update.add_argument(
        "--dry-run", action="store_true", help="say what would be fetched; fetch and load nothing"
    )
    update.set_defaults(run=command_update)
