"""Least privilege: no wildcard actions, no data access on `*`, each role exactly what it needs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipmeta.schema import keys
from stacks.constants import CHUNK_PREFIX, LOADER_MODULE, LOADER_TASKS, LOOKUP_HANDLER
from stacks.fronts.lookup_api import LOOKUP_INDEX_ACTIONS, LOOKUP_TABLE_ACTIONS
from stacks.load.loader_functions import SOURCE_READERS, STAGING_ACTIONS, TABLE_ACTIONS
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    only,
    policy_statements_of_role,
    resources_of_type,
)
from tests.infra.conftest import ALL_VARIANTS, DEFAULT, HTTP_API, Synthesized

#: Services whose actions read or change customer data.
DATA_SERVICES = ("dynamodb", "s3", "kms", "sqs", "sns", "lambda", "states", "secretsmanager", "ssm")


def _identity_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in resources_of_type(template, "AWS::IAM::Policy").values():
        statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for policy in resources_of_type(template, "AWS::IAM::ManagedPolicy").values():
        statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for role in resources_of_type(template, "AWS::IAM::Role").values():
        for inline in role["Properties"].get("Policies", []):
            statements.extend(inline["PolicyDocument"]["Statement"])
    return [s for s in statements if s["Effect"] == "Allow"]


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_no_statement_grants_a_wildcard_action(synthesized: Synthesized, variant: str) -> None:
    statements = _identity_statements(synthesized.templates[variant])
    assert statements
    for statement in statements:
        for action in as_list(statement["Action"]):
            assert action != "*", statement
            assert not action.endswith(":*"), statement


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_no_data_action_is_granted_on_every_resource(synthesized: Synthesized, variant: str) -> None:
    for statement in _identity_statements(synthesized.templates[variant]):
        if "*" not in as_list(statement["Resource"]):
            continue
        services = {action.split(":")[0] for action in as_list(statement["Action"])}
        assert not services & set(DATA_SERVICES), statement


@pytest.mark.parametrize("variant", [DEFAULT, HTTP_API])
def test_no_role_uses_an_aws_managed_policy(synthesized: Synthesized, variant: str) -> None:
    for logical_id, role in resources_of_type(synthesized.templates[variant], "AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), logical_id


def _role_of(template: dict[str, Any], handler: str) -> str:
    _, function = function_by_handler(template, handler)
    role_id: str = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_id


def _actions_by_service(statements: list[dict[str, Any]], service: str) -> set[str]:
    return {
        action
        for statement in statements
        for action in as_list(statement["Action"])
        if action.startswith(f"{service}:")
    }


def _index_arn(table_id: str, index_name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [table_id, "Arn"]}, f"/index/{index_name}"]]}


@pytest.mark.parametrize("variant", [DEFAULT, HTTP_API])
def test_lookup_may_only_query_and_get_items_of_the_table_and_query_its_indexes(
    synthesized: Synthesized, variant: str
) -> None:
    template = synthesized.templates[variant]
    table_id, _ = only(template, "AWS::DynamoDB::GlobalTable")
    statements = policy_statements_of_role(template, _role_of(template, LOOKUP_HANDLER))

    dynamodb = [
        (sorted(as_list(s["Action"])), sorted(as_list(s["Resource"]), key=json.dumps))
        for s in statements
        if _actions_by_service([s], "dynamodb")
    ]
    assert dynamodb == [
        (sorted(LOOKUP_TABLE_ACTIONS), [{"Fn::GetAtt": [table_id, "Arn"]}]),
        (
            sorted(LOOKUP_INDEX_ACTIONS),
            sorted((_index_arn(table_id, index.name) for index in keys.INDEXES), key=json.dumps),
        ),
    ]
    assert _actions_by_service(statements, "s3") == set()


@pytest.mark.parametrize("task", LOADER_TASKS)
def test_each_loader_task_gets_exactly_its_table_actions(synthesized: Synthesized, task: str) -> None:
    template = synthesized.templates[DEFAULT]
    table_id, _ = only(template, "AWS::DynamoDB::GlobalTable")
    statements = policy_statements_of_role(template, _role_of(template, f"{LOADER_MODULE}.{task}"))

    assert _actions_by_service(statements, "dynamodb") == set(TABLE_ACTIONS[task])
    for statement in statements:
        if _actions_by_service([statement], "dynamodb"):
            assert as_list(statement["Resource"]) == [{"Fn::GetAtt": [table_id, "Arn"]}]


@pytest.mark.parametrize("task", LOADER_TASKS)
def test_each_loader_task_gets_exactly_its_bucket_actions(synthesized: Synthesized, task: str) -> None:
    template = synthesized.templates[DEFAULT]
    statements = policy_statements_of_role(template, _role_of(template, f"{LOADER_MODULE}.{task}"))

    expected = set(STAGING_ACTIONS[task]) | ({"s3:GetObject"} if task in SOURCE_READERS else set())
    assert _actions_by_service(statements, "s3") == expected
    for statement in statements:
        writes = _actions_by_service([statement], "s3") & {"s3:PutObject", "s3:DeleteObject"}
        if writes:
            assert f"/{CHUNK_PREFIX}/*" in str(statement["Resource"]), statement
        if "s3:ListBucket" in as_list(statement["Action"]):
            assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{CHUNK_PREFIX}/*"]}}
