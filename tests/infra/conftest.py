"""Synthesize the app once per session, the way ``app.py`` does, offline.

One App holds the stack with ``cdk.json``'s context and the REST front (``DEFAULT``: the stack
most template tests read; REST was the default front before issue 27), plus one Stage per
variant that overrides context to switch on the optional features: ``SHIPPED``, cdk.json as it
is (the HTTP API front, the default since issue 34), the function URL front (``URL``), the HTTP
API front with options, CloudFront in front of each. A single
``synth`` covers them all, and cdk-nag validates them all. Validation failures are recorded,
not raised, so the nag test can list them while the template tests still run
(the templates are written before validation).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stacks.constants import REPO_ROOT

# jsii prints a banner on every start under Node 20; it is noise in test output.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

from aws_cdk import App, Stage, Validations
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from stacks.deployment import build

DEFAULT = "default"
#: cdk.json as it is, nothing overridden: what ``cdk deploy`` builds (the HTTP API front).
SHIPPED = "shipped"
#: The function URL front (``apiType=url``), the cheapest.
URL = "url"
#: CloudFront in front of each front.
URL_EDGE = "url_edge"
HTTP_EDGE = "http_edge"
REST_EDGE = "rest_edge"
SOURCE_URL = "source_url"
UPLOAD_TRIGGER = "upload_trigger"
HTTP_API = "http_api"
EXPORT_MMDB = "export_mmdb"
DATASETS = "datasets"
FEEDS = "feeds"
REPLICAS = "replicas"
REPLICAS_DOMAIN = "replicas_domain"
#: ``ipmeta enrich`` on AWS: the enrich state machine, reading and writing these prefixes only.
ENRICH = "enrich"
EXAMPLE_ENRICH_INPUTS = ("s3://example-logs/access/", "s3://example-inventory/logs-inventory/")
EXAMPLE_ENRICH_OUTPUT = "s3://example-results/enriched/"

EXAMPLE_SOURCE_URL = "https://example.com/ip-metadata.csv"
#: A regional web ACL of the tests' region (the stacks are environment-agnostic).
EXAMPLE_WEB_ACL_ARN = (
    "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/ipmeta-acl/a1b2c3d4-5678-90ab-cdef-0123456789ab"
)
EXAMPLE_ORIGIN = "https://app.example.com"
#: A second site allowed beside it (the edge variant's cache key then needs ``Origin``).
EXAMPLE_OTHER_ORIGIN = "https://maps.example.org"
#: A CloudFront (global) web ACL: created in us-east-1, whatever the stack's region.
EXAMPLE_EDGE_WEB_ACL_ARN = (
    "arn:aws:wafv2:us-east-1:123456789012:global/webacl/ipmeta-edge/b1c2d3e4-5678-90ab-cdef-0123456789ab"
)
#: What every variant has unless it names otherwise: REST, as the stack tests were written for, and
#: the dashboard (an option, off in cdk.json), which ``test_dashboard`` reads in each variant.
DEFAULT_CONTEXT: Mapping[str, Any] = {"apiType": "rest", "dashboard": True}
#: What a GeoIP2 CSV user's triggered loads run with.
EXAMPLE_SOURCE_OPTIONS = {
    "format": "geoip2-csv",
    "locations": "s3://other-bucket/GeoLite2-City-Locations-en.csv",
}

#: A deployment of three datasets: two scheduled, one loaded on upload.
EXAMPLE_DATASETS: Mapping[str, Mapping[str, Any]] = {
    "city": {
        "sourceKey": "datasets/GeoLite2-City.mmdb",
        "scheduleCron": "cron(0 6 ? * WED,SAT *)",
        "maxAgeHours": 96,
    },
    "asn": {"sourceKey": "datasets/GeoLite2-ASN.mmdb", "scheduleCron": "cron(30 6 ? * WED,SAT *)"},
    "blocklist": {
        "sourceKey": "datasets/blocklist.csv",
        "uploadTrigger": True,
        "scheduleEnabled": False,
        "sourceOptions": {"flag_column": "rule"},
    },
}

#: A mirror of one network list (``<list>=URL`` in a network feed's edition).
EXAMPLE_RELAY_MIRROR = "https://mirror.example.com/apple/egress-ip-ranges.csv"
#: The public network lists as one feed of one dataset (``network``), one list on a mirror; no
#: cron: the set's schedule is its most frequent list's (Tor's).
EXAMPLE_NETWORK_FEED: Mapping[str, Any] = {
    "vendor": "network",
    "edition": f"aws,tor,apple-relay={EXAMPLE_RELAY_MIRROR}",
}
#: Four vendor feeds: two MaxMind editions sharing one secret, DB-IP (no secret), IPinfo; and the
#: network lists.
EXAMPLE_FEEDS: tuple[Mapping[str, Any], ...] = (
    {
        "name": "city",
        "vendor": "maxmind",
        "edition": "GeoLite2-City",
        "secret": "ipmeta/maxmind",
        "cron": "cron(0 6 ? * WED,SAT *)",
    },
    {"vendor": "maxmind", "edition": "GeoLite2-ASN", "secret": "ipmeta/maxmind"},
    {"vendor": "dbip", "edition": "country-lite", "cron": "cron(0 7 2 * ? *)"},
    {"vendor": "ipinfo", "edition": "ipinfo_lite", "secret": "ipmeta/ipinfo"},
    EXAMPLE_NETWORK_FEED,
)
#: The feeds' secrets, as Secrets Manager names them: the only ones the fetch function may read.
EXAMPLE_FEED_SECRETS = ("ipmeta/ipinfo", "ipmeta/maxmind")

#: Home's region and the replica regions of the replicas variants (``stacks/deployment.py``).
HOME_REGION = "us-east-1"
EXAMPLE_REPLICA_REGIONS = ("eu-west-1", "ap-southeast-1")
EXAMPLE_DOMAIN = {
    "domainName": "ip.example.com",
    "hostedZoneId": "Z0123456789ABCDEFGHIJ",
    "hostedZoneName": "example.com",
}


def cdk_json() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))
    return document


#: Context overrides of each variant, on top of cdk.json.
VARIANTS: Mapping[str, Mapping[str, Any]] = {
    # ``DEFAULT_CONTEXT`` names REST and the dashboard for the whole app: this stage puts back
    # cdk.json's own front and its dashboard (none).
    SHIPPED: {key: cdk_json()["context"][key] for key in DEFAULT_CONTEXT},
    URL: {"apiType": "url"},
    URL_EDGE: {
        "apiType": "url",
        "edge": True,
        "edgeCacheSeconds": 600,
        "corsAllowOrigins": [EXAMPLE_ORIGIN, EXAMPLE_OTHER_ORIGIN],
        "ipinfoAtRoot": True,
        "lookupReservedConcurrency": 50,
        "accessLogSampleRate": 0.05,
        "wafWebAclArn": EXAMPLE_EDGE_WEB_ACL_ARN,
    },
    HTTP_EDGE: {"apiType": "http", "edge": True},
    REST_EDGE: {"edge": True},
    SOURCE_URL: {
        "billingMode": "provisioned",
        "provisionedReadCapacity": 7,
        "provisionedWriteMaxCapacity": 321,
        "warmReadUnitsPerSecond": 13000,
        "warmWriteUnitsPerSecond": 5000,
        "deletionProtection": False,
        "sourceUrl": EXAMPLE_SOURCE_URL,
        "corsAllowOrigins": [EXAMPLE_ORIGIN],
        "alarmEmail": "ops@example.com",
        "mapMaxConcurrency": 3,
        "apiTracing": True,
        "wafWebAclArn": EXAMPLE_WEB_ACL_ARN,
        "alarmTopicEncryption": False,
    },
    UPLOAD_TRIGGER: {
        "uploadTrigger": True,
        "scheduleEnabled": False,
        "sourceKey": "datasets/GeoLite2-City-Blocks-IPv4.csv",
        "sourceOptions": EXAMPLE_SOURCE_OPTIONS,
    },
    HTTP_API: {
        "apiType": "http",
        "corsAllowOrigins": [EXAMPLE_ORIGIN],
        "apiKeyCacheSeconds": 120,
        "lookupMemoryMb": 192,
        "lookupCacheMb": 16,
        "ipinfoAtRoot": True,
    },
    EXPORT_MMDB: {
        "exportMmdb": True,
    },
    DATASETS: {
        "datasets": EXAMPLE_DATASETS,
        "lookupDatasets": ["blocklist", "city", "asn"],
        # The GeoIP2 web service and ipinfo read the city and ASN data, never the blocklist.
        "geoip2Datasets": {"country": ["city"], "city": ["city", "asn"], "insights": ["city", "asn"]},
        "ipinfoDatasets": ["city", "asn"],
        "ipinfoFields": {"region": "subdivisions.1.names.en"},
        "ipinfoAtRoot": True,
        "showSources": True,
    },
    FEEDS: {
        "feeds": list(EXAMPLE_FEEDS),
        # A fed dataset may be declared for its maximum age (and load options); its feed loads it.
        "datasets": {"city": {"maxAgeHours": 120, "sourceOptions": {"max_errors": 10}}},
        "feedFailuresToAlarm": 3,
    },
    REPLICAS: {"replicaRegions": list(EXAMPLE_REPLICA_REGIONS), "homeRegion": HOME_REGION},
    ENRICH: {"enrichInputs": list(EXAMPLE_ENRICH_INPUTS), "enrichOutputs": [EXAMPLE_ENRICH_OUTPUT]},
    # The HTTP front's keys replicate too; one hostname over both regions.
    REPLICAS_DOMAIN: {
        "replicaRegions": [EXAMPLE_REPLICA_REGIONS[0]],
        "homeRegion": HOME_REGION,
        "apiType": "http",
        **EXAMPLE_DOMAIN,
    },
}
#: Every synthesized variant, the default first.
ALL_VARIANTS = (DEFAULT, *VARIANTS)


def region_template(variant: str, region: str) -> str:
    """The key of a replica region's template in ``Synthesized.templates``."""
    return f"{variant}@{region}"


