"""The rules between options: what no single option's type or bound can tell.

Each rule is a pure function of the options (``IpmetaConfig``) that returns its problems, each
a message naming the options and what would do instead; ``problems`` runs them all, in this
order, and ``IpmetaConfig`` refuses a deployment with any (``ConfigError`` at synth). A rule
reads the config and never changes it. One rule needs the stack's region too
(``region_problem``), which only the stack knows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ipmeta.schema import keys
from ipmeta.schema.settings import Front
from stacks.constants import CHUNK_PREFIX
from stacks.options import MAX_DATA_AGE_HOURS, range_problems

if TYPE_CHECKING:
    from stacks.config import IpmetaConfig

#: An EventBridge Scheduler expression: cron() with its six fields, or rate().
SCHEDULE_EXPRESSION: Final = re.compile(r"cron\((\S+ ){5}\S+\)|rate\(\d+ (minute|hour|day)s?\)")
#: A WAFv2 web ACL: regional (a REST stage's) or global, in us-east-1 (a CloudFront distribution's).
WEB_ACL_ARN: Final = re.compile(
    r"arn:aws[a-z-]*:wafv2:(?P<region>[a-z]{2}(-[a-z]+)+-\d):\d{12}:"
    r"(?P<scope>regional|global)/webacl/[\w-]{1,128}/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
)
#: An S3 bucket, and optionally a prefix in it: where an enrich job may read or write.
S3_PREFIX: Final = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?")
#: An address SNS can subscribe: something@domain.tld, no spaces.
EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
#: What the warm lookup function holds besides its range cache, rounded up: the
#: runtime, the handler's imports and one DynamoDB client (docs/deploy.md, "Memory").
LOOKUP_BASELINE_MB: Final = 96
#: The retention periods CloudWatch Logs accepts, in days (``config.LOG_RETENTION`` maps them).
LOG_RETENTION_DAYS: Final = (
    *(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180),
    *(365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653),
)

Rule = Callable[["IpmetaConfig"], list[str]]


def _when(broken: bool, message: str) -> list[str]:
    return [message] if broken else []


def web_acl_problems(config: IpmetaConfig) -> list[str]:
    """A regional ACL on the REST stage without ``edge``; a global one on the distribution with it."""
    if not config.waf_web_acl_arn:
        return []
    found = WEB_ACL_ARN.fullmatch(config.waf_web_acl_arn)
    scope = found["scope"] if found else None
    if config.edge:
        return _when(
            scope != "global" or (found is not None and found["region"] != "us-east-1"),
            "wafWebAclArn with edge=true must be a CloudFront (global) web ACL, created in "
            "us-east-1: arn:aws:wafv2:us-east-1:<account>:global/webacl/<name>/<id>",
        )
    return [
        *_when(
            found is None,
            "wafWebAclArn must be a WAFv2 web ACL's ARN: "
            "arn:aws:wafv2:<region>:<account>:regional/webacl/<name>/<id>",
        ),
        *_when(
            scope == "global",
            "wafWebAclArn names a CloudFront (global) web ACL: it takes edge=true (a distribution); "
            "a REST stage takes a regional one",
        ),
        *_when(
            config.api_type is not Front.REST,
            f"wafWebAclArn: AWS WAF cannot be associated with an HTTP API or a function URL "
            f"(apiType={config.api_type.value}); use edge=true with a CloudFront (global) web ACL, "
            "or apiType=rest",
        ),
    ]


def region_problems(config: IpmetaConfig) -> list[str]:
    """Replica regions named once and never home; one hostname with its zone, on a front that takes it."""
    regions, home = config.replica_regions, config.home_region
    hostname = (config.domain_name, config.hosted_zone_id, config.hosted_zone_name)
    return [
        *_when(len(set(regions)) != len(regions), "replicaRegions names a region twice"),
        *_when(
            bool(home) and home in regions,
            f"replicaRegions holds the home region {home}: the table is already there",
        ),
        *_when(
            bool(home) and not keys.REGION_NAME.fullmatch(home),
            "homeRegion must be an AWS region name such as us-east-1",
        ),
        *_when(
            any(hostname) and not all(hostname),
            "domainName, hostedZoneId and hostedZoneName go together: one hostname needs its zone",
        ),
        *_when(
            bool(regions) and bool(config.waf_web_acl_arn),
            "wafWebAclArn with replicaRegions: a regional web ACL serves one region's stage only",
        ),
        *_when(
            bool(regions) and config.edge,
            "edge with replicaRegions: each region's distribution would keep its cached answers "
            "after an activation, which invalidates home's only; choose one",
        ),
        *_when(
            bool(config.domain_name) and (config.api_type is Front.URL or config.edge),
            "domainName needs apiType=http or rest without edge: the one hostname is an API "
            "Gateway custom domain per region, and a function URL or a distribution takes none",
        ),
    ]


def bound_problems(config: IpmetaConfig) -> list[str]:
    """Numbers no deployment can mean (``stacks.options``: sizes Lambda has not, throttles that stop
    every request, caches longer than anyone keeps them), and an email that is no address."""
    values = {field.alias or name: getattr(config, name) for name, field in type(config).model_fields.items()}
    return [
        *range_problems(values),
        *_when(
            bool(config.alarm_email) and not EMAIL.fullmatch(config.alarm_email),
            "alarmEmail must be an email address such as ops@example.com",
        ),
    ]


def schedule_problems(config: IpmetaConfig) -> list[str]:
    """Every schedule (the top-level one, each dataset's, each feed's) is one EventBridge Scheduler reads."""
    crons = {
        "scheduleCron": config.schedule_cron,
        **{f"scheduleCron of {source.name}": source.schedule_cron for source in config.dataset_sources},
        **{f"cron of feed {feed.name}": feed.cron for feed in config.feed_sources},
    }
    return [
        f"{key} must be a schedule expression such as cron(0 3 * * ? *) or rate(12 hours)"
        for key, cron in crons.items()
        if not SCHEDULE_EXPRESSION.fullmatch(cron)
    ]


def log_retention_problems(config: IpmetaConfig) -> list[str]:
    return _when(
        config.log_retention_days not in LOG_RETENTION_DAYS,
        f"logRetentionDays must be one of {sorted(LOG_RETENTION_DAYS)}",
    )


def grace_problems(config: IpmetaConfig) -> list[str]:
    # Cleanup deletes the old version's items; a lookup container may still
    # hold the old pointer for pointerCacheSeconds after activation.
    return _when(
        config.activation_grace_seconds <= config.pointer_cache_seconds,
        "activationGraceSeconds must exceed pointerCacheSeconds",
    )


def source_url_problems(config: IpmetaConfig) -> list[str]:
    return _when(
        bool(config.source_url) and config.default_source is None,
        "sourceUrl keeps the default dataset current: declare 'default' in datasets, "
        "or name the URL in feeds as a url feed",
    )


def feed_problems(config: IpmetaConfig) -> list[str]:
    """Each dataset has one loader: one feed, and never a feed and an upload trigger together."""
    names = [feed.name for feed in config.feed_sources]
    triggered = {source.name for source in config.dataset_sources if source.upload_trigger}
    # Two loaders of one dataset would replace each other's versions.
    return [
        *(
            f"two feeds load dataset {name}: name each feed's dataset"
            for name in sorted(set(names))
            if names.count(name) > 1
        ),
        *(
            f"uploadTrigger and a feed (or sourceUrl) both load dataset {name}"
            for name in sorted(set(names))
            if name in triggered
        ),
    ]


def source_key_problems(config: IpmetaConfig) -> list[str]:
    return [
        f"sourceKey of {source.name} must name an object outside the chunk prefix"
        for source in config.dataset_sources
        if not source.source_key or source.source_key.startswith(f"{CHUNK_PREFIX}/")
    ]


def max_age_problems(config: IpmetaConfig) -> list[str]:
    return [
        f"maxAgeHours of {source.name} must be 1..{MAX_DATA_AGE_HOURS}"
        for source in config.dataset_sources
        if not 1 <= source.max_age_hours <= MAX_DATA_AGE_HOURS
    ]


def lookup_cache_problems(config: IpmetaConfig) -> list[str]:
    # A cache the function cannot hold beside its code ends in out-of-memory kills.
    return _when(
        config.lookup_cache_mb > config.lookup_memory_mb - LOOKUP_BASELINE_MB,
        f"lookupCacheMb must be 0..lookupMemoryMb - {LOOKUP_BASELINE_MB}",
    )


#: Every rule, in the order its messages are reported.
def enrich_problems(config: IpmetaConfig) -> list[str]:
    """Where an enrich job may read and where it may write come together, as S3 prefixes."""
    return [
        *_when(
            bool(config.enrich_inputs) != bool(config.enrich_outputs),
            "enrichInputs and enrichOutputs go together: where a job may read, and where it may write",
        ),
        *(
            f"enrichInputs and enrichOutputs hold s3://bucket/prefix/ addresses, not {uri!r}"
            for uri in (*config.enrich_inputs, *config.enrich_outputs)
            if not S3_PREFIX.fullmatch(uri)
        ),
    ]


RULES: Final[tuple[Rule, ...]] = (
    web_acl_problems,
    region_problems,
    bound_problems,
    schedule_problems,
    log_retention_problems,
    grace_problems,
    source_url_problems,
    feed_problems,
    source_key_problems,
    max_age_problems,
    lookup_cache_problems,
    enrich_problems,
)


def problems(config: IpmetaConfig) -> list[str]:
    """What every rule finds wrong with ``config``, in order; none for a deployable one."""
    return [problem for rule in RULES for problem in rule(config)]


def web_acl_region(arn: str) -> str | None:
    """The region of a regional web ACL, or None (a global one's region is CloudFront's, us-east-1,
    whatever the stack's; an ARN the rules refuse has none)."""
    found = WEB_ACL_ARN.fullmatch(arn)
    return found["region"] if found and found["scope"] == "regional" else None


def region_problem(config: IpmetaConfig, region: str | None) -> str | None:
    """What only the stack's region can tell: a regional web ACL of another region cannot be
    associated (None: an environment-agnostic stack, whose region is known at deploy only)."""
    acl_region = web_acl_region(config.waf_web_acl_arn)
    if region and acl_region and acl_region != region:
        return (
            f"wafWebAclArn is a web ACL of {acl_region}, but the stack deploys to {region}: "
            "a REST stage can only be associated with a web ACL of its own region"
        )
    return None
