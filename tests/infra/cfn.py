"""Reading a synthesized CloudFormation template in tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

PLACEHOLDER_ACCOUNT = "123456789012"
PLACEHOLDER_REGION = "us-east-1"
_PSEUDO_PARAMETERS = {
    "AWS::Partition": "aws",
    "AWS::Region": PLACEHOLDER_REGION,
    "AWS::AccountId": PLACEHOLDER_ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
}


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def only(template: dict[str, Any], resource_type: str) -> tuple[str, dict[str, Any]]:
    found = resources_of_type(template, resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))


def _substitute(part: Any, template: dict[str, Any]) -> str:
    """A realistic literal for a token inside the state machine definition."""
    if isinstance(part, str):
        return part
    if "Ref" in part:
        name = part["Ref"]
        return _PSEUDO_PARAMETERS.get(name, f"{name.lower()}-placeholder")
    if "Fn::GetAtt" in part:
        logical_id, attribute = part["Fn::GetAtt"]
        resource_type = template["Resources"][logical_id]["Type"]
        if resource_type == "AWS::Lambda::Function" and attribute == "Arn":
            return f"arn:aws:lambda:{PLACEHOLDER_REGION}:{PLACEHOLDER_ACCOUNT}:function:{logical_id}"
        return f"{logical_id}-{attribute}-placeholder"
    raise AssertionError(f"unexpected token in definition: {part}")


def state_machine_definition(template: dict[str, Any], under: str = "") -> dict[str, Any]:
    """The ASL document, with every CloudFormation token replaced by a literal; with ``under``, of the
    state machine whose logical id starts so (a stack with the enrich state machine holds two)."""
    machines = {
        logical_id: machine
        for logical_id, machine in resources_of_type(template, "AWS::StepFunctions::StateMachine").items()
        if logical_id.startswith(under) and (under or not logical_id.startswith("EnrichWorkflow"))
    }
    assert len(machines) == 1, f"expected one state machine under {under!r}, found {sorted(machines)}"
    (machine,) = machines.values()
    definition = machine["Properties"]["DefinitionString"]
    if isinstance(definition, str):
        return dict(json.loads(definition))
    separator, parts = definition["Fn::Join"]
    return dict(json.loads(separator.join(_substitute(part, template) for part in parts)))


def iter_states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state, including those inside Map and Parallel states."""
    for name, state in states.items():
        yield name, state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from iter_states(processor["States"])
        for branch in state.get("Branches", []):
            yield from iter_states(branch["States"])


def function_by_handler(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    matches = {
        logical_id: resource
        for logical_id, resource in resources_of_type(template, "AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == handler
    }
    assert len(matches) == 1, f"expected one function with handler {handler}, found {sorted(matches)}"
    return next(iter(matches.items()))


def policy_statements_of_role(template: dict[str, Any], role_logical_id: str) -> list[dict[str, Any]]:
    """Statements of every AWS::IAM::Policy attached to the role, plus its inline policies."""
    statements: list[dict[str, Any]] = []
    for policy in resources_of_type(template, "AWS::IAM::Policy").values():
        roles = policy["Properties"].get("Roles", [])
        if {"Ref": role_logical_id} in roles:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    role = template["Resources"][role_logical_id]
    for inline in role["Properties"].get("Policies", []):
        statements.extend(inline["PolicyDocument"]["Statement"])
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def rest_method_routes(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every REST API method with its resource path (``/geoip/{proxy+}``, ``/`` for the root)."""
    resources = resources_of_type(template, "AWS::ApiGateway::Resource")

    def path_of(resource_id: Any) -> str:
        if "Ref" not in resource_id:  # Fn::GetAtt [RestApi, RootResourceId]
            return ""
        properties = resources[resource_id["Ref"]]["Properties"]
        return f"{path_of(properties['ParentId'])}/{properties['PathPart']}"

    return [
        (path_of(method["Properties"]["ResourceId"]) or "/", method["Properties"])
        for method in resources_of_type(template, "AWS::ApiGateway::Method").values()
    ]


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every alarm's properties by logical id, an alarm on one metric always in the classic form.

    CloudFormation takes a single metric two ways: ``MetricName``, ``Dimensions``… at the top,
    or as the one query of ``Metrics`` (which CDK writes for a labelled metric, and
    cdk-monitoring-constructs labels them). The second is flattened into the first here.
    """
    found = {}
    for logical_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
        properties = dict(alarm["Properties"])
        queries = properties.get("Metrics", [])
        if len(queries) == 1 and "MetricStat" in queries[0]:
            stat = queries[0]["MetricStat"]
            properties.pop("Metrics")
            properties.update(
                Namespace=stat["Metric"]["Namespace"],
                MetricName=stat["Metric"]["MetricName"],
                Dimensions=stat["Metric"].get("Dimensions", []),
                Period=stat["Period"],
                Statistic=stat["Stat"],
            )
        found[logical_id] = properties
    return found
