"""The front at the floor of the bill (``apiType=url``): the lookup function's own URL, no API Gateway.

- **Same handler, same routes, same answers.** A function URL sends payload 2.0, which the
  lookup's one resolver reads (``ipmeta.api.fronts.front_events``).
- **Keys are checked in the function** (``ipmeta.api.fronts.key_check``), in every client's form, in
  constant time, against a secret of client name -> key (the HTTP front's shape), read once per
  container and again every ``apiKeyCacheSeconds``. A refused key is 401 ``AUTHORIZATION_INVALID``
  in its API's own error shape, before any read.
- **The throttle** is the function's reserved concurrency (``lookupReservedConcurrency``): what
  the front gives up is a throttle and a quota per key (docs/decisions.md).
- **The access log** is the function's: one line per request, sampled (``accessLogSampleRate``),
  every 4xx and 5xx (``ipmeta.api.fronts.access_log``).
- **Behind CloudFront** (``edge``) the URL is ``AWS_IAM``, callable only by the distribution
  through its origin access control. Signed POSTs need their body's SHA-256, which clients do not
  send, so the batch routes reach the function through a second URL, of the ``batch`` alias, that
  serves them alone (``stacks/fronts/edge.py``; docs/decisions.md, "Batches behind the edge").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.config import ConfigError
from stacks.constants import (
    BATCH_ALIAS,
    CORS_ALLOW_HEADERS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_SECONDS,
    EDGE_AUTHORIZATION_HEADER,
    ENV_ACCESS_LOG_SAMPLE_RATE,
    ENV_API_KEY_CACHE_SECONDS,
    ENV_API_KEYS_SECRET_ARN,
    ENV_BATCH_ALIAS,
    ENV_EDGE_AUTHORIZATION_HEADER,
)
from stacks.fronts.edge import batch_url_origin, function_url_origin
from stacks.fronts.front_metrics import FIVE_MINUTES, MonitoredFront
from stacks.fronts.http_front import keys_secret, keys_secret_outputs
from stacks.fronts.lookup_front import SecretKeyedFront
from stacks.function import PythonFunction
from stacks.nag import acknowledge

#: What a preflight may ask for (a function URL's CORS takes at most six methods).
URL_CORS_METHODS = (lambda_.HttpMethod.GET, lambda_.HttpMethod.HEAD, lambda_.HttpMethod.POST)


class UrlLookupFront(SecretKeyedFront):
    """The lookup function's URL, its keys and its access log; with ``edge``, the batch alias's URL."""

    def _build(self, handler: PythonFunction, keys: secretsmanager.ISecret | None) -> None:
        config = self._config
        self._function = handler.function
        #: ``keys``: home's secret replicated here, in a replica region; else the front's own.
        self.keys: secretsmanager.ISecret | None = self._build_keys(handler, keys)
        self.functions: Mapping[str, lambda_.IFunction] = {}
        function = handler.function
        if config.lookup_reserved_concurrency:
            # Behind its own URL the function's concurrency is the front's throttle.
            resource = cast(lambda_.CfnFunction, function.node.default_child)
            resource.reserved_concurrent_executions = config.lookup_reserved_concurrency
        function.add_environment(ENV_ACCESS_LOG_SAMPLE_RATE, str(config.access_log_sample_rate))
        auth = lambda_.FunctionUrlAuthType.AWS_IAM if config.edge else lambda_.FunctionUrlAuthType.NONE
        self.function_url = function.add_function_url(auth_type=auth, cors=self._cors())
        self.batch_url: lambda_.FunctionUrl | None = None
        if config.edge:
            self.batch_url = self._build_batch_url(function)
            function.add_environment(ENV_EDGE_AUTHORIZATION_HEADER, EDGE_AUTHORIZATION_HEADER)
        else:
            acknowledge(
                self.function_url,
                "LambdaFunctionUrlAuth",
                "The URL is the API's front: every request's key is checked in the function "
                "(ipmeta.api.fronts.key_check) against the keys secret, before any read.",
            )

    @property
    def url(self) -> str:
        return self.function_url.url

    def key_outputs(self) -> dict[str, tuple[str, str]]:
        assert self.keys is not None
        return keys_secret_outputs(self.keys)

    def edge_origins(self) -> dict[str, cloudfront.IOrigin]:
        assert self.batch_url is not None
        return {
            "origin": function_url_origin(self.function_url),
            "batch_origin": batch_url_origin(self.batch_url),
        }

    def custom_domain(
        self, scope: Construct, domain_name: str, certificate: acm.ICertificate
    ) -> route53.IAliasRecordTarget:
        # IpmetaConfig refuses domainName with apiType=url: a function URL takes no custom domain.
        raise ConfigError(f"{domain_name}: a function URL takes no custom domain")

    def monitored_front(self) -> MonitoredFront:
        """The function URL as the dashboard sees it: Lambda's ``Url*`` metrics of the function,
        which count what reached it through its URL (none comes any other way)."""
        function, total = self._function, cloudwatch.Stats.SUM
        return MonitoredFront(
            name="Function URL",
            requests=lambda period: function.metric("UrlRequestCount", period=period, statistic=total),
            latency=lambda statistic: function.metric(
                "UrlRequestLatency", period=FIVE_MINUTES, statistic=statistic
            ),
            client_errors=lambda period: function.metric("Url4xxCount", period=period, statistic=total),
            server_errors=lambda period: function.metric("Url5xxCount", period=period, statistic=total),
        )

    def _build_keys(
        self, handler: PythonFunction, shared: secretsmanager.ISecret | None
    ) -> secretsmanager.ISecret:
        secret = shared if shared is not None else keys_secret(self, "the function URL")
        secret.grant_read(handler.role)
        handler.function.add_environment(ENV_API_KEYS_SECRET_ARN, secret.secret_arn)
        handler.function.add_environment(ENV_API_KEY_CACHE_SECONDS, str(self._config.api_key_cache_seconds))
        return secret

    def _build_batch_url(self, function: lambda_.Function) -> lambda_.FunctionUrl:
        """The batch routes' way in behind CloudFront: an alias's URL, reached without the origin
        access control (its signed POSTs would need a body hash), serving those routes only."""
        alias = lambda_.Alias(self, "BatchAlias", alias_name=BATCH_ALIAS, version=function.current_version)
        function.add_environment(ENV_BATCH_ALIAS, BATCH_ALIAS)
        url = alias.add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE, cors=self._cors())
        acknowledge(
            url,
            "LambdaFunctionUrlAuth",
            "The batch alias's URL serves POST /v1/batch and /ipinfo/batch only (the function refuses "
            "any other route on it), each key checked in the function: CloudFront's origin access "
            "control cannot sign a POST without the body's SHA-256, which clients do not send.",
        )
        return url

    def _cors(self) -> lambda_.FunctionUrlCorsOptions | None:
        origins = self._config.cors_allow_origins
        if not origins:
            return None
        return lambda_.FunctionUrlCorsOptions(
            allowed_origins=origins,
            allowed_methods=list(URL_CORS_METHODS),
            allowed_headers=list(CORS_ALLOW_HEADERS),
            exposed_headers=list(CORS_EXPOSE_HEADERS),
            max_age=Duration.seconds(CORS_MAX_AGE_SECONDS),
        )
