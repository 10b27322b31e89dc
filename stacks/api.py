"""The lookup API: a front (``apiType``) -> lookup Lambda -> the table; with ``edge``, CloudFront first.

The REST front is built here, under the construct ids it always had, so an
existing deployment keeps its API and URL; the HTTP front (``stacks/http_api.py``)
and the function's own URL (``stacks/url_front.py``, the default) are constructs of
their own, and so is the distribution (``stacks/edge.py``). Every front calls the
same function, which reads each front's event (``ipmeta.api.fronts.front_events``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from ipmeta.api.fronts.credentials import (
    GEOIP2_KEYS,
    IPINFO_KEYS,
    REFUSAL_STATUS,
    V1_KEYS,
    RouteFamily,
    refusal_body,
)
from stacks.config import API_TYPE_HTTP, API_TYPE_URL, IpmetaConfig
from stacks.constants import (
    API_STAGE_NAME,
    API_VERSION_PATH,
    AUTHORIZER_SERVICE_NAME,
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_MAX_AGE_SECONDS,
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
    GEOIP2_PATH,
    IPINFO_PATH,
    LOOKUP_HANDLER,
    LOOKUP_SERVICE_NAME,
    METRICS_NAMESPACE,
    OUTPUT_API_KEY_ID,
    OUTPUT_API_KEYS_SECRET_ARN,
    OUTPUT_API_URL,
    OUTPUT_DISTRIBUTION_ID,
    PAGE_STATIC_PATH,
    POWERTOOLS_METRICS_DISABLED_ENV,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
    USAGE_PLAN_AUTHORIZER_HANDLER,
)
from stacks.edge import EdgeFront, batch_url_origin, function_url_origin, http_api_origin, rest_api_origin
from stacks.front_metrics import MonitoredFront, api_gateway_front
from stacks.function import PythonFunction, lookup_code
from stacks.http_api import AUTHORIZER_MEMORY_MB, HttpLookupFront
from stacks.nag import acknowledge
from stacks.url_front import UrlLookupFront

#: The lookup reads, never writes: a query for the piece at or before an
#: address, a get of the table's list of datasets, and a batch get of their pointers.
LOOKUP_TABLE_ACTIONS = ("dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem")
LOOKUP_INDEX_ACTIONS = ("dynamodb:Query",)

#: One JSON line per request, and the only line a request leaves when it goes
#: well (docs/deploy.md, "What the logs cost"): who (ip, key id), what (method,
#: path), the outcome (status, latencies) and, with execution logging off, why it
#: failed (the gateway's error, the Lambda call's). The log event's own timestamp
#: is the request time.
ACCESS_LOG_FIELDS: Final[Mapping[str, str]] = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "key": "$context.identity.apiKeyId",
    "method": "$context.httpMethod",
    "path": "$context.path",
    "status": "$context.status",
    "ms": "$context.responseLatency",
    "lambdaMs": "$context.integration.latency",
    "error": "$context.error.message",
    "lambdaError": "$context.integration.error",
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


def rest_front(api: apigateway.RestApi) -> MonitoredFront:
    """The REST API as the dashboard sees it: API-wide metrics (``ApiName``), as the 5xx alarm always
    read them, and the library's own REST API section for the stage."""
    return api_gateway_front(
        "REST API",
        api,
        lambda facade: facade.monitor_api_gateway(
            api=api, api_stage=API_STAGE_NAME, alarm_friendly_name="RestApi", human_readable_name="REST API"
        ),
    )


@dataclass(frozen=True)
class SharedSecrets:
    """The secrets a replica region's front uses instead of making its own: home's, replicated there
    (``stacks/replicas.py``), so a page token or a key is good in every region."""

    page_token_key: secretsmanager.ISecret
    api_keys: secretsmanager.ISecret | None = None


