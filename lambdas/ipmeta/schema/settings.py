"""Runtime configuration, read from the environment.

The names of the variables live here, in the runtime; ``stacks/constants.py``
re-exports them so the stack sets exactly what the code reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

ENV_TABLE_NAME = "IPMETA_TABLE_NAME"
ENV_DYNAMODB_ENDPOINT = "IPMETA_DYNAMODB_ENDPOINT"
ENV_POINTER_CACHE_SECONDS = "IPMETA_POINTER_CACHE_SECONDS"
#: Set in a replica region's lookup stack only: lookups there follow that region's own pointer
#: (``keys.KeySpace.region_pointer``), which moves once a version has wholly arrived there.
ENV_POINTER_REGION = "IPMETA_POINTER_REGION"

DEFAULT_TABLE_NAME = "ipmeta"
#: The lookup re-reads the active-version pointer at most this often per container.
DEFAULT_POINTER_CACHE_SECONDS = 5.0


class Front(StrEnum):
    """The lookup API's fronts: ``apiType`` in the stack, ``ipmeta serve --front`` locally,
    ``ipmeta plan --api-type``. Declared here, once, so the runtime, the stacks and the CLI agree."""

    REST = "rest"
    HTTP = "http"
    URL = "url"

    @property
    def checks_keys(self) -> bool:
        """Whether the front refuses a request without a known key before the function (API
        Gateway's authorizers); behind a function URL the function checks them itself."""
        return self is not Front.URL


#: ``make run``'s front, and a deployment's (``apiType``): docs/decisions.md says why.
DEFAULT_FRONT: Final = Front.HTTP


@dataclass(frozen=True, slots=True)
class Settings:
    table_name: str
    dynamodb_endpoint: str | None
    pointer_cache_seconds: float
    #: None: home's pointer (every deployment without replicas); a region: that replica's pointer.
    pointer_region: str | None = None

    @classmethod
    def from_environment(cls) -> Settings:
        return cls(
            table_name=os.environ.get(ENV_TABLE_NAME, DEFAULT_TABLE_NAME),
            dynamodb_endpoint=os.environ.get(ENV_DYNAMODB_ENDPOINT) or None,
            pointer_cache_seconds=float(
                os.environ.get(ENV_POINTER_CACHE_SECONDS, DEFAULT_POINTER_CACHE_SECONDS)
            ),
            pointer_region=os.environ.get(ENV_POINTER_REGION) or None,
        )


#: Bytes the lookup's range cache may hold per container (the stack sets it from context).
ENV_RANGE_CACHE_BYTES = "IPMETA_RANGE_CACHE_BYTES"
DEFAULT_RANGE_CACHE_BYTES = 32 * 1024 * 1024

#: CloudWatch namespace of the metrics the lookup and the loader publish.
METRICS_NAMESPACE = "ipmeta"
#: The lookup function's powertools service: the one dimension of its metrics line.
LOOKUP_SERVICE = "lookup"
#: What the lookup function counts in memory and publishes once a minute at most (one EMF line,
#: ``ipmeta.api.observability``): addresses looked up (a batch counts each distinct one), the
#: range cache's answers and misses (one per address and dataset version read), the Queries
#: sent to DynamoDB, and the answers by status family.
METRIC_LOOKUPS = "Lookups"
METRIC_CACHE_HITS = "RangeCacheHits"
METRIC_CACHE_MISSES = "RangeCacheMisses"
METRIC_QUERIES = "Queries"
METRIC_ANSWERS = {family: f"Answers{family}xx" for family in (2, 3, 4, 5)}
#: Every metric of the line, always all of them: the bill counts metrics, not values.
LOOKUP_METRICS = (
    METRIC_LOOKUPS,
    METRIC_CACHE_HITS,
    METRIC_CACHE_MISSES,
    METRIC_QUERIES,
    *METRIC_ANSWERS.values(),
)
#: The line is published at most this often per container.
METRICS_INTERVAL_SECONDS = 60.0


ENV_CACHE_MAX_AGE_SECONDS = "IPMETA_CACHE_MAX_AGE_SECONDS"
ENV_CORS_ORIGINS = "IPMETA_CORS_ORIGINS"
ENV_BATCH_MAX_IPS = "IPMETA_BATCH_MAX_IPS"
ENV_BATCH_CONCURRENCY = "IPMETA_BATCH_CONCURRENCY"
ENV_TRUSTED_PROXY_HOPS = "IPMETA_TRUSTED_PROXY_HOPS"
ENV_HEALTH_MAX_DATASET_AGE_SECONDS = "IPMETA_HEALTH_MAX_DATASET_AGE_SECONDS"
#: The datasets a lookup answers from by default, in precedence order (comma-separated).
ENV_DATASETS = "IPMETA_DATASETS"
#: Each dataset's own maximum age for ``/v1/health``, as JSON: ``{"city": 691200}``.
ENV_DATASET_MAX_AGE_SECONDS = "IPMETA_DATASET_MAX_AGE_SECONDS"
#: The datasets each GeoIP2 service answers from, as JSON: ``{"city": ["city", "asn"]}``.
ENV_GEOIP2_DATASETS = "IPMETA_GEOIP2_DATASETS"
#: The datasets the ipinfo routes answer from, in precedence order (comma-separated).
ENV_IPINFO_DATASETS = "IPMETA_IPINFO_DATASETS"
#: The columns of ipinfo's fields, as JSON: ``{"city": "town", "loc": ["lat", "lng"]}``.
ENV_IPINFO_FIELDS = "IPMETA_IPINFO_FIELDS"
#: ``true``: the ipinfo routes answer at the root too (``/8.8.8.8``, ``POST /batch``).
ENV_IPINFO_AT_ROOT = "IPMETA_IPINFO_AT_ROOT"
#: ``true``: ``/v1/datasets`` shows each version's sources whole (paths, bucket, keys), not file names.
ENV_SHOW_SOURCES = "IPMETA_SHOW_SOURCES"


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """What the lookup API lets an operator tune; every field has a safe default."""

    #: ``Cache-Control: max-age`` of lookup answers. A version's data never
    #: changes, so the only staleness is a newer version being activated.
    cache_max_age_seconds: int = 3600
    #: Origins allowed by CORS; ``*`` allows any, an empty tuple disables CORS.
    cors_origins: tuple[str, ...] = ("*",)
    batch_max_ips: int = 1000
    #: Concurrent Queries of one batch; below the boto3 pool (32) so one batch
    #: cannot starve the container's connections.
    batch_concurrency: int = 16
    #: 0 ignores ``X-Forwarded-For`` (anyone can forge it); n trusts the n
    #: proxies in front of API Gateway and takes the n-th address from the right.
    trusted_proxy_hops: int = 0
    #: ``/v1/health`` turns 503 when an active dataset was loaded longer ago (unless it has its own).
    health_max_dataset_age_seconds: int = 8 * 24 * 3600
    #: The datasets declared at deploy time, in precedence order (``ipmeta.lookup.catalog``): lookups
    #: answer from these first. Empty: every dataset of the table, by name.
    datasets: tuple[str, ...] = ()
    #: A maximum age per dataset, where it differs from ``health_max_dataset_age_seconds``.
    dataset_max_age_seconds: Mapping[str, int] = field(default_factory=dict)
    #: The datasets each GeoIP2 service (country, city, insights) reads; a service not named
    #: reads what a lookup reads, each dataset giving the fields its columns hold.
    geoip2_datasets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The datasets the ipinfo routes read; empty: what a lookup reads.
    ipinfo_datasets: tuple[str, ...] = ()
    #: ipinfo field -> column(s), replacing that field's defaults (``ipmeta.shapes.ipinfo_document``).
    ipinfo_fields: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)
    #: Serve the ipinfo routes at the root as well, so ipinfo's own ``API_URL`` works unchanged.
    ipinfo_at_root: bool = False
    #: Show ``/v1/datasets``' sources whole. Off: every key holder reads that listing, and a
    #: local path, a bucket's name or a feed URL's query says more than a client needs.
    show_sources: bool = False

    def max_age_of(self, dataset: str) -> int:
        return int(self.dataset_max_age_seconds.get(dataset, self.health_max_dataset_age_seconds))

    @classmethod
    def from_environment(cls) -> ApiSettings:
        defaults = cls()
        origins = os.environ.get(ENV_CORS_ORIGINS)
        return cls(
            cache_max_age_seconds=int(
                os.environ.get(ENV_CACHE_MAX_AGE_SECONDS, defaults.cache_max_age_seconds)
            ),
            cors_origins=defaults.cors_origins
            if origins is None
            else tuple(origin.strip() for origin in origins.split(",") if origin.strip()),
            batch_max_ips=int(os.environ.get(ENV_BATCH_MAX_IPS, defaults.batch_max_ips)),
            batch_concurrency=int(os.environ.get(ENV_BATCH_CONCURRENCY, defaults.batch_concurrency)),
            trusted_proxy_hops=int(os.environ.get(ENV_TRUSTED_PROXY_HOPS, defaults.trusted_proxy_hops)),
            health_max_dataset_age_seconds=int(
                os.environ.get(ENV_HEALTH_MAX_DATASET_AGE_SECONDS, defaults.health_max_dataset_age_seconds)
            ),
            datasets=_names(os.environ.get(ENV_DATASETS, "")),
            dataset_max_age_seconds={
                str(name): int(seconds)
                for name, seconds in json.loads(os.environ.get(ENV_DATASET_MAX_AGE_SECONDS) or "{}").items()
            },
            geoip2_datasets={
                str(service): tuple(str(name) for name in names)
                for service, names in json.loads(os.environ.get(ENV_GEOIP2_DATASETS) or "{}").items()
            },
            ipinfo_datasets=_names(os.environ.get(ENV_IPINFO_DATASETS, "")),
            ipinfo_fields={
                str(name): columns if isinstance(columns, str) else tuple(columns)
                for name, columns in json.loads(os.environ.get(ENV_IPINFO_FIELDS) or "{}").items()
            },
            ipinfo_at_root=_flag(ENV_IPINFO_AT_ROOT),
            show_sources=_flag(ENV_SHOW_SOURCES),
        )


