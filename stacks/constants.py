"""Names shared by the stack, its tests and the deploy docs.

The environment variable names and the metric names belong to the runtime
(``ipmeta.schema.settings`` for the lookup, ``loader.settings`` for the loader); they
are re-exported here so the stack sets exactly what the code reads. The
runtime never imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from ipmeta.api.fronts.authorizer import API_KEY_HEADER, ENV_API_KEYS_SECRET_ARN
from ipmeta.api.fronts.cors import (
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_SECONDS,
)
from ipmeta.api.fronts.credentials import (
    AUTHORIZATION_HEADER,
    GEOIP2_KEYS,
    IPINFO_KEYS,
    STATIC_PREFIX,
    V1_KEYS,
)
from ipmeta.schema.settings import (
    ENV_ACCESS_LOG_SAMPLE_RATE,
    ENV_API_KEY_CACHE_SECONDS,
    ENV_BATCH_ALIAS,
    ENV_CORS_ORIGINS,
    ENV_DATASET_MAX_AGE_SECONDS,
    ENV_DATASETS,
    ENV_EDGE_AUTHORIZATION_HEADER,
    ENV_GEOIP2_DATASETS,
    ENV_HEALTH_MAX_DATASET_AGE_SECONDS,
    ENV_IPINFO_AT_ROOT,
    ENV_IPINFO_DATASETS,
    ENV_IPINFO_FIELDS,
    ENV_PAGE_TOKEN_SECRET_ARN,
    ENV_POINTER_CACHE_SECONDS,
    ENV_POINTER_REGION,
    ENV_RANGE_CACHE_BYTES,
    ENV_SHOW_SOURCES,
    ENV_TABLE_NAME,
    LOOKUP_SERVICE,
    METRIC_ANSWERS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_LOOKUPS,
    METRIC_QUERIES,
    METRICS_NAMESPACE,
)
from loader.settings import (
    DEFAULT_CHUNK_PREFIX,
    ENV_CHUNK_PREFIX,
    ENV_EDGE_DISTRIBUTION_ID,
    ENV_EVENT_BUS_NAME,
    ENV_EXPORTS_ENABLED,
    ENV_FEEDS,
    ENV_SOURCE_BUCKET,
    FEED_RUN_UNCHANGED,
    FEEDS_PREFIX,
    LOADER_SERVICE_NAME,
    METRIC_DATASET_ACTIVATED,
    METRIC_DATASET_DIMENSION,
    METRIC_FEED_DIMENSION,
    METRIC_FEED_FAILURES,
    METRIC_FEED_RUNS,
    METRIC_ITEMS_WRITTEN,
    METRIC_LOAD_SECONDS,
    METRIC_REGION_BEHIND,
    METRIC_REGION_DIMENSION,
    METRIC_RELEASE_HELD,
    OUTPUT_DISTRIBUTION_ID,
    OUTPUT_ENRICH_STATE_MACHINE_ARN,
    OUTPUT_TABLE_NAME,
)

__all__ = [
    "API_KEY_HEADER",
    "AUTHORIZATION_HEADER",
    "CORS_ALLOW_HEADERS",
    "CORS_ALLOW_METHODS",
    "CORS_EXPOSE_HEADERS",
    "CORS_MAX_AGE_SECONDS",
    "ENV_ACCESS_LOG_SAMPLE_RATE",
    "ENV_API_KEYS_SECRET_ARN",
    "ENV_API_KEY_CACHE_SECONDS",
    "ENV_BATCH_ALIAS",
    "ENV_CHUNK_PREFIX",
    "ENV_CORS_ORIGINS",
    "ENV_DATASETS",
    "ENV_DATASET_MAX_AGE_SECONDS",
    "ENV_EDGE_AUTHORIZATION_HEADER",
    "ENV_EDGE_DISTRIBUTION_ID",
    "ENV_EVENT_BUS_NAME",
    "ENV_EXPORTS_ENABLED",
    "ENV_FEEDS",
    "ENV_GEOIP2_DATASETS",
    "ENV_HEALTH_MAX_DATASET_AGE_SECONDS",
    "ENV_IPINFO_AT_ROOT",
    "ENV_IPINFO_DATASETS",
    "ENV_IPINFO_FIELDS",
    "ENV_PAGE_TOKEN_SECRET_ARN",
    "ENV_POINTER_CACHE_SECONDS",
    "ENV_POINTER_REGION",
    "ENV_RANGE_CACHE_BYTES",
    "ENV_SHOW_SOURCES",
    "ENV_SOURCE_BUCKET",
    "ENV_TABLE_NAME",
    "FEEDS_PREFIX",
    "FEED_RUN_UNCHANGED",
    "LOADER_SERVICE_NAME",
    "LOOKUP_SERVICE",
    "METRICS_NAMESPACE",
    "METRIC_ANSWERS",
    "METRIC_CACHE_HITS",
    "METRIC_CACHE_MISSES",
    "METRIC_DATASET_ACTIVATED",
    "METRIC_DATASET_DIMENSION",
    "METRIC_FEED_DIMENSION",
    "METRIC_FEED_FAILURES",
    "METRIC_FEED_RUNS",
    "METRIC_ITEMS_WRITTEN",
    "METRIC_LOAD_SECONDS",
    "METRIC_LOOKUPS",
    "METRIC_QUERIES",
    "METRIC_REGION_BEHIND",
    "METRIC_REGION_DIMENSION",
    "METRIC_RELEASE_HELD",
    "OUTPUT_DISTRIBUTION_ID",
    "OUTPUT_ENRICH_STATE_MACHINE_ARN",
    "OUTPUT_TABLE_NAME",
]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
LAMBDAS_DIR: Final = REPO_ROOT / "lambdas"
CORE_PACKAGE_DIR: Final = LAMBDAS_DIR / "ipmeta"
LOADER_DIR: Final = REPO_ROOT / "loader"

# --- Construct ids -----------------------------------------------------------
STACK_ID: Final = "Ipmeta"
TABLE_ID: Final = "Table"
API_ID: Final = "LookupApi"
LOADER_WORKFLOW_ID: Final = "LoaderWorkflow"
#: With ``enrichInputs`` and ``enrichOutputs``: ``ipmeta enrich`` on AWS (``stacks/load/enrich_workflow.py``).
ENRICH_WORKFLOW_ID: Final = "EnrichWorkflow"
SCHEDULE_ID: Final = "Reloads"
MONITORING_ID: Final = "Monitoring"
#: With ``replicaRegions``: home's part of the replication, each region's stack (``Ipmeta-eu-west-1``),
#: and in every region with ``domainName``, its part of the one hostname.
REPLICATION_ID: Final = "Replication"
ARRIVAL_ID: Final = "Arrival"
HOSTNAME_ID: Final = "Hostname"


def region_stack_id(region: str) -> str:
    return f"{STACK_ID}-{region}"


# --- Stack outputs -----------------------------------------------------------
OUTPUT_API_URL: Final = "ApiUrl"
OUTPUT_API_KEY_ID: Final = "ApiKeyId"
OUTPUT_BUCKET_NAME: Final = "SourceBucketName"
OUTPUT_STATE_MACHINE_ARN: Final = "StateMachineArn"
OUTPUT_ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
#: The HTTP API's and the function URL's keys (``apiType=http``, ``url``), in place of ``ApiKeyId``.
OUTPUT_API_KEYS_SECRET_ARN: Final = "ApiKeysSecretArn"
#: With ``replicaRegions`` behind REST: the key every region accepts, and where its value is.
OUTPUT_SHARED_KEY_ID: Final = "SharedApiKeyId"
OUTPUT_SHARED_KEY_SECRET_ARN: Final = "SharedApiKeySecretArn"
#: With ``domainName``: the one hostname.
OUTPUT_HOSTNAME_URL: Final = "HostnameUrl"
#: ``OUTPUT_TABLE_NAME`` and, with ``edge``, ``OUTPUT_DISTRIBUTION_ID`` (``ApiUrl`` is then its
#: address) come from ``loader.settings``: the CLI reads them back to find the distribution.

# --- Lambda runtime ----------------------------------------------------------
LOOKUP_HANDLER: Final = "ipmeta.api.handler.handler"
AUTHORIZER_HANDLER: Final = "ipmeta.api.fronts.authorizer.handler"
#: The REST front's request authorizer: any form of key, handed to the usage plan.
USAGE_PLAN_AUTHORIZER_HANDLER: Final = "ipmeta.api.fronts.usage_plan_authorizer.handler"
LOADER_MODULE: Final = "loader.pipeline.handlers"
#: The loader's Lambda handlers (``loader.pipeline.handlers``), in the order the state machine runs them.
LOADER_TASKS: Final = (
    "start",
    "scan",
    "plan_partitions",
    "resolve",
    "plan_writes",
    "write_chunks",
    "activate",
    "cleanup",
    "abort",
)
#: With feeds (context ``feeds``, or ``sourceUrl``): the Fetch state's task, and the one that
#: remembers a feed's release once its load is active (``loader.pipeline.fetch``).
FETCH_TASK: Final = "fetch"
RECORD_RELEASE_TASK: Final = "record_release"
FEED_TASKS: Final = (FETCH_TASK, RECORD_RELEASE_TASK)
#: In each replica region (``replicaRegions``): its arrival check on a schedule (``loader.pipeline.arrival``).
ARRIVAL_TASK: Final = "arrive"

#: Powertools for AWS Lambda (Python): the pip pin in requirements.txt and the
#: public layer built from that release must stay the same version (a test
#: checks the pin). The layer number is NOT derivable from the pip version and
#: could not be confirmed from the published docs available while this was
#: written. Evidence: issue aws-powertools/powertools-lambda-python#7689 ties
#: 3.23.0 to layer 27; a public pin ties 3.31.1 to layer 36 (python314-arm64);
#: one layer is published per release (3.24.0 .. 3.31.1 account for 27 -> 36).
#: Counting 3.32.0 .. 3.37.0 gives 42. Verify before the first deploy with
#: ``aws lambda get-layer-version-by-arn --arn <POWERTOOLS_LAYER_ARN in us-east-1>``
#: (the Description ends with the Powertools version).
POWERTOOLS_VERSION: Final = "3.37.0"
POWERTOOLS_LAYER_VERSION: Final = 42
POWERTOOLS_LAYER_ACCOUNT: Final = "017000801446"
POWERTOOLS_LAYER_NAME: Final = "AWSLambdaPowertoolsPythonV3-python313-arm64"

LOOKUP_SERVICE_NAME: Final = LOOKUP_SERVICE
AUTHORIZER_SERVICE_NAME: Final = "authorizer"
#: The loader's Powertools Metrics carry ``service=<this>`` as their dimension,
#: so the data-age alarm must name it to find DatasetActivated.
POWERTOOLS_SERVICE_NAME_ENV: Final = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_METRICS_NAMESPACE_ENV: Final = "POWERTOOLS_METRICS_NAMESPACE"
POWERTOOLS_METRICS_DISABLED_ENV: Final = "POWERTOOLS_METRICS_DISABLED"

# --- Source bucket layout ----------------------------------------------------
#: Chunk files of a load live under ``<CHUNK_PREFIX>/<load_id>/``.
CHUNK_PREFIX: Final = DEFAULT_CHUNK_PREFIX
DATASETS_PREFIX: Final = "datasets"

API_STAGE_NAME: Final = "api"
#: The HTTP API serves from its default stage: no stage in the URL, so paths are /v1/... as locally.
HTTP_API_STAGE_NAME: Final = "$default"
#: Each route family's first path segment: its authorizer reads the key in the family's forms
#: (``ipmeta.api.fronts.credentials``), and its identity source is the family's header.
API_VERSION_PATH: Final = V1_KEYS.path
#: The GeoIP2 web service's and ipinfo's (``ipmeta.shapes``' documents).
GEOIP2_PATH: Final = GEOIP2_KEYS.path
IPINFO_PATH: Final = IPINFO_KEYS.path
#: The lookup page is ``/``; its files are under this first segment (``ipmeta.api.routes.page_routes``).
PAGE_STATIC_PATH: Final = STATIC_PREFIX.strip("/")

#: The change event goes to the account's default EventBridge bus.
DEFAULT_EVENT_BUS: Final = "default"

#: Behind CloudFront (``url`` with ``edge``): the alias whose URL serves the batch routes, and the
#: header a CloudFront Function moves the client's Authorization to (the origin access control
#: signs the origin request in Authorization).
BATCH_ALIAS: Final = "batch"
EDGE_AUTHORIZATION_HEADER: Final = "x-ipmeta-authorization"
