"""The ipmeta stack: table, lookup API, loader workflow, reloads and alarms."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Token
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.constants import (
    API_ID,
    ENRICH_WORKFLOW_ID,
    HOSTNAME_ID,
    LOADER_WORKFLOW_ID,
    MONITORING_ID,
    OUTPUT_ALARM_TOPIC_ARN,
    OUTPUT_BUCKET_NAME,
    OUTPUT_ENRICH_STATE_MACHINE_ARN,
    OUTPUT_HOSTNAME_URL,
    OUTPUT_SHARED_KEY_ID,
    OUTPUT_SHARED_KEY_SECRET_ARN,
    OUTPUT_STATE_MACHINE_ARN,
    OUTPUT_TABLE_NAME,
    REPLICATION_ID,
    SCHEDULE_ID,
    TABLE_ID,
)
from stacks.fronts.lookup_api import LookupApi
from stacks.load.enrich_workflow import EnrichWorkflow
from stacks.load.loader_workflow import LoaderWorkflow
from stacks.load.schedule import ScheduledReloads
from stacks.monitoring.dashboard import Monitoring
from stacks.regions.regional_hostname import RegionalHostname
from stacks.regions.replicas import HomeReplication, import_shared_key
from stacks.table import RangesTable


class IpmetaStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = IpmetaConfig.from_node(self.node)
        # An environment-agnostic stack learns its region at deploy time only.
        config.check_region(None if Token.is_unresolved(self.region) else self.region)

        self.ranges = RangesTable(self, TABLE_ID, config=config)
        table = self.ranges.table
        self.lookup = LookupApi(self, API_ID, config=config, table=table, index_names=self.ranges.index_names)
        self.loader = LoaderWorkflow(self, LOADER_WORKFLOW_ID, config=config, table=table)
        if self.lookup.edge is not None:
            self.loader.invalidate_on_activation(self.lookup.edge.distribution)
        self.reloads = ScheduledReloads(
            self,
            SCHEDULE_ID,
            config=config,
            state_machine=self.loader.state_machine,
            bucket=self.loader.bucket,
        )
        self._build_regions(config)
        self.enrich = (
            EnrichWorkflow(self, ENRICH_WORKFLOW_ID, config=config, table=table, bucket=self.loader.bucket)
            if config.enrich_inputs
            else None
        )
        functions = dict(self.lookup.functions)
        functions.update({task: f.function for task, f in self.loader.functions.items()})
        if self.enrich is not None:
            functions.update({task: f.function for task, f in self.enrich.functions.items()})
        self.monitoring = Monitoring(
            self,
            MONITORING_ID,
            config=config,
            fronts=self.lookup.fronts(),
            lookup_function=self.lookup.handler.function,
            functions=functions,
            table=table,
            state_machine=self.loader.state_machine,
            other_alarms=[
                *([self.hostname.unhealthy] if self.hostname is not None else []),
                *([self.enrich.failed] if self.enrich is not None else []),
            ],
        )
        if self.enrich is not None:
            self.enrich.notify(self.monitoring.topic)
        self._build_outputs()

    def _build_regions(self, config: IpmetaConfig) -> None:
        """With ``replicaRegions``: home's part of them (``stacks/regions/replicas.py``); with ``domainName``:
        home's part of the one hostname (``stacks/regions/regional_hostname.py``)."""
        self.replication: HomeReplication | None = None
        self.hostname: RegionalHostname | None = None
        self._region_outputs: dict[str, tuple[str, str]] = {}
        if config.replica_regions:
            self.replication = HomeReplication(
                self,
                REPLICATION_ID,
                config=config,
                table=self.ranges.table,
                lookup=self.lookup,
            )
            if self.replication.shared_key is not None:
                key = import_shared_key(self.replication, self.replication.shared_key, self.lookup)
                self._region_outputs[OUTPUT_SHARED_KEY_ID] = (
                    key.key_id,
                    "Id of the API key every region accepts",
                )
                self._region_outputs[OUTPUT_SHARED_KEY_SECRET_ARN] = (
                    self.replication.shared_key.secret_arn,
                    "The value of that key: aws secretsmanager get-secret-value --secret-id <arn>",
                )
        if config.domain_name:
            self.hostname = RegionalHostname(self, HOSTNAME_ID, config=config, lookup=self.lookup)
            self._region_outputs[OUTPUT_HOSTNAME_URL] = (self.hostname.url, "The one hostname")

    def _build_outputs(self) -> None:
        outputs = {
            **self.lookup.outputs(),
            OUTPUT_TABLE_NAME: (self.ranges.table.table_name, "DynamoDB table of ranges"),
            OUTPUT_BUCKET_NAME: (self.loader.bucket.bucket_name, "Bucket the loader reads from"),
            OUTPUT_STATE_MACHINE_ARN: (
                self.loader.state_machine.state_machine_arn,
                "Start an execution to load a dataset",
            ),
            OUTPUT_ALARM_TOPIC_ARN: (self.monitoring.topic.topic_arn, "Subscribe to receive alarms"),
            **self._region_outputs,
        }
        if self.enrich is not None:
            outputs[OUTPUT_ENRICH_STATE_MACHINE_ARN] = (
                self.enrich.state_machine.state_machine_arn,
                "Start an execution to annotate files of addresses (ipmeta enrich --stack)",
            )
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)
