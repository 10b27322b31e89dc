"""Deployment settings, read once from CDK context into a pydantic model.

Every value has a safe default here; ``cdk.json`` repeats the defaults so they
are visible and editable in one place (a test keeps the two equal). Values
given with ``cdk deploy -c key=value`` arrive as strings; pydantic's lax mode
turns ``"12"`` and ``"false"`` into their types and refuses ``"lots"``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from aws_cdk import aws_logs as logs
from constructs import Node
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ipmeta.schema import keys
from ipmeta.schema.keys import DEFAULT_DATASET
from ipmeta.schema.settings import DEFAULT_FRONT, Front
from stacks.constants import CHUNK_PREFIX, DATASETS_PREFIX

if TYPE_CHECKING:
    from loader.feeds.config import FeedConfig

BILLING_ON_DEMAND: Final = "onDemand"
BILLING_PROVISIONED: Final = "provisioned"

#: Child executions a Distributed Map of the loader runs at once, at most: far beyond what a
#: table absorbs (each writer does ~1,000 items/s), and within Step Functions' 10,000.
_MAX_MAP_CONCURRENCY: Final = 1000
#: CloudWatch evaluates at most 7 days of hourly periods.
_MAX_DATA_AGE_HOURS: Final = 7 * 24
#: A feed's alarm fires after at most this many failed runs in a row.
_MAX_FEED_FAILURES_TO_ALARM: Final = 100
#: API Gateway caches an HTTP API authorizer's answer for at most an hour.
_MAX_API_KEY_CACHE_SECONDS: Final = 3600
#: CloudFront keeps an answer at most a year; an activation invalidates it anyway.
_MAX_EDGE_CACHE_SECONDS: Final = 365 * 24 * 3600
#: Reserved concurrency a lookup function may hold, at most (an account's default quota).
_MAX_RESERVED_CONCURRENCY: Final = 1000
#: Lambda's memory sizes, in MB.
_MIN_MEMORY_MB: Final = 128
_MAX_MEMORY_MB: Final = 10_240
#: How long a lookup container may trust the active-version pointer, at most.
_MAX_POINTER_CACHE_SECONDS: Final = 3600
#: A throttle (requests per second, or a burst) beyond any account's reach. API Gateway's
#: account quota is 10,000 requests per second unless raised; zero or less stops every request.
_MAX_THROTTLE: Final = 1_000_000
#: An EventBridge Scheduler expression: cron() with its six fields, or rate().
_SCHEDULE_EXPRESSION: Final = re.compile(r"cron\((\S+ ){5}\S+\)|rate\(\d+ (minute|hour|day)s?\)")
#: A WAFv2 web ACL: regional (a REST stage's) or global, in us-east-1 (a CloudFront distribution's).
_WEB_ACL_ARN: Final = re.compile(
    r"arn:aws[a-z-]*:wafv2:(?P<region>[a-z]{2}(-[a-z]+)+-\d):\d{12}:"
    r"(?P<scope>regional|global)/webacl/[\w-]{1,128}/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
)
#: An address SNS can subscribe: something@domain.tld, no spaces.
_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
#: What the warm lookup function holds besides its range cache, rounded up: the
#: runtime, the handler's imports and one DynamoDB client (docs/deploy.md, "Memory").
LOOKUP_BASELINE_MB: Final = 96

_RETENTION_DAYS_SHORT: Final = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180)
_RETENTION_DAYS_LONG: Final = (365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
#: The retention periods CloudWatch Logs accepts, in days, in the order
#: RetentionDays declares them (INFINITE aside).
LOG_RETENTION: Final[Mapping[int, logs.RetentionDays]] = dict(
    zip(
        (*_RETENTION_DAYS_SHORT, *_RETENTION_DAYS_LONG),
        [days for days in logs.RetentionDays if days is not logs.RetentionDays.INFINITE],
        strict=True,
    )
)


class ConfigError(ValueError):
    """A context value is present but unusable."""


def _relative_key(value: Any) -> Any:
    """An object key, written with or without a leading slash."""
    return value.strip().lstrip("/") if isinstance(value, str) else value


def _checked_options(value: Any, key: str = "sourceOptions") -> Any:
    """Load options as an execution's ``options``: a JSON object the loader itself accepts.

    ``-c sourceOptions='{"format": "mmdb"}'`` arrives as JSON text.
    """
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    if isinstance(value, dict):
        from loader.options import LoadOptions

        try:
            options = LoadOptions.from_event(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{key}: {error}") from None
        # The loader's functions read only from S3: a local path cannot exist there.
        if options.locations is not None and not options.locations.startswith("s3://"):
            raise ValueError(f"{key}: locations must be an s3:// URI")
    return value


class DatasetConfig(BaseModel):
    """One dataset of the deployment (context ``datasets``): its source, schedule and freshness.

    Unset fields take the top-level value of the same name (``scheduleCron``,
    ``scheduleEnabled``, ``dataMaxAgeHours`` as ``maxAgeHours``); the source key
    defaults to ``datasets/<name>/current.csv``.
    """

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True, extra="forbid")

    source_key: str | None = None
    source_options: dict[str, Any] = {}
    schedule_cron: str | None = None
    schedule_enabled: bool | None = None
    upload_trigger: bool = False
    max_age_hours: int | None = None

    _key = field_validator("source_key", mode="before")(_relative_key)
    _options = field_validator("source_options", mode="before")(_checked_options)


@dataclass(frozen=True)
class DatasetSource:
    """A dataset as the stack builds it: every field resolved against the top-level defaults."""

    name: str
    source_key: str
    source_options: Mapping[str, Any]
    schedule_cron: str
    schedule_enabled: bool
    upload_trigger: bool
    max_age_hours: int

    @property
    def construct_suffix(self) -> str:
        return construct_suffix(self.name)


def construct_suffix(dataset: str) -> str:
    """``""`` for ``default`` (its constructs keep the ids they had before datasets), else ``City``."""
    if dataset == DEFAULT_DATASET:
        return ""
    return "".join(part.capitalize() for part in dataset.split("-"))


def _checked_feed(value: Any, index: int) -> None:
    """One entry of ``feeds``, checked by the feeds' own parser (``FeedConfig.from_dict``).

    An unknown key is refused, so a licence key or a token can never be put in
    ``cdk.json``; the errors name keys, never values.
    """
    from loader.errors import LoadError
    from loader.feeds.config import FeedConfig

    if not isinstance(value, dict):
        raise ValueError(f"feeds[{index}]: expected an object such as {{'vendor': 'maxmind', ...}}")
    if not isinstance(value.get("cron", ""), str):
        raise ValueError(f"feeds[{index}]: cron is a schedule expression such as cron(0 6 ? * WED,SAT *)")
    try:
        FeedConfig.from_dict(value)
    except LoadError as error:
        raise ValueError(f"feeds[{index}]: {error}") from None


def _name_list(value: Any, check: Callable[[str], str]) -> Any:
    """A context list of names, as a JSON list or comma-separated, each name ``check``ed."""
    if isinstance(value, str):
        stripped = value.strip()
        value = json.loads(stripped) if stripped.startswith("[") else stripped.split(",")
    if isinstance(value, list):
        value = [check(str(name).strip()) for name in value if str(name).strip()]
    return value


def _check_geoip2_datasets(value: Mapping[str, Any]) -> None:
    from ipmeta.shapes.geoip2_document import SERVICES

    for service, names in value.items():
        if service not in SERVICES:
            raise ValueError(f"geoip2Datasets: no service {service!r}; the services: {', '.join(SERVICES)}")
        for name in names if isinstance(names, list) else [names]:
            keys.check_dataset_name(str(name))


def _check_ipinfo_fields(value: Mapping[str, Any]) -> None:
    from ipmeta.shapes.ipinfo_document import field_map

    field_map(value)


@dataclass(frozen=True)
class FeedSource:
    """A feed as the stack builds it: its settings, its schedule, and its dataset's load options."""

    config: FeedConfig
    cron: str
    schedule_enabled: bool
    #: The ``sourceOptions`` of its dataset, if ``datasets`` declares it (``sourceUrl``: the default's).
    options: Mapping[str, Any]

    @property
    def name(self) -> str:
        """Its dataset: what a run's input names (``{"feed": "city"}``) and its constructs end with."""
        return self.config.dataset_name

    @property
    def construct_suffix(self) -> str:
        return construct_suffix(self.name)


