"""CloudFront in front of any front (``edge=true``): TLS near the caller, lookup answers cached.

- **The origin**: the function URL through an origin access control for Lambda (the URL is then
  ``AWS_IAM``, callable only by this distribution), the HTTP API's endpoint, or the REST stage.
- **What is cached**: the lookup answers, ``/v1/ip/*``, ``/geoip/v2.1/*`` and ``/ipinfo/*`` (and the
  root's with ``ipinfoAtRoot``), for ``edgeCacheSeconds`` at most. The cache policy's default TTL is
  0, so only an answer that says it may be kept (``Cache-Control: public``) is: the caller's own
  answers (``private``), errors and ``POST`` are not. ``/v1/*`` otherwise (``/v1/health``,
  ``/v1/datasets``, ``/v1/batch``, the docs) is never cached.
- **CORS at the edge: the cache key includes ``Origin``** whenever CORS is on
  (``corsAllowOrigins``). The function answers each allowed origin with its own
  ``Access-Control-Allow-Origin`` (and a request without ``Origin`` with none), and CloudFront
  ignores ``Vary``: without ``Origin`` in the key one site's cached answer, and its header, would
  reach another's page for up to ``edgeCacheSeconds``.
- **Errors are never cached**: CloudFront keeps a 4xx or 5xx for its Error Caching Minimum TTL
  (10 s by default) whatever ``Cache-Control`` says, and an error may name the caller (its own
  address); every status CloudFront caches gets an error caching TTL of 0.
- **Keys at the edge: the cache key includes the key** (docs/decisions.md, "Keys behind the edge").
  A cached answer is found only by a request carrying the very credential (header or ``?token=``)
  the origin admitted it for, so a bad key never reaches one, and one key never receives another's
  answer. Behind the function URL the origin access control signs the origin request in
  ``Authorization``; a CloudFront Function moves the client's own to ``x-ipmeta-authorization``
  first, which the cache key and the function read instead.
- **Batches behind the function URL** reach its ``batch`` alias's URL directly (no origin access
  control: a signed POST needs its body's SHA-256, which clients do not send).
- **Activation empties it**: the loader's Activate asks for one ``/*`` invalidation per version
  (``loader.store.edge_cache``), allowed on this distribution alone.
- **A web ACL** (``wafWebAclArn``, a CLOUDFRONT-scope ACL) attaches to the distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Duration, Fn
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigatewayv2
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import API_KEY_HEADER, AUTHORIZATION_HEADER, EDGE_AUTHORIZATION_HEADER
from stacks.nag import acknowledge

#: The lookup answers' paths: cached, by the key.
LOOKUP_PATHS: Final = ("/v1/ip/*", "/geoip/v2.1/*", "/ipinfo/*")
#: ``/v1`` apart from the lookups: never cached.
UNCACHED_PATHS: Final = ("/v1/*",)
#: The batch routes, which reach the function URL's ``batch`` alias (``url`` front only).
BATCH_PATHS: Final = ("/v1/batch", "/ipinfo/batch")
ROOT_BATCH_PATH: Final = "/batch"

#: Every 4xx and 5xx CloudFront caches (and may be given an Error Caching Minimum TTL), each kept 0 s.
UNCACHED_ERRORS: Final = (400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504)
#: The request header the function's CORS answer depends on.
ORIGIN_HEADER: Final = "Origin"

#: The viewer-request function behind the function URL: the client's Authorization moved aside
#: (a repeated one joined with commas, which no key holds), and a forged copy dropped.
COPY_AUTHORIZATION: Final = f"""function handler(event) {{
  var headers = event.request.headers;
  delete headers['{EDGE_AUTHORIZATION_HEADER}'];
  var given = headers['{AUTHORIZATION_HEADER}'];
  if (given) {{
    var values = given.multiValue
      ? given.multiValue.map(function (one) {{ return one.value; }})
      : [given.value];
    headers['{EDGE_AUTHORIZATION_HEADER}'] = {{ value: values.join(',') }};
  }}
  return event.request;
}}
"""


class EdgeFront(Construct):
    """The distribution, its lookup cache policy, and (behind the function URL) its key-moving function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        origin: cloudfront.IOrigin,
        batch_origin: cloudfront.IOrigin | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        signed = batch_origin is not None
        key_headers = [API_KEY_HEADER, EDGE_AUTHORIZATION_HEADER if signed else AUTHORIZATION_HEADER]
        if config.cors_allow_origins:
            key_headers.append(ORIGIN_HEADER)
        self.lookup_cache = cloudfront.CachePolicy(
            self,
            "LookupCache",
            comment="ipmeta lookup answers, by path, query and the caller's key",
            min_ttl=Duration.seconds(0),
            default_ttl=Duration.seconds(0),
            max_ttl=Duration.seconds(config.edge_cache_seconds),
            header_behavior=cloudfront.CacheHeaderBehavior.allow_list(*key_headers),
            query_string_behavior=cloudfront.CacheQueryStringBehavior.all(),
            cookie_behavior=cloudfront.CacheCookieBehavior.none(),
            enable_accept_encoding_gzip=True,
            enable_accept_encoding_brotli=True,
        )
        self.copy_authorization = (
            cloudfront.Function(
                self,
                "CopyAuthorization",
                code=cloudfront.FunctionCode.from_inline(COPY_AUTHORIZATION),
                runtime=cloudfront.FunctionRuntime.JS_2_0,
                comment="ipmeta: the client's Authorization, moved aside before the origin request is signed",
            )
            if signed
            else None
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="ipmeta lookups",
            default_behavior=self._behavior(origin, cached=config.ipinfo_at_root),
            additional_behaviors=self._behaviors(origin, batch_origin),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            error_responses=[
                cloudfront.ErrorResponse(http_status=status, ttl=Duration.seconds(0))
                for status in UNCACHED_ERRORS
            ],
            web_acl_id=config.waf_web_acl_arn or None,
        )
        self._acknowledge_nag_findings()

    @property
    def url(self) -> str:
        return f"https://{self.distribution.distribution_domain_name}/"

    def _behavior(self, origin: cloudfront.IOrigin, *, cached: bool) -> cloudfront.BehaviorOptions:
        functions = (
            [
                cloudfront.FunctionAssociation(
                    function=self.copy_authorization, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                )
            ]
            if self.copy_authorization is not None
            else None
        )
        return cloudfront.BehaviorOptions(
            origin=origin,
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cached_methods=cloudfront.CachedMethods.CACHE_GET_HEAD,
            cache_policy=self.lookup_cache if cached else cloudfront.CachePolicy.CACHING_DISABLED,
            # Every viewer header but Host (the origin's own): x-api-key, the moved Authorization.
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            compress=True,
            function_associations=functions,
        )

    def _behaviors(
        self, origin: cloudfront.IOrigin, batch_origin: cloudfront.IOrigin | None
    ) -> Mapping[str, cloudfront.BehaviorOptions]:
        """In CloudFront's order: the batches (their own way in), the lookups, the rest of ``/v1``."""
        behaviors: dict[str, cloudfront.BehaviorOptions] = {}
        if batch_origin is not None:
            batches = (*BATCH_PATHS, ROOT_BATCH_PATH) if self._config.ipinfo_at_root else BATCH_PATHS
            for path in batches:
                behaviors[path] = self._behavior(batch_origin, cached=False)
        for path in LOOKUP_PATHS:
            behaviors[path] = self._behavior(origin, cached=True)
        for path in UNCACHED_PATHS:
            behaviors[path] = self._behavior(origin, cached=False)
        return behaviors

    def _acknowledge_nag_findings(self) -> None:
        acknowledge(
            self.distribution,
            "CFR1",
            "A lookup API serves every country; a geo restriction belongs in the operator's web ACL.",
        )
        if not self._config.waf_web_acl_arn:
            acknowledge(
                self.distribution,
                "CFR2",
                "No web ACL by default (a monthly fee per ACL and rule, and one per million requests); "
                "keys bound each client. Set wafWebAclArn to a CLOUDFRONT-scope ACL (docs/deploy.md).",
            )
        acknowledge(
            self.distribution,
            "CFR3",
            "Standard logs would need a bucket; the origin logs every refusal and error, and a sample "
            "of the answers (the function's access log, or API Gateway's).",
        )
        acknowledge(
            self.distribution,
            "CFR4",
            "The default *.cloudfront.net certificate sets the TLS policy (TLSv1 minimum); a custom "
            "domain with its own certificate takes TLSv1.2_2021 (docs/deploy.md).",
        )


def function_url_origin(url: lambda_.IFunctionUrl) -> cloudfront.IOrigin:
    """The function URL, signed by an origin access control for Lambda."""
    return origins.FunctionUrlOrigin.with_origin_access_control(url)


def batch_url_origin(url: lambda_.IFunctionUrl) -> cloudfront.IOrigin:
    """The batch alias's URL, as a plain HTTPS origin."""
    return origins.FunctionUrlOrigin(url)


def http_api_origin(api: apigatewayv2.HttpApi) -> cloudfront.IOrigin:
    return origins.HttpOrigin(
        Fn.select(2, Fn.split("/", api.api_endpoint)),
        protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
        origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
    )


def rest_api_origin(api: apigateway.RestApi) -> cloudfront.IOrigin:
    return origins.RestApiOrigin(api)
