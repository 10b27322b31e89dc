"""The app's stacks: home's (``Ipmeta``), and with ``replicaRegions`` a lookup stack in each of those.

Without replicas the app is the one environment-agnostic stack it always was. With
them, every stack needs its region at synth (a global table's replicas, and what
home publishes to each region, are per region): home's is ``homeRegion``, else the
CLI's ``CDK_DEFAULT_REGION``; the account is the CLI's ``CDK_DEFAULT_ACCOUNT``.
``app.py`` and the infra tests build the app through ``build``.
"""

from __future__ import annotations

import os

from aws_cdk import Environment, Stack
from constructs import Construct

from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import STACK_ID, region_stack_id
from stacks.ipmeta_stack import IpmetaStack
from stacks.lookup_region_stack import LookupRegionStack

#: Set by the CDK CLI from the profile it deploys with.
CDK_DEFAULT_REGION = "CDK_DEFAULT_REGION"
CDK_DEFAULT_ACCOUNT = "CDK_DEFAULT_ACCOUNT"


def build(scope: Construct) -> list[Stack]:
    """Home's stack first, then each replica region's, in ``replicaRegions`` order."""
    config = IpmetaConfig.from_node(scope.node)
    if not config.replica_regions:
        return [IpmetaStack(scope, STACK_ID)]
    home_region = config.home_region or os.environ.get(CDK_DEFAULT_REGION, "")
    if not home_region:
        raise ConfigError(
            "replicaRegions needs the home stack's region at synth: -c homeRegion=us-east-1, "
            f"or a profile with a region (the CLI sets {CDK_DEFAULT_REGION})"
        )
    if home_region in config.replica_regions:
        raise ConfigError(f"replicaRegions holds the home region {home_region}: the table is already there")
    account = os.environ.get(CDK_DEFAULT_ACCOUNT)
    home = IpmetaStack(scope, STACK_ID, env=Environment(account=account, region=home_region))
    assert home.replication is not None
    regions = [
        LookupRegionStack(
            scope,
            region_stack_id(region),
            home=home.replication,
            env=Environment(account=account, region=region),
            description=f"ipmeta lookups in {region}, on the table's replica there",
        )
        for region in config.replica_regions
    ]
    return [home, *regions]
