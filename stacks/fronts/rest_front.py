"""The REST front (``apiType=rest``): an API Gateway REST API with API keys and a usage plan.

It is built in the ``LookupApi`` construct itself, under the construct ids it always had
(``RestApi``, ``AccessLogs``, ``KeyAuthorizer``, ``V1Keys``…), so an existing deployment
keeps its API, its URL and its keys: ``tests/infra/test_logical_ids.py`` pins them.

- **Keys in any form.** A Lambda authorizer per route family reads the family's key
  (``ipmeta.api.fronts.credentials``) and hands it to the usage plan (``apiKeySource=AUTHORIZER``).
- **A throttle and a quota per key** (the usage plan), and stage-wide throttling.
- **Refusals** are 401 with one body every client reads as its own error.
- **A web ACL** (``wafWebAclArn``) on the stage, where one is given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from ipmeta.api.fronts.credentials import (
    REFUSAL_CONTEXT,
    REFUSAL_MESSAGE,
    REFUSAL_STATUS,
    refusal_body,
)
from stacks.config import IpmetaConfig
from stacks.constants import (
    API_STAGE_NAME,
    API_VERSION_PATH,
    AUTHORIZER_SERVICE_NAME,
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_MAX_AGE_SECONDS,
    GEOIP2_PATH,
    IPINFO_PATH,
    OUTPUT_API_KEY_ID,
    PAGE_STATIC_PATH,
    POWERTOOLS_SERVICE_NAME_ENV,
    USAGE_PLAN_AUTHORIZER_HANDLER,
)
from stacks.fronts.edge import rest_api_origin
from stacks.fronts.front_metrics import MonitoredFront, api_gateway_front
from stacks.fronts.http_front import AUTHORIZER_MEMORY_MB
from stacks.function import PythonFunction, lookup_code
from stacks.nag import acknowledge

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


class RestLookupFront:
    """The REST API, its key authorizer, its usage plan and first key, built in ``scope``.

    Not a construct of its own: one would put its name in every logical id below it.
    """

    def __init__(
        self,
        scope: Construct,
        *,
        config: IpmetaConfig,
        handler: PythonFunction,
        keys: secretsmanager.ISecret | None = None,
    ) -> None:
        self._scope = scope
        self._config = config
        self._handler = handler
        #: API Gateway holds the REST front's keys; a replica region imports the shared one.
        self.keys: secretsmanager.ISecret | None = None
        self.access_logs = logs.LogGroup(
            scope, "AccessLogs", retention=config.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.api = self._build_rest_api()
        self.key_authorizer = self._build_key_authorizer()
        self.functions: Mapping[str, lambda_.IFunction] = {"authorizer": self.key_authorizer.function}
        self._build_routes(self.api)
        self._build_refusals(self.api)
        self.usage_plan, self.api_key = self._build_usage_plan(self.api)
        self.web_acl = self._build_web_acl_association(self.api)
        self._acknowledge_nag_findings(self.api)

    @property
    def url(self) -> str:
        """``.../api/``: the REST stage's."""
        return self.api.url

    def monitored_front(self) -> MonitoredFront:
        """The REST API as the dashboard sees it: API-wide metrics (``ApiName``), as the 5xx alarm
        always read them, and the library's own REST API section for the stage."""
        api = self.api
        return api_gateway_front(
            "REST API",
            api,
            lambda facade: facade.monitor_api_gateway(
                api=api,
                api_stage=API_STAGE_NAME,
                alarm_friendly_name="RestApi",
                human_readable_name="REST API",
            ),
        )

    def key_outputs(self) -> dict[str, tuple[str, str]]:
        return {
            OUTPUT_API_KEY_ID: (
                self.api_key.key_id,
                "Id of the first API key: aws apigateway get-api-key --include-value --api-key <id>",
            )
        }

    def edge_origins(self) -> dict[str, cloudfront.IOrigin]:
        return {"origin": rest_api_origin(self.api)}

    def custom_domain(
        self, scope: Construct, domain_name: str, certificate: acm.ICertificate
    ) -> route53.IAliasRecordTarget:
        domain = apigateway.DomainName(
            scope,
            "Domain",
            domain_name=domain_name,
            certificate=certificate,
            endpoint_type=apigateway.EndpointType.REGIONAL,
            security_policy=apigateway.SecurityPolicy.TLS_1_2,
        )
        domain.add_base_path_mapping(self.api, stage=self.api.deployment_stage)
        return targets.ApiGatewayDomain(domain)

    def _build_rest_api(self) -> apigateway.RestApi:
        config = self._config
        return apigateway.RestApi(
            self._scope,
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
            self._scope,
            "KeyAuthorizer",
            code=lookup_code(),
            handler=USAGE_PLAN_AUTHORIZER_HANDLER,
            description="ipmeta REST API key authorizer (x-api-key, Basic, Bearer, ?token=)",
            environment={POWERTOOLS_SERVICE_NAME_ENV: AUTHORIZER_SERVICE_NAME},
            memory_mb=AUTHORIZER_MEMORY_MB,
            timeout=Duration.seconds(5),
            log_retention=self._config.log_retention,
        )

    def _authorizer(self, construct_id: str) -> apigateway.RequestAuthorizer:
        """One authorizer per route family (the ids an existing deployment has), with no identity
        source, so it judges every request: the family comes from the route it is called for.

        API Gateway refuses a request that lacks an identity source before any authorizer runs,
        with its one API-wide 401 that cannot tell the families apart; and it caches an answer
        only by identity sources. So no family names one: a request with no key at all reaches
        its family's authorizer, whose denial names the family's key forms, at the price of an
        authorizer call per request (``apiKeyCacheSeconds`` does not apply to this front).
        """
        return apigateway.RequestAuthorizer(
            self._scope,
            construct_id,
            handler=self.key_authorizer.function,
            identity_sources=[],
            results_cache_ttl=Duration.seconds(0),
        )

    def _build_routes(self, api: apigateway.RestApi) -> None:
        integration = apigateway.LambdaIntegration(
            self._handler.function,
            proxy=True,
            # The console's test button would need its own invoke permission.
            allow_test_invoke=False,
        )
        cors = self._cors_options()
        authorizers = {
            API_VERSION_PATH: self._authorizer("V1Keys"),
            GEOIP2_PATH: self._authorizer("GeoIP2Keys"),
            IPINFO_PATH: self._authorizer("IpinfoKeys"),
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
        """No key, a refused one, or a key no usage plan holds: 401 and one body every client reads
        as its own error (MaxMind's ``code``/``error``, /v1's ``code``/``message``), not API
        Gateway's ``{"message": "Forbidden"}``. Every keyed request reaches its family's authorizer
        (``_authorizer``), so a missing or refused key (ACCESS_DENIED) and an unknown one
        (INVALID_API_KEY) get the family's message from the authorizer's context. UNAUTHORIZED is
        left to a route of no family, which the authorizer does not judge: every form is named."""
        judged = refusal_body(f"$context.authorizer.{REFUSAL_CONTEXT}")
        for construct_id, response_type, body in (
            ("NoKey", apigateway.ResponseType.UNAUTHORIZED, refusal_body(REFUSAL_MESSAGE)),
            ("UnknownKey", apigateway.ResponseType.INVALID_API_KEY, judged),
            ("RefusedKey", apigateway.ResponseType.ACCESS_DENIED, judged),
        ):
            api.add_gateway_response(
                construct_id,
                type=response_type,
                status_code=str(REFUSAL_STATUS),
                response_headers={"Content-Type": "'application/json'"},
                templates={"application/json": json.dumps(body)},
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

    def _build_usage_plan(self, api: apigateway.RestApi) -> tuple[apigateway.UsagePlan, apigateway.IApiKey]:
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
        api_key = api.add_api_key("DefaultKey", description="First ipmeta API key")
        plan.add_api_key(api_key)
        return plan, api_key

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
            self._scope,
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
