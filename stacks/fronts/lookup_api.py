"""The lookup API: a front (``apiType``) -> lookup Lambda -> the table; with ``edge``, CloudFront first.

``LookupApi`` builds the lookup function, then the front ``apiType`` names from ``FRONTS``, a
table of builders that each return a ``LookupFront`` (``stacks/fronts/lookup_front.py``): the
REST API (``rest_front``, built under the construct ids it always had, so an existing
deployment keeps its API and URL), the HTTP API (``http_front``, the default) or the
function's own URL (``url_front``, the cheapest). The distribution (``edge``) stands before
any of them. Every front calls the same function, which reads each front's event
(``ipmeta.api.fronts.front_events``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ipmeta.schema.settings import Front
from stacks.config import IpmetaConfig
from stacks.constants import (
    ENV_CORS_ORIGINS,
    ENV_DATASET_MAX_AGE_SECONDS,
    ENV_DATASETS,
    ENV_GEOIP2_DATASETS,
    ENV_HEALTH_MAX_DATASET_AGE_SECONDS,
    ENV_IPINFO_AT_ROOT,
    ENV_IPINFO_DATASETS,
    ENV_IPINFO_FIELDS,
    ENV_PAGE_TOKEN_SECRET_ARN,
    ENV_POINTER_CACHE_SECONDS,
    ENV_RANGE_CACHE_BYTES,
    ENV_SHOW_SOURCES,
    ENV_TABLE_NAME,
    LOOKUP_HANDLER,
    LOOKUP_SERVICE_NAME,
    METRICS_NAMESPACE,
    OUTPUT_API_URL,
    OUTPUT_DISTRIBUTION_ID,
    POWERTOOLS_METRICS_DISABLED_ENV,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
)
from stacks.fronts.edge import EdgeFront
from stacks.fronts.front_metrics import MonitoredFront
from stacks.fronts.http_front import HttpLookupFront
from stacks.fronts.lookup_front import FrontBuilder, LookupFront
from stacks.fronts.rest_front import RestLookupFront
from stacks.fronts.url_front import UrlLookupFront
from stacks.function import PythonFunction, lookup_code
from stacks.nag import acknowledge

#: The lookup reads, never writes: a query for the piece at or before an
#: address, a get of the table's list of datasets, and a batch get of their pointers.
LOOKUP_TABLE_ACTIONS = ("dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem")
LOOKUP_INDEX_ACTIONS = ("dynamodb:Query",)


def _http_front(
    scope: Construct, *, config: IpmetaConfig, handler: PythonFunction, keys: secretsmanager.ISecret | None
) -> LookupFront:
    return HttpLookupFront(scope, "HttpFront", config=config, handler=handler, keys=keys)


def _url_front(
    scope: Construct, *, config: IpmetaConfig, handler: PythonFunction, keys: secretsmanager.ISecret | None
) -> LookupFront:
    return UrlLookupFront(scope, "UrlFront", config=config, handler=handler, keys=keys)


#: Each front and what builds it. The HTTP API and the function URL are constructs of their
#: own (``HttpFront``, ``UrlFront``); the REST front builds in ``LookupApi`` itself.
FRONTS: Final[Mapping[Front, FrontBuilder]] = {
    Front.REST: RestLookupFront,
    Front.HTTP: _http_front,
    Front.URL: _url_front,
}


def emit_lean_logs(function: lambda_.IFunction) -> None:
    """JSON logs without Lambda's START, END and REPORT lines; application logs unfiltered.

    At ``SystemLogLevel`` WARN Lambda drops its per-invocation platform lines,
    which repeat what the access log and Lambda's metrics (Duration, Errors,
    Throttles) already hold. Application lines stay at INFO: powertools' metrics
    line has no level, which Lambda reads as INFO, and a stricter filter would
    drop the metric. ``PythonFunction`` knows nothing of log levels, so they are
    set on the resource.
    """
    resource = cast(lambda_.CfnFunction, function.node.default_child)
    resource.add_property_override("LoggingConfig.LogFormat", lambda_.LoggingFormat.JSON.value)
    resource.add_property_override("LoggingConfig.SystemLogLevel", lambda_.SystemLogLevel.WARN.value)
    resource.add_property_override(
        "LoggingConfig.ApplicationLogLevel", lambda_.ApplicationLogLevel.INFO.value
    )


@dataclass(frozen=True)
class SharedSecrets:
    """The secrets a replica region's front uses instead of making its own: home's, replicated there
    (``stacks/regions/replicas.py``), so a page token or a key is good in every region."""

    page_token_key: secretsmanager.ISecret
    api_keys: secretsmanager.ISecret | None = None


class LookupApi(Construct):
    """The lookup function and the front that serves it, chosen by ``apiType`` from ``FRONTS``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
        index_names: Sequence[str],
        shared: SharedSecrets | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._shared = shared
        self.handler = self._build_function(table, index_names)
        self.front: LookupFront = FRONTS[config.api_type](
            self, config=config, handler=self.handler, keys=shared.api_keys if shared else None
        )
        self.functions: dict[str, lambda_.IFunction] = {
            "lookup": self.handler.function,
            **self.front.functions,
        }
        origins = self.front.edge_origins() if config.edge else {}
        self.edge = EdgeFront(self, "Edge", config=config, **origins) if config.edge else None
        for function in self.functions.values():
            emit_lean_logs(function)

    @property
    def url(self) -> str:
        """The base URL: the distribution's with ``edge``; else the front's (``.../api/``, the REST
        stage; ``.../``, the HTTP API's default stage or the function URL)."""
        return self.edge.url if self.edge is not None else self.front.url

    def fronts(self) -> list[MonitoredFront]:
        """What the dashboard and the alarms watch of the front in front of the function."""
        return [self.front.monitored_front()]

    def outputs(self) -> dict[str, tuple[str, str]]:
        """The front's stack outputs: its URL and where a client's key comes from."""
        outputs = {OUTPUT_API_URL: (self.url, "Base URL of the lookup API")}
        if self.edge is not None:
            outputs[OUTPUT_DISTRIBUTION_ID] = (
                self.edge.distribution.distribution_id,
                "The CloudFront distribution in front of the API (each activation invalidates it)",
            )
        return {**outputs, **self.front.key_outputs()}

    def _build_function(self, table: dynamodb.ITableV2, index_names: Sequence[str]) -> PythonFunction:
        function = PythonFunction(
            self,
            "Lookup",
            code=lookup_code(),
            handler=LOOKUP_HANDLER,
            description="ipmeta lookup API",
            environment={
                ENV_TABLE_NAME: table.table_name,
                ENV_POINTER_CACHE_SECONDS: str(self._config.pointer_cache_seconds),
                # Empty turns CORS off in the handler, as it is at API Gateway.
                ENV_CORS_ORIGINS: ",".join(self._config.cors_allow_origins),
                # /v1/health and the data-age alarms agree on what "too old" is, per dataset.
                ENV_HEALTH_MAX_DATASET_AGE_SECONDS: str(self._config.data_max_age_hours * 3600),
                ENV_DATASET_MAX_AGE_SECONDS: json.dumps(
                    {source.name: source.max_age_hours * 3600 for source in self._config.dataset_sources},
                    separators=(",", ":"),
                ),
                ENV_DATASETS: ",".join(self._config.lookup_datasets),
                ENV_GEOIP2_DATASETS: json.dumps(self._config.geoip2_datasets, separators=(",", ":")),
                ENV_IPINFO_DATASETS: ",".join(self._config.ipinfo_datasets),
                ENV_IPINFO_FIELDS: json.dumps(self._config.ipinfo_fields, separators=(",", ":")),
                ENV_IPINFO_AT_ROOT: str(self._config.ipinfo_at_root).lower(),
                ENV_SHOW_SOURCES: str(self._config.show_sources).lower(),
                ENV_RANGE_CACHE_BYTES: str(self._config.lookup_cache_mb * 1024 * 1024),
                POWERTOOLS_SERVICE_NAME_ENV: LOOKUP_SERVICE_NAME,
                POWERTOOLS_METRICS_NAMESPACE_ENV: METRICS_NAMESPACE,
                # Lookups, cache hits and misses, Queries and answers by status, counted in
                # memory and published as one EMF line a minute at most per container
                # (ipmeta.api.observability): the cost grows with containers, not lookups.
                POWERTOOLS_METRICS_DISABLED_ENV: str(not self._config.lookup_metrics).lower(),
            },
            memory_mb=self._config.lookup_memory_mb,
            timeout=Duration.seconds(10),
            log_retention=self._config.log_retention,
            tracing=self._config.api_tracing,
        )
        self.page_token_key = self._build_page_token_key(function)
        if self._config.api_tracing:
            acknowledge(
                function.role,
                "IAM5[Resource::*]",
                "Active tracing's xray:PutTraceSegments and PutTelemetryRecords have no "
                "resource-level permissions; the function's data access is scoped below.",
            )
        function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(LOOKUP_TABLE_ACTIONS), resources=[table.table_arn])
        )
        if index_names:
            # GetItem means nothing on an index: the reverse lookups only Query them.
            function.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(LOOKUP_INDEX_ACTIONS),
                    resources=[f"{table.table_arn}/index/{name}" for name in index_names],
                )
            )
        return function

    def _build_page_token_key(self, function: PythonFunction) -> secretsmanager.ISecret:
        """The key that signs /v1/ranges and /v1/flagged page tokens, never in the template."""
        if self._shared is not None:
            replica = self._shared.page_token_key
            replica.grant_read(function.role)
            function.function.add_environment(ENV_PAGE_TOKEN_SECRET_ARN, replica.secret_arn)
            return replica
        key = secretsmanager.Secret(
            self,
            "PageTokenKey",
            description="ipmeta: signs the next-page tokens of reverse lookups",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=48
            ),
        )
        key.grant_read(function.role)
        function.function.add_environment(ENV_PAGE_TOKEN_SECRET_ARN, key.secret_arn)
        acknowledge(
            key,
            "SMG4",
            "Rotating the page-token key would invalidate open paginations and buys nothing: "
            "a token only names positions in data the caller may list anyway.",
        )
        return key
