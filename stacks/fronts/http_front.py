"""The cheaper front (``apiType=http``): an API Gateway HTTP API in front of the same lookup function.

- **Same handler, same routes.** The integration sends payload format 2.0, a function
  URL's shape too; the lookup's one resolver reads it beside REST's proxy event
  (``ipmeta.api.fronts.front_events``; ``tests/unit/test_http_api_events.py`` feeds it one).
- **Same paths.** The ``$default`` stage puts no stage name in the URL:
  ``https://<id>.execute-api.<region>.amazonaws.com/v1/ip/1.1.1.1``.
- **A key per client.** A Lambda authorizer checks the key against a generated
  secret, in the route family's form (``ipmeta.api.fronts.credentials``): ``x-api-key`` on
  ``/v1``, HTTP Basic's password on the GeoIP2 web service, ``Bearer`` or ``?token=``
  on ipinfo's routes. API Gateway caches its answer per identity source (the
  family's header, the only one it reads), so most requests invoke nothing; ipinfo's routes have no
  single identity source, so their authorizer is called on every request
  (docs/decisions.md says why not IAM or JWT). A refused key is API Gateway's
  own 401/403 ``{"message": ...}``: an HTTP API cannot reshape it.
- **Throttling** is stage-wide. HTTP APIs have no usage plans: no per-key rate
  or quota (the REST front keeps those).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigatewayv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ipmeta.api.fronts.credentials import GEOIP2_KEYS, IPINFO_KEYS, V1_KEYS, RouteFamily
from stacks.constants import (
    API_VERSION_PATH,
    AUTHORIZER_HANDLER,
    AUTHORIZER_SERVICE_NAME,
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_SECONDS,
    ENV_API_KEYS_SECRET_ARN,
    GEOIP2_PATH,
    HTTP_API_STAGE_NAME,
    IPINFO_PATH,
    OUTPUT_API_KEYS_SECRET_ARN,
    PAGE_STATIC_PATH,
    POWERTOOLS_SERVICE_NAME_ENV,
)
from stacks.fronts.edge import http_api_origin
from stacks.fronts.front_metrics import MonitoredFront, api_gateway_front
from stacks.fronts.lookup_front import SecretKeyedFront
from stacks.function import PythonFunction, lookup_code
from stacks.nag import acknowledge

#: Every method but OPTIONS reaches the handler, which answers ROUTE_NOT_FOUND for
#: the ones it has no route for, as behind the REST front's ANY methods. OPTIONS is
#: left to the gateway's CORS preflight: an ANY route would send the preflight,
#: which carries no key, to the authorizer.
ROUTED_METHODS: Final = (
    apigatewayv2.HttpMethod.GET,
    apigatewayv2.HttpMethod.HEAD,
    apigatewayv2.HttpMethod.POST,
    apigatewayv2.HttpMethod.PUT,
    apigatewayv2.HttpMethod.PATCH,
    apigatewayv2.HttpMethod.DELETE,
)
ROUTED_PATHS: Final = (f"/{API_VERSION_PATH}", f"/{API_VERSION_PATH}/{{proxy+}}")
GEOIP2_PATHS: Final = (f"/{GEOIP2_PATH}/{{proxy+}}",)
IPINFO_PATHS: Final = (f"/{IPINFO_PATH}", f"/{IPINFO_PATH}/{{proxy+}}")
#: ``ipinfoAtRoot``: ipinfo's own API_URL has no path (the other families keep theirs).
ROOT_PATHS: Final = ("/", "/{proxy+}")
#: The lookup page and its files: GET (and HEAD, as on every GET route), no authorizer
#: (``ipmeta.api.routes.page_routes``).
PAGE_PATHS: Final = ("/", f"/{PAGE_STATIC_PATH}/{{proxy+}}")
PAGE_METHODS: Final = (apigatewayv2.HttpMethod.GET, apigatewayv2.HttpMethod.HEAD)

#: One JSON line per request, the REST front's fields in HTTP API variables;
#: ``client`` is the authorizer's name for the key (the REST log has the key id).
ACCESS_LOG_FIELDS: Final[Mapping[str, str]] = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "client": "$context.authorizer.client",
    "method": "$context.httpMethod",
    "path": "$context.path",
    "status": "$context.status",
    "ms": "$context.responseLatency",
    "lambdaMs": "$context.integrationLatency",
    "error": "$context.error.message",
    "lambdaError": "$context.integrationErrorMessage",
    "authError": "$context.authorizer.error",
}

#: The authorizer compares a header with a few keys: the smallest size is plenty.
AUTHORIZER_MEMORY_MB: Final = 128


def keys_secret(scope: Construct, front: str) -> secretsmanager.Secret:
    """Client name -> key, one generated client to start with; never in the template. The HTTP
    front's authorizer and the url front's function read it (``credentials.client_of``)."""
    secret = secretsmanager.Secret(
        scope,
        "ApiKeys",
        description=f"ipmeta: API keys of {front}, a JSON object of client name to key",
        generate_secret_string=secretsmanager.SecretStringGenerator(
            secret_string_template="{}",
            generate_string_key="default",
            exclude_punctuation=True,
            password_length=40,
        ),
    )
    acknowledge(
        secret,
        "SMG4",
        "The keys are handed to clients, so a scheduled rotation would cut them off; "
        "an operator rotates a client's key by editing the secret (docs/deploy.md).",
    )
    return secret


def keys_secret_outputs(keys: secretsmanager.ISecret) -> dict[str, tuple[str, str]]:
    """Where a client's key comes from, behind a front whose keys are a secret."""
    return {
        OUTPUT_API_KEYS_SECRET_ARN: (
            keys.secret_arn,
            "API keys by client: aws secretsmanager get-secret-value --secret-id <arn>",
        )
    }


