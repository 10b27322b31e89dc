"""The lookup API and its function: runtime, layer, routes, keys, limits, logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from ipmeta.schema.settings import Front
from loader.planning.costs import (
    ACCESS_LOG_LINE_BYTES,
    DEFAULT_LOG_BYTES,
    LOG_EVENT_OVERHEAD_BYTES,
)
from stacks.constants import (
    API_STAGE_NAME,
    API_VERSION_PATH,
    AUTHORIZER_HANDLER,
    ENV_CORS_ORIGINS,
    ENV_HEALTH_MAX_DATASET_AGE_SECONDS,
    ENV_PAGE_TOKEN_SECRET_ARN,
    ENV_POINTER_CACHE_SECONDS,
    ENV_RANGE_CACHE_BYTES,
    ENV_TABLE_NAME,
    GEOIP2_PATH,
    IPINFO_PATH,
    LOADER_TASKS,
    LOOKUP_HANDLER,
    POWERTOOLS_LAYER_ACCOUNT,
    POWERTOOLS_LAYER_NAME,
    POWERTOOLS_LAYER_VERSION,
    POWERTOOLS_VERSION,
)
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    only,
    policy_statements_of_role,
    resources_of_type,
    rest_method_routes,
)
from tests.infra.conftest import DEFAULT, EXAMPLE_ORIGIN, HTTP_API, SOURCE_URL, Synthesized, cdk_json

EXPECTED_LAYER_ARN = {
    "Fn::Join": [
        "",
        [
            "arn:aws:lambda:",
            {"Ref": "AWS::Region"},
            f":{POWERTOOLS_LAYER_ACCOUNT}:layer:{POWERTOOLS_LAYER_NAME}:{POWERTOOLS_LAYER_VERSION}",
        ],
    ]
}


def test_every_function_is_python313_arm64_with_the_pinned_powertools_layer(
    synthesized: Synthesized,
) -> None:
    functions = resources_of_type(synthesized.templates[DEFAULT], "AWS::Lambda::Function")
    assert len(functions) == 2 + len(LOADER_TASKS)  # the lookup, its key authorizer, one per loader task
    for logical_id, function in functions.items():
        properties = function["Properties"]
        assert properties["Runtime"] == "python3.13", logical_id
        assert properties["Architectures"] == ["arm64"], logical_id
        assert properties["Layers"] == [EXPECTED_LAYER_ARN], logical_id
        tags = {tag["Key"]: tag["Value"] for tag in properties.get("Tags", [])}
        assert tags.get("ipmeta:powertools-version") == POWERTOOLS_VERSION, logical_id


def test_lookup_function_runs_the_api_handler_with_its_settings(synthesized: Synthesized) -> None:
    context = cdk_json()["context"]
    _, function = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    properties = function["Properties"]
    variables = properties["Environment"]["Variables"]

    assert properties["MemorySize"] == context["lookupMemoryMb"]
    assert variables[ENV_POINTER_CACHE_SECONDS] == str(context["pointerCacheSeconds"])
    assert variables[ENV_TABLE_NAME] == {
        "Ref": only(synthesized.templates[DEFAULT], "AWS::DynamoDB::GlobalTable")[0]
    }
    assert variables[ENV_CORS_ORIGINS] == ""
    assert variables[ENV_HEALTH_MAX_DATASET_AGE_SECONDS] == str(context["dataMaxAgeHours"] * 3600)


def test_lookup_asset_is_the_lambdas_folder(synthesized: Synthesized) -> None:
    _, function = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    asset = _asset_dir(synthesized.asset_dirs[DEFAULT], function)

    assert (asset / "ipmeta" / "schema" / "keys.py").is_file()
    # The lookup page ships with the function: its HTML, its script and Leaflet with its licence
    page = asset / "ipmeta" / "api" / "routes" / "page"
    for name in ("index.html", "static/page.js", "static/leaflet/leaflet.js", "static/leaflet/LICENSE"):
        assert (page / name).is_file(), name
    assert (page / "static" / "leaflet" / "images" / "marker-icon.png").is_file()
    assert not list(asset.rglob("__pycache__"))
    # The lookup ships no loader code: no loader package, no write path of the table
    assert sorted(path.name for path in asset.iterdir()) == ["ipmeta"]
    assert not [path for path in asset.rglob("*.py") if "LoaderTable" in path.read_text(encoding="utf-8")]


def _asset_dir(stage_dir: Path, function: dict[str, Any]) -> Path:
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    return stage_dir / f"asset.{asset_hash}"


def test_each_api_and_its_proxy_route_to_the_lookup_function_with_an_api_key(
    synthesized: Synthesized,
) -> None:
    template = synthesized.template()
    resources = resources_of_type(synthesized.templates[DEFAULT], "AWS::ApiGateway::Resource")
    assert sorted(r["Properties"]["PathPart"] for r in resources.values()) == sorted(
        [API_VERSION_PATH, GEOIP2_PATH, IPINFO_PATH, "static", *["{proxy+}"] * 4]
    )
    routes = rest_method_routes(synthesized.templates[DEFAULT])
    assert len(routes) == 10
    lookup_id, _ = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    # The lookup page and its files: GET and HEAD, no key (no data; the page's lookups need one)
    page_methods = [(path, properties) for path, properties in routes if path in ("/", "/static/{proxy+}")]
    assert sorted((path, p["HttpMethod"]) for path, p in page_methods) == [
        ("/", "GET"),
        ("/", "HEAD"),
        ("/static/{proxy+}", "GET"),
        ("/static/{proxy+}", "HEAD"),
    ]
    pages = {path for path, _ in page_methods}
    for _, properties in page_methods:
        assert (properties.get("ApiKeyRequired", False), properties["AuthorizationType"]) == (False, "NONE")
        assert lookup_id in str(properties["Integration"]["Uri"])
    for path, properties in routes:
        if path in pages:
            continue
        assert properties["HttpMethod"] == "ANY"
        assert properties["ApiKeyRequired"] is True
        assert properties["AuthorizationType"] == "CUSTOM"
        assert properties["Integration"]["Type"] == "AWS_PROXY"
        assert lookup_id in str(properties["Integration"]["Uri"])
    # The usage plan meters the key the authorizer read, in whichever form it came
    template.has_resource_properties(
        "AWS::ApiGateway::RestApi",
        {"ApiKeySourceType": "AUTHORIZER", "EndpointConfiguration": {"Types": ["REGIONAL"]}},
    )
    # The page's images are base64 from the function: REST decodes them for any Accept (*/*)
    template.has_resource_properties("AWS::ApiGateway::RestApi", {"BinaryMediaTypes": ["*/*"]})


def test_usage_plan_and_stage_throttles_come_from_context(synthesized: Synthesized) -> None:
    context = cdk_json()["context"]
    template = synthesized.template()
    template.has_resource_properties(
        "AWS::ApiGateway::UsagePlan",
        {
            "Throttle": {
                "RateLimit": context["usagePlanRateLimit"],
                "BurstLimit": context["usagePlanBurstLimit"],
            },
            "Quota": {"Limit": context["usagePlanQuotaLimit"], "Period": context["usagePlanQuotaPeriod"]},
            "ApiStages": [Match.object_like({"Stage": Match.any_value()})],
        },
    )
    template.resource_count_is("AWS::ApiGateway::ApiKey", 1)
    template.resource_count_is("AWS::ApiGateway::UsagePlanKey", 1)
    template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": API_STAGE_NAME,
            "MethodSettings": [
                Match.object_like(
                    {
                        "HttpMethod": "*",
                        "ResourcePath": "/*",
                        "ThrottlingRateLimit": context["apiThrottleRateLimit"],
                        "ThrottlingBurstLimit": context["apiThrottleBurstLimit"],
                    }
                )
            ],
            "AccessLogSetting": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp(r"\$context\.identity\.apiKeyId"),
            },
        },
    )


def test_no_cors_preflight_unless_origins_are_configured(synthesized: Synthesized) -> None:
    default_methods = resources_of_type(synthesized.templates[DEFAULT], "AWS::ApiGateway::Method")
    assert all(m["Properties"]["HttpMethod"] != "OPTIONS" for m in default_methods.values())

    with_cors = resources_of_type(synthesized.templates[SOURCE_URL], "AWS::ApiGateway::Method")
    preflights = [m for m in with_cors.values() if m["Properties"]["HttpMethod"] == "OPTIONS"]
    assert len(preflights) == 6  # v1, geoip, ipinfo and their proxies
    for preflight in preflights:
        # Browsers send no API key on a preflight.
        assert not preflight["Properties"].get("ApiKeyRequired", False)
        headers = preflight["Properties"]["Integration"]["IntegrationResponses"][0]["ResponseParameters"]
        assert headers["method.response.header.Access-Control-Allow-Origin"] == f"'{EXAMPLE_ORIGIN}'"
        # A browser's batch is a POST with a JSON body: its preflight must allow both.
        assert "POST" in headers["method.response.header.Access-Control-Allow-Methods"]
        assert "Content-Type" in headers["method.response.header.Access-Control-Allow-Headers"]
    # The handler answers real requests with the same origins.
    _, function = function_by_handler(synthesized.templates[SOURCE_URL], LOOKUP_HANDLER)
    assert function["Properties"]["Environment"]["Variables"][ENV_CORS_ORIGINS] == EXAMPLE_ORIGIN


def test_tracing_is_off_unless_asked_for_and_then_needs_no_sdk(synthesized: Synthesized) -> None:
    # X-Ray bills every sampled request (docs/deploy.md), so apiTracing turns it on
    default = synthesized.templates[DEFAULT]
    _, function = function_by_handler(default, LOOKUP_HANDLER)
    assert function["Properties"].get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
    assert only(default, "AWS::ApiGateway::Stage")[1]["Properties"]["TracingEnabled"] is False
    assert not _xray_actions(default, function)

    traced = synthesized.templates[SOURCE_URL]
    _, function = function_by_handler(traced, LOOKUP_HANDLER)
    assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
    assert only(traced, "AWS::ApiGateway::Stage")[1]["Properties"]["TracingEnabled"] is True
    assert _xray_actions(traced, function) == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def _xray_actions(template: dict[str, Any], function: dict[str, Any]) -> set[str]:
    statements = policy_statements_of_role(template, function["Properties"]["Role"]["Fn::GetAtt"][0])
    return {a for s in statements for a in as_list(s["Action"]) if a.startswith("xray:")}


@pytest.mark.parametrize("variant", [DEFAULT, HTTP_API])
def test_lookup_functions_log_json_without_platform_lines(synthesized: Synthesized, variant: str) -> None:
    template = synthesized.templates[variant]
    handlers = [LOOKUP_HANDLER] + ([AUTHORIZER_HANDLER] if variant == HTTP_API else [])
    for handler in handlers:
        _, function = function_by_handler(template, handler)
        config = function["Properties"]["LoggingConfig"]
        # WARN drops START, END and REPORT; INFO keeps powertools' metric lines, which have no level
        assert config["LogFormat"] == "JSON"
        assert config["SystemLogLevel"] == "WARN"
        assert config["ApplicationLogLevel"] == "INFO"
        assert "LogGroup" in config


def test_the_range_cache_is_sized_from_context(synthesized: Synthesized) -> None:
    _, function = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    megabytes = cdk_json()["context"]["lookupCacheMb"]
    assert function["Properties"]["Environment"]["Variables"][ENV_RANGE_CACHE_BYTES] == str(megabytes << 20)


#: What the cost model in docs/deploy.md counts for one access-log line, with its
#: 26 bytes of per-event overhead: a line built from realistic values must fit.
REALISTIC_VALUES = {
    "$context.requestId": "5c1e6b0e-6a47-4c5f-9f3e-0d2b7c9a1f48",
    "$context.identity.sourceIp": "203.0.113.195",
    "$context.identity.apiKeyId": "a1b2c3d4e5",
    "$context.authorizer.client": "default",
    "$context.httpMethod": "GET",
    "$context.path": "/api/v1/ip/198.51.100.23",
    "$context.status": "200",
    "$context.responseLatency": "23",
    "$context.integration.latency": "19",
    "$context.integrationLatency": "19",
    "$context.error.message": "-",
    "$context.integration.error": "-",
    "$context.integrationErrorMessage": "-",
    "$context.authorizer.error": "-",
}


@pytest.mark.parametrize(
    ("variant", "stage_type"), [(DEFAULT, "AWS::ApiGateway::Stage"), (HTTP_API, "AWS::ApiGatewayV2::Stage")]
)
def test_an_access_log_line_weighs_what_the_cost_model_counts(
    synthesized: Synthesized, variant: str, stage_type: str
) -> None:
    _, stage = only(synthesized.templates[variant], stage_type)
    settings = stage["Properties"].get("AccessLogSetting") or stage["Properties"]["AccessLogSettings"]
    line = settings["Format"]
    for variable, value in REALISTIC_VALUES.items():
        line = line.replace(f'"{variable}"', json.dumps(value))
    assert "$context" not in line
    # The cost model (loader.planning.costs) counts this many bytes per request.
    front = Front.HTTP if variant == HTTP_API else Front.REST
    assert len(line.encode()) <= ACCESS_LOG_LINE_BYTES
    assert DEFAULT_LOG_BYTES[front] == ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES


def test_page_tokens_are_signed_with_a_generated_secret_only_the_lookup_reads(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[DEFAULT]
    secret_id, secret = only(template, "AWS::SecretsManager::Secret")
    assert "GenerateSecretString" in secret["Properties"]
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    assert function["Properties"]["Environment"]["Variables"][ENV_PAGE_TOKEN_SECRET_ARN] == {"Ref": secret_id}
    readers = [
        policy["Properties"]["Roles"]
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if any(
            "secretsmanager:GetSecretValue" in str(statement["Action"])
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    assert readers == [[{"Ref": function["Properties"]["Role"]["Fn::GetAtt"][0]}]]
