"""The stack as shipped puts API Gateway in front of the lookup function (issue 34).

``cdk.json``, the config's default and ``ipmeta serve``'s default (what ``make run`` serves) name
one front, the HTTP API; the template synthesized from ``cdk.json`` as it is has that API, and
its one integration invokes the lookup function. ``apiType=url`` still gives the function's own
URL with no API Gateway (``tests/infra/test_url_front.py``).
"""

from __future__ import annotations

from ipmeta.schema.settings import DEFAULT_FRONT, Front
from stacks.config import DEFAULTS
from stacks.constants import LOOKUP_HANDLER
from tests.infra.cfn import function_by_handler, only, resources_of_type
from tests.infra.conftest import SHIPPED, URL, Synthesized, cdk_json


def test_cdk_json_the_config_and_make_run_share_one_default_front() -> None:
    assert cdk_json()["context"]["apiType"] == DEFAULTS["apiType"] == DEFAULT_FRONT
    assert DEFAULT_FRONT is Front.HTTP


def test_the_shipped_stack_has_an_http_api_in_front_of_the_lookup_function(synthesized: Synthesized) -> None:
    # Given the template of cdk.json as it is
    template = synthesized.templates[SHIPPED]
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    # Then one HTTP API, whose one integration invokes the lookup function
    only(template, "AWS::ApiGatewayV2::Api")
    _, integration = only(template, "AWS::ApiGatewayV2::Integration")
    assert integration["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [lookup_id, "Arn"]}
    # And no function URL beside it, no REST API
    assert resources_of_type(template, "AWS::Lambda::Url") == {}
    assert resources_of_type(template, "AWS::ApiGateway::RestApi") == {}


def test_the_url_front_has_no_api_gateway(synthesized: Synthesized) -> None:
    template = synthesized.templates[URL]
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    _, url = only(template, "AWS::Lambda::Url")
    assert url["Properties"]["TargetFunctionArn"] == {"Fn::GetAtt": [lookup_id, "Arn"]}
    kinds = {resource["Type"] for resource in template["Resources"].values()}
    assert {kind for kind in kinds if kind.startswith("AWS::ApiGateway")} == set()
