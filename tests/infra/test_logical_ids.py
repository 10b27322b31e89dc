"""Deployments update in place: the logical ids of what holds data or serves stay as they were.

CloudFormation replaces a resource whose logical id changes: a new table (empty), new
functions, a new state machine, a new REST API (a new URL and new keys). The ids below were
read from the templates synthesized before ``stacks/`` was grouped by role (issue 34), and
every template must still hold each of them, with the same type. The REST front's resources
are pinned whole but for its deployment, whose id is a hash of the API's shape by design.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.infra.conftest import DEFAULT, HTTP_API, REPLICAS, URL, Synthesized, region_template

#: Logical id -> type, by template: the REST front (``DEFAULT``), the function URL, the HTTP API,
#: and a replica region's stack.
PINNED: Mapping[str, Mapping[str, str]] = {
    DEFAULT: {
        "LoaderWorkflowFunctionsAbortFunction13CA55BF": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsActivateFunctionD1EF2FB4": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsCleanupFunction3E83CA72": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanPartitionsFunction4225346C": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanWritesFunctionD74F77C3": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsResolveFunctionA26153A9": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsScanFunction3CA4536F": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsStartFunction4D6D2AFB": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsWriteChunksFunctionE28ACC74": "AWS::Lambda::Function",
        "LoaderWorkflowStateMachine61E05C87": "AWS::StepFunctions::StateMachine",
        "LookupApiAccessLogs0E37D40C": "AWS::Logs::LogGroup",
        "LookupApiGeoIP2Keys3E673E80": "AWS::ApiGateway::Authorizer",
        "LookupApiIpinfoKeys69F3CBAD": "AWS::ApiGateway::Authorizer",
        "LookupApiKeyAuthorizerFunction197D6EA1": "AWS::Lambda::Function",
        "LookupApiLookupFunctionF347A096": "AWS::Lambda::Function",
        "LookupApiRestApi6E630631": "AWS::ApiGateway::RestApi",
        "LookupApiRestApiDefaultKey4D6DDE41": "AWS::ApiGateway::ApiKey",
        "LookupApiRestApiDeploymentStageapi3E8A6D6E": "AWS::ApiGateway::Stage",
        "LookupApiRestApiGET68B75C32": "AWS::ApiGateway::Method",
        "LookupApiRestApiHEAD6E6CC6F0": "AWS::ApiGateway::Method",
        "LookupApiRestApiNoKeyDA157098": "AWS::ApiGateway::GatewayResponse",
        "LookupApiRestApiUnknownKey48CAB8F4": "AWS::ApiGateway::GatewayResponse",
        "LookupApiRestApiUsagePlan82FC26F3": "AWS::ApiGateway::UsagePlan",
        "LookupApiRestApiUsagePlanUsagePlanKeyResourceIpmetaLookupApiRestApiDefaultKey8909A0BF90F898D0": (
            "AWS::ApiGateway::UsagePlanKey"
        ),
        "LookupApiRestApigeoip0223643F": "AWS::ApiGateway::Resource",
        "LookupApiRestApigeoipANY2E96B739": "AWS::ApiGateway::Method",
        "LookupApiRestApigeoipproxyANY65D27CE8": "AWS::ApiGateway::Method",
        "LookupApiRestApigeoipproxyC06B5B17": "AWS::ApiGateway::Resource",
        "LookupApiRestApiipinfo7D3D20C7": "AWS::ApiGateway::Resource",
        "LookupApiRestApiipinfoANY81856D18": "AWS::ApiGateway::Method",
        "LookupApiRestApiipinfoproxy657B319A": "AWS::ApiGateway::Resource",
        "LookupApiRestApiipinfoproxyANY6B47BB61": "AWS::ApiGateway::Method",
        "LookupApiRestApistaticCC5D3B70": "AWS::ApiGateway::Resource",
        "LookupApiRestApistaticproxy412DA728": "AWS::ApiGateway::Resource",
        "LookupApiRestApistaticproxyGET127C1313": "AWS::ApiGateway::Method",
        "LookupApiRestApistaticproxyHEADA6DC2989": "AWS::ApiGateway::Method",
        "LookupApiRestApiv1A17B91C2": "AWS::ApiGateway::Resource",
        "LookupApiRestApiv1ANY42979F9A": "AWS::ApiGateway::Method",
        "LookupApiRestApiv1proxy2563F177": "AWS::ApiGateway::Resource",
        "LookupApiRestApiv1proxyANYDA5995C0": "AWS::ApiGateway::Method",
        "LookupApiV1Keys23FA1798": "AWS::ApiGateway::Authorizer",
        "Table710B521B": "AWS::DynamoDB::GlobalTable",
    },
    URL: {
        "LoaderWorkflowFunctionsAbortFunction13CA55BF": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsActivateFunctionD1EF2FB4": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsCleanupFunction3E83CA72": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanPartitionsFunction4225346C": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanWritesFunctionD74F77C3": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsResolveFunctionA26153A9": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsScanFunction3CA4536F": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsStartFunction4D6D2AFB": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsWriteChunksFunctionE28ACC74": "AWS::Lambda::Function",
        "LoaderWorkflowStateMachine61E05C87": "AWS::StepFunctions::StateMachine",
        "LookupApiLookupFunctionF347A096": "AWS::Lambda::Function",
        "Table710B521B": "AWS::DynamoDB::GlobalTable",
    },
    HTTP_API: {
        "LoaderWorkflowFunctionsAbortFunction13CA55BF": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsActivateFunctionD1EF2FB4": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsCleanupFunction3E83CA72": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanPartitionsFunction4225346C": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsPlanWritesFunctionD74F77C3": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsResolveFunctionA26153A9": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsScanFunction3CA4536F": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsStartFunction4D6D2AFB": "AWS::Lambda::Function",
        "LoaderWorkflowFunctionsWriteChunksFunctionE28ACC74": "AWS::Lambda::Function",
        "LoaderWorkflowStateMachine61E05C87": "AWS::StepFunctions::StateMachine",
        "LookupApiHttpFrontAuthorizerFunctionA1B988D9": "AWS::Lambda::Function",
        "LookupApiLookupFunctionF347A096": "AWS::Lambda::Function",
        "Table710B521B": "AWS::DynamoDB::GlobalTable",
    },
    region_template(REPLICAS, "eu-west-1"): {
        "ArrivalFunctionEB3C6138": "AWS::Lambda::Function",
        "LookupApiKeyAuthorizerFunction197D6EA1": "AWS::Lambda::Function",
        "LookupApiLookupFunctionF347A096": "AWS::Lambda::Function",
    },
}


@pytest.mark.parametrize("variant", sorted(PINNED))
def test_every_pinned_logical_id_is_still_in_the_template(synthesized: Synthesized, variant: str) -> None:
    resources = synthesized.templates[variant]["Resources"]
    present = {logical_id: resource["Type"] for logical_id, resource in resources.items()}
    moved = {
        logical_id: kind for logical_id, kind in PINNED[variant].items() if present.get(logical_id) != kind
    }
    assert moved == {}


def test_the_pins_cover_the_table_the_functions_the_state_machine_and_the_rest_front() -> None:
    kinds = set(PINNED[DEFAULT].values())
    assert {
        "AWS::DynamoDB::GlobalTable",
        "AWS::Lambda::Function",
        "AWS::StepFunctions::StateMachine",
    } <= kinds
    assert {"AWS::ApiGateway::RestApi", "AWS::ApiGateway::UsagePlan", "AWS::ApiGateway::Method"} <= kinds
