"""What every front of the lookup function gives the stack: one protocol for rest, http and url.

``LookupApi`` builds the front ``apiType`` names from its table of builders and reads it
through this protocol alone: its URL, its stack outputs, its metrics, the origins CloudFront
stands before, the custom domain of the one hostname, and where its keys live. Adding a
front is a module here with a class that meets it and one row in that table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.fronts.front_metrics import MonitoredFront
from stacks.function import PythonFunction


class LookupFront(Protocol):
    """A front of the lookup function."""

    @property
    def keys(self) -> secretsmanager.ISecret | None:
        """The clients' keys as a secret of client name -> key (HTTP, URL); None where API Gateway
        holds them (REST), which is why a region-spanning key is then a key of its own."""
        ...

    @property
    def usage_plan(self) -> apigateway.UsagePlan | None:
        """REST's usage plan, which a key every region accepts joins; None for the others."""
        ...

    @property
    def functions(self) -> Mapping[str, lambda_.IFunction]:
        """The front's own functions (its authorizer), by name, watched like every function."""
        ...

    @property
    def url(self) -> str: ...

    def monitored_front(self) -> MonitoredFront:
        """Its requests, latency and errors, as the dashboard and the alarms read them."""
        ...

    def key_outputs(self) -> dict[str, tuple[str, str]]:
        """The stack outputs that tell an operator where a client's key comes from."""
        ...

    def edge_origins(self) -> dict[str, cloudfront.IOrigin]:
        """What CloudFront stands before (``edge``): ``origin``, and ``batch_origin`` if any."""
        ...

    def custom_domain(
        self, scope: Construct, domain_name: str, certificate: acm.ICertificate
    ) -> route53.IAliasRecordTarget:
        """``domainName``: the name on this front, its root on the front's stage."""
        ...


class SecretKeyedFront(Construct):
    """A front built as a construct of its own, its clients' keys in a secret (http, url): the
    arguments every ``FrontBuilder`` passes, kept here once. The construct's id is the one its
    resources' logical ids have always carried (``HttpFront``, ``UrlFront``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: IpmetaConfig,
        handler: PythonFunction,
        keys: secretsmanager.ISecret | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        #: Only REST meters keys with a usage plan.
        self.usage_plan: apigateway.UsagePlan | None = None
        self._build(handler, keys)

    def _build(self, handler: PythonFunction, keys: secretsmanager.ISecret | None) -> None:
        """The front itself, around ``handler``; ``keys``: home's secret replicated here, in a
        replica region."""
        raise NotImplementedError


class FrontBuilder(Protocol):
    """Builds one front in ``scope`` (the ``LookupApi``) before ``handler``; ``keys`` is home's
    secret replicated here, in a replica region."""

    def __call__(
        self,
        scope: Construct,
        *,
        config: IpmetaConfig,
        handler: PythonFunction,
        keys: secretsmanager.ISecret | None,
    ) -> LookupFront: ...
