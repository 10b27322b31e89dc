"""Deployment settings, read once from CDK context.

Every value has a safe default here; ``cdk.json`` repeats the defaults so they
are visible and editable in one place (a test keeps the two equal). Values
given with ``cdk deploy -c key=value`` arrive as strings, so each reader
accepts both the JSON type and its string form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from aws_cdk import aws_logs as logs
from constructs import Node

from stacks.constants import CHUNK_PREFIX, DATASETS_PREFIX

BILLING_ON_DEMAND: Final = "onDemand"
BILLING_PROVISIONED: Final = "provisioned"

#: Context key -> default. The keys are the documented knobs of the stack.
DEFAULTS: Final[Mapping[str, Any]] = {
    "billingMode": BILLING_ON_DEMAND,
    "provisionedReadCapacity": 5,
    "provisionedWriteMaxCapacity": 100,
    "warmReadUnitsPerSecond": 0,
    "warmWriteUnitsPerSecond": 0,
    "deletionProtection": True,
    "lookupMemoryMb": 256,
    "loaderMemoryMb": 1024,
    "pointerCacheSeconds": 5,
    "apiThrottleRateLimit": 500,
    "apiThrottleBurstLimit": 1000,
    "usagePlanRateLimit": 100,
    "usagePlanBurstLimit": 200,
    "usagePlanQuotaLimit": 10_000_000,
    "usagePlanQuotaPeriod": "MONTH",
    "corsAllowOrigins": [],
    "logRetentionDays": 30,
    "mapMaxConcurrency": 8,
    "activationGraceSeconds": 60,
    "scheduleEnabled": True,
    "scheduleCron": "cron(0 3 * * ? *)",
    "sourceKey": f"{DATASETS_PREFIX}/current.csv",
    "uploadTrigger": False,
    "sourceUrl": "",
    "dataMaxAgeHours": 48,
    "alarmEmail": "",
}

_QUOTA_PERIODS: Final = ("DAY", "WEEK", "MONTH")
#: Inline Map runs at most 40 iterations at once.
_MAX_INLINE_MAP_CONCURRENCY: Final = 40
#: CloudWatch evaluates at most 7 days of hourly periods.
_MAX_DATA_AGE_HOURS: Final = 7 * 24

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

T = TypeVar("T")


class ConfigError(ValueError):
    """A context value is present but unusable."""


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"context {key!r} must be true or false, got {value!r}")


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"context {key!r} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"context {key!r} must be an integer, got {value!r}") from error


def _as_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"context {key!r} must be a string, got {value!r}")
    return value


def _as_str_list(key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            value = json.loads(stripped)
        else:
            value = [item.strip() for item in stripped.split(",") if item.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"context {key!r} must be a list of strings, got {value!r}")
    return value


def _read(node: Node, key: str, parse: Callable[[str, Any], T]) -> T:
    value = node.try_get_context(key)
    return parse(key, DEFAULTS[key] if value is None else value)


@dataclass(frozen=True, slots=True)
class IpmetaConfig:
    billing_mode: str
    provisioned_read_capacity: int
    provisioned_write_max_capacity: int
    warm_read_units_per_second: int
    warm_write_units_per_second: int
    deletion_protection: bool
    lookup_memory_mb: int
    loader_memory_mb: int
    pointer_cache_seconds: int
    api_throttle_rate_limit: int
    api_throttle_burst_limit: int
    usage_plan_rate_limit: int
    usage_plan_burst_limit: int
    usage_plan_quota_limit: int
    usage_plan_quota_period: str
    cors_allow_origins: list[str]
    log_retention_days: int
    map_max_concurrency: int
    activation_grace_seconds: int
    schedule_enabled: bool
    schedule_cron: str
    source_key: str
    upload_trigger: bool
    source_url: str
    data_max_age_hours: int
    alarm_email: str

    @classmethod
    def from_node(cls, node: Node) -> IpmetaConfig:
        config = cls(
            billing_mode=_read(node, "billingMode", _as_str),
            provisioned_read_capacity=_read(node, "provisionedReadCapacity", _as_int),
            provisioned_write_max_capacity=_read(node, "provisionedWriteMaxCapacity", _as_int),
            warm_read_units_per_second=_read(node, "warmReadUnitsPerSecond", _as_int),
            warm_write_units_per_second=_read(node, "warmWriteUnitsPerSecond", _as_int),
            deletion_protection=_read(node, "deletionProtection", _as_bool),
            lookup_memory_mb=_read(node, "lookupMemoryMb", _as_int),
            loader_memory_mb=_read(node, "loaderMemoryMb", _as_int),
            pointer_cache_seconds=_read(node, "pointerCacheSeconds", _as_int),
            api_throttle_rate_limit=_read(node, "apiThrottleRateLimit", _as_int),
            api_throttle_burst_limit=_read(node, "apiThrottleBurstLimit", _as_int),
            usage_plan_rate_limit=_read(node, "usagePlanRateLimit", _as_int),
            usage_plan_burst_limit=_read(node, "usagePlanBurstLimit", _as_int),
            usage_plan_quota_limit=_read(node, "usagePlanQuotaLimit", _as_int),
            usage_plan_quota_period=_read(node, "usagePlanQuotaPeriod", _as_str).upper(),
            cors_allow_origins=_read(node, "corsAllowOrigins", _as_str_list),
            log_retention_days=_read(node, "logRetentionDays", _as_int),
            map_max_concurrency=_read(node, "mapMaxConcurrency", _as_int),
            activation_grace_seconds=_read(node, "activationGraceSeconds", _as_int),
            schedule_enabled=_read(node, "scheduleEnabled", _as_bool),
            schedule_cron=_read(node, "scheduleCron", _as_str),
            source_key=_read(node, "sourceKey", _as_str).lstrip("/"),
            upload_trigger=_read(node, "uploadTrigger", _as_bool),
            source_url=_read(node, "sourceUrl", _as_str).strip(),
            data_max_age_hours=_read(node, "dataMaxAgeHours", _as_int),
            alarm_email=_read(node, "alarmEmail", _as_str).strip(),
        )
        config._validate()
        return config

    @property
    def provisioned(self) -> bool:
        return self.billing_mode == BILLING_PROVISIONED

    @property
    def log_retention(self) -> logs.RetentionDays:
        return LOG_RETENTION[self.log_retention_days]

    def _validate(self) -> None:
        if self.billing_mode not in (BILLING_ON_DEMAND, BILLING_PROVISIONED):
            raise ConfigError(
                f"billingMode must be {BILLING_ON_DEMAND!r} or {BILLING_PROVISIONED!r}, "
                f"got {self.billing_mode!r}"
            )
        if self.log_retention_days not in LOG_RETENTION:
            raise ConfigError(f"logRetentionDays must be one of {sorted(LOG_RETENTION)}")
        if self.usage_plan_quota_period not in _QUOTA_PERIODS:
            raise ConfigError(f"usagePlanQuotaPeriod must be one of {_QUOTA_PERIODS}")
        if not 1 <= self.map_max_concurrency <= _MAX_INLINE_MAP_CONCURRENCY:
            raise ConfigError(f"mapMaxConcurrency must be 1..{_MAX_INLINE_MAP_CONCURRENCY}")
        if not 1 <= self.data_max_age_hours <= _MAX_DATA_AGE_HOURS:
            raise ConfigError(f"dataMaxAgeHours must be 1..{_MAX_DATA_AGE_HOURS}")
        # Cleanup deletes the old version's items; a lookup container may still
        # hold the old pointer for pointerCacheSeconds after activation.
        if self.activation_grace_seconds <= self.pointer_cache_seconds:
            raise ConfigError("activationGraceSeconds must exceed pointerCacheSeconds")
        # FetchSource writes the source key, and that write would start the next load.
        if self.upload_trigger and self.source_url:
            raise ConfigError("uploadTrigger and sourceUrl cannot both be set")
        if not self.source_key or self.source_key.startswith(f"{CHUNK_PREFIX}/"):
            raise ConfigError("sourceKey must name an object outside the chunk prefix")