#: The replica regions' own templates, each with its region.
REGION_TEMPLATES: dict[str, str] = {
    region_template(variant, region): region
    for variant in (REPLICAS, REPLICAS_DOMAIN)
    for region in VARIANTS[variant]["replicaRegions"]
}


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    templates: Mapping[str, dict[str, Any]]
    asset_dirs: Mapping[str, Path]
    validation_error: str | None
    validation_report: dict[str, Any] | None

    def template(self, variant: str = DEFAULT) -> Template:
        return Template.from_json(self.templates[variant])


def stage_name(variant: str) -> str:
    """The stage a variant is built in: ``http_api`` in ``HttpApi``."""
    return "".join(part.capitalize() for part in variant.split("_"))


def synthesize(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The app with every variant, synthesized; ``tests/conftest.py`` makes it a session fixture."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = App(outdir=str(outdir), context={**cdk_json()["context"], **DEFAULT_CONTEXT})
    # As app.py builds it: the home stack, and with replicaRegions each region's stack after it.
    (default,) = build(app)
    stacks = {DEFAULT: default}
    for variant, overrides in VARIANTS.items():
        stage = Stage(app, stage_name(variant))
        for key, value in overrides.items():
            stage.node.set_context(key, value)
        home, *regions = build(stage)
        stacks[variant] = home
        for stack in regions:
            stacks[region_template(variant, stack.region)] = stack
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))

    validation_error: str | None = None
    try:
        app.synth()
    except RuntimeError as error:
        validation_error = str(error)

    templates = {}
    asset_dirs = {}
    for variant, stack in stacks.items():
        stage_dir = Path(Stage.of(stack).outdir)  # type: ignore[union-attr]
        templates[variant] = json.loads((stage_dir / stack.template_file).read_text(encoding="utf-8"))
        asset_dirs[variant] = stage_dir
    report_path = outdir / "validation-report.json"
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else None
    return Synthesized(outdir, templates, asset_dirs, validation_error, report)


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> Template:
    return synthesized.template(DEFAULT)


@pytest.fixture(scope="session")
def resources(synthesized: Synthesized) -> dict[str, Any]:
    resources: dict[str, Any] = synthesized.templates[DEFAULT]["Resources"]
    return resources
