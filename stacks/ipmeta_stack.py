"""The ipmeta stack: table, lookup API, loader workflow, reloads and alarms."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Token
from constructs import Construct

from stacks.api import LookupApi
from stacks.config import IpmetaConfig
from stacks.constants import (
    API_ID,
    LOADER_WORKFLOW_ID,
    MONITORING_ID,
    OUTPUT_ALARM_TOPIC_ARN,
    OUTPUT_BUCKET_NAME,
    OUTPUT_STATE_MACHINE_ARN,
    OUTPUT_TABLE_NAME,
    SCHEDULE_ID,
    TABLE_ID,
)
from stacks.loader_workflow import LoaderWorkflow
from stacks.monitoring import Monitoring
from stacks.schedule import ScheduledReloads
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
        functions = dict(self.lookup.functions)
        functions.update({task: f.function for task, f in self.loader.functions.items()})
        self.monitoring = Monitoring(
            self,
            MONITORING_ID,
            config=config,
            api=self.lookup.monitored_api,
            functions=functions,
            table=table,
            state_machine=self.loader.state_machine,
        )
        self._build_outputs()

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
        }
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)
