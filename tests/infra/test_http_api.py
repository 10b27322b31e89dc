"""The HTTP API front (``apiType=http``): same function and paths, a key authorizer, throttle, logs, CORS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipmeta.api.fronts import authorizer as http_authorizer
from ipmeta.api.fronts.credentials import FORM_HEADERS, family_of_route
from stacks.constants import (
    API_KEY_HEADER,
    AUTHORIZER_HANDLER,
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_SECONDS,
    ENV_API_KEYS_SECRET_ARN,
    ENV_CORS_ORIGINS,
    ENV_RANGE_CACHE_BYTES,
    HTTP_API_STAGE_NAME,
    LOOKUP_HANDLER,
    OUTPUT_API_KEY_ID,
    OUTPUT_API_KEYS_SECRET_ARN,
    OUTPUT_API_URL,
)
from stacks.fronts.http_front import (
    ACCESS_LOG_FIELDS,
    AUTHORIZER_MEMORY_MB,
    GEOIP2_PATHS,
    IPINFO_PATHS,
    ROOT_PATHS,
    ROUTED_METHODS,
    ROUTED_PATHS,
)
from tests.authorizer_events import HTTP_KEYS, admitted_forms
from tests.infra.cfn import alarms as cfn_alarms
from tests.infra.cfn import as_list, function_by_handler, only, policy_statements_of_role, resources_of_type
from tests.infra.conftest import DEFAULT, EXAMPLE_ORIGIN, HTTP_API, VARIANTS, Synthesized, cdk_json

HTTP_CONTEXT = VARIANTS[HTTP_API]
#: The lookup page's routes, the only ones without an authorizer.
PAGE_ROUTE_KEYS = frozenset(
    f"{method} {path}" for method in ("GET", "HEAD") for path in ("/", "/static/{proxy+}")
)


@pytest.fixture(scope="module")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return dict(synthesized.templates[HTTP_API])


def _keys_secret_id(template: dict[str, Any]) -> str:
    [secret_id] = [
        logical_id
        for logical_id, secret in resources_of_type(template, "AWS::SecretsManager::Secret").items()
        if "API keys" in secret["Properties"]["Description"]
    ]
    return secret_id


def test_the_http_front_replaces_the_rest_api(template: dict[str, Any]) -> None:
    only(template, "AWS::ApiGatewayV2::Api")
    for rest_type in ("RestApi", "Stage", "Resource", "Method", "UsagePlan", "ApiKey"):
        assert resources_of_type(template, f"AWS::ApiGateway::{rest_type}") == {}, rest_type


def test_every_route_is_an_api_path_sent_to_the_lookup_function_as_payload_2_0(
    template: dict[str, Any],
) -> None:
    routes = resources_of_type(template, "AWS::ApiGatewayV2::Route")
    paths = (*ROUTED_PATHS, *GEOIP2_PATHS, *IPINFO_PATHS, *ROOT_PATHS)  # ipinfoAtRoot: the root too
    expected = {f"{method.value} {path}" for path in paths for method in ROUTED_METHODS}
    # And the lookup page and its files, GET and HEAD: the root's are the page's, not ipinfo's
    expected |= PAGE_ROUTE_KEYS
    assert {route["Properties"]["RouteKey"] for route in routes.values()} == expected
    # OPTIONS is the gateway's CORS preflight: an ANY route would send it to the authorizer
    assert not [key for key in expected if key.startswith(("OPTIONS ", "ANY ", "$default"))]

    integration_id, integration = only(template, "AWS::ApiGatewayV2::Integration")
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    # A function URL's shape too: one event reader for both (ipmeta.api.fronts.front_events)
    assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
    assert integration["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [lookup_id, "Arn"]}
    for route in routes.values():
        assert route["Properties"]["Target"] == {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}


def test_every_route_needs_a_key_checked_by_its_familys_authorizer(template: dict[str, Any]) -> None:
    authorizers = resources_of_type(template, "AWS::ApiGatewayV2::Authorizer")
    function_id, _ = function_by_handler(template, AUTHORIZER_HANDLER)
    by_source = {}
    for logical_id, authorizer in authorizers.items():
        properties = authorizer["Properties"]
        assert properties["AuthorizerType"] == "REQUEST"
        assert properties["EnableSimpleResponses"] is True
        assert properties["AuthorizerPayloadFormatVersion"] == "2.0"
        assert function_id in json.dumps(properties["AuthorizerUri"])
        by_source[tuple(properties.get("IdentitySource") or ())] = (logical_id, properties)
    # /v1 and the GeoIP2 web service: cached per header value; ipinfo (header or ?token=): never
    cached = HTTP_CONTEXT["apiKeyCacheSeconds"]
    assert by_source[(f"$request.header.{API_KEY_HEADER}",)][1]["AuthorizerResultTtlInSeconds"] == cached
    assert by_source[("$request.header.authorization",)][1]["AuthorizerResultTtlInSeconds"] == cached
    assert by_source[()][1]["AuthorizerResultTtlInSeconds"] == 0
    families = {
        ROUTED_PATHS: by_source[(f"$request.header.{API_KEY_HEADER}",)][0],
        GEOIP2_PATHS: by_source[("$request.header.authorization",)][0],
        (*IPINFO_PATHS, *ROOT_PATHS): by_source[()][0],
    }
    for route in resources_of_type(template, "AWS::ApiGatewayV2::Route").values():
        key = route["Properties"]["RouteKey"]
        if key in PAGE_ROUTE_KEYS:  # the lookup page and its files: no data, no key
            assert route["Properties"].get("AuthorizationType", "NONE") == "NONE", key
            continue
        path = key.split(" ", 1)[1]
        [authorizer_id] = [logical_id for paths, logical_id in families.items() if path in paths]
        assert route["Properties"]["AuthorizationType"] == "CUSTOM"
        assert route["Properties"]["AuthorizerId"] == {"Ref": authorizer_id}


def test_the_default_stage_throttles_and_logs_every_request(template: dict[str, Any]) -> None:
    context = cdk_json()["context"]
    _, stage = only(template, "AWS::ApiGatewayV2::Stage")
    properties = stage["Properties"]
    assert properties["StageName"] == HTTP_API_STAGE_NAME
    assert properties["AutoDeploy"] is True
    assert properties["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": context["apiThrottleRateLimit"],
        "ThrottlingBurstLimit": context["apiThrottleBurstLimit"],
    }
    log_fields = json.loads(properties["AccessLogSettings"]["Format"])
    assert log_fields == dict(ACCESS_LOG_FIELDS)
    assert {"requestId", "status", "ms", "lambdaError", "authError"} <= set(log_fields)
    log_group_id = properties["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"][0]
    assert template["Resources"][log_group_id]["Properties"]["RetentionInDays"] == context["logRetentionDays"]


def test_the_gateway_answers_cors_with_the_rest_fronts_rules(
    synthesized: Synthesized, template: dict[str, Any]
) -> None:
    _, api = only(template, "AWS::ApiGatewayV2::Api")
    assert api["Properties"]["CorsConfiguration"] == {
        "AllowOrigins": [EXAMPLE_ORIGIN],
        "AllowMethods": list(CORS_ALLOW_METHODS),
        "AllowHeaders": list(CORS_ALLOW_HEADERS),
        "ExposeHeaders": list(CORS_EXPOSE_HEADERS),
        "MaxAge": CORS_MAX_AGE_SECONDS,
    }
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    assert function["Properties"]["Environment"]["Variables"][ENV_CORS_ORIGINS] == EXAMPLE_ORIGIN


def test_only_this_api_may_invoke_the_lookup_and_the_authorizer(template: dict[str, Any]) -> None:
    api_id, _ = only(template, "AWS::ApiGatewayV2::Api")
    permissions = resources_of_type(template, "AWS::Lambda::Permission")
    invoked = {}
    for permission in permissions.values():
        properties = permission["Properties"]
        assert properties["Principal"] == "apigateway.amazonaws.com"
        assert {"Ref": api_id} in properties["SourceArn"]["Fn::Join"][1]
        invoked[properties["FunctionName"]["Fn::GetAtt"][0]] = properties["SourceArn"]
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    authorizer_id, _ = function_by_handler(template, AUTHORIZER_HANDLER)
    # The lookup's one permission covers this API's routes; each of the three authorizers has its own
    assert sorted(set(invoked)) == sorted([lookup_id, authorizer_id])
    assert len(permissions) == 4


def test_the_authorizer_is_small_quiet_and_reads_the_generated_keys(template: dict[str, Any]) -> None:
    _, function = function_by_handler(template, AUTHORIZER_HANDLER)
    properties = function["Properties"]
    secret_id = _keys_secret_id(template)
    assert properties["MemorySize"] == AUTHORIZER_MEMORY_MB
    assert properties["Environment"]["Variables"][ENV_API_KEYS_SECRET_ARN] == {"Ref": secret_id}
    assert properties["LoggingConfig"]["SystemLogLevel"] == "WARN"
    secret = template["Resources"][secret_id]["Properties"]["GenerateSecretString"]
    assert secret["GenerateStringKey"] == "default"
    assert secret["SecretStringTemplate"] == "{}"


def test_only_the_authorizer_may_read_the_keys(template: dict[str, Any]) -> None:
    secret_id = _keys_secret_id(template)
    for handler in (AUTHORIZER_HANDLER, LOOKUP_HANDLER):
        _, function = function_by_handler(template, handler)
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = policy_statements_of_role(template, role_id)
        readers = [s for s in statements if {"Ref": secret_id} in as_list(s["Resource"])]
        if handler == AUTHORIZER_HANDLER:
            [read] = readers
            assert sorted(as_list(read["Action"])) == [
                "secretsmanager:DescribeSecret",
                "secretsmanager:GetSecretValue",
            ]
            actions = {action for s in statements for action in as_list(s["Action"])}
            assert actions == {
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "secretsmanager:DescribeSecret",
                "secretsmanager:GetSecretValue",
            }
        else:
            assert readers == []


def test_the_lookup_function_is_the_rest_fronts_with_this_variants_settings(template: dict[str, Any]) -> None:
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    properties = function["Properties"]
    assert properties["MemorySize"] == HTTP_CONTEXT["lookupMemoryMb"]
    cache_bytes = HTTP_CONTEXT["lookupCacheMb"] * 1024 * 1024
    assert properties["Environment"]["Variables"][ENV_RANGE_CACHE_BYTES] == str(cache_bytes)


def test_outputs_name_the_keys_secret_instead_of_an_api_key(
    synthesized: Synthesized, template: dict[str, Any]
) -> None:
    outputs = template["Outputs"]
    api_id, _ = only(template, "AWS::ApiGatewayV2::Api")
    # The default stage: the base URL has no stage, so paths are /v1/... as locally
    assert outputs[OUTPUT_API_URL]["Value"]["Fn::Join"][1][:2] == ["https://", {"Ref": api_id}]
    assert outputs[OUTPUT_API_URL]["Value"]["Fn::Join"][1][-1] == "/"
    assert outputs[OUTPUT_API_KEYS_SECRET_ARN]["Value"] == {"Ref": _keys_secret_id(template)}
    assert OUTPUT_API_KEY_ID not in outputs
    rest_outputs = synthesized.templates[DEFAULT]["Outputs"]
    assert OUTPUT_API_KEY_ID in rest_outputs
    assert OUTPUT_API_KEYS_SECRET_ARN not in rest_outputs


def test_alarms_watch_the_http_apis_5xx_and_the_authorizer(template: dict[str, Any]) -> None:
    api_id, _ = only(template, "AWS::ApiGatewayV2::Api")
    alarms = list(cfn_alarms(template).values())
    [server_errors] = [a for a in alarms if a.get("MetricName") == "5xx"]
    assert server_errors["Namespace"] == "AWS/ApiGateway"
    assert server_errors["Dimensions"] == [{"Name": "ApiId", "Value": {"Ref": api_id}}]
    authorizer_id, _ = function_by_handler(template, AUTHORIZER_HANDLER)
    watched = {
        (a["MetricName"], a["Dimensions"][0]["Value"]["Ref"])
        for a in alarms
        if a.get("Namespace") == "AWS/Lambda"
    }
    assert {("Errors", authorizer_id), ("Throttles", authorizer_id)} <= watched


def test_each_authorizer_is_cached_by_the_one_header_its_handler_reads(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_authorizer, "api_keys", lambda: HTTP_KEYS)
    authorizers = resources_of_type(template, "AWS::ApiGatewayV2::Authorizer")
    for route in resources_of_type(template, "AWS::ApiGatewayV2::Route").values():
        if route["Properties"]["RouteKey"] in PAGE_ROUTE_KEYS:
            continue
        path = route["Properties"]["RouteKey"].split(" ", 1)[1]
        properties = authorizers[route["Properties"]["AuthorizerId"]["Ref"]]["Properties"]
        [source] = properties.get("IdentitySource") or [None]
        header = source.removeprefix("$request.header.") if source else None
        # The forms the real handler admits on this route are read from that header only
        forms = admitted_forms("http", path, header)
        assert forms, route
        assert header is None or {FORM_HEADERS[form] for form in forms} == {header}, (path, forms)
        family = family_of_route(path)
        assert family is not None
        assert forms == set(family.forms), path
