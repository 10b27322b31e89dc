"""CloudFront's cache in front of the API (``edge``): emptied when another version starts answering.

The distribution caches lookup answers for ``edgeCacheSeconds``; a version's answers never change,
so the only staleness is another version going live. Each activation (and rollback) therefore asks
for one ``/*`` invalidation, identified by a caller reference of its own: a retried Activate asks
again with the same reference and CloudFront answers with the invalidation it already made, so one
activated version is one invalidation (the first 1,000 paths a month are free; ``/*`` is one).

The stack names the distribution in ``IPMETA_EDGE_DISTRIBUTION_ID`` on the activate function, and
grants ``cloudfront:CreateInvalidation`` on that distribution alone; without the variable (no
``edge``, or a local load) there is no cache to empty and nothing is sent.

A rollback or a load run from a workstation has no such variable: ``find_edge`` finds the
distribution itself, from the outputs of the stack whose ``TableName`` is the table, and says
plainly why when it cannot (a local table, a stack without ``edge``, no permission to read the
stacks), so that no one believes a cache emptied that was not.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Final

from loader.errors import EdgeInvalidationFailed
from loader.settings import ENV_EDGE_DISTRIBUTION_ID, OUTPUT_DISTRIBUTION_ID, OUTPUT_TABLE_NAME

log = logging.getLogger(__name__)

#: Every path: one invalidation path, whatever the distribution holds.
EVERY_PATH: Final = "/*"


@dataclass(frozen=True)
class EdgeCache:
    distribution_id: str
    client: Any = None

    @classmethod
    def from_environment(cls) -> EdgeCache | None:
        distribution = os.environ.get(ENV_EDGE_DISTRIBUTION_ID)
        return cls(distribution) if distribution else None

    def invalidate(self, reference: str) -> str:
        """Ask for the ``/*`` invalidation identified by ``reference``; its id."""
        client = self.client
        if client is None:
            import boto3

            client = boto3.client("cloudfront")
        batch = {"Paths": {"Quantity": 1, "Items": [EVERY_PATH]}, "CallerReference": reference}
        try:
            response = client.create_invalidation(
                DistributionId=self.distribution_id, InvalidationBatch=batch
            )
        except Exception as error:  # botocore's ClientError and connection errors alike
            raise EdgeInvalidationFailed(f"invalidating {self.distribution_id}: {error}") from error
        invalidation = str(response["Invalidation"]["Id"])
        log.info("edge cache of %s: invalidation %s (%s)", self.distribution_id, invalidation, reference)
        return invalidation


def invalidate_after(reference: str, edge: EdgeCache | None) -> str | None:
    """The invalidation of ``edge`` (None: no distribution) for what ``reference`` switched."""
    return edge.invalidate(reference) if edge is not None else None


@dataclass(frozen=True)
class FoundEdge:
    """The distribution in front of a table (None: none to invalidate) and how that was decided."""

    cache: EdgeCache | None
    reason: str
    #: A local table (dynalite): no distribution can serve it, and there is nothing to say.
    local: bool = False


def find_edge(table_name: str, *, local: bool, cloudformation: Any = None) -> FoundEdge:
    """The distribution in front of ``table_name``: the environment's, else its stack's output."""
    named = EdgeCache.from_environment()
    if named is not None:
        return FoundEdge(named, f"{ENV_EDGE_DISTRIBUTION_ID}={named.distribution_id}")
    if local:
        return FoundEdge(None, "the table is local: no CloudFront distribution serves it", local=True)
    if cloudformation is None:
        import boto3

        cloudformation = boto3.client("cloudformation")
    try:
        for page in cloudformation.get_paginator("describe_stacks").paginate():
            for stack in page["Stacks"]:
                outputs = {out["OutputKey"]: out["OutputValue"] for out in stack.get("Outputs", [])}
                if outputs.get(OUTPUT_TABLE_NAME) != table_name:
                    continue
                distribution = outputs.get(OUTPUT_DISTRIBUTION_ID)
                if distribution is None:
                    return FoundEdge(None, f"stack {stack['StackName']} has no edge distribution")
                return FoundEdge(
                    EdgeCache(distribution), f"stack {stack['StackName']}'s {OUTPUT_DISTRIBUTION_ID}"
                )
    except Exception as error:  # no credentials, no permission, no network: said, never hidden
        return FoundEdge(None, f"could not read the stacks' outputs to find the distribution: {error}")
    return FoundEdge(None, f"no stack in this account and region has {OUTPUT_TABLE_NAME} {table_name}")
