"""Acknowledging cdk-nag findings, each with its reason, next to what causes it.

cdk-nag v3 reads CDK's own ``Validations.of(...).acknowledge``; every finding of
a rule that reports several (IAM5) is acknowledged by its exact id.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, CfnElement, Stack, Token, Validations
from constructs import IConstruct

NAG_PACK: Final = "AwsSolutions"


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Accept ``finding`` (e.g. ``L1`` or ``IAM5[Resource::*]``) on ``scope`` and below."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{NAG_PACK}::{NAG_PACK}-{finding}", reason=reason))


def arn_ref(resource: IConstruct) -> str:
    """How cdk-nag spells a resource's ARN inside a finding: ``<LogicalId.Arn>``."""
    element = resource if isinstance(resource, CfnElement) else resource.node.default_child
    if not isinstance(element, CfnElement):
        raise TypeError(f"{resource.node.path} has no CloudFormation resource")
    stack = Stack.of(element)
    return f"<{stack.resolve(stack.get_logical_id(element))}.Arn>"


def acknowledge_map_children(state_machine: IConstruct) -> None:
    """A state machine with a Distributed Map may start, describe and stop its own child executions."""
    stack = Stack.of(state_machine)
    machine = stack.resolve(stack.get_logical_id(state_machine.node.default_child))  # type: ignore[arg-type]
    # A stack deployed to a known region and account (one with replicaRegions) spells them out.
    partition, region, account = (
        f"<{pseudo}>" if Token.is_unresolved(value) else value
        for pseudo, value in (
            ("AWS::Partition", stack.partition),
            ("AWS::Region", stack.region),
            ("AWS::AccountId", stack.account),
        )
    )
    execution = (
        f"arn:{partition}:states:{region}:{account}:execution:"
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine}"}}]}}]}}'
    )
    for suffix in (":*", "/*:*"):
        acknowledge(
            state_machine,
            f"IAM5[Resource::{execution}{suffix}]",
            "A Distributed Map starts, describes and stops its own child executions, whose "
            "names Step Functions chooses; CDK scopes the grant to this state machine's executions.",
        )
