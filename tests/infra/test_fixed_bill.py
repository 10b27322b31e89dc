"""The fixed bill ``ipmeta plan`` prints counts what the default stack's template holds.

``loader.planning.fixed_bill.DEFAULT_STACK`` declares the default stack's alarm metrics, dashboards,
keys and secrets (the loader never imports the stacks); each count is read here from the template
synthesized from ``cdk.json`` as it is, and with ``dashboard=true``, so the bill cannot drift from
the stack.
"""

from __future__ import annotations

from typing import Any

from loader.planning.fixed_bill import DEFAULT_STACK, FixedResources, fixed_bill
from tests.infra.cfn import resources_of_type
from tests.infra.conftest import HTTP_API, SHIPPED, Synthesized


def alarm_metrics(properties: dict[str, Any]) -> int:
    """The metrics an alarm is billed for: its one metric, or each metric its expression reads."""
    if "MetricName" in properties:
        return 1
    return sum("MetricStat" in query for query in properties["Metrics"])


def counted(template: dict[str, Any]) -> FixedResources:
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm").values()
    return FixedResources(
        alarm_metrics=sum(alarm_metrics(alarm["Properties"]) for alarm in alarms),
        dashboards=len(resources_of_type(template, "AWS::CloudWatch::Dashboard")),
        keys=len(resources_of_type(template, "AWS::KMS::Key")),
        secrets=len(resources_of_type(template, "AWS::SecretsManager::Secret")),
    )


def test_the_default_stacks_fixed_resources_are_the_ones_the_bill_counts(synthesized: Synthesized) -> None:
    assert counted(synthesized.templates[SHIPPED]) == DEFAULT_STACK


def test_with_the_dashboard_the_bill_counts_the_one_dashboard_more(synthesized: Synthesized) -> None:
    # Given the default front with dashboard=true (the variants' default; its other options hold no
    # alarm, key or secret of their own)
    assert counted(synthesized.templates[HTTP_API]) == DEFAULT_STACK.with_dashboard()


def test_the_alarm_line_is_what_the_templates_alarms_cost(synthesized: Synthesized) -> None:
    # Given the template's own count of alarm metrics, at $0.10 each
    metrics = counted(synthesized.templates[SHIPPED]).alarm_metrics
    # Then the bill's alarm line is that, and it is under a dollar (31 metrics, $3.10, before issue 34)
    assert fixed_bill()["breakdown"]["alarms"] == round(metrics * 0.10, 2) < 1.0


def test_a_replica_regions_alarm_metrics_are_the_ones_its_bill_counts(synthesized: Synthesized) -> None:
    from loader.planning.regions import REGION_ALARM_METRICS
    from tests.infra.conftest import REGION_TEMPLATES, REPLICAS

    # Without domainName: with it, each region adds the hostname's health alarm (one metric)
    regions = [name for name in REGION_TEMPLATES if name.startswith(f"{REPLICAS}@")]
    assert regions
    for name in regions:
        assert counted(synthesized.templates[name]).alarm_metrics == REGION_ALARM_METRICS, name
