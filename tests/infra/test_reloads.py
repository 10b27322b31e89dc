"""What starts a load: the daily schedule and the optional upload trigger."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from tests.infra.cfn import only, resources_of_type
from tests.infra.conftest import DEFAULT, EXAMPLE_SOURCE_OPTIONS, UPLOAD_TRIGGER, Synthesized, cdk_json


def _input_text(joined: dict[str, Any], bucket_name: str) -> str:
    """The JSON text of an Fn::Join, with the bucket's Ref spelled ``bucket_name``."""
    separator: str = joined["Fn::Join"][0]
    parts: list[Any] = joined["Fn::Join"][1]
    return separator.join(bucket_name if isinstance(part, dict) else part for part in parts)


def test_schedule_starts_the_state_machine_daily_on_the_source_object(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    context = cdk_json()["context"]
    machine_id, _ = only(template, "AWS::StepFunctions::StateMachine")
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    _, schedule = only(template, "AWS::Scheduler::Schedule")
    properties = schedule["Properties"]

    assert properties["ScheduleExpression"] == context["scheduleCron"] == "cron(0 3 * * ? *)"
    assert properties["State"] == "ENABLED"
    assert properties["Target"]["Arn"] == {"Ref": machine_id}
    assert {"Ref": bucket_id} in properties["Target"]["Input"]["Fn::Join"][1]
    assert json.loads(_input_text(properties["Target"]["Input"], "bucket")) == {
        "dataset": "default",
        "source": f"s3://bucket/{context['sourceKey']}",
        "options": {},
    }
    assert not resources_of_type(template, "AWS::Events::Rule")


def test_upload_trigger_enables_bucket_events_and_starts_a_load_on_the_source_key(
    synthesized: Synthesized,
) -> None:
    template = synthesized.template(UPLOAD_TRIGGER)
    raw = synthesized.templates[UPLOAD_TRIGGER]
    bucket_id, _ = only(raw, "AWS::S3::Bucket")
    machine_id, _ = only(raw, "AWS::StepFunctions::StateMachine")

    template.has_resource_properties(
        "AWS::S3::Bucket",
        {"NotificationConfiguration": {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}},
    )
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {
                    "bucket": {"name": [{"Ref": bucket_id}]},
                    "object": {"key": ["datasets/GeoLite2-City-Blocks-IPv4.csv"]},
                },
            },
            "Targets": [Match.object_like({"Arn": {"Ref": machine_id}})],
        },
    )
    # The load it starts reads the uploaded object with the configured options (sourceOptions).
    _, rule = only(raw, "AWS::Events::Rule")
    assert json.loads(_input_text(rule["Properties"]["Targets"][0]["Input"], "bucket")) == {
        "dataset": "default",
        "source": "s3://bucket/datasets/GeoLite2-City-Blocks-IPv4.csv",
        "options": EXAMPLE_SOURCE_OPTIONS,
    }
    # No custom resource: the notification setting lives on the bucket itself.
    template.resource_count_is("Custom::S3BucketNotifications", 0)
    template.resource_count_is("AWS::Scheduler::Schedule", 0)
