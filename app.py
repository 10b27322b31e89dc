#!/usr/bin/env python3
"""CDK entry point: the ipmeta stack, checked by cdk-nag's AWS Solutions rules."""

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.constants import STACK_ID
from stacks.ipmeta_stack import IpmetaStack

app = App()
IpmetaStack(app, STACK_ID)
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
