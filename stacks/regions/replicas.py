"""What home adds for its replica regions (``replicaRegions``): the table and the lookup's secrets there.

- **The table** gets a replica in each region (TableV2: one global table).
  Replicated writes are billed in every region, which is why reloads are deltas.
- **The secrets** the fronts read are replicated into each region by Secrets
  Manager: the page-token key (a token from one region pages on in another) and,
  behind the HTTP API, the clients' keys. Behind REST, API keys belong to one
  region's API Gateway, so a shared key is generated once, replicated, and
  imported into every region's usage plan (home's included): one key works
  behind the one hostname, wherever latency routing sends the caller.
- **Cleanup** learns the regions (``IPMETA_REPLICA_REGIONS``): it deletes a
  version only once every region's own pointer has moved past it
  (``loader.pipeline.retention.held_by_regions``).

A replica region's own stack (``stacks/lookup_region_stack.py``) reads what it
needs of home from home's outputs, with ``Fn::GetStackOutput`` when it deploys: the
table's name, and each secret's ARN in that region, spelled in home's template
(``replica_arn``) where the secret's own ARN is known. No export pins home's
outputs, and no custom resource carries them across regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import ENV_REPLICA_REGIONS
from stacks.fronts.lookup_api import LookupApi
from stacks.nag import acknowledge

#: The length of the shared REST key: API Gateway takes 20 to 128 characters.
SHARED_KEY_LENGTH: Final = 40
#: The field of an ARN (``arn:partition:service:region:…``) that names its region.
_ARN_REGION: Final = 3
_ARN_FIELDS: Final = 7


def replica_arn(secret: secretsmanager.ISecret, region: str) -> str:
    """A replicated secret's ARN in ``region``: its own, with that region (the name and suffix stay)."""
    fields = Fn.split(":", secret.secret_arn, _ARN_FIELDS)
    return Fn.join(
        ":", [region if index == _ARN_REGION else Fn.select(index, fields) for index in range(_ARN_FIELDS)]
    )


@dataclass(frozen=True)
class Published:
    """What one replica region's stack reads of home: tokens that resolve when that stack deploys."""

    table_name: str
    page_token_key_arn: str
    api_keys_arn: str | None
    shared_key_arn: str | None


def region_suffix(region: str) -> str:
    """``eu-west-1`` -> ``EuWest1``, for the ids of what home publishes to each region."""
    return "".join(part.capitalize() for part in region.split("-"))


class HomeReplication(Construct):
    """The table's replicas, the secrets' replicas, one REST key for every region, cleanup's regions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        table: dynamodb.TableV2,
        lookup: LookupApi,
        cleanup: lambda_.Function,
    ) -> None:
        super().__init__(scope, construct_id)
        self.regions = tuple(config.replica_regions)
        self.table_name = table.table_name
        for region in self.regions:
            table.add_replica(region=region)
        #: The secrets each region's front reads, as home holds them.
        self.page_token_key = lookup.page_token_key
        self.api_keys = lookup.front.keys
        # API Gateway's keys belong to one region: the REST front needs one key of every region's.
        self.shared_key = self._build_shared_key() if lookup.front.usage_plan is not None else None
        for secret in (self.page_token_key, self.api_keys, self.shared_key):
            if isinstance(secret, secretsmanager.Secret):
                for region in self.regions:
                    secret.add_replica_region(region)
        cleanup.add_environment(ENV_REPLICA_REGIONS, ",".join(self.regions))
        self._outputs = {region: self._publish(region) for region in self.regions}

    def _publish(self, region: str) -> dict[str, CfnOutput]:
        values = {
            "TableName": self.table_name,
            "PageTokenKeyArn": replica_arn(self.page_token_key, region),
            "ApiKeysArn": replica_arn(self.api_keys, region) if self.api_keys else None,
            "SharedApiKeyArn": replica_arn(self.shared_key, region) if self.shared_key else None,
        }
        outputs = {}
        for name, value in values.items():
            if value is not None:
                output = CfnOutput(self, f"{name}{region_suffix(region)}", value=value)
                output.override_logical_id(f"Replica{name}{region_suffix(region)}")
                outputs[name] = output
        return outputs

    def published(self, consumer: Stack) -> Published:
        """Home's values for ``consumer``, a replica region's stack, which deploys after home."""
        home = Stack.of(self)
        consumer.add_stack_dependency(home, "a replica region reads home's outputs")
        outputs = self._outputs[consumer.region]

        def read(name: str) -> str | None:
            if name not in outputs:
                return None
            logical_id = home.resolve(outputs[name].logical_id)
            return Fn.get_stack_output(home.stack_name, logical_id, home.region)

        table_name, page_token_key = read("TableName"), read("PageTokenKeyArn")
        assert table_name is not None
        assert page_token_key is not None
        return Published(table_name, page_token_key, read("ApiKeysArn"), read("SharedApiKeyArn"))

    def _build_shared_key(self) -> secretsmanager.Secret:
        """A key every region's REST front accepts: generated here, imported by each usage plan."""
        secret = secretsmanager.Secret(
            self,
            "SharedApiKey",
            description="ipmeta: an API key every region's REST front accepts (one hostname, many regions)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=SHARED_KEY_LENGTH
            ),
        )
        acknowledge(
            secret,
            "SMG4",
            "The key is handed to clients, so a scheduled rotation would cut them off; an operator "
            "rotates it by putting a new value and redeploying every region (docs/deploy.md).",
        )
        return secret


def import_shared_key(
    scope: Construct, secret: secretsmanager.ISecret, lookup: LookupApi
) -> apigateway.ApiKey:
    """The shared key in this region's usage plan, its value read from the secret at deploy time."""
    key = apigateway.ApiKey(
        scope,
        "SharedKey",
        description="ipmeta API key shared by every region",
        value=secret.secret_value.unsafe_unwrap(),
    )
    assert lookup.front.usage_plan is not None
    lookup.front.usage_plan.add_api_key(key)
    return key
