"""Every deployment option, once: what it means and the bounds the stack holds it to.

``IpmetaConfig`` (``config``) declares each option's type and default; this table gives each
its description and, for a number, the bounds ``range_problems`` refuses outside of, so the
code's bound and the documented one are the same value. docs/deploy.md's options table is
``markdown_table()`` (``python -m stacks.config`` prints it; ``tests/infra/test_options.py``
fails when the page differs, or when an option has no description here). The rules between
options (a cache within its memory, a grace beyond the pointer cache, a web ACL for the front)
are ``config_rules``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: Lambda's memory sizes, in MB.
MIN_MEMORY_MB: Final = 128
MAX_MEMORY_MB: Final = 10_240
#: Child executions a Distributed Map of the loader runs at once, at most: far beyond what a
#: table absorbs (each writer does ~1,000 items/s), and within Step Functions' 10,000.
MAX_MAP_CONCURRENCY: Final = 1000
#: CloudWatch evaluates at most 7 days of hourly periods.
MAX_DATA_AGE_HOURS: Final = 7 * 24
#: A feed's alarm fires after at most this many failed runs in a row.
MAX_FEED_FAILURES_TO_ALARM: Final = 100
#: API Gateway caches an authorizer's answer for at most an hour; a container trusts the
#: active-version pointer at most as long.
MAX_CACHE_SECONDS: Final = 3600
#: CloudFront keeps an answer at most a year; an activation invalidates it anyway.
MAX_EDGE_CACHE_SECONDS: Final = 365 * 24 * 3600
#: Reserved concurrency a lookup function may hold, at most (an account's default quota).
MAX_RESERVED_CONCURRENCY: Final = 1000
#: A throttle (requests per second, or a burst) beyond any account's reach. API Gateway's
#: account quota is 10,000 requests per second unless raised; zero or less stops every request.
MAX_THROTTLE: Final = 1_000_000


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


@dataclass(frozen=True)
class Option:
    """One option: its meaning, and for a number the least and the most it may be."""

    description: str
    low: float | None = None
    high: float | None = None

    def bounds(self) -> str:
        """The bounds as the table writes them: ``1–1000``, ``≥ 1``, or nothing."""
        if self.low is None:
            return ""
        if self.high is None:
            return f"≥ {_number(self.low)}"
        return f"{_number(self.low)}–{_number(self.high)}"

    def problem(self, key: str, value: float) -> str | None:
        """Why ``value`` is refused for ``key``, or None."""
        if self.low is None or (self.low <= value and (self.high is None or value <= self.high)):
            return None
        if self.high is None:
            return f"{key} must be at least {_number(self.low)}"
        return f"{key} must be {_number(self.low)}..{_number(self.high)}"


#: Context key -> option, in ``IpmetaConfig``'s order.
OPTIONS: Final[Mapping[str, Option]] = {
    "billingMode": Option("`onDemand` or `provisioned` table capacity"),
    "provisionedReadCapacity": Option("Fixed read capacity units (provisioned only)", low=1),
    "provisionedWriteMaxCapacity": Option("Write capacity autoscales up to this (provisioned only)", low=1),
    "warmReadUnitsPerSecond": Option("Pre-warmed read throughput of the table (0: off)", low=0),
    "warmWriteUnitsPerSecond": Option(
        "Pre-warmed write throughput (0: off); set it before a big first load so writes are not "
        "throttled while partitions split",
        low=0,
    ),
    "deletionProtection": Option("DynamoDB deletion protection of the table"),
    "lookupMemoryMb": Option(
        "Memory (and so CPU) of the lookup function",
        low=MIN_MEMORY_MB,
        high=MAX_MEMORY_MB,
    ),
    "loaderMemoryMb": Option("Memory of each loader function", low=MIN_MEMORY_MB, high=MAX_MEMORY_MB),
    "pointerCacheSeconds": Option(
        "How long a lookup container trusts the active-version pointer",
        low=0,
        high=MAX_CACHE_SECONDS,
    ),
    "apiThrottleRateLimit": Option(
        "Stage-wide throttle (API Gateway fronts): requests per second",
        low=1,
        high=MAX_THROTTLE,
    ),
    "apiThrottleBurstLimit": Option(
        "Stage-wide throttle (API Gateway fronts): the burst, in requests",
        low=1,
        high=MAX_THROTTLE,
    ),
    "usagePlanRateLimit": Option(
        "`rest`: throttle per API key, requests per second",
        low=1,
        high=MAX_THROTTLE,
    ),
    "usagePlanBurstLimit": Option("`rest`: throttle per API key, the burst", low=1, high=MAX_THROTTLE),
    "usagePlanQuotaLimit": Option("`rest`: quota per API key, requests per `usagePlanQuotaPeriod`", low=1),
    "usagePlanQuotaPeriod": Option("`rest`: the quota's period: `DAY`, `WEEK` or `MONTH`"),
    "corsAllowOrigins": Option(
        "Browser origins allowed to call the API (none: off); on the CLI: `-c "
        "corsAllowOrigins=https://a.example,https://b.example`",
    ),
    "logRetentionDays": Option(
        "Retention of every log group (a CloudWatch Logs value: 1, 3, 5, 7, 14, 30, 60, 90, ...)",
    ),
    "mapMaxConcurrency": Option("Chunks written at once during a load", low=1, high=MAX_MAP_CONCURRENCY),
    "activationGraceSeconds": Option(
        "Wait between activation and cleanup of the old version; must exceed `pointerCacheSeconds`",
    ),
    "scheduleEnabled": Option("Run the reload schedule"),
    "scheduleCron": Option("EventBridge Scheduler expression (UTC); daily at 03:00"),
    "sourceKey": Option("Object in the source bucket that scheduled and triggered loads read"),
    "uploadTrigger": Option("Start a load whenever `sourceKey` is uploaded"),
    "sourceUrl": Option(
        "An https URL kept current in the `default` dataset (empty: off): a `url` feed on the default"
        " dataset's schedule and `sourceOptions` ([Vendor "
        "feeds](#vendor-feeds-maxmind-db-ip-ipinfo-a-url)). Cannot be combined with `uploadTrigger`",
    ),
    "dataMaxAgeHours": Option(
        "Alarm (and `/v1/health`) when no version was activated for this long; each dataset's default"
        " `maxAgeHours`",
        low=1,
        high=MAX_DATA_AGE_HOURS,
    ),
    "alarmEmail": Option("Subscribe this address to the alarm topic (checked to be an address at synth)"),
    "apiType": Option(
        "The front ([below](#the-api-fronts-and-cloudfront)): `http` (API Gateway's HTTP API, a key "
        "authorizer; the default), `url` (the function's own URL, the key checked in the function; "
        "the cheapest) or `rest` (API keys, usage plans)",
    ),
    "apiTracing": Option("X-Ray tracing of the API and the lookup function"),
    "apiKeyCacheSeconds": Option(
        "`url`: how long a container keeps the keys it read from the secret; `http`: how long API "
        "Gateway caches the authorizer's answer per key; `rest`: not used (its authorizers judge "
        "every request, so a request without a key is told its route's key forms)",
        low=0,
        high=MAX_CACHE_SECONDS,
    ),
    "lookupReservedConcurrency": Option(
        "`url`: the lookup function's reserved concurrency, the front's throttle (0: none reserved; "
        "Lambda keeps 100 of an account's concurrency unreserved)",
        low=0,
        high=MAX_RESERVED_CONCURRENCY,
    ),
    "accessLogSampleRate": Option(
        "`url`: the share of answers the function's access log records; every 4xx and 5xx is recorded",
        low=0,
        high=1,
    ),
    "edge": Option(
        "CloudFront in front of the front, caching lookup answers ([below](#cloudfront-in-front-edge))",
    ),
    "edgeCacheSeconds": Option(
        "`edge`: how long CloudFront keeps a lookup answer at most; every activation invalidates the cache",
        low=0,
        high=MAX_EDGE_CACHE_SECONDS,
    ),
    "lookupCacheMb": Option(
        "Range cache of each lookup container (0 turns it off); at most `lookupMemoryMb` − 96",
        low=0,
    ),
    "lookupMetrics": Option(
        "The lookup function's metrics line: lookups, range-cache hits and misses, Queries, answers "
        "by status family, counted in memory and published as one EMF line a minute at most per "
        "container ([below](#the-dashboard-and-the-metrics)); `false`: none "
        "(`POWERTOOLS_METRICS_DISABLED`)",
    ),
    "exportMmdb": Option(
        "Write each new version as a MaxMind DB to `exports/<version>.mmdb` in the source bucket "
        "before activating it (see [Exporting a MaxMind DB](#exporting-a-maxmind-db))",
    ),
    "sourceOptions": Option(
        "Load options of scheduled and triggered loads, as an execution's `options`: `-c "
        'sourceKey=datasets/GeoLite2-City-Blocks-IPv4.csv -c sourceOptions=\'{"format": "geoip2-csv", '
        '"locations": "s3://BUCKET/datasets/GeoLite2-City-Locations-en.csv"}\'`. A `.mmdb` key needs '
        "none: its name picks the format",
    ),
    "datasets": Option(
        "The deployment's datasets, by name, each with its source, options, schedule and maximum age "
        "([Several datasets](#several-datasets)). Empty: the `default` dataset alone, from "
        "`sourceKey`, `sourceOptions`, `scheduleCron` and `uploadTrigger`",
    ),
    "lookupDatasets": Option(
        "The datasets a lookup reads without `?datasets=`, in precedence order: the merged view takes"
        " each field from the first that has it. Empty: every dataset, in name order. `-c "
        "lookupDatasets=blocklist,city,asn`",
    ),
    "feeds": Option(
        'Vendor feeds, each kept current in a dataset of its own: `[{"name": "city", "vendor": '
        '"maxmind", "edition": "GeoLite2-City", "secret": "ipmeta/maxmind", "cron": "cron(0 6 ? * '
        'WED,SAT *)"}]` ([Vendor feeds](#vendor-feeds-maxmind-db-ip-ipinfo-a-url)). The public network '
        'lists as one feed of one dataset: `{"vendor": "network", "edition": "aws,tor,apple-relay"}` '
        "(any list may name its own https URL, `tor=https://mirror/exits.txt`; one schedule for the "
        "set, by default its most frequent list's: [docs/feeds.md](feeds.md)). With feeds, the "
        "implicit `default` dataset (top-level `sourceKey`…) is there only if `datasets` declares it",
    ),
    "feedFailuresToAlarm": Option(
        "A feed's alarm (`FeedFailing<Name>`) fires when this many of its runs failed in a row",
        low=1,
        high=MAX_FEED_FAILURES_TO_ALARM,
    ),
    "geoip2Datasets": Option(
        'The datasets each GeoIP2 web service reads: `{"country": ["city"], "city": ["city", "asn"], '
        '"insights": ["city", "asn"]}`. A service not named reads what a lookup reads, each dataset '
        "giving the fields its columns hold ([API](api.md#the-geoip2-web-service-and-ipinfo)). "
        "Services and names are checked at synth",
    ),
    "ipinfoDatasets": Option(
        "The datasets ipinfo's routes read, in precedence order. Empty: what a lookup reads. `-c "
        "ipinfoDatasets=city,asn`",
    ),
    "ipinfoFields": Option(
        'ipinfo field → the column(s) it reads, replacing that field\'s defaults: `{"city": "town", '
        '"loc": ["lat", "lng"], "org": ["asn", "as_name"]}`; checked at synth by the function\'s own '
        "parser",
    ),
    "ipinfoAtRoot": Option(
        "Serve ipinfo's routes at the API's root as well (`/8.8.8.8`, `POST /batch`), so the ipinfo "
        "client's `API_URL` needs no path",
    ),
    "wafWebAclArn": Option(
        "A WAFv2 web ACL (empty: none; [below](#a-waf-web-acl-and-the-alarm-topics-key)): a regional "
        "one on the REST API's stage, or with `edge` a CloudFront (global) one on the distribution; "
        "refused on an HTTP API or a function URL without `edge`",
    ),
    "alarmTopicEncryption": Option(
        "Encrypt the alarm topic with a customer-managed KMS key CloudWatch may use "
        "([below](#a-waf-web-acl-and-the-alarm-topics-key)); `false`: unencrypted, no key",
    ),
    "dashboard": Option(
        "Build the CloudWatch dashboard ([below](#the-dashboard-and-the-metrics)): $3 a month at list "
        "price beyond an account's first three; the alarms and their topic are there either way",
    ),
    "showSources": Option(
        "An admin option: `/v1/datasets` shows each version's sources whole (the source bucket's name"
        " and keys, feed URLs with their query) instead of each file's name. Every key holder reads "
        "that listing, so leave it off unless every key holder may see them (`IPMETA_SHOW_SOURCES` on"
        " the lookup function; `ipmeta serve --show-sources` locally)",
    ),
    "replicaRegions": Option(
        "Regions that get a replica of the table and a lookup stack of their own (none: one region): "
        '`-c replicaRegions=\'["eu-west-1","ap-southeast-1"]\'` ([Several regions](#several-regions))',
    ),
    "homeRegion": Option(
        "The home stack's region, needed at synth with `replicaRegions` (empty: the CLI's "
        "`CDK_DEFAULT_REGION`)",
    ),
    "domainName": Option(
        "One hostname for every region's front: latency records with health checks in the Route 53 "
        "zone `hostedZoneId` / `hostedZoneName` ([Several regions](#one-hostname))",
    ),
    "hostedZoneId": Option("`domainName`: the id of the Route 53 hosted zone that holds it"),
    "hostedZoneName": Option("`domainName`: the name of that hosted zone"),
    "replicaLagAlarmMinutes": Option(
        "A replica region whose pointer has trailed home's this long raises its `RegionBehind` alarm",
        low=1,
        high=MAX_DATA_AGE_HOURS * 60,
    ),
    "enrichInputs": Option(
        "`ipmeta enrich` on AWS: the `s3://bucket/prefix/` addresses a job may read (inputs and "
        "manifests); with `enrichOutputs`, builds the enrich state machine ([enrich](enrich.md#on-aws))",
    ),
    "enrichOutputs": Option(
        "`ipmeta enrich` on AWS: the `s3://bucket/prefix/` addresses a job may write; empty with "
        "`enrichInputs`: no enrich state machine",
    ),
}


def range_problems(values: Mapping[str, Any]) -> list[str]:
    """Each option of ``values`` (context key -> value) outside its bounds, as a message."""
    return [
        problem
        for key, option in OPTIONS.items()
        if key in values and (problem := option.problem(key, values[key])) is not None
    ]


def _default_text(value: Any) -> str:
    text = json.dumps(value.value if hasattr(value, "value") else value)
    return f"`{text.strip(chr(34)) if isinstance(value, str) and value else text}`"


def markdown_table(defaults: Mapping[str, Any]) -> str:
    """docs/deploy.md's options table: every option with its default, bounds and meaning."""
    rows = ["| Key | Default | Bounds | Meaning |", "| --- | --- | --- | --- |"]
    for key, option in OPTIONS.items():
        rows.append(
            f"| `{key}` | {_default_text(defaults[key])} | {option.bounds()} | {option.description} |"
        )
    return "\n".join(rows)
