"""Deployment settings, read once from CDK context into a pydantic model.

Every value has a safe default here; ``cdk.json`` repeats the defaults so they
are visible and editable in one place (a test keeps the two equal). Values
given with ``cdk deploy -c key=value`` arrive as strings; pydantic's lax mode
turns ``"12"`` and ``"false"`` into their types and refuses ``"lots"``. Each option's meaning and
bounds are ``options``; the rules between options, ``config_rules``, run once the values are read.
"""

from __future__ import annotations

import dataclasses
import json
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
from stacks import config_rules
from stacks.config_rules import LOG_RETENTION_DAYS
from stacks.constants import DATASETS_PREFIX
from stacks.options import markdown_table

if TYPE_CHECKING:
    from loader.feeds.config import FeedConfig

BILLING_ON_DEMAND: Final = "onDemand"
BILLING_PROVISIONED: Final = "provisioned"

#: The retention periods CloudWatch Logs accepts, in days, in the order
#: RetentionDays declares them (INFINITE aside).
LOG_RETENTION: Final[Mapping[int, logs.RetentionDays]] = dict(
    zip(
        LOG_RETENTION_DAYS,
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


def _lists_schedule(config: FeedConfig) -> str:
    """A ``network`` feed's default schedule (its lists' most frequent); ``""`` for any other feed."""
    from loader.feeds.catalogue import set_schedule

    return set_schedule(config.edition) if config.vendor == "network" else ""


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
    #: Build the CloudWatch dashboard ($3 a month beyond an account's first three): docs/decisions.md,
    #: "The dashboard is an option". The alarms do not depend on it.
    dashboard: bool = False
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
        # A network feed's set of lists runs as often as its most frequent list (docs/feeds.md).
        configs = [(config, cron or _lists_schedule(config)) for config, cron in configs]
        default = self.default_source
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

    @property
    def default_source(self) -> DatasetSource | None:
        """The ``default`` dataset, if the deployment has one."""
        return next((source for source in self.dataset_sources if source.name == DEFAULT_DATASET), None)

    def check_region(self, region: str | None) -> None:
        """Refuse what only the stack's region can tell (``config_rules.region_problem``)."""
        problem = config_rules.region_problem(self, region)
        if problem:
            raise ConfigError(problem)

    @property
    def provisioned(self) -> bool:
        return self.billing_mode == BILLING_PROVISIONED

    @property
    def log_retention(self) -> logs.RetentionDays:
        return LOG_RETENTION[self.log_retention_days]

    @model_validator(mode="after")
    def _usable(self) -> IpmetaConfig:
        """The rules between options (``config_rules``), each problem in one message."""
        problems = config_rules.problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


#: Context key -> default: the documented knobs, as ``cdk.json`` lists them.
DEFAULTS: Final[Mapping[str, Any]] = {
    name if field.alias is None else field.alias: field.default
    for name, field in IpmetaConfig.model_fields.items()
}


if __name__ == "__main__":
    # docs/deploy.md's options table (tests/infra/test_options.py holds the page to it).
    print(markdown_table(DEFAULTS))
