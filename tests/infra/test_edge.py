"""CloudFront in front of each front (``edge=true``): what it caches, by which key, and who empties it.

- behind the function URL: an origin access control for Lambda, the URL on ``AWS_IAM`` and callable
  by this distribution alone, the client's Authorization moved aside by a CloudFront Function (run
  here in node), the batch routes through the ``batch`` alias's URL;
- the lookup paths cached for at most ``edgeCacheSeconds`` by path, query and the key; ``/v1/health``,
  ``/v1/datasets`` and the rest of ``/v1`` never;
- every activation invalidates it: the activate function names the distribution and may invalidate
  it and no other, and Activate is retried on a refused invalidation;
- a CLOUDFRONT-scope web ACL attached, and cdk-nag's CloudFront findings acknowledged with reasons.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from stacks.constants import (
    API_KEY_HEADER,
    AUTHORIZATION_HEADER,
    BATCH_ALIAS,
    EDGE_AUTHORIZATION_HEADER,
    ENV_BATCH_ALIAS,
    ENV_EDGE_AUTHORIZATION_HEADER,
    ENV_EDGE_DISTRIBUTION_ID,
    LOADER_MODULE,
    LOOKUP_HANDLER,
    OUTPUT_API_URL,
    OUTPUT_DISTRIBUTION_ID,
)
from stacks.fronts.edge import COPY_AUTHORIZATION
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    iter_states,
    only,
    policy_statements_of_role,
    resources_of_type,
    state_machine_definition,
)
from tests.infra.cloudfront import CACHING_DISABLED, behaviour_for
from tests.infra.conftest import (
    EXAMPLE_EDGE_WEB_ACL_ARN,
    HTTP_EDGE,
    REST_EDGE,
    URL_EDGE,
    VARIANTS,
    Synthesized,
)

EDGES = (URL_EDGE, HTTP_EDGE, REST_EDGE)


def lookup_cache(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    logical_id, policy = only(template, "AWS::CloudFront::CachePolicy")
    return logical_id, policy["Properties"]["CachePolicyConfig"]


@pytest.mark.parametrize("variant", EDGES)
def test_lookup_answers_are_cached_by_path_query_and_key_and_health_never(
    synthesized: Synthesized, variant: str
) -> None:
    template = synthesized.templates[variant]
    cache_id, cache = lookup_cache(template)
    # A TTL for the lookups, at most edgeCacheSeconds; only what the answer declares cacheable
    assert cache["MaxTTL"] == VARIANTS[variant].get("edgeCacheSeconds", 3600)
    assert (cache["MinTTL"], cache["DefaultTTL"]) == (0, 0)
    key = cache["ParametersInCacheKeyAndForwardedToOrigin"]
    assert key["QueryStringsConfig"] == {"QueryStringBehavior": "all"}  # ?fields=, ?token=, ...
    carried = EDGE_AUTHORIZATION_HEADER if variant == URL_EDGE else AUTHORIZATION_HEADER
    origin = ["Origin"] if VARIANTS[variant].get("corsAllowOrigins") else []  # the CORS answer's
    assert key["HeadersConfig"] == {
        "HeaderBehavior": "whitelist",
        "Headers": [API_KEY_HEADER, carried, *origin],
    }
    for path in ("/v1/ip/1.1.1.1", "/v1/ip/1.1.1.1/asn", "/geoip/v2.1/city/1.1.1.1", "/ipinfo/1.1.1.1"):
        behaviour = behaviour_for(template, path)
        assert behaviour["CachePolicyId"] == {"Ref": cache_id}, path
        assert behaviour["CachedMethods"] == ["GET", "HEAD"], path  # never a POST
    for path in ("/v1/health", "/v1/datasets", "/v1/datasets/city", "/v1/batch", "/v1/ip", "/v1/ranges"):
        assert behaviour_for(template, path)["CachePolicyId"] == CACHING_DISABLED, path
    assert all(
        behaviour_for(template, path)["ViewerProtocolPolicy"] == "https-only" for path in ("/", "/v1/ip/x")
    )


def test_behind_the_function_url_the_origin_access_control_signs_and_only_this_distribution_may_call(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[URL_EDGE]
    lookup_id, function = function_by_handler(template, LOOKUP_HANDLER)
    distribution_id, distribution = only(template, "AWS::CloudFront::Distribution")
    _, control = only(template, "AWS::CloudFront::OriginAccessControl")
    assert control["Properties"]["OriginAccessControlConfig"] | {"Name": None} == {
        "Name": None,
        "OriginAccessControlOriginType": "lambda",
        "SigningBehavior": "always",
        "SigningProtocol": "sigv4",
    }
    urls = resources_of_type(template, "AWS::Lambda::Url")
    [main] = [url for url in urls.values() if "Qualifier" not in url["Properties"]]
    assert main["Properties"]["AuthType"] == "AWS_IAM"
    # CloudFront may invoke it, and only for this distribution
    permissions = [p["Properties"] for p in resources_of_type(template, "AWS::Lambda::Permission").values()]
    cloudfront = [p for p in permissions if p["Principal"] == "cloudfront.amazonaws.com"]
    assert {p["Action"] for p in cloudfront} == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    url_id = next(logical_id for logical_id, url in urls.items() if url is main)
    for permission in cloudfront:
        assert permission["FunctionName"]["Fn::GetAtt"][0] in (lookup_id, url_id)
        assert {"Ref": distribution_id} in permission["SourceArn"]["Fn::Join"][1]
    # The function reads the client's Authorization where the CloudFront Function moved it
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables[ENV_EDGE_AUTHORIZATION_HEADER] == EDGE_AUTHORIZATION_HEADER
    origins = distribution["Properties"]["DistributionConfig"]["Origins"]
    assert sum("OriginAccessControlId" in origin for origin in origins) == 1


def test_batches_reach_the_batch_aliass_url_which_serves_nothing_else(synthesized: Synthesized) -> None:
    template = synthesized.templates[URL_EDGE]
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    _, alias = only(template, "AWS::Lambda::Alias")
    assert alias["Properties"]["Name"] == BATCH_ALIAS
    assert function["Properties"]["Environment"]["Variables"][ENV_BATCH_ALIAS] == BATCH_ALIAS
    [batch_url_id] = [
        logical_id
        for logical_id, url in resources_of_type(template, "AWS::Lambda::Url").items()
        if url["Properties"].get("Qualifier") == BATCH_ALIAS
    ]
    _, distribution = only(template, "AWS::CloudFront::Distribution")
    origins = {origin["Id"]: origin for origin in distribution["Properties"]["DistributionConfig"]["Origins"]}
    for path in ("/v1/batch", "/ipinfo/batch", "/batch"):  # ipinfoAtRoot: the root's batch too
        behaviour = behaviour_for(template, path)
        origin = origins[behaviour["TargetOriginId"]]
        assert "OriginAccessControlId" not in origin, path  # a signed POST would need the body's hash
        assert batch_url_id in json.dumps(origin["DomainName"]), path
        assert "POST" in behaviour["AllowedMethods"], path
        assert behaviour["CachePolicyId"] == CACHING_DISABLED, path
    assert "OriginAccessControlId" in origins[behaviour_for(template, "/v1/ip/1.1.1.1")["TargetOriginId"]]


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the CloudFront Function's code")
@pytest.mark.parametrize(
    ("headers", "moved"),
    [
        ({"authorization": {"value": "Basic MTIzOmtleQ=="}}, "Basic MTIzOmtleQ=="),
        ({}, None),
        # A client cannot smuggle its own "moved" header past the function
        ({EDGE_AUTHORIZATION_HEADER: {"value": "Bearer forged"}}, None),
        # A repeated Authorization arrives joined with a comma, which no key holds
        (
            {
                "authorization": {
                    "value": "Bearer a",
                    "multiValue": [{"value": "Bearer a"}, {"value": "Bearer b"}],
                }
            },
            "Bearer a,Bearer b",
        ),
    ],
)
def test_the_cloudfront_function_moves_the_clients_authorization_aside(
    headers: dict[str, Any], moved: str | None
) -> None:
    event = {"request": {"method": "GET", "uri": "/geoip/v2.1/city/1.1.1.1", "headers": headers}}
    script = f"{COPY_AUTHORIZATION}\nconsole.log(JSON.stringify(handler({json.dumps(event)})));"
    output = subprocess.run(["node", "-e", script], check=True, capture_output=True, text=True).stdout
    request = json.loads(output)
    assert request["headers"].get(EDGE_AUTHORIZATION_HEADER, {}).get("value") == moved


@pytest.mark.parametrize("variant", EDGES)
def test_activation_invalidates_this_distribution_and_may_touch_no_other(
    synthesized: Synthesized, variant: str
) -> None:
    template = synthesized.templates[variant]
    distribution_id, _ = only(template, "AWS::CloudFront::Distribution")
    activate_id, activate = function_by_handler(template, f"{LOADER_MODULE}.activate")
    assert activate["Properties"]["Environment"]["Variables"][ENV_EDGE_DISTRIBUTION_ID] == {
        "Ref": distribution_id
    }
    granted = [
        statement
        for statement in policy_statements_of_role(template, activate["Properties"]["Role"]["Fn::GetAtt"][0])
        if "cloudfront:CreateInvalidation" in as_list(statement["Action"])
    ]
    [statement] = granted
    assert {"Ref": distribution_id} in statement["Resource"]["Fn::Join"][1]
    # No other function may invalidate anything
    for logical_id, function in resources_of_type(template, "AWS::Lambda::Function").items():
        if logical_id == activate_id:
            continue
        statements = policy_statements_of_role(template, function["Properties"]["Role"]["Fn::GetAtt"][0])
        assert not [s for s in statements if "cloudfront:CreateInvalidation" in as_list(s["Action"])]
    # A refused invalidation retries Activate (which asks again under the same reference)
    [activate_state] = [
        s for name, s in iter_states(state_machine_definition(template)["States"]) if name == "Activate"
    ]
    assert any("EdgeInvalidationFailed" in retry["ErrorEquals"] for retry in activate_state["Retry"])
    outputs = template["Outputs"]
    assert outputs[OUTPUT_DISTRIBUTION_ID]["Value"] == {"Ref": distribution_id}
    assert distribution_id in json.dumps(outputs[OUTPUT_API_URL]["Value"])


def test_a_cloudfront_web_acl_attaches_to_the_distribution(synthesized: Synthesized) -> None:
    _, with_acl = only(synthesized.templates[URL_EDGE], "AWS::CloudFront::Distribution")
    assert with_acl["Properties"]["DistributionConfig"]["WebACLId"] == EXAMPLE_EDGE_WEB_ACL_ARN
    _, without = only(synthesized.templates[REST_EDGE], "AWS::CloudFront::Distribution")
    assert "WebACLId" not in without["Properties"]["DistributionConfig"]
    assert resources_of_type(synthesized.templates[URL_EDGE], "AWS::WAFv2::WebACLAssociation") == {}


def test_cloudfront_findings_are_acknowledged_with_reasons(synthesized: Synthesized) -> None:
    report = synthesized.validation_report or {}
    suppressed = {
        (finding["ruleName"], construct["constructPath"].split("/")[0])
        for plugin in report.get("pluginReports", [])
        for finding in plugin.get("suppressedViolations", [])
        if finding["ruleName"].startswith("AwsSolutions-CFR")
        for construct in finding["violatingConstructs"]
    }
    stages = {"UrlEdge", "HttpEdge", "RestEdge"}
    for rule in ("CFR1", "CFR3", "CFR4"):
        assert {stage for name, stage in suppressed if name == f"AwsSolutions-{rule}"} == stages, rule
    # CFR2 (no web ACL) only where none is attached
    assert {stage for name, stage in suppressed if name == "AwsSolutions-CFR2"} == {"HttpEdge", "RestEdge"}
