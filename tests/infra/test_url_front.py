"""The function URL front (``apiType=url``, cdk.json's default): no API Gateway, the key in the function.

- an ``AWS::Lambda::Url`` on the lookup function, ``AuthType NONE`` (the key is checked in the
  function), its CORS from ``corsAllowOrigins``, and no API Gateway resource of either kind;
- the throttle: the function's reserved concurrency (``lookupReservedConcurrency``);
- the function reads the same kind of keys secret as the HTTP front, and no other function does;
  it is told how long to keep the keys and how much of its access log to keep;
- a 5xx alarm on the URL's answers, the URL and the secret as outputs;
- the finding of a URL with ``AuthType NONE`` acknowledged with its reason, only without ``edge``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.constants import (
    ENV_ACCESS_LOG_SAMPLE_RATE,
    ENV_API_KEY_CACHE_SECONDS,
    ENV_API_KEYS_SECRET_ARN,
    LOOKUP_HANDLER,
    OUTPUT_API_KEY_ID,
    OUTPUT_API_KEYS_SECRET_ARN,
    OUTPUT_API_URL,
)
from tests.infra.cfn import as_list, function_by_handler, only, policy_statements_of_role, resources_of_type
from tests.infra.conftest import URL, URL_EDGE, VARIANTS, Synthesized, cdk_json
from tests.infra.test_alarms_kept import alarm_signatures

#: cdk-nag's rule for a function URL without AWS_IAM (``LambdaFunctionUrlAuth``); the AwsSolutions
#: pack of cdk-nag 3.0.2 does not run it, so the acknowledgment is read from the assembly.
URL_AUTH_RULE = "AwsSolutions::AwsSolutions-LambdaFunctionUrlAuth"


@pytest.fixture(scope="module")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return dict(synthesized.templates[URL])


def acknowledged(synthesized: Synthesized, variant: str, rule: str) -> dict[str, str]:
    """Construct path -> reason, of each acknowledgment of ``rule`` in a variant's assembly."""
    [path] = synthesized.asset_dirs[variant].glob("*.metadata.json")  # the stage's one stack
    metadata = json.loads(path.read_text(encoding="utf-8"))
    return {
        path: entry["data"][rule]
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules" and rule in entry["data"]
    }


def test_the_function_has_its_own_url_and_no_api_gateway(template: dict[str, Any]) -> None:
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    _, url = only(template, "AWS::Lambda::Url")
    assert url["Properties"]["AuthType"] == "NONE"
    assert url["Properties"]["TargetFunctionArn"] == {"Fn::GetAtt": [lookup_id, "Arn"]}
    assert "Qualifier" not in url["Properties"]
    gateways = [resource["Type"] for resource in template["Resources"].values()]
    assert [kind for kind in gateways if kind.startswith(("AWS::ApiGateway", "AWS::ApiGatewayV2"))] == []
    # Anyone may call the URL (the function checks the key), and only through it
    permissions = [p["Properties"] for p in resources_of_type(template, "AWS::Lambda::Permission").values()]
    by_action = {
        p["Action"]: p for p in permissions if p["FunctionName"] == {"Fn::GetAtt": [lookup_id, "Arn"]}
    }
    assert by_action["lambda:InvokeFunctionUrl"]["FunctionUrlAuthType"] == "NONE"
    assert by_action["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True


def test_the_throttle_is_the_functions_reserved_concurrency(
    template: dict[str, Any], synthesized: Synthesized
) -> None:
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    assert (
        function["Properties"]["ReservedConcurrentExecutions"]
        == cdk_json()["context"]["lookupReservedConcurrency"]
    )
    _, edge_function = function_by_handler(synthesized.templates[URL_EDGE], LOOKUP_HANDLER)
    assert (
        edge_function["Properties"]["ReservedConcurrentExecutions"]
        == VARIANTS[URL_EDGE]["lookupReservedConcurrency"]
    )


def test_the_function_checks_keys_from_the_secret_and_logs_a_sample(template: dict[str, Any]) -> None:
    context = cdk_json()["context"]
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    variables = function["Properties"]["Environment"]["Variables"]
    [secret_id] = resources_of_type(template, "AWS::SecretsManager::Secret").keys() - {
        logical_id for logical_id in template["Resources"] if "PageTokenKey" in logical_id
    }
    assert variables[ENV_API_KEYS_SECRET_ARN] == {"Ref": secret_id}
    assert variables[ENV_API_KEY_CACHE_SECONDS] == str(context["apiKeyCacheSeconds"])
    assert variables[ENV_ACCESS_LOG_SAMPLE_RATE] == str(context["accessLogSampleRate"])
    secret = template["Resources"][secret_id]["Properties"]["GenerateSecretString"]
    assert (secret["SecretStringTemplate"], secret["GenerateStringKey"]) == ("{}", "default")
    # Only the lookup function may read it
    readers = [
        logical_id
        for logical_id, fn in resources_of_type(template, "AWS::Lambda::Function").items()
        for statement in policy_statements_of_role(template, fn["Properties"]["Role"]["Fn::GetAtt"][0])
        if {"Ref": secret_id} in as_list(statement["Resource"])
    ]
    assert readers == [function_by_handler(template, LOOKUP_HANDLER)[0]]


def test_the_urls_5xx_answers_raise_an_alarm_and_the_outputs_name_url_and_keys(
    template: dict[str, Any],
) -> None:
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    watched = set().union(*(metrics for metrics, *_ in alarm_signatures(template)))
    assert (
        "AWS/Lambda",
        "Url5xxCount",
        frozenset({("FunctionName", f"Ref:{lookup_id}")}),
        "Sum",
        300,
    ) in watched
    url_id, _ = only(template, "AWS::Lambda::Url")
    outputs = template["Outputs"]
    assert outputs[OUTPUT_API_URL]["Value"] == {"Fn::GetAtt": [url_id, "FunctionUrl"]}
    assert OUTPUT_API_KEYS_SECRET_ARN in outputs
    assert OUTPUT_API_KEY_ID not in outputs


def test_the_url_answers_cors_with_the_other_fronts_origins(synthesized: Synthesized) -> None:
    urls = resources_of_type(synthesized.templates[URL_EDGE], "AWS::Lambda::Url")
    for url in urls.values():
        cors = url["Properties"]["Cors"]
        assert cors["AllowOrigins"] == VARIANTS[URL_EDGE]["corsAllowOrigins"]
        assert cors["ExposeHeaders"] == ["ETag"]
    _, plain = only(synthesized.templates[URL], "AWS::Lambda::Url")
    assert "Cors" not in plain["Properties"]  # corsAllowOrigins empty: CORS off, as on the other fronts


def test_a_url_without_aws_iam_is_acknowledged_with_its_reason(synthesized: Synthesized) -> None:
    # Without edge: the one URL, the API's front
    [(path, reason)] = acknowledged(synthesized, URL, URL_AUTH_RULE).items()
    assert path.endswith("/LookupApi/Lookup/Function/FunctionUrl")
    assert "checked in the function" in reason
    # With edge: the function's URL is AWS_IAM; only the batch alias's URL (batches alone) is not
    [(edge_path, edge_reason)] = acknowledged(synthesized, URL_EDGE, URL_AUTH_RULE).items()
    assert "BatchAlias" in edge_path
    assert "POST /v1/batch and /ipinfo/batch only" in edge_reason
