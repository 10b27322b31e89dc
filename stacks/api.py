"""The lookup API: REST API -> lookup Lambda -> Query/GetItem on the table."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import (
    API_STAGE_NAME,
    API_VERSION_PATH,
    ENV_CORS_ORIGINS,
    ENV_HEALTH_MAX_DATASET_AGE_SECONDS,
    ENV_PAGE_TOKEN_SECRET_ARN,
    ENV_POINTER_CACHE_SECONDS,
    ENV_TABLE_NAME,
    LOOKUP_HANDLER,
    LOOKUP_SERVICE_NAME,
    METRICS_NAMESPACE,
    POWERTOOLS_METRICS_NAMESPACE_ENV,
    POWERTOOLS_SERVICE_NAME_ENV,
)
from stacks.function import PythonFunction, lookup_code
from stacks.nag import acknowledge

#: The lookup reads, never writes: a query for the piece at or before an
#: address, and a get of the active-version pointer.
LOOKUP_TABLE_ACTIONS = ("dynamodb:Query", "dynamodb:GetItem")
LOOKUP_INDEX_ACTIONS = ("dynamodb:Query",)

#: One JSON line per request. With execution logging off, the integration
#: fields are where a failed Lambda call shows up; the key id shows who called.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "apiKeyId": "$context.identity.apiKeyId",
    "httpMethod": "$context.httpMethod",
    "path": "$context.path",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationStatus": "$context.integration.status",
    "integrationLatency": "$context.integration.latency",
    "integrationError": "$context.integration.error",
    "errorMessage": "$context.error.message",
}


class LookupApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.ITableV2,
        index_names: Sequence[str],
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.handler = self._build_function(table, index_names)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.api = self._build_rest_api()
        self._build_routes()
        self.api_key = self._build_usage_plan()
        self._acknowledge_nag_findings()

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
                # /v1/health and the data-age alarm agree on what "too old" is.
                ENV_HEALTH_MAX_DATASET_AGE_SECONDS: str(self._config.data_max_age_hours * 3600),
                POWERTOOLS_SERVICE_NAME_ENV: LOOKUP_SERVICE_NAME,
                POWERTOOLS_METRICS_NAMESPACE_ENV: METRICS_NAMESPACE,
            },
            memory_mb=self._config.lookup_memory_mb,
            timeout=Duration.seconds(10),
            log_retention=self._config.log_retention,
            tracing=True,
        )
        self.page_token_key = self._build_page_token_key(function)
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

    def _build_page_token_key(self, function: PythonFunction) -> secretsmanager.Secret:
        """The key that signs /v1/ranges and /v1/flagged page tokens, never in the template."""
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
            api_key_source_type=apigateway.ApiKeySourceType.HEADER,
            # Execution logging needs an account-wide CloudWatch role; access
            # logs below record every request without touching account settings.
            cloud_watch_role=False,
            deploy_options=apigateway.StageOptions(
                stage_name=API_STAGE_NAME,
                tracing_enabled=True,
                throttling_rate_limit=config.api_throttle_rate_limit,
                throttling_burst_limit=config.api_throttle_burst_limit,
                access_log_destination=apigateway.LogGroupLogDestination(self.access_logs),
                access_log_format=apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
            ),
        )

    def _build_routes(self) -> None:
        integration = apigateway.LambdaIntegration(
            self.handler.function,
            proxy=True,
            # The console's test button would need its own invoke permission.
            allow_test_invoke=False,
        )
        cors = self._cors_options()
        version = self.api.root.add_resource(API_VERSION_PATH, default_cors_preflight_options=cors)
        proxy = version.add_resource("{proxy+}", default_cors_preflight_options=cors)
        for resource in (version, proxy):
            resource.add_method("ANY", integration, api_key_required=True)

    def _cors_options(self) -> apigateway.CorsOptions | None:
        origins = self._config.cors_allow_origins
        if not origins:
            return None
        # API Gateway answers the preflight, which carries no API key; the
        # handler adds Access-Control-Allow-Origin to real responses.
        return apigateway.CorsOptions(
            allow_origins=origins,
            allow_methods=["GET", "OPTIONS"],
            allow_headers=["Content-Type", "x-api-key"],
            max_age=Duration.hours(1),
        )

    def _build_usage_plan(self) -> apigateway.IApiKey:
        config = self._config
        plan = self.api.add_usage_plan(
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
        plan.add_api_stage(stage=self.api.deployment_stage)
        api_key = self.api.add_api_key("DefaultKey", description="First ipmeta API key")
        plan.add_api_key(api_key)
        return api_key

    def _acknowledge_nag_findings(self) -> None:
        acknowledge(
            self.api,
            "APIG2",
            "Every route is a Lambda proxy: the handler parses the path and maps invalid "
            "input to 400 in one exception handler, so there is no model to validate here.",
        )
        acknowledge(
            self.api,
            "APIG3",
            "No WAF web ACL by default (a fixed monthly cost plus a per-request fee at the "
            "volumes this API serves); API keys, the usage plan and stage throttling bound "
            "each client. Attach a web ACL to the stage if the API faces untrusted traffic.",
        )
        acknowledge(
            self.api,
            "APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role, which "
            "this stack does not own; JSON access logs record every request instead.",
        )
        for finding in ("APIG4", "COG4"):
            acknowledge(
                self.api,
                finding,
                "The API serves public reference data to programs, not users: access is "
                "controlled by API key with a usage plan (throttle and quota per key).",
            )
