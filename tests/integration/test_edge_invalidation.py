"""`ipmeta rollback` and a load from a workstation empty the edge cache, or say plainly they could not.

No variable names the distribution on a workstation: ``find_edge`` reads it from the outputs of
the stack whose ``TableName`` is the table (CloudFormation stubbed with botocore's Stubber), and
the rollback and the load's activation invalidate it (CloudFront stood in for by moto). A stack
without ``edge``, no stack, or no permission to read the stacks is said in words.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ipmeta_cli.loading import edge_line
from loader.options import LoadOptions
from loader.pipeline import driver, retention
from loader.settings import ENV_EDGE_DISTRIBUTION_ID, OUTPUT_DISTRIBUTION_ID, OUTPUT_TABLE_NAME
from loader.store.edge_cache import find_edge
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable

FIXTURE = Path(__file__).parent.parent / "fixtures" / "small.csv"
REGION = "us-east-1"


def stacks(*outputs: dict[str, str]) -> Any:
    """A CloudFormation client whose DescribeStacks lists one stack per ``outputs``."""
    client = boto3.client(
        "cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    listed = [
        {
            "StackName": f"Ipmeta{number}",
            "CreationTime": "2026-11-27T00:00:00Z",
            "StackStatus": "CREATE_COMPLETE",
            "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in found.items()],
        }
        for number, found in enumerate(outputs)
    ]
    stubber.add_response("describe_stacks", {"Stacks": listed})
    stubber.activate()
    return client


@pytest.fixture
def cloudfront(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv(ENV_EDGE_DISTRIBUTION_ID, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.client("cloudfront", region_name=REGION)


def distribution(cloudfront: Any) -> str:
    origin = {
        "Id": "api",
        "DomainName": "api.example.com",
        "CustomOriginConfig": {"HTTPPort": 80, "HTTPSPort": 443, "OriginProtocolPolicy": "https-only"},
    }
    behaviour = {
        "TargetOriginId": "api",
        "ViewerProtocolPolicy": "https-only",
        "MinTTL": 0,
        "ForwardedValues": {"QueryString": True, "Cookies": {"Forward": "none"}},
    }
    config = {
        "CallerReference": "ipmeta",
        "Origins": {"Quantity": 1, "Items": [origin]},
        "DefaultCacheBehavior": behaviour,
        "Comment": "ipmeta lookups",
        "Enabled": True,
    }
    return str(cloudfront.create_distribution(DistributionConfig=config)["Distribution"]["Id"])


def invalidations(cloudfront: Any, distribution_id: str) -> int:
    return len(
        cloudfront.list_invalidations(DistributionId=distribution_id)["InvalidationList"].get("Items", [])
    )


def test_a_rollback_and_a_load_from_a_workstation_invalidate_the_distribution_of_the_tables_stack(
    store: LoaderTable, tmp_path: Path, cloudfront: Any
) -> None:
    # Given a table whose stack has an edge distribution, and no variable naming it
    edge_id = distribution(cloudfront)
    outputs = {OUTPUT_TABLE_NAME: store.table_name, OUTPUT_DISTRIBUTION_ID: edge_id}
    other = {OUTPUT_TABLE_NAME: "another-table", OUTPUT_DISTRIBUTION_ID: "EOTHER"}
    found = find_edge(store.table_name, local=False, cloudformation=stacks(other, outputs))
    assert found.cache is not None
    assert found.cache.distribution_id == edge_id
    # When a load activates a version, and a rollback switches back
    staging = LocalStaging(tmp_path / "staging")
    driver.run_load([FIXTURE], LoadOptions(), store, staging, edge=found.cache)
    changed = tmp_path / "changed.csv"
    changed.write_text(FIXTURE.read_text().replace("Cloudflare", "Cloudflare, Inc."))
    driver.run_load([changed], LoadOptions(), store, staging, edge=found.cache)
    assert invalidations(cloudfront, edge_id) == 2
    rolled = retention.rollback(store, edge=found.cache)
    # Then each emptied the cache, and the rollback says which invalidation
    assert invalidations(cloudfront, edge_id) == 3
    assert rolled["edge_invalidation"]
    assert edge_id in str(edge_line(found))


def test_when_no_distribution_is_found_it_is_said_plainly() -> None:
    no_edge = find_edge("t", local=False, cloudformation=stacks({OUTPUT_TABLE_NAME: "t"}))
    assert no_edge.cache is None
    assert "has no edge distribution" in no_edge.reason
    missing = find_edge("t", local=False, cloudformation=stacks({OUTPUT_TABLE_NAME: "u"}))
    assert missing.cache is None
    assert "no stack" in missing.reason
    refused = boto3.client(
        "cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(refused)
    stubber.add_client_error("describe_stacks", "AccessDenied", "not authorized to perform DescribeStacks")
    stubber.activate()
    denied = find_edge("t", local=False, cloudformation=refused)
    assert denied.cache is None
    assert "AccessDenied" in denied.reason
    for found in (no_edge, missing, denied):
        said = edge_line(found)
        assert said is not None
        assert said.startswith("edge cache: NOT invalidated")
    # A local table has no distribution to speak of
    assert edge_line(find_edge("t", local=True)) is None
