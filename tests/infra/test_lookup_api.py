"""The lookup API and its function: runtime, layer, routes, keys, limits, logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk.assertions import Match

from stacks.constants import (
    API_STAGE_NAME,
    API_VERSION_PATH,
    ENV_CORS_ORIGINS,
    ENV_HEALTH_MAX_DATASET_AGE_SECONDS,
    ENV_PAGE_TOKEN_SECRET_ARN,
    ENV_POINTER_CACHE_SECONDS,
    ENV_TABLE_NAME,
    LOADER_TASKS,
    LOOKUP_HANDLER,
    POWERTOOLS_LAYER_ACCOUNT,
    POWERTOOLS_LAYER_NAME,
    POWERTOOLS_LAYER_VERSION,
)
from tests.infra.cfn import function_by_handler, only, resources_of_type
from tests.infra.conftest import DEFAULT, EXAMPLE_ORIGIN, SOURCE_URL, Synthesized, cdk_json

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
    assert len(functions) == 1 + len(LOADER_TASKS)  # the lookup and one per loader task
    for logical_id, function in functions.items():
        properties = function["Properties"]
        assert properties["Runtime"] == "python3.13", logical_id
        assert properties["Architectures"] == ["arm64"], logical_id
        assert properties["Layers"] == [EXPECTED_LAYER_ARN], logical_id


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

    assert (asset / "ipmeta" / "keys.py").is_file()
    assert not list(asset.rglob("__pycache__"))
    # The lookup ships no loader code: no loader package, no write path of the table
    assert sorted(path.name for path in asset.iterdir()) == ["ipmeta"]
    assert not [path for path in asset.rglob("*.py") if "LoaderTable" in path.read_text(encoding="utf-8")]


def _asset_dir(stage_dir: Path, function: dict[str, Any]) -> Path:
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    return stage_dir / f"asset.{asset_hash}"


def test_v1_and_its_proxy_route_to_the_lookup_function_with_an_api_key(synthesized: Synthesized) -> None:
    template = synthesized.template()
    resources = resources_of_type(synthesized.templates[DEFAULT], "AWS::ApiGateway::Resource")
    assert sorted(r["Properties"]["PathPart"] for r in resources.values()) == sorted(
        [API_VERSION_PATH, "{proxy+}"]
    )
    methods = resources_of_type(synthesized.templates[DEFAULT], "AWS::ApiGateway::Method")
    assert len(methods) == 2
    lookup_id, _ = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    for method in methods.values():
        properties = method["Properties"]
        assert properties["HttpMethod"] == "ANY"
        assert properties["ApiKeyRequired"] is True
        assert properties["Integration"]["Type"] == "AWS_PROXY"
        assert lookup_id in str(properties["Integration"]["Uri"])
    template.has_resource_properties(
        "AWS::ApiGateway::RestApi",
        {"ApiKeySourceType": "HEADER", "EndpointConfiguration": {"Types": ["REGIONAL"]}},
    )


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
    assert len(preflights) == 2
    for preflight in preflights:
        # Browsers send no API key on a preflight.
        assert not preflight["Properties"].get("ApiKeyRequired", False)
        headers = preflight["Properties"]["Integration"]["IntegrationResponses"][0]["ResponseParameters"]
        assert headers["method.response.header.Access-Control-Allow-Origin"] == f"'{EXAMPLE_ORIGIN}'"
    # The handler answers real requests with the same origins.
    _, function = function_by_handler(synthesized.templates[SOURCE_URL], LOOKUP_HANDLER)
    assert function["Properties"]["Environment"]["Variables"][ENV_CORS_ORIGINS] == EXAMPLE_ORIGIN


def test_lookup_is_traced_by_lambda_and_api_gateway_without_an_sdk(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
    _, stage = only(template, "AWS::ApiGateway::Stage")
    assert stage["Properties"]["TracingEnabled"] is True


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
