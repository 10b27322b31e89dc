"""A replica region's stack (``replicaRegions``): the lookup alone, near its callers, on the local replica.

The same lookup function and front as home's (``LookupApi``, every option of the
deployment), reading the table's replica in this region and following this
region's own pointer (``IPMETA_POINTER_REGION``), which the region's arrival check
moves once a version has wholly arrived here (``stacks/regions/arrival_check.py``). No
loader, no bucket, no state machine, no schedule of loads; the only write any of
its roles may make is the check's, to this region's pointer items. The front reads
home's secrets, replicated here (``stacks/regions/replicas.py``). Its alarms go to a topic
of its own (``stacks/monitoring/region_alarms.py``); with ``domainName`` it joins the one
hostname (``stacks/regions/regional_hostname.py``).

Home's values (the table's name, the secrets' ARNs in this region) are home's
outputs, read with ``Fn::GetStackOutput`` when this stack deploys
(``HomeReplication.published``): no custom resource, no export pinning home's outputs.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ipmeta.schema import keys
from stacks.config import IpmetaConfig
from stacks.constants import (
    API_ID,
    ARRIVAL_ID,
    ENV_POINTER_REGION,
    HOSTNAME_ID,
    MONITORING_ID,
    OUTPUT_ALARM_TOPIC_ARN,
    OUTPUT_HOSTNAME_URL,
    OUTPUT_SHARED_KEY_ID,
    TABLE_ID,
)
from stacks.fronts.lookup_api import LookupApi, SharedSecrets
from stacks.monitoring.region_alarms import RegionAlarms
from stacks.regions.arrival_check import ArrivalCheck
from stacks.regions.regional_hostname import RegionalHostname
from stacks.regions.replicas import HomeReplication, Published, import_shared_key


class LookupRegionStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, home: HomeReplication, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = IpmetaConfig.from_node(self.node)
        region = self.region
        published = home.published(self)
        self.table = dynamodb.TableV2.from_table_name(self, TABLE_ID, published.table_name)
        self.lookup = LookupApi(
            self,
            API_ID,
            config=config,
            table=self.table,
            index_names=[index.name for index in keys.INDEXES],
            shared=self._shared_secrets(published),
        )
        self.lookup.handler.function.add_environment(ENV_POINTER_REGION, region)
        outputs = dict(self.lookup.outputs())
        if published.shared_key_arn is not None:
            shared = secretsmanager.Secret.from_secret_complete_arn(
                self, "SharedApiKey", published.shared_key_arn
            )
            key = import_shared_key(self, shared, self.lookup)
            outputs[OUTPUT_SHARED_KEY_ID] = (key.key_id, "Id of the API key every region accepts")
        self.arrival = ArrivalCheck(self, ARRIVAL_ID, config=config, table=self.table, region=region)
        self.alarms = RegionAlarms(
            self,
            MONITORING_ID,
            config=config,
            region=region,
            front=self.lookup.fronts()[0],
            functions={**self.lookup.functions, "arrival": self.arrival.function},
            table=self.table,
        )
        outputs[OUTPUT_ALARM_TOPIC_ARN] = (self.alarms.topic.topic_arn, "This region's alarms")
        if config.domain_name:
            hostname = RegionalHostname(self, HOSTNAME_ID, config=config, lookup=self.lookup)
            outputs[OUTPUT_HOSTNAME_URL] = (hostname.url, "The one hostname, answered by the nearest region")
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)

    def _shared_secrets(self, published: Published) -> SharedSecrets:
        page_token_key = secretsmanager.Secret.from_secret_complete_arn(
            self, "PageTokenKey", published.page_token_key_arn
        )
        api_keys = None
        if published.api_keys_arn is not None:
            api_keys = secretsmanager.Secret.from_secret_complete_arn(self, "ApiKeys", published.api_keys_arn)
        return SharedSecrets(page_token_key, api_keys)
