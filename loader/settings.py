"""The loader's configuration: environment variable names and defaults.

The lookup's settings (table name, DynamoDB endpoint, pointer cache) are in
``ipmeta.schema.settings``; these are the loader's alone. ``stacks/constants.py``
re-exports the names so the stack sets exactly what the code reads.
"""

from __future__ import annotations

import os
from typing import Final

from ipmeta.schema.settings import DEFAULT_POINTER_CACHE_SECONDS

#: The bucket sources are read from and loads are staged in.
ENV_SOURCE_BUCKET: Final = "IPMETA_SOURCE_BUCKET"
#: The prefix of that bucket under which each load stages its files.
ENV_CHUNK_PREFIX: Final = "IPMETA_CHUNK_PREFIX"
DEFAULT_CHUNK_PREFIX: Final = "chunks"
#: Names the EventBridge bus the loader announces activations on; unset locally (a log line instead).
ENV_EVENT_BUS_NAME: Final = "IPMETA_EVENT_BUS_NAME"
#: The feeds the ``fetch`` function may run, by dataset (``loader.pipeline.fetch.encode_feeds``):
#: their settings and load options, and the *names* of their secrets.
ENV_FEEDS: Final = "IPMETA_FEEDS"
#: Where the Fetch state puts each feed's files: ``feeds/<dataset>/<file>`` in the source bucket.
FEEDS_PREFIX: Final = "feeds"

#: The CloudFront distribution in front of the API (``edge``): each activation invalidates its cache.
ENV_EDGE_DISTRIBUTION_ID: Final = "IPMETA_EDGE_DISTRIBUTION_ID"
#: The stack's outputs naming its table and (with ``edge``) its distribution: how `ipmeta rollback`
#: and a load from a workstation find the distribution to invalidate.
OUTPUT_TABLE_NAME: Final = "TableName"
OUTPUT_DISTRIBUTION_ID: Final = "DistributionId"

#: Set (``true``) on the cleanup function when the stack exports a .mmdb per version
#: (``exportMmdb``): deleting a version then deletes its ``exports/<version>.mmdb`` too.
ENV_EXPORTS_ENABLED: Final = "IPMETA_EXPORTS_ENABLED"

#: Published by each run of a replica region's arrival check (``loader.pipeline.arrival``): how
#: long, in seconds, the region's pointer of some dataset has trailed home's (0: it follows).
METRIC_REGION_BEHIND: Final = "RegionBehindSeconds"
METRIC_REGION_DIMENSION: Final = "region"


#: The loader's powertools service name: the ``service`` dimension of its metrics.
LOADER_SERVICE_NAME: Final = "ipmeta-loader"
#: Published (value 1) by the loader each time a version is activated; the
#: data-age alarm fires when none arrived within the allowed age.
METRIC_DATASET_ACTIVATED: Final = "DatasetActivated"
#: The dimension that names the dataset of each loader metric (and of its alarms).
METRIC_DATASET_DIMENSION: Final = "dataset"
#: Published by every run of a feed that ends: its failed runs in a row (0 after a success),
#: with the feed (its dataset) as the dimension. The feed's alarm fires at the stack's threshold.
METRIC_FEED_FAILURES: Final = "FeedFailuresInARow"
METRIC_FEED_DIMENSION: Final = "feed"
#: In the same line, how the run ended (value 1): a release loaded, nothing new, or a failure.
FEED_RUN_LOADED: Final = "loaded"
FEED_RUN_UNCHANGED: Final = "unchanged"
FEED_RUN_FAILED: Final = "failed"
METRIC_FEED_RUNS: Final = {
    FEED_RUN_LOADED: "FeedRunsLoaded",
    FEED_RUN_UNCHANGED: "FeedRunsUnchanged",
    FEED_RUN_FAILED: "FeedRunsFailed",
}
#: Published with ``DatasetActivated``, in its line: the load's items written and its seconds
#: from Start to activation (the activation report's ``items_written`` and ``duration_seconds``).
METRIC_ITEMS_WRITTEN: Final = "ItemsWritten"
METRIC_LOAD_SECONDS: Final = "LoadSeconds"
#: Published (value 1, by dataset) when the guard holds a release (``loader.pipeline.guard``):
#: each feed's second alarm fires on any.
METRIC_RELEASE_HELD: Final = "ReleaseHeld"

#: Retired versions kept for rollback (and ``?version=`` lookups) beyond the active one.
DEFAULT_RETENTION: Final = 1
#: A retired or failed version is deleted only this long after it stopped being served.
#: It must exceed the pointer cache's lifetime: a container may still query the old
#: version for up to ``DEFAULT_POINTER_CACHE_SECONDS`` after an activation.
DEFAULT_CLEANUP_GRACE_SECONDS: Final = 300.0
#: How long the load lock holds without renewal; each written chunk renews it.
DEFAULT_LOCK_LEASE_SECONDS: Final = 900.0
assert DEFAULT_CLEANUP_GRACE_SECONDS > DEFAULT_POINTER_CACHE_SECONDS

#: A replica region's arrival check (``loader.pipeline.arrival``): between two counts of the
#: partitions that did not match yet. Here, not there, so the CLI's start imports no botocore.
DEFAULT_POLL_SECONDS: Final = 5.0
#: How long a run of the arrival check recounts what is still short: less than the minute between
#: scheduled runs (``ARRIVAL_PERIOD_SECONDS``, the stack's ``ARRIVAL_RATE``), so runs do not
#: overlap; a version still arriving is the next run's to count. ``ipmeta plan`` prices the
#: recounts by this schedule (``loader.planning.regions.arrival_count_passes``).
ARRIVAL_WAIT_SECONDS: Final = 40.0
ARRIVAL_PERIOD_SECONDS: Final = 60

#: ``ipmeta enrich`` on AWS (``loader.pipeline.enrich_task``): a part a Lambda sorts and merges
#: well within its 15 minutes, whose sorted addresses fit its memory beside the snapshot's ranges.
ENRICH_PART_BYTES: Final = 256 << 20
#: A part's function: more than the 1,769 MB that buy one vCPU, with room for a part's sorted
#: addresses. ``ipmeta plan --enrich-rows`` prices this size (``loader.planning.enrich_costs``).
ENRICH_PART_MEMORY_MB: Final = 2048
#: The stack output naming the enrich state machine, which ``ipmeta enrich s3://… --stack`` starts.
OUTPUT_ENRICH_STATE_MACHINE_ARN: Final = "EnrichStateMachineArn"

#: Chunks a local load writes at once; with DEFAULT_WRITE_WORKERS each, 16 requests are in flight.
DEFAULT_PARALLEL_CHUNKS: Final = 2


def default_workers() -> int:
    """Processes a local load scans and resolves on: one per core."""
    return max(1, os.cpu_count() or 1)
