"""Replica regions (``replicaRegions``): the global table, a lookup-only stack per region, one hostname.

The ``replicas`` variant has two replica regions behind REST; ``replicas_domain``
one, behind the HTTP API, with ``domainName``. Without either the default template
has none of it (``test_the_default_template_has_nothing_of_replicas``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App

from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import (
    ARRIVAL_TASK,
    AUTHORIZER_HANDLER,
    ENV_POINTER_REGION,
    LOADER_MODULE,
    LOOKUP_HANDLER,
    USAGE_PLAN_AUTHORIZER_HANDLER,
)
from stacks.regions.arrival_check import ARRIVAL_RATE, ARRIVAL_READ_ACTIONS, ARRIVAL_WRITE_ACTIONS
from tests.infra.cfn import as_list, function_by_handler, only, policy_statements_of_role, resources_of_type
from tests.infra.conftest import (
    DEFAULT,
    EXAMPLE_DOMAIN,
    EXAMPLE_REPLICA_REGIONS,
    EXAMPLE_WEB_ACL_ARN,
    HOME_REGION,
    REGION_TEMPLATES,
    REPLICAS,
    REPLICAS_DOMAIN,
    Synthesized,
    region_template,
)

ARRIVE_HANDLER = f"{LOADER_MODULE}.{ARRIVAL_TASK}"
#: What a region's stack may run: the lookup, its front's authorizer, the arrival check.
REGION_HANDLERS = {LOOKUP_HANDLER, USAGE_PLAN_AUTHORIZER_HANDLER, AUTHORIZER_HANDLER, ARRIVE_HANDLER}
WRITES = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}


def _environment(template: dict[str, Any], handler: str) -> dict[str, Any]:
    _, function = function_by_handler(template, handler)
    variables: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return variables


def test_the_table_has_a_replica_in_home_and_in_each_replica_region(synthesized: Synthesized) -> None:
    _, table = only(synthesized.templates[REPLICAS], "AWS::DynamoDB::GlobalTable")
    replicas = table["Properties"]["Replicas"]
    assert sorted(replica["Region"] for replica in replicas) == sorted(
        [HOME_REGION, *EXAMPLE_REPLICA_REGIONS]
    )
    # Every replica keeps the indexes, point-in-time recovery and deletion protection
    for replica in replicas:
        assert {index["IndexName"] for index in replica["GlobalSecondaryIndexes"]} == {
            "ranges-by-value",
            "flagged-ranges",
        }
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert replica["DeletionProtectionEnabled"] is True
    # And a global table streams its changes, which is how replicas receive them
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_a_replica_region_stack_is_lookup_only(synthesized: Synthesized, name: str) -> None:
    template = synthesized.templates[name]
    # No state machine, no bucket, no table of its own, no loader task
    for kind in ("AWS::StepFunctions::StateMachine", "AWS::S3::Bucket", "AWS::DynamoDB::GlobalTable"):
        assert resources_of_type(template, kind) == {}
    handlers = {
        f["Properties"]["Handler"] for f in resources_of_type(template, "AWS::Lambda::Function").values()
    }
    assert handlers <= REGION_HANDLERS
    assert {LOOKUP_HANDLER, ARRIVE_HANDLER} <= handlers


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_the_only_write_in_a_region_is_its_checks_to_its_own_pointer(
    synthesized: Synthesized, name: str
) -> None:
    template, region = synthesized.templates[name], REGION_TEMPLATES[name]
    writes = []
    for role in resources_of_type(template, "AWS::IAM::Role"):
        for statement in policy_statements_of_role(template, role):
            actions = set(as_list(statement["Action"]))
            if actions & WRITES or any(action.startswith("dynamodb:*") for action in actions):
                writes.append((role, statement))
    # Then one statement writes: PutItem, for the arrival check, held to this region's pointer keys
    assert len(writes) == 1, writes
    role, statement = writes[0]
    assert as_list(statement["Action"]) == list(ARRIVAL_WRITE_ACTIONS)
    _, arrive = function_by_handler(template, ARRIVE_HANDLER)
    assert arrive["Properties"]["Role"] == {"Fn::GetAtt": [role, "Arn"]}
    # (and to the progress of its counts, saved beside them so a run resumes the last one's)
    mine = [f"meta#pointer#{region}", f"meta#pointer#{region}#counted"]
    own = [*mine, *(f"ds#*#{key}" for key in mine)]
    assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": own}}


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_a_region_reads_its_own_replica_and_follows_its_own_pointer(
    synthesized: Synthesized, name: str
) -> None:
    template, region = synthesized.templates[name], REGION_TEMPLATES[name]
    lookup = _environment(template, LOOKUP_HANDLER)
    assert lookup[ENV_POINTER_REGION] == region
    assert _environment(template, ARRIVE_HANDLER)[ENV_POINTER_REGION] == region
    # The table's name is home's output, read when the region's stack deploys
    assert lookup["IPMETA_TABLE_NAME"]["Fn::GetStackOutput"]["StackName"].endswith("Ipmeta")
    assert lookup["IPMETA_TABLE_NAME"]["Fn::GetStackOutput"]["Region"] == HOME_REGION
    # And the function reads the table in its own region
    _, function = function_by_handler(template, LOOKUP_HANDLER)
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    reads = [s for s in policy_statements_of_role(template, role) if "dynamodb:Query" in as_list(s["Action"])]
    assert reads
    assert all(f"arn:aws:dynamodb:{region}:" in json.dumps(s["Resource"]) for s in reads)


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_the_arrival_check_runs_every_minute_and_retries_by_running_again(
    synthesized: Synthesized, name: str
) -> None:
    template = synthesized.templates[name]
    arrive_id, arrive = function_by_handler(template, ARRIVE_HANDLER)
    (invoke_config,) = resources_of_type(template, "AWS::Lambda::EventInvokeConfig").values()
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0
    _, schedule = only(template, "AWS::Scheduler::Schedule")
    assert schedule["Properties"]["ScheduleExpression"] == f"rate({ARRIVAL_RATE.to_minutes():g} minute)"
    assert schedule["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [arrive_id, "Arn"]}
    assert schedule["Properties"]["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    role = arrive["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = {a for s in policy_statements_of_role(template, role) for a in as_list(s["Action"])}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        *ARRIVAL_READ_ACTIONS,
        *ARRIVAL_WRITE_ACTIONS,
    }


@pytest.mark.parametrize("name", sorted(REGION_TEMPLATES))
def test_a_region_alarms_on_its_own_topic_when_it_trails_home(synthesized: Synthesized, name: str) -> None:
    template, region = synthesized.templates[name], REGION_TEMPLATES[name]
    only(template, "AWS::SNS::Topic")
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    behind = [
        a["Properties"] for a in alarms.values() if a["Properties"].get("MetricName") == "RegionBehindSeconds"
    ]
    assert len(behind) == 1
    assert behind[0]["Threshold"] == 30 * 60
    assert behind[0]["TreatMissingData"] == "breaching"
    assert {"Name": "region", "Value": region} in behind[0]["Dimensions"]
    # And the front, the lookup's throttles and the replica's reads have theirs, as home's do
    # (tests/infra/test_alarms_kept.py holds each one's metric and threshold)
    names = {a["Properties"].get("MetricName") for a in alarms.values()}
    assert {"Throttles", "RegionBehindSeconds"} <= names
    assert "Errors" not in names
    # Each tells the region's topic (the hostname's alarm tells Route 53, which watches it)
    assert all(a["Properties"]["AlarmActions"] for i, a in alarms.items() if i.startswith("Monitoring"))


def test_home_replicates_the_fronts_secrets_and_tells_cleanup_the_regions(synthesized: Synthesized) -> None:
    home = synthesized.templates[REPLICAS]
    secrets = resources_of_type(home, "AWS::SecretsManager::Secret")
    # The page-token key and the REST front's shared key, each in every replica region
    assert len(secrets) == 2
    for secret in secrets.values():
        assert sorted(r["Region"] for r in secret["Properties"]["ReplicaRegions"]) == sorted(
            EXAMPLE_REPLICA_REGIONS
        )
    cleanup = next(
        f["Properties"]["Environment"]["Variables"]
        for f in resources_of_type(home, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"].endswith(".cleanup")
    )
    # Cleanup learns the regions from the table itself (DescribeTable), from no variable
    assert "IPMETA_REPLICA_REGIONS" not in cleanup
    assert "dynamodb:DescribeTable" in json.dumps(home)
    # Behind the HTTP API, its clients' keys replicate too
    http_home = synthesized.templates[REPLICAS_DOMAIN]
    for secret in resources_of_type(http_home, "AWS::SecretsManager::Secret").values():
        assert secret["Properties"]["ReplicaRegions"] == [{"Region": EXAMPLE_REPLICA_REGIONS[0]}]


@pytest.mark.parametrize(
    "name", [REPLICAS, *(region_template(REPLICAS, region) for region in EXAMPLE_REPLICA_REGIONS)]
)
def test_every_region_accepts_the_shared_rest_key(synthesized: Synthesized, name: str) -> None:
    template = synthesized.templates[name]
    shared = [
        (logical_id, key["Properties"])
        for logical_id, key in resources_of_type(template, "AWS::ApiGateway::ApiKey").items()
        if "Value" in key["Properties"]
    ]
    assert len(shared) == 1
    logical_id, key = shared[0]
    # Its value is read from the replicated secret when the stack deploys, never written in the template
    assert "{{resolve:secretsmanager:" in json.dumps(key["Value"])
    plan_keys = resources_of_type(template, "AWS::ApiGateway::UsagePlanKey").values()
    assert {"Ref": logical_id} in [plan_key["Properties"]["KeyId"] for plan_key in plan_keys]


@pytest.mark.parametrize(
    "name", [REPLICAS_DOMAIN, region_template(REPLICAS_DOMAIN, EXAMPLE_REPLICA_REGIONS[0])]
)
def test_one_hostname_routes_by_latency_to_healthy_regions(synthesized: Synthesized, name: str) -> None:
    template = synthesized.templates[name]
    region = REGION_TEMPLATES.get(name, HOME_REGION)
    _, record = only(template, "AWS::Route53::RecordSet")
    check_id, check = only(template, "AWS::Route53::HealthCheck")
    assert record["Properties"]["Name"] == f"{EXAMPLE_DOMAIN['domainName']}."
    assert record["Properties"]["HostedZoneId"] == EXAMPLE_DOMAIN["hostedZoneId"]
    assert (record["Properties"]["Region"], record["Properties"]["SetIdentifier"]) == (region, region)
    assert record["Properties"]["HealthCheckId"] == {"Ref": check_id}
    assert check["Properties"]["HealthCheckConfig"]["Type"] == "CLOUDWATCH_METRIC"
    assert check["Properties"]["HealthCheckConfig"]["AlarmIdentifier"]["Region"] == region
    # And the name is the front's own, on a certificate of the region's own
    only(template, "AWS::CertificateManager::Certificate")
    only(template, "AWS::ApiGatewayV2::DomainName")
    assert "HostnameUrl" in template["Outputs"]


def test_without_a_domain_each_region_outputs_its_own_url(synthesized: Synthesized) -> None:
    for name in (REPLICAS, *(region_template(REPLICAS, region) for region in EXAMPLE_REPLICA_REGIONS)):
        template = synthesized.templates[name]
        assert resources_of_type(template, "AWS::Route53::RecordSet") == {}
        assert "ApiUrl" in template["Outputs"]


def test_the_default_template_has_nothing_of_replicas(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    text = json.dumps(template)
    _, table = only(template, "AWS::DynamoDB::GlobalTable")
    assert [replica["Region"] for replica in table["Properties"]["Replicas"]] == [{"Ref": "AWS::Region"}]
    for absent in (
        ENV_POINTER_REGION,
        "IPMETA_REPLICA_REGIONS",
        "ReplicaRegions",
        "Fn::GetStackOutput",
        "Route53",
    ):
        assert absent not in text
    assert "StreamSpecification" not in table["Properties"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"replicaRegions": ["eu-west-1", "eu-west-1"]}, "twice"),
        ({"replicaRegions": ["eu-west-1"], "homeRegion": "eu-west-1"}, "home region"),
        ({"replicaRegions": ["europe"]}, "region name"),
        ({"domainName": "ip.example.com"}, "go together"),
        (
            {
                "replicaRegions": ["eu-west-1"],
                "wafWebAclArn": EXAMPLE_WEB_ACL_ARN,
            },
            "one region",
        ),
        ({"replicaLagAlarmMinutes": 0}, "replicaLagAlarmMinutes"),
    ],
)
def test_a_replica_setting_no_deployment_can_mean_stops_the_synth(
    context: dict[str, Any], message: str
) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        IpmetaConfig.from_node(App(context=context).node)


def test_command_line_region_lists_are_parsed() -> None:
    config = IpmetaConfig.from_node(App(context={"replicaRegions": "eu-west-1, ap-southeast-1"}).node)
    assert config.replica_regions == ["eu-west-1", "ap-southeast-1"]