class LookupApi(Construct):
    """The lookup function and the front that serves it, chosen by ``apiType``."""

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
        self.functions: dict[str, lambda_.IFunction] = {"lookup": self.handler.function}
        self.http: HttpLookupFront | None = None
        self.rest: apigateway.RestApi | None = None
        self.function_url: UrlLookupFront | None = None
        self.api_key: apigateway.IApiKey | None = None
        if config.api_type == API_TYPE_HTTP:
            self.http = HttpLookupFront(
                self,
                "HttpFront",
                config=config,
                handler=self.handler.function,
                keys=shared.api_keys if shared else None,
            )
            self.functions["authorizer"] = self.http.authorizer.function
        elif config.api_type == API_TYPE_URL:
            self.function_url = UrlLookupFront(
                self,
                "UrlFront",
                config=config,
                handler=self.handler,
                keys=shared.api_keys if shared else None,
            )
        else:
            self.access_logs = logs.LogGroup(
                self,
                "AccessLogs",
                retention=config.log_retention,
                removal_policy=RemovalPolicy.DESTROY,
            )
            self.rest = self._build_rest_api()
            self.key_authorizer = self._build_key_authorizer()
            self.functions["authorizer"] = self.key_authorizer.function
            self._build_routes(self.rest)
            self._build_refusals(self.rest)
            self.api_key = self._build_usage_plan(self.rest)
            self.web_acl = self._build_web_acl_association(self.rest)
            self._acknowledge_nag_findings(self.rest)
        self.edge = EdgeFront(self, "Edge", config=config, **self._edge_origins()) if config.edge else None
        for function in self.functions.values():
            emit_lean_logs(function)

    @property
    def url(self) -> str:
        """The base URL: the distribution's with ``edge``; else ``.../api/`` (REST stage), or ``.../``
        (the HTTP API's default stage, the function URL)."""
        if self.edge is not None:
            return self.edge.url
        if self.http is not None:
            return self.http.url
        if self.function_url is not None:
            return self.function_url.url
        assert self.rest is not None
        return self.rest.url

    def fronts(self) -> list[MonitoredFront]:
        """What the dashboard and the alarms watch of the front in front of the function."""
        if self.http is not None:
            return [self.http.monitored_front()]
        if self.function_url is not None:
            return [self.function_url.monitored_front()]
        assert self.rest is not None
        return [rest_front(self.rest)]

    def outputs(self) -> dict[str, tuple[str, str]]:
        """The front's stack outputs: its URL and where a client's key comes from."""
        outputs = {OUTPUT_API_URL: (self.url, "Base URL of the lookup API")}
        if self.edge is not None:
            outputs[OUTPUT_DISTRIBUTION_ID] = (
                self.edge.distribution.distribution_id,
                "The CloudFront distribution in front of the API (each activation invalidates it)",
            )
        keys = (
            self.http.keys if self.http is not None else self.function_url.keys if self.function_url else None
        )
        if keys is not None:
            outputs[OUTPUT_API_KEYS_SECRET_ARN] = (
                keys.secret_arn,
                "API keys by client: aws secretsmanager get-secret-value --secret-id <arn>",
            )
            return outputs
        assert self.api_key is not None
        outputs[OUTPUT_API_KEY_ID] = (
            self.api_key.key_id,
            "Id of the first API key: aws apigateway get-api-key --include-value --api-key <id>",
        )
        return outputs

    def _edge_origins(self) -> dict[str, cloudfront.IOrigin]:
        """The distribution's origins: the front it stands before (and the batch alias's URL)."""
        if self.function_url is not None:
            batch = self.function_url.batch_url
            assert batch is not None
            return {
                "origin": function_url_origin(self.function_url.function_url),
                "batch_origin": batch_url_origin(batch),
            }
        if self.http is not None:
            return {"origin": http_api_origin(self.http.api)}
        assert self.rest is not None
        return {"origin": rest_api_origin(self.rest)}

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
            # Behind its own URL the function's concurrency is the front's throttle.
            reserved_concurrency=self._config.lookup_reserved_concurrency
            if self._config.api_type == API_TYPE_URL and self._config.lookup_reserved_concurrency
            else None,
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

    def _build_rest_api(self) -> apigateway.RestApi:
        config = self._config
        return apigateway.RestApi(
            self,
            "RestApi",
            description="ipmeta: IP metadata lookups",
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            # The key authorizer hands the usage plan the key of any form (ipmeta.api.fronts.credentials).
            api_key_source_type=apigateway.ApiKeySourceType.AUTHORIZER,
            # The lookup page's images leave the function base64-encoded; API Gateway decodes them
            # only for a binary media type matching the request's first Accept type, which a
            # browser's is not, hence */*. Request bodies then reach the function base64-encoded,
            # which the batch routes already read (ipmeta.api.routes.ip_routes.raw_body).
            binary_media_types=["*/*"],
            # Execution logging needs an account-wide CloudWatch role; access
            # logs below record every request without touching account settings.
            cloud_watch_role=False,
            deploy_options=apigateway.StageOptions(
                stage_name=API_STAGE_NAME,
                tracing_enabled=config.api_tracing,
                throttling_rate_limit=config.api_throttle_rate_limit,
                throttling_burst_limit=config.api_throttle_burst_limit,
                access_log_destination=apigateway.LogGroupLogDestination(self.access_logs),
                access_log_format=apigateway.AccessLogFormat.custom(
                    json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":"))
                ),
            ),
        )

    def _build_key_authorizer(self) -> PythonFunction:
        """Reads the key in any form and hands it to the usage plan: no secret, no table."""
        return PythonFunction(
            self,
            "KeyAuthorizer",
            code=lookup_code(),
            handler=USAGE_PLAN_AUTHORIZER_HANDLER,
            description="ipmeta REST API key authorizer (x-api-key, Basic, Bearer, ?token=)",
            environment={POWERTOOLS_SERVICE_NAME_ENV: AUTHORIZER_SERVICE_NAME},
            memory_mb=AUTHORIZER_MEMORY_MB,
            timeout=Duration.seconds(5),
            log_retention=self._config.log_retention,
        )

    def _authorizer(self, construct_id: str, family: RouteFamily) -> apigateway.RequestAuthorizer:
        """One authorizer per route family: API Gateway caches its answer per value of the
        family's identity header, the one header the authorizer reads the family's key from.

        ipinfo's key comes as a header or a query parameter, so its family has no identity
        source, and API Gateway caches nothing without one: it is invoked on every request.
        """
        header = family.identity_header
        cached = header is not None and self._config.api_key_cache_seconds > 0
        return apigateway.RequestAuthorizer(
            self,
            construct_id,
            handler=self.key_authorizer.function,
            identity_sources=[apigateway.IdentitySource.header(header)] if header else [],
            results_cache_ttl=Duration.seconds(self._config.api_key_cache_seconds if cached else 0),
        )

    def _build_routes(self, api: apigateway.RestApi) -> None:
        integration = apigateway.LambdaIntegration(
            self.handler.function,
            proxy=True,
            # The console's test button would need its own invoke permission.
            allow_test_invoke=False,
        )
        cors = self._cors_options()
        authorizers = {
            API_VERSION_PATH: self._authorizer("V1Keys", V1_KEYS),
            GEOIP2_PATH: self._authorizer("GeoIP2Keys", GEOIP2_KEYS),
            IPINFO_PATH: self._authorizer("IpinfoKeys", IPINFO_KEYS),
        }
        for path, authorizer in authorizers.items():
            resource = api.root.add_resource(path, default_cors_preflight_options=cors)
            proxy = resource.add_resource("{proxy+}", default_cors_preflight_options=cors)
            family: tuple[apigateway.IResource, ...] = (resource, proxy)
            for target in family:
                target.add_method("ANY", integration, api_key_required=True, authorizer=authorizer)
        self._build_page_routes(api, integration)
        if self._config.ipinfo_at_root:
            # ipinfo's own API_URL has no path: /8.8.8.8, POST /batch (the other families keep theirs).
            root_proxy = api.root.add_resource("{proxy+}", default_cors_preflight_options=cors)
            roots: tuple[apigateway.IResource, ...] = (api.root, root_proxy)
            for target in roots:
                target.add_method(
                    "ANY", integration, api_key_required=True, authorizer=authorizers[IPINFO_PATH]
                )

    def _build_page_routes(self, api: apigateway.RestApi, integration: apigateway.LambdaIntegration) -> None:
        """The lookup page (``GET /``) and its files (``GET /static/...``), and their ``HEAD``, with no
        key: they hold no data, and the page's lookups go to ``/v1`` with the key. With
        ``ipinfoAtRoot`` the root's ``ANY`` stays ipinfo's for every other method, and ``/static`` is
        more specific than the root's ``{proxy+}``."""
        static = api.root.add_resource(PAGE_STATIC_PATH)
        files = static.add_resource("{proxy+}")
        pages: tuple[apigateway.IResource, ...] = (api.root, files)
        for target in pages:
            # HEAD as on every GET route: the handler answers it as the GET without the body.
            for method in ("GET", "HEAD"):
                target.add_method(method, integration, api_key_required=False)

    def _build_refusals(self, api: apigateway.RestApi) -> None:
        """No key, or a key no usage plan holds: 401 and one body every client reads as its own
        error (MaxMind's ``code``/``error``, /v1's ``code``/``message``), not API Gateway's
        ``{"message": "Forbidden"}``."""
        for construct_id, response_type in (
            ("NoKey", apigateway.ResponseType.UNAUTHORIZED),
            ("UnknownKey", apigateway.ResponseType.INVALID_API_KEY),
        ):
            api.add_gateway_response(
                construct_id,
                type=response_type,
                status_code=str(REFUSAL_STATUS),
                response_headers={"Content-Type": "'application/json'"},
                templates={"application/json": json.dumps(refusal_body())},
            )

    def _cors_options(self) -> apigateway.CorsOptions | None:
        origins = self._config.cors_allow_origins
        if not origins:
            return None
        # API Gateway answers the preflight, which carries no API key; the
        # handler adds Access-Control-Allow-Origin to real responses.
        return apigateway.CorsOptions(
            allow_origins=origins,
            allow_methods=list(CORS_ALLOW_METHODS),
            allow_headers=list(CORS_ALLOW_HEADERS),
            max_age=Duration.seconds(CORS_MAX_AGE_SECONDS),
        )

    def _build_usage_plan(self, api: apigateway.RestApi) -> apigateway.IApiKey:
        config = self._config
        plan = api.add_usage_plan(
            "UsagePlan",
            description="Default plan for ipmeta API keys",
            throttle=apigateway.ThrottleSettings(
                rate_limit=config.usage_plan_rate_limit,
                burst_limit=config.usage_plan_burst_limit,
            ),
            quota=apigateway.QuotaSettings(
                limit=config.usage_plan_quota_limit,
                period=apigateway.Period[config.usage_plan_quota_period],
            ),
        )
        plan.add_api_stage(stage=api.deployment_stage)
        self.usage_plan = plan
        api_key = api.add_api_key("DefaultKey", description="First ipmeta API key")
        plan.add_api_key(api_key)
        return api_key

    def _build_web_acl_association(self, api: apigateway.RestApi) -> wafv2.CfnWebACLAssociation | None:
        """``wafWebAclArn``: the operator's web ACL in front of the stage (its rules, its price)."""
        if not self._config.waf_web_acl_arn:
            acknowledge(
                api,
                "APIG3",
                "No WAF web ACL by default (a fixed monthly cost plus a per-request fee at the "
                "volumes this API serves); API keys, the usage plan and stage throttling bound "
                "each client. Set wafWebAclArn to associate a web ACL with the stage.",
            )
            return None
        return wafv2.CfnWebACLAssociation(
            self,
            "WebAcl",
            resource_arn=api.deployment_stage.stage_arn,
            web_acl_arn=self._config.waf_web_acl_arn,
        )

    def _acknowledge_nag_findings(self, api: apigateway.RestApi) -> None:
        acknowledge(
            api,
            "APIG2",
            "Every route is a Lambda proxy: the handler parses the path and maps invalid "
            "input to 400 in one exception handler, so there is no model to validate here.",
        )
        acknowledge(
            api,
            "APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role, which "
            "this stack does not own; JSON access logs record every request instead.",
        )
        acknowledge(
            api,
            "COG4",
            "The API serves public reference data to programs, not users: access is "
            "controlled by API key with a usage plan (throttle and quota per key), read by a "
            "Lambda authorizer in any form the GeoIP2 and ipinfo clients send it. The lookup "
            "page (GET / and /static) holds no data; its lookups call /v1 with the key.",
        )
        acknowledge(
            api,
            "APIG4",
            "Only the CORS preflights (OPTIONS, answered by the gateway itself) and the lookup "
            "page (GET / and its static files, which hold no data) have no authorizer: a browser "
            "sends no key on a preflight, and the page's own lookups go to /v1 with the key.",
        )
