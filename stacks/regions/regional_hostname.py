"""One hostname for every region (``domainName``): each region's front under it, by latency, while healthy.

In each region (home's and every replica's) the same name gets a certificate of
its own (ACM is regional, validated in the hosted zone), a custom domain on that
region's front, and a latency alias record whose set identifier is the region.
Route 53 answers each caller with the region nearest in latency among those whose
health check passes. The health check watches an alarm, not a URL: every
route needs an API key, which Route 53's checkers cannot send, and the alarm is
what the region itself says of its front (5xx answers a minute, two minutes in a row).
A region whose data trails home stays in the answer: it serves its previous version,
which is late, not wrong (``RegionBehind`` pages for it).
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_route53 as route53
from constructs import Construct

from stacks.config import IpmetaConfig
from stacks.fronts.lookup_api import LookupApi

#: 5xx answers in a minute that make the region unhealthy, two minutes in a row.
UNHEALTHY_5XX_PER_MINUTE: Final = 25


class RegionalHostname(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: IpmetaConfig, lookup: LookupApi
    ) -> None:
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        self.name = config.domain_name
        zone = route53.HostedZone.from_hosted_zone_attributes(
            self, "Zone", hosted_zone_id=config.hosted_zone_id, zone_name=config.hosted_zone_name
        )
        certificate = acm.Certificate(
            self, "Certificate", domain_name=self.name, validation=acm.CertificateValidation.from_dns(zone)
        )
        target = lookup.front.custom_domain(self, self.name, certificate)
        self.unhealthy = cloudwatch.Alarm(
            self,
            "FrontUnhealthy",
            alarm_description="The lookup API of this region answers 5xx: Route 53 sends callers elsewhere",
            metric=lookup.fronts()[0].server_errors(Duration.minutes(1)),
            threshold=UNHEALTHY_5XX_PER_MINUTE,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.health_check = route53.HealthCheck(
            self,
            "Health",
            type=route53.HealthCheckType.CLOUDWATCH_METRIC,
            alarm_identifier=route53.AlarmIdentifier(name=self.unhealthy.alarm_name, region=region),
            insufficient_data_health_status=route53.InsufficientDataHealthStatusEnum.LAST_KNOWN_STATUS,
        )
        # A regional custom domain answers over IPv4: an A record, no AAAA.
        self.record = route53.ARecord(
            self,
            "A",
            zone=zone,
            record_name=self.name,
            target=route53.RecordTarget.from_alias(target),
            region=region,
            set_identifier=region,
            health_check=self.health_check,
        )

    @property
    def url(self) -> str:
        return f"https://{self.name}/"
