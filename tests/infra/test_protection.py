"""What the operator may put in front of the API and around its alarms: a WAF web ACL, a KMS key.

- ``wafWebAclArn`` associates a regional WAFv2 web ACL with the REST stage; cdk-nag's
  APIG3 (no web ACL) is acknowledged only when none is given. An HTTP API cannot take one.
- ``alarmTopicEncryption`` (on by default) encrypts the alarm topic with a rotated
  customer-managed key whose policy lets CloudWatch's alarms publish.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment

from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import STACK_ID
from stacks.ipmeta_stack import IpmetaStack
from tests.infra.cfn import as_list, only, resources_of_type
from tests.infra.conftest import DEFAULT, EXAMPLE_WEB_ACL_ARN, SOURCE_URL, Synthesized

#: The variant that sets wafWebAclArn and turns the topic's key off.
WITH_WAF = SOURCE_URL
#: What an alarm publishes as, and what SNS asks of the publisher on an encrypted topic.
CLOUDWATCH = "cloudwatch.amazonaws.com"
PUBLISHER_KEY_ACTIONS = {"kms:Decrypt", "kms:GenerateDataKey*"}


def _suppressed(synthesized: Synthesized, rule: str) -> list[str]:
    report = synthesized.validation_report or {}
    return [
        construct["constructPath"]
        for plugin in report.get("pluginReports", [])
        for finding in plugin.get("suppressedViolations", [])
        if finding["ruleName"] == f"AwsSolutions-{rule}"
        for construct in finding["violatingConstructs"]
    ]


def test_the_web_acl_is_associated_with_the_rest_stage(synthesized: Synthesized) -> None:
    template = synthesized.templates[WITH_WAF]
    _, association = only(template, "AWS::WAFv2::WebACLAssociation")
    [rest_api_id] = resources_of_type(template, "AWS::ApiGateway::RestApi")
    stage_id, _ = only(template, "AWS::ApiGateway::Stage")
    properties = association["Properties"]
    assert properties["WebACLArn"] == EXAMPLE_WEB_ACL_ARN
    # arn:<partition>:apigateway:<region>::/restapis/<api id>/stages/<stage name>
    parts = properties["ResourceArn"]["Fn::Join"][1]
    assert {"Ref": rest_api_id} in parts
    assert {"Ref": stage_id} in parts
    assert any(isinstance(part, str) and part.endswith("/stages/") for part in parts)


def test_apig3_is_acknowledged_only_without_a_web_acl(synthesized: Synthesized) -> None:
    # Given the default deployment (no web ACL) and one with
    assert resources_of_type(synthesized.templates[DEFAULT], "AWS::WAFv2::WebACLAssociation") == {}
    acknowledged = _suppressed(synthesized, "APIG3")
    # Then the finding is acknowledged on the default's stage, and on no stage of the other
    assert any(path.startswith(f"{STACK_ID}/") for path in acknowledged)
    assert not [path for path in acknowledged if path.startswith("SourceUrl/")]
    # (and test_checks finds no unacknowledged finding in any variant: the association satisfies it)


def test_an_http_api_cannot_take_a_web_acl() -> None:
    with pytest.raises(ConfigError, match="cannot be associated with an HTTP API"):
        IpmetaConfig.from_node(App(context={"apiType": "http", "wafWebAclArn": EXAMPLE_WEB_ACL_ARN}).node)


def test_a_web_acl_of_another_region_is_refused_by_a_stack_that_knows_its_region() -> None:
    app = App(context={"apiType": "rest", "wafWebAclArn": EXAMPLE_WEB_ACL_ARN})  # us-east-1's
    with pytest.raises(ConfigError, match="web ACL of us-east-1, but the stack deploys to eu-west-1"):
        IpmetaStack(app, STACK_ID, env=Environment(region="eu-west-1"))


def _key_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    _, key = only(template, "AWS::KMS::Key")
    statements: list[dict[str, Any]] = key["Properties"]["KeyPolicy"]["Statement"]
    return statements


def test_the_alarm_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[DEFAULT]
    key_id, key = only(template, "AWS::KMS::Key")
    _, topic = only(template, "AWS::SNS::Topic")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    # Alarms publish as CloudWatch: without these in the key policy, every notification fails
    [statement] = [s for s in _key_statements(template) if s.get("Principal") == {"Service": CLOUDWATCH}]
    assert statement["Effect"] == "Allow"
    assert set(as_list(statement["Action"])) == PUBLISHER_KEY_ACTIONS


def test_the_alarm_topics_key_can_be_turned_off(synthesized: Synthesized) -> None:
    template = synthesized.templates[WITH_WAF]
    assert resources_of_type(template, "AWS::KMS::Key") == {}
    _, topic = only(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" not in topic["Properties"]
