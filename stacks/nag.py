"""Acknowledging cdk-nag findings, each with its reason, next to what causes it.

cdk-nag v3 reads CDK's own ``Validations.of(...).acknowledge``; every finding of
a rule that reports several (IAM5) is acknowledged by its exact id.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
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