@jsii.implements(apigatewayv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._log_group = log_group

    @property
    def destination(self) -> apigatewayv2.IAccessLogDestination:
        return apigatewayv2.LogGroupLogDestination(self._log_group)

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":")))


class HttpLookupFront(SecretKeyedFront):
    def _build(self, handler: PythonFunction, keys: secretsmanager.ISecret | None) -> None:
        config = self._config
        #: Given in a replica region: home's keys, replicated there, so one key works everywhere.
        self.keys: secretsmanager.ISecret = keys or self._build_keys_secret()
        self.authorizer = self._build_authorizer_function()
        self.functions: Mapping[str, lambda_.IFunction] = {"authorizer": self.authorizer.function}
        self.api = apigatewayv2.HttpApi(
            self,
            "HttpApi",
            description="ipmeta: IP metadata lookups",
            cors_preflight=self._cors_options(),
            # The stage below carries the throttle and the access logs.
            create_default_stage=False,
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=config.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.stage = self.api.add_stage(
            "DefaultStage",
            stage_name=HTTP_API_STAGE_NAME,
            auto_deploy=True,
            throttle=apigatewayv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate_limit, burst_limit=config.api_throttle_burst_limit
            ),
            access_log_settings=_AccessLogs(self.access_logs),
        )
        # Every route but the lookup page's has the authorizer, and the stage logs every request:
        # cdk-nag's APIG4 is acknowledged on the page's routes alone.
        self._build_routes(handler.function)

    @property
    def url(self) -> str:
        return self.stage.url

    def key_outputs(self) -> dict[str, tuple[str, str]]:
        return keys_secret_outputs(self.keys)

    def edge_origins(self) -> dict[str, cloudfront.IOrigin]:
        return {"origin": http_api_origin(self.api)}

    def custom_domain(
        self, scope: Construct, domain_name: str, certificate: acm.ICertificate
    ) -> route53.IAliasRecordTarget:
        domain = apigatewayv2.DomainName(scope, "Domain", domain_name=domain_name, certificate=certificate)
        apigatewayv2.ApiMapping(scope, "Mapping", api=self.api, domain_name=domain, stage=self.stage)
        return targets.ApiGatewayv2DomainProperties(
            domain.regional_domain_name, domain.regional_hosted_zone_id
        )

    def monitored_front(self) -> MonitoredFront:
        """The HTTP API as the dashboard sees it: API-wide metrics (``ApiId``), as the 5xx alarm always
        read them, and the library's own HTTP API section for the default stage."""
        api = self.api
        return api_gateway_front(
            "HTTP API",
            api,
            lambda facade: facade.monitor_api_gateway_v2_http_api(
                api=api, alarm_friendly_name="HttpApi", human_readable_name="HTTP API"
            ),
        )

    def _build_keys_secret(self) -> secretsmanager.Secret:
        return keys_secret(self, "the HTTP API")

    def _build_authorizer_function(self) -> PythonFunction:
        function = PythonFunction(
            self,
            "Authorizer",
            code=lookup_code(),
            handler=AUTHORIZER_HANDLER,
            description="ipmeta HTTP API key authorizer",
            environment={
                ENV_API_KEYS_SECRET_ARN: self.keys.secret_arn,
                POWERTOOLS_SERVICE_NAME_ENV: AUTHORIZER_SERVICE_NAME,
            },
            memory_mb=AUTHORIZER_MEMORY_MB,
            timeout=Duration.seconds(5),
            log_retention=self._config.log_retention,
        )
        self.keys.grant_read(function.role)
        return function

    def _authorizer(self, construct_id: str, family: RouteFamily) -> authorizers.HttpLambdaAuthorizer:
        """One per route family: the answer is cached per value of the family's identity header, the
        one header the authorizer reads its key from; a family without one (ipinfo: a header or
        ``?token=``) is checked on every request."""
        header = family.identity_header
        return authorizers.HttpLambdaAuthorizer(
            construct_id,
            self.authorizer.function,
            identity_source=[f"$request.header.{header}"] if header else [],
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            results_cache_ttl=Duration.seconds(self._config.api_key_cache_seconds if header else 0),
        )

    def _build_routes(self, handler: lambda_.IFunction) -> None:
        integration = integrations.HttpLambdaIntegration(
            "Lookup",
            handler,
            payload_format_version=apigatewayv2.PayloadFormatVersion.VERSION_2_0,
            # One invoke permission for this API rather than one per route.
            scope_permission_to_route=False,
        )
        ipinfo = self._authorizer("IpinfoKey", IPINFO_KEYS)
        families = [
            (ROUTED_PATHS, self._authorizer("ApiKey", V1_KEYS)),
            (GEOIP2_PATHS, self._authorizer("GeoIP2Key", GEOIP2_KEYS)),
            (IPINFO_PATHS, ipinfo),
        ]
        if self._config.ipinfo_at_root:
            families.append((ROOT_PATHS, ipinfo))
        for paths, authorizer in families:
            for path in paths:
                # `GET /` and `HEAD /` are the lookup page's, below, whoever else answers at the root.
                methods = [method for method in ROUTED_METHODS if (path, method) not in self._page_routes()]
                self.api.add_routes(
                    path=path, methods=methods, integration=integration, authorizer=authorizer
                )
        self._build_page_routes(integration)

    @staticmethod
    def _page_routes() -> set[tuple[str, apigatewayv2.HttpMethod]]:
        return {(path, method) for path in PAGE_PATHS for method in PAGE_METHODS}

    def _build_page_routes(self, integration: integrations.HttpLambdaIntegration) -> None:
        """The lookup page (``GET /``) and its files (``GET /static/...``), with no authorizer: they
        hold no data, and the page's lookups go to ``/v1`` with the key."""
        for path in PAGE_PATHS:
            for route in self.api.add_routes(path=path, methods=list(PAGE_METHODS), integration=integration):
                acknowledge(
                    route,
                    "APIG4",
                    "The lookup page and its static files hold no data and need no key; the lookups "
                    "the page makes go to /v1, whose routes have the key authorizer.",
                )

    def _cors_options(self) -> apigatewayv2.CorsPreflightOptions | None:
        origins = self._config.cors_allow_origins
        if not origins:
            return None
        return apigatewayv2.CorsPreflightOptions(
            allow_origins=origins,
            allow_methods=[apigatewayv2.CorsHttpMethod[method] for method in CORS_ALLOW_METHODS],
            allow_headers=list(CORS_ALLOW_HEADERS),
            expose_headers=list(CORS_EXPOSE_HEADERS),
            max_age=Duration.seconds(CORS_MAX_AGE_SECONDS),
        )