#: The key that signs ``next`` page tokens of ``/v1/ranges`` and ``/v1/flagged``.
ENV_PAGE_TOKEN_KEY = "IPMETA_PAGE_TOKEN_KEY"
#: Good enough locally: a token only names positions in public data, and a forged
#: one could at most read ranges the caller may list anyway. A deployment sets its own
#: key so tokens cannot be crafted to make the server run arbitrary index Queries.
DEFAULT_PAGE_TOKEN_KEY = "ipmeta-local-page-token-key"


#: In AWS the stack generates the key in Secrets Manager and names it here.
ENV_PAGE_TOKEN_SECRET_ARN = "IPMETA_PAGE_TOKEN_SECRET_ARN"


#: How long a container keeps the key it read: the stack never rotates it.
PAGE_TOKEN_KEY_MAX_AGE_SECONDS = 3600


def page_token_key() -> bytes:
    """The signing key: set directly, read from Secrets Manager (cached), or the local default."""
    if key := os.environ.get(ENV_PAGE_TOKEN_KEY):
        return key.encode()
    if secret_arn := os.environ.get(ENV_PAGE_TOKEN_SECRET_ARN):
        # Imported on the first paged listing, not at cold start: forward lookups never need it.
        from aws_lambda_powertools.utilities import parameters

        return str(parameters.get_secret(secret_arn, max_age=PAGE_TOKEN_KEY_MAX_AGE_SECONDS)).encode()
    return DEFAULT_PAGE_TOKEN_KEY.encode()


# -- the url front: what the function checks itself, with no API Gateway before it -------------

#: The secret of client name -> key, JSON (the HTTP front's authorizer reads the same one). Set on
#: the lookup function only when it checks keys itself (``apiType=url``).
ENV_API_KEYS_SECRET_ARN = "IPMETA_API_KEYS_SECRET_ARN"
#: How long a container keeps the keys it read before reading the secret again.
ENV_API_KEY_CACHE_SECONDS = "IPMETA_API_KEY_CACHE_SECONDS"
DEFAULT_API_KEY_CACHE_SECONDS = 300
#: The share of answered requests the function's access log records (4xx and 5xx: every one).
ENV_ACCESS_LOG_SAMPLE_RATE = "IPMETA_ACCESS_LOG_SAMPLE_RATE"
#: Behind CloudFront's origin access control the function URL's ``Authorization`` carries
#: CloudFront's signature; a CloudFront Function moves the client's own to this header first.
ENV_EDGE_AUTHORIZATION_HEADER = "IPMETA_EDGE_AUTHORIZATION_HEADER"
#: The alias whose URL serves the batch routes behind CloudFront (signed POSTs need a body hash).
ENV_BATCH_ALIAS = "IPMETA_BATCH_ALIAS"
