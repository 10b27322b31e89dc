"""The synthesized app passes cdk-nag (AWS Solutions) and cfn-lint, every variant."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

from tests.infra.cfn import PLACEHOLDER_REGION
from tests.infra.conftest import ALL_VARIANTS, REGION_TEMPLATES, Synthesized

#: W3005 flags DependsOn that CloudFormation could infer; CDK emits them on purpose.
IGNORED_CFN_LINT_CHECKS = ["W3005"]


def _violations(synthesized: Synthesized) -> list[str]:
    report = synthesized.validation_report or {}
    return [
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in report.get("pluginReports", [])
        for violation in plugin.get("violations", [])
        for construct in violation.get("violatingConstructs", [])
    ]


def test_cdk_nag_ran_and_every_finding_is_fixed_or_acknowledged(synthesized: Synthesized) -> None:
    violations = _violations(synthesized)
    assert synthesized.validation_error is None, "\n".join(violations) or synthesized.validation_error
    assert violations == []
    report = synthesized.validation_report
    assert report is not None, "cdk-nag wrote no validation report: was the plugin registered?"
    plugins = {plugin["pluginName"]: plugin["conclusion"] for plugin in report["pluginReports"]}
    assert plugins == {"AwsSolutions": "success"}


def test_no_construct_left_a_warning_or_error_annotation(synthesized: Synthesized) -> None:
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text(encoding="utf-8"))
    nested = [
        json.loads(
            (synthesized.outdir / artifact["properties"]["directoryName"] / "manifest.json").read_text()
        )
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "cdk:cloud-assembly"
    ]
    messages = [
        f"{path}: {entry['data']}"
        for assembly in (manifest, *nested)
        for artifact in assembly["artifacts"].values()
        for path, entries in artifact.get("metadata", {}).items()
        for entry in entries
        if entry["type"] in ("aws:cdk:warning", "aws:cdk:error")
    ]
    assert messages == []


@pytest.mark.parametrize("variant", [*ALL_VARIANTS, *REGION_TEMPLATES])
def test_cfn_lint_finds_nothing(synthesized: Synthesized, variant: str) -> None:
    # A replica region's template is linted for its own region.
    region = REGION_TEMPLATES.get(variant, PLACEHOLDER_REGION)
    matches = lint(
        json.dumps(synthesized.templates[variant]),
        config=ManualArgs(regions=[region], ignore_checks=IGNORED_CFN_LINT_CHECKS),
    )
    assert [f"{m.rule.id} {m.message}" for m in matches] == []