class IpmetaConfig(BaseModel):
    """The documented knobs of the stack; each field's alias is its context key (``billingMode``)."""

    # A refused value is not repeated in the error: a ``feeds`` entry could hold a key by mistake.
    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        hide_input_in_errors=True,
    )

    billing_mode: Literal["onDemand", "provisioned"] = BILLING_ON_DEMAND
    provisioned_read_capacity: int = 5
    provisioned_write_max_capacity: int = 100
    warm_read_units_per_second: int = 0
    warm_write_units_per_second: int = 0
    deletion_protection: bool = True
    lookup_memory_mb: int = 256
    loader_memory_mb: int = 1024
    pointer_cache_seconds: int = 5
    api_throttle_rate_limit: int = 500
    api_throttle_burst_limit: int = 1000
    usage_plan_rate_limit: int = 100
    usage_plan_burst_limit: int = 200
    usage_plan_quota_limit: int = 10_000_000
    usage_plan_quota_period: Literal["DAY", "WEEK", "MONTH"] = "MONTH"
    cors_allow_origins: list[str] = []
    log_retention_days: int = 30
    map_max_concurrency: int = 8
    activation_grace_seconds: int = 60
    schedule_enabled: bool = True
    schedule_cron: str = "cron(0 3 * * ? *)"
    source_key: str = f"{DATASETS_PREFIX}/current.csv"
    upload_trigger: bool = False
    source_url: str = ""
    data_max_age_hours: int = 48
    alarm_email: str = ""
    #: The lookup API's front (``ipmeta.schema.settings.Front``): docs/decisions.md, "The default front".
    api_type: Front = DEFAULT_FRONT
    api_tracing: bool = False
    api_key_cache_seconds: int = 300
    #: ``apiType=url``: the lookup function's reserved concurrency, its throttle (0: none reserved).
    lookup_reserved_concurrency: int = 20
    #: ``apiType=url``: the share of answers the function's access log records (4xx and 5xx: all).
    access_log_sample_rate: float = 0.01
    #: CloudFront in front of the front, caching lookup answers (``stacks/fronts/edge.py``).
    edge: bool = False
    #: ``edge``: how long CloudFront keeps a lookup answer; every activation invalidates them.
    edge_cache_seconds: int = 3600
    lookup_cache_mb: int = 32
    #: The lookup function's metrics line: counts in memory, one EMF line a minute at most per container.
    lookup_metrics: bool = True
    export_mmdb: bool = False
    #: The load options of scheduled and upload-triggered loads (an execution's ``options``):
    #: ``{"format": "geoip2-csv", "locations": "s3://…/Locations-en.csv"}``, say.
    source_options: dict[str, Any] = {}
    #: Each dataset with its source, schedule and freshness (``DatasetConfig``), by name. Empty:
    #: the ``default`` dataset alone, from ``sourceKey``, ``sourceOptions`` and ``scheduleCron``.
    datasets: dict[str, DatasetConfig] = {}
    #: The datasets a lookup reads without ``?datasets=``, in precedence order (the merged
    #: view's fields come from the first that has them). Empty: every dataset, by name.
    lookup_datasets: list[str] = []
    #: Vendor feeds, each kept current in its own dataset (``FeedConfig.from_dict`` plus ``cron``):
    #: ``[{"name": "city", "vendor": "maxmind", "edition": "GeoLite2-City", "secret": "ipmeta/maxmind"}]``.
    feeds: list[dict[str, Any]] = []
    #: A feed's alarm fires when this many of its runs failed in a row.
    feed_failures_to_alarm: int = 2
    #: The datasets each GeoIP2 web service reads (``{"city": ["city", "asn"]}``); a service
    #: not named reads what a lookup reads, each dataset giving the fields its columns hold.
    geoip2_datasets: dict[str, list[str]] = {}
    #: The datasets the ipinfo routes read, in precedence order; empty: what a lookup reads.
    ipinfo_datasets: list[str] = []
    #: ipinfo field -> the column(s) it reads, replacing that field's defaults
    #: (``ipmeta.shapes.ipinfo_document``).
    ipinfo_fields: dict[str, Any] = {}
    #: Serve the ipinfo routes at the API's root too, so ipinfo's own client works with no path.
    ipinfo_at_root: bool = False
    #: A WAFv2 web ACL (``""``: none): a regional one for the REST API's stage, or with ``edge`` a
    #: global (CLOUDFRONT-scope) one for the distribution.
    waf_web_acl_arn: str = ""
    #: Encrypt the alarm topic with a customer-managed KMS key that CloudWatch may use.
    alarm_topic_encryption: bool = True
    #: Show each version's sources whole in ``/v1/datasets`` (bucket, keys, URLs) rather than by
    #: file name: an admin's choice, as every key holder reads that listing.
    show_sources: bool = False
    #: Regions that get a replica of the table and a lookup stack of their own
    #: (``stacks/regions/replicas.py``, docs/deploy.md, "Several regions"). Empty: one region, as before.
    replica_regions: list[str] = []
    #: The home stack's region, which replicas need known at synth (default: ``CDK_DEFAULT_REGION``,
    #: the region of the CLI's profile).
    home_region: str = ""
    #: One hostname for every region's front: Route 53 latency records, with health checks, in the
    #: hosted zone ``hostedZoneId`` / ``hostedZoneName`` (``stacks/regions/regional_hostname.py``).
    domain_name: str = ""
    hosted_zone_id: str = ""
    hosted_zone_name: str = ""
    #: A replica region whose pointer has trailed home's this long raises its ``RegionBehind`` alarm.
    replica_lag_alarm_minutes: int = 30
    #: ``ipmeta enrich`` on AWS (``stacks/load/enrich_workflow.py``): the ``s3://bucket/prefix/`` the job may
    #: read (inputs and manifests) and write (outputs). Both empty: no enrich state machine.
    enrich_inputs: list[str] = []
    enrich_outputs: list[str] = []

    @classmethod
    def from_node(cls, node: Node) -> IpmetaConfig:
        given = {key: value for key in DEFAULTS if (value := node.try_get_context(key)) is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as error:
            raise ConfigError(str(error)) from None

    @field_validator("api_type", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("usage_plan_quota_period", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("replica_regions", mode="before")
    @classmethod
    def _region_list(cls, value: Any) -> Any:
        """``-c replicaRegions='["eu-west-1","ap-southeast-1"]'`` or ``eu-west-1,ap-southeast-1``."""
        return _name_list(value, keys.check_region_name)

    @field_validator(
        "source_url",
        "alarm_email",
        "waf_web_acl_arn",
        "home_region",
        "domain_name",
        "hosted_zone_id",
        "hosted_zone_name",
        mode="before",
    )
    @classmethod
    def _trimmed(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    _key = field_validator("source_key", mode="before")(_relative_key)
    _options = field_validator("source_options", mode="before")(_checked_options)

    @field_validator("source_url")
    @classmethod
    def _https_source(cls, value: str) -> str:
        """Checked as the ``url`` feed it becomes: a plain ``http://`` is refused here, at synth."""
        from loader.errors import LoadError
        from loader.feeds.config import FeedConfig

        if not value:
            return value
        try:
            FeedConfig("url", value, dataset=DEFAULT_DATASET)
        except LoadError as error:
            raise ValueError(f"sourceUrl: {error}") from None
        return value

    @field_validator("datasets", mode="before")
    @classmethod
    def _dataset_map(cls, value: Any) -> Any:
        """``-c datasets='{"city": {...}}'`` arrives as JSON text; names must be dataset names."""
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if isinstance(value, dict):
            for name in value:
                keys.check_dataset_name(str(name))
        return value

    @field_validator("geoip2_datasets", "ipinfo_fields", mode="before")
    @classmethod
    def _client_api_map(cls, value: Any, info: ValidationInfo) -> Any:
        """``-c geoip2Datasets='{"city": ["city", "asn"]}'`` and ``-c ipinfoFields='{"city": "town"}'``
        arrive as JSON text; each is checked as the lookup function reads it."""
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if isinstance(value, dict):
            (_check_geoip2_datasets if info.field_name == "geoip2_datasets" else _check_ipinfo_fields)(value)
        return value

    @field_validator("lookup_datasets", "ipinfo_datasets", mode="before")
    @classmethod
    def _dataset_list(cls, value: Any) -> Any:
        """``-c lookupDatasets=city,asn`` or a JSON list; each a dataset name."""
        return _name_list(value, keys.check_dataset_name)

    @field_validator("feeds", mode="before")
    @classmethod
    def _feed_list(cls, value: Any) -> Any:
        """``-c feeds='[...]'`` arrives as JSON text; each feed is checked as the fetch function reads it."""
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else []
        if isinstance(value, list):
            for index, feed in enumerate(value):
                _checked_feed(feed, index)
        return value

    @property
    def feed_sources(self) -> list[FeedSource]:
        """Every feed: ``feeds``, and ``sourceUrl`` as a ``url`` feed into the ``default`` dataset."""
        from loader.feeds.config import FeedConfig

        configs = [(FeedConfig.from_dict(feed), str(feed.get("cron") or "")) for feed in self.feeds]
        default = self._default_source()
        if self.source_url:
            url = FeedConfig("url", self.source_url, dataset=DEFAULT_DATASET)
            configs.append((url, default.schedule_cron if default else ""))
        sources = []
        for config, cron in configs:
            declared = next(
                (source for source in self.dataset_sources if source.name == config.dataset_name), None
            )
            sources.append(
                FeedSource(
                    dataclasses.replace(config, dataset=config.dataset_name),
                    cron or self.schedule_cron,
                    declared.schedule_enabled if declared else self.schedule_enabled,
                    declared.source_options if declared else {},
                )
            )
        return sources

    @property
    def fed_datasets(self) -> set[str]:
        """The datasets a feed loads: their source keys are not scheduled (the feed's schedule is)."""
        return {feed.name for feed in self.feed_sources}

    @property
    def dataset_sources(self) -> list[DatasetSource]:
        """The datasets: ``datasets``; with neither it nor ``feeds``, ``default`` from the top-level keys."""
        if not self.datasets and not self.feeds:
            return [
                DatasetSource(
                    DEFAULT_DATASET,
                    self.source_key,
                    self.source_options,
                    self.schedule_cron,
                    self.schedule_enabled,
                    self.upload_trigger,
                    self.data_max_age_hours,
                )
            ]
        return [
            DatasetSource(
                name,
                dataset.source_key or f"{DATASETS_PREFIX}/{name}/current.csv",
                dataset.source_options,
                dataset.schedule_cron or self.schedule_cron,
                self.schedule_enabled if dataset.schedule_enabled is None else dataset.schedule_enabled,
                dataset.upload_trigger,
                dataset.max_age_hours or self.data_max_age_hours,
            )
            for name, dataset in self.datasets.items()
        ]

    @field_validator("cors_allow_origins", mode="before")
    @classmethod
    def _origin_list(cls, value: Any) -> Any:
        """``-c corsAllowOrigins=a,b`` and ``-c corsAllowOrigins='["a"]'`` both name a list."""
        if not isinstance(value, str):
            return value
        stripped = value.strip()
        if stripped.startswith("["):
            return json.loads(stripped)
        return [item.strip() for item in stripped.split(",") if item.strip()]

    def _default_source(self) -> DatasetSource | None:
        return next((source for source in self.dataset_sources if source.name == DEFAULT_DATASET), None)

    @property
    def web_acl_region(self) -> str | None:
        """The region of a regional ``wafWebAclArn``, or None without one (a global one's region is
        CloudFront's, us-east-1, whatever the stack's; one the rules refuse has none)."""
        found = _WEB_ACL_ARN.fullmatch(self.waf_web_acl_arn)
        return found["region"] if found and found["scope"] == "regional" else None

    def check_region(self, region: str | None) -> None:
        """Refuse what only the stack's region can tell: a regional web ACL of another region cannot
        be associated (None: an environment-agnostic stack, whose region is known at deploy only)."""
        acl_region = self.web_acl_region
        if region and acl_region and acl_region != region:
            raise ConfigError(
                f"wafWebAclArn is a web ACL of {acl_region}, but the stack deploys to {region}: "
                "a REST stage can only be associated with a web ACL of its own region"
            )

    @property
    def provisioned(self) -> bool:
        return self.billing_mode == BILLING_PROVISIONED

    @property
    def log_retention(self) -> logs.RetentionDays:
        return LOG_RETENTION[self.log_retention_days]

    @model_validator(mode="after")
    def _usable(self) -> IpmetaConfig:
        problems = [message for broken, message in self._rules() if broken]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _feed_rules(self) -> list[tuple[bool, str]]:
        names = [feed.name for feed in self.feed_sources]
        triggered = {source.name for source in self.dataset_sources if source.upload_trigger}
        return [
            *(
                (names.count(name) > 1, f"two feeds load dataset {name}: name each feed's dataset")
                for name in sorted(set(names))
            ),
            # Two loaders of one dataset would replace each other's versions.
            *(
                (name in triggered, f"uploadTrigger and a feed (or sourceUrl) both load dataset {name}")
                for name in sorted(set(names))
            ),
            (
                not 1 <= self.feed_failures_to_alarm <= _MAX_FEED_FAILURES_TO_ALARM,
                f"feedFailuresToAlarm must be 1..{_MAX_FEED_FAILURES_TO_ALARM}",
            ),
        ]

    def _waf_rules(self) -> list[tuple[bool, str]]:
        """A regional ACL on the REST stage without ``edge``; a global one on the distribution with it."""
        if not self.waf_web_acl_arn:
            return []
        found = _WEB_ACL_ARN.fullmatch(self.waf_web_acl_arn)
        scope = found["scope"] if found else None
        if self.edge:
            return [
                (
                    scope != "global" or (found is not None and found["region"] != "us-east-1"),
                    "wafWebAclArn with edge=true must be a CloudFront (global) web ACL, created in "
                    "us-east-1: arn:aws:wafv2:us-east-1:<account>:global/webacl/<name>/<id>",
                ),
            ]
        return [
            (
                found is None,
                "wafWebAclArn must be a WAFv2 web ACL's ARN: "
                "arn:aws:wafv2:<region>:<account>:regional/webacl/<name>/<id>",
            ),
            (
                scope == "global",
                "wafWebAclArn names a CloudFront (global) web ACL: it takes edge=true (a distribution); "
                "a REST stage takes a regional one",
            ),
            (
                self.api_type is not Front.REST,
                f"wafWebAclArn: AWS WAF cannot be associated with an HTTP API or a function URL "
                f"(apiType={self.api_type.value}); use edge=true with a CloudFront (global) web ACL, "
                "or apiType=rest",
            ),
        ]

    def _url_rules(self) -> list[tuple[bool, str]]:
        """The function URL's throttle and access log, and the edge's cache."""
        return [
            (
                not 0 <= self.lookup_reserved_concurrency <= _MAX_RESERVED_CONCURRENCY,
                f"lookupReservedConcurrency must be 0 (none reserved)..{_MAX_RESERVED_CONCURRENCY}",
            ),
            (
                not 0.0 <= self.access_log_sample_rate <= 1.0,
                "accessLogSampleRate must be a share from 0 to 1",
            ),
            (
                not 0 <= self.edge_cache_seconds <= _MAX_EDGE_CACHE_SECONDS,
                f"edgeCacheSeconds must be 0..{_MAX_EDGE_CACHE_SECONDS}",
            ),
        ]

    def _region_rules(self) -> list[tuple[bool, str]]:
        regions = self.replica_regions
        hostname = (self.domain_name, self.hosted_zone_id, self.hosted_zone_name)
        return [
            (len(set(regions)) != len(regions), "replicaRegions names a region twice"),
            (
                bool(self.home_region) and self.home_region in regions,
                f"replicaRegions holds the home region {self.home_region}: the table is already there",
            ),
            (
                bool(self.home_region) and not keys.REGION_NAME.fullmatch(self.home_region),
                "homeRegion must be an AWS region name such as us-east-1",
            ),
            (
                any(hostname) and not all(hostname),
                "domainName, hostedZoneId and hostedZoneName go together: one hostname needs its zone",
            ),
            (
                bool(regions) and bool(self.waf_web_acl_arn),
                "wafWebAclArn with replicaRegions: a regional web ACL serves one region's stage only",
            ),
            (
                bool(regions) and self.edge,
                "edge with replicaRegions: each region's distribution would keep its cached answers "
                "after an activation, which invalidates home's only; choose one",
            ),
            (
                bool(self.domain_name) and (self.api_type is Front.URL or self.edge),
                "domainName needs apiType=http or rest without edge: the one hostname is an API "
                "Gateway custom domain per region, and a function URL or a distribution takes none",
            ),
            (
                not 1 <= self.replica_lag_alarm_minutes <= _MAX_DATA_AGE_HOURS * 60,
                f"replicaLagAlarmMinutes must be 1..{_MAX_DATA_AGE_HOURS * 60}",
            ),
        ]

    def _bound_rules(self) -> list[tuple[bool, str]]:
        """Numbers no deployment can mean: sizes Lambda has not, throttles that stop every request."""
        throttles = {
            "apiThrottleRateLimit": self.api_throttle_rate_limit,
            "apiThrottleBurstLimit": self.api_throttle_burst_limit,
            "usagePlanRateLimit": self.usage_plan_rate_limit,
            "usagePlanBurstLimit": self.usage_plan_burst_limit,
        }
        memory = {"lookupMemoryMb": self.lookup_memory_mb, "loaderMemoryMb": self.loader_memory_mb}
        return [
            *(
                (
                    not _MIN_MEMORY_MB <= size <= _MAX_MEMORY_MB,
                    f"{key} must be {_MIN_MEMORY_MB}..{_MAX_MEMORY_MB}",
                )
                for key, size in memory.items()
            ),
            *(
                (not 1 <= limit <= _MAX_THROTTLE, f"{key} must be 1..{_MAX_THROTTLE} requests per second")
                for key, limit in throttles.items()
            ),
            (self.usage_plan_quota_limit < 1, "usagePlanQuotaLimit must be at least 1: 0 refuses every key"),
            (
                not 0 <= self.pointer_cache_seconds <= _MAX_POINTER_CACHE_SECONDS,
                f"pointerCacheSeconds must be 0..{_MAX_POINTER_CACHE_SECONDS}",
            ),
            (
                min(self.provisioned_read_capacity, self.provisioned_write_max_capacity) < 1,
                "provisionedReadCapacity and provisionedWriteMaxCapacity must be at least 1",
            ),
            (
                min(self.warm_read_units_per_second, self.warm_write_units_per_second) < 0,
                "warmReadUnitsPerSecond and warmWriteUnitsPerSecond must be 0 (off) or more",
            ),
            (
                bool(self.alarm_email) and not _EMAIL.fullmatch(self.alarm_email),
                "alarmEmail must be an email address such as ops@example.com",
            ),
        ]

    def _schedule_rules(self) -> list[tuple[bool, str]]:
        crons = {
            "scheduleCron": self.schedule_cron,
            **{f"scheduleCron of {source.name}": source.schedule_cron for source in self.dataset_sources},
            **{f"cron of feed {feed.name}": feed.cron for feed in self.feed_sources},
        }
        return [
            (
                not _SCHEDULE_EXPRESSION.fullmatch(cron),
                f"{key} must be a schedule expression such as cron(0 3 * * ? *) or rate(12 hours)",
            )
            for key, cron in crons.items()
        ]

    def _enrich_rules(self) -> list[tuple[bool, str]]:
        return [
            (
                bool(self.enrich_inputs) != bool(self.enrich_outputs),
                "enrichInputs and enrichOutputs go together: where a job may read, and where it may write",
            ),
            *(
                (
                    not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?", uri),
                    f"enrichInputs and enrichOutputs hold s3://bucket/prefix/ addresses, not {uri!r}",
                )
                for uri in (*self.enrich_inputs, *self.enrich_outputs)
            ),
        ]

    def _rules(self) -> list[tuple[bool, str]]:
        return [
            *self._waf_rules(),
            *self._region_rules(),
            *self._bound_rules(),
            *self._schedule_rules(),
            (
                self.log_retention_days not in LOG_RETENTION,
                f"logRetentionDays must be one of {sorted(LOG_RETENTION)}",
            ),
            (
                not 1 <= self.map_max_concurrency <= _MAX_MAP_CONCURRENCY,
                f"mapMaxConcurrency must be 1..{_MAX_MAP_CONCURRENCY}",
            ),
            (
                not 1 <= self.data_max_age_hours <= _MAX_DATA_AGE_HOURS,
                f"dataMaxAgeHours must be 1..{_MAX_DATA_AGE_HOURS}",
            ),
            # Cleanup deletes the old version's items; a lookup container may still
            # hold the old pointer for pointerCacheSeconds after activation.
            (
                self.activation_grace_seconds <= self.pointer_cache_seconds,
                "activationGraceSeconds must exceed pointerCacheSeconds",
            ),
            (
                bool(self.source_url) and self._default_source() is None,
                "sourceUrl keeps the default dataset current: declare 'default' in datasets, "
                "or name the URL in feeds as a url feed",
            ),
            *self._feed_rules(),
            *(
                (
                    not source.source_key or source.source_key.startswith(f"{CHUNK_PREFIX}/"),
                    f"sourceKey of {source.name} must name an object outside the chunk prefix",
                )
                for source in self.dataset_sources
            ),
            *(
                (
                    not 1 <= source.max_age_hours <= _MAX_DATA_AGE_HOURS,
                    f"maxAgeHours of {source.name} must be 1..{_MAX_DATA_AGE_HOURS}",
                )
                for source in self.dataset_sources
            ),
            (
                not 0 <= self.api_key_cache_seconds <= _MAX_API_KEY_CACHE_SECONDS,
                f"apiKeyCacheSeconds must be 0..{_MAX_API_KEY_CACHE_SECONDS}",
            ),
            *self._url_rules(),
            *self._enrich_rules(),
            # A cache the function cannot hold beside its code ends in out-of-memory kills.
            (
                not 0 <= self.lookup_cache_mb <= self.lookup_memory_mb - LOOKUP_BASELINE_MB,
                f"lookupCacheMb must be 0..lookupMemoryMb - {LOOKUP_BASELINE_MB}",
            ),
        ]


#: Context key -> default: the documented knobs, as ``cdk.json`` lists them.
DEFAULTS: Final[Mapping[str, Any]] = {
    name if field.alias is None else field.alias: field.default
    for name, field in IpmetaConfig.model_fields.items()
}
