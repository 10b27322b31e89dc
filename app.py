#!/usr/bin/env python3
"""CDK entry point: the ipmeta stacks (home's, and one per replica region), checked by cdk-nag."""

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.deployment import build

app = App()
build(app)
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
