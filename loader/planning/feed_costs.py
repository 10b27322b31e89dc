"""What keeping a set of network lists current costs on AWS a month: one schedule for the set (the
stack's choice), priced against one schedule per list.

A scheduled run that finds nothing new (most runs) costs, per run:

- **Step Functions**: its transitions (``Feed?``, ``Fetch``, ``Fetched?``, ``FeedUnchanged``);
- **Lambda**: one invocation of the fetch function (512 MB), a base time plus one conditional GET
  per published file;
- **S3**: one LIST a file (is the current file there?), priced as S3 prices a LIST (a PUT's price).

A run on a set checks every file of every list; a run per list, its own. The set runs as often
as its most frequent list (``loader.feeds.catalogue.set_schedule``), so the slower lists are asked
more often than their own pace, for a small request each; one schedule per list asks each list at
its own pace but would take a schedule, a run and two alarms per list, and two lists' runs landing
together would race for the dataset's one load lock. A run that finds a change loads the dataset
either way, so what the loads cost is the same for both (``ipmeta plan FILES`` prices one).

Pure arithmetic on the paces the caller names (the catalogue is the feeds', not planning's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from loader.planning.costs import LAMBDA_PRICE_PER_GB_SECOND, LAMBDA_PRICE_PER_MILLION
from loader.planning.enrich_costs import S3_PUT_PRICE_PER_THOUSAND, STEP_FUNCTIONS_PRICE_PER_THOUSAND

SECONDS_PER_MONTH: Final = 730 * 3600
#: ``Feed?``, ``Fetch``, ``Fetched?``, ``FeedUnchanged``.
UNCHANGED_RUN_TRANSITIONS: Final = 4
#: The fetch function's memory (``stacks.load.loader_functions.sizing``).
FETCH_MEMORY_MB: Final = 512
#: A run's own time (its start, the table's state), and each file's conditional GET.
FETCH_BASE_SECONDS: Final = 0.3
FETCH_SECONDS_PER_FILE: Final = 0.25
#: A standard alarm on one metric, a month; each feed has two (FeedFailing, ReleaseHeld).
ALARM_METRIC_PER_MONTH: Final = 0.10
ALARMS_PER_FEED: Final = 2


@dataclass(frozen=True)
class ListPace:
    """A list as its schedule runs it: how often, and how many files it publishes."""

    name: str
    period_seconds: int
    files: int = 1


def _runs(period_seconds: int) -> float:
    return SECONDS_PER_MONTH / period_seconds


def _bill(runs: float, files: int, feeds: int) -> dict[str, Any]:
    """A month of unchanged runs of ``files`` files each, and the alarms of ``feeds`` feeds."""
    seconds = runs * (FETCH_BASE_SECONDS + files * FETCH_SECONDS_PER_FILE)
    breakdown = {
        "step_functions": runs * UNCHANGED_RUN_TRANSITIONS / 1000 * STEP_FUNCTIONS_PRICE_PER_THOUSAND,
        "lambda": runs / 1e6 * LAMBDA_PRICE_PER_MILLION
        + seconds * FETCH_MEMORY_MB / 1024 * LAMBDA_PRICE_PER_GB_SECOND,
        "s3": runs * files / 1000 * S3_PUT_PRICE_PER_THOUSAND,
        "alarms": feeds * ALARMS_PER_FEED * ALARM_METRIC_PER_MONTH,
    }
    return {
        "runs": round(runs),
        "requests": round(runs * files),
        "breakdown": {name: round(usd, 4) for name, usd in breakdown.items()},
        "usd_per_month": round(sum(breakdown.values()), 4),
    }


def feed_check_costs(lists: Sequence[ListPace]) -> dict[str, Any]:
    """A month of checks: ``set`` (one schedule, the stack's) and ``per_list`` (one each, compared)."""
    if not lists:
        raise ValueError("name at least one list")
    every = min(pace.period_seconds for pace in lists)
    files = sum(pace.files for pace in lists)
    per_list = [_bill(_runs(pace.period_seconds), pace.files, 1) for pace in lists]
    return {
        "lists": [pace.name for pace in lists],
        "set": {"every_seconds": every, **_bill(_runs(every), files, 1)},
        "per_list": {
            "runs": sum(bill["runs"] for bill in per_list),
            "requests": sum(bill["requests"] for bill in per_list),
            "usd_per_month": round(sum(bill["usd_per_month"] for bill in per_list), 4),
        },
    }
