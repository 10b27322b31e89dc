"""Hostile input to what the template deploys: the key authorizers, and the stack's own context.

**The authorizers** (``ipmeta.api.fronts.usage_plan_authorizer`` behind REST, ``ipmeta.api.fronts.authorizer``
behind the HTTP API) get API Gateway's REQUEST events carrying keys in every form and
combination, per route family: both headers, a header twice or under two spellings, empty
values, broken Basic, Bearer with spaces, ``?token=`` where the family takes none, huge keys,
NUL bytes, non-ASCII. Every case runs through both handlers and must be admitted with exactly
the key its family's identity header holds, or refused; nothing may raise anything else.

**The context** of ``cdk synth`` (``-c key=value``): each hostile value must stop the stack
at construction with a message that names the setting, before any resource is built. The
stack is constructed for each case (``IpmetaStack`` refuses on its first lines) and never
synthesized: a refusal costs milliseconds, a synth half a minute.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from aws_cdk import App, Environment

from ipmeta.api.fronts import authorizer
from stacks.config import ConfigError
from stacks.constants import STACK_ID
from stacks.ipmeta_stack import IpmetaStack
from tests.authorizer_events import (
    GEOIP2_ROUTE,
    HTTP_KEYS,
    IPINFO_ROUTE,
    ROOT_ROUTE,
    V1_ROUTE,
    admitted_key,
    basic,
)

K = str(HTTP_KEYS["default"])  # a key of the HTTP API's secret (REST hands any key to the usage plan)
B = str(HTTP_KEYS["client-b"])
J = "j" * 40  # key-shaped, but no client's key: only ever sent beside another value
NO_KEY = "junk junk"  # in a family's identity header: the authorizer is invoked, and finds no key
EXAMPLE_ACL = (
    "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/ipmeta/a1b2c3d4-5678-90ab-cdef-0123456789ab"
)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def case(
    case_id: str,
    route: str,
    headers: Sequence[tuple[str, str]] = (),
    query: Sequence[tuple[str, str]] = (),
    admitted: str | None = None,
) -> Any:
    return pytest.param(route, list(headers), list(query), admitted, id=case_id)


AUTHORIZER_CASES = [
    # -- /v1: the x-api-key header, and nothing else ---------------------------------------------
    case("v1-x-api-key", V1_ROUTE, [("x-api-key", K)], admitted=K),
    case("v1-header-name-upper-case", V1_ROUTE, [("X-API-KEY", K)], admitted=K),
    case(
        "v1-both-headers-reads-x-api-key",
        V1_ROUTE,
        [("x-api-key", K), ("Authorization", "Bearer " + B)],
        admitted=K,
    ),
    case(
        "v1-bearer-beside-junk-x-api-key", V1_ROUTE, [("x-api-key", NO_KEY), ("Authorization", "Bearer " + K)]
    ),
    case(
        "v1-basic-beside-junk-x-api-key", V1_ROUTE, [("x-api-key", NO_KEY), ("Authorization", basic("1", K))]
    ),
    case("v1-token-query-not-taken", V1_ROUTE, [("x-api-key", NO_KEY)], [("token", K)]),
    case("v1-x-api-key-twice", V1_ROUTE, [("x-api-key", J), ("x-api-key", K)]),
    case("v1-x-api-key-two-spellings", V1_ROUTE, [("X-Api-Key", J), ("x-api-key", K)]),
    case("v1-x-api-key-empty", V1_ROUTE, [("x-api-key", "")]),
    case("v1-x-api-key-spaces-only", V1_ROUTE, [("x-api-key", "   ")]),
    case("v1-key-129-characters", V1_ROUTE, [("x-api-key", "k" * 129)]),
    case("v1-key-10-kb", V1_ROUTE, [("x-api-key", "k" * 10_000)]),
    case("v1-key-nul-byte", V1_ROUTE, [("x-api-key", K[:20] + "\x00" + K[21:])]),
    case("v1-key-unicode", V1_ROUTE, [("x-api-key", "ķ" * 40)]),
    case("v1-key-comma-joined-pair", V1_ROUTE, [("x-api-key", f"{K},{B}")]),
    case("v1-key-newline-injected", V1_ROUTE, [("x-api-key", K + "\r\nx-api-key: " + B)]),
    # -- /geoip: Basic's password in Authorization -----------------------------------------------
    case("geoip-basic", GEOIP2_ROUTE, [("Authorization", basic("123456", K))], admitted=K),
    case(
        "geoip-scheme-lower-header-upper",
        GEOIP2_ROUTE,
        [("AUTHORIZATION", "basic " + _b64(f"1:{K}".encode()))],
        admitted=K,
    ),
    case(
        "geoip-junk-authorization-valid-x-api-key",
        GEOIP2_ROUTE,
        [("Authorization", "Basic !!"), ("x-api-key", K)],
    ),
    case(
        "geoip-basic-and-another-x-api-key",
        GEOIP2_ROUTE,
        [("Authorization", basic("1", B)), ("x-api-key", K)],
        admitted=B,
    ),
    case("geoip-basic-no-colon", GEOIP2_ROUTE, [("Authorization", "Basic " + _b64(K.encode()))]),
    case("geoip-basic-not-base64", GEOIP2_ROUTE, [("Authorization", "Basic %%%" + K)]),
    case("geoip-basic-empty-password", GEOIP2_ROUTE, [("Authorization", basic("123456", ""))]),
    case("geoip-basic-password-not-utf8", GEOIP2_ROUTE, [("Authorization", "Basic " + _b64(b"1:\xff\xfe"))]),
    case("geoip-basic-password-nul", GEOIP2_ROUTE, [("Authorization", basic("1", "kk\x00kk" * 8))]),
    case("geoip-basic-no-credentials", GEOIP2_ROUTE, [("Authorization", "Basic")]),
    case("geoip-basic-100-kb", GEOIP2_ROUTE, [("Authorization", basic("1", "k" * 100_000))]),
    case("geoip-bearer-not-taken", GEOIP2_ROUTE, [("Authorization", "Bearer " + K)]),
    case("geoip-token-query-not-taken", GEOIP2_ROUTE, [("Authorization", "Basic !!")], [("token", K)]),
    case(
        "geoip-authorization-twice",
        GEOIP2_ROUTE,
        [("Authorization", basic("1", J)), ("Authorization", basic("1", K))],
    ),
    case("geoip-digest-scheme", GEOIP2_ROUTE, [("Authorization", "Digest " + K)]),
    # -- /ipinfo and the root: Bearer or ?token= ---------------------------------------------------
    case("ipinfo-bearer", IPINFO_ROUTE, [("Authorization", "Bearer " + K)], admitted=K),
    case("ipinfo-token", IPINFO_ROUTE, [], [("token", K)], admitted=K),
    case(
        "ipinfo-bearer-and-token-agree",
        IPINFO_ROUTE,
        [("Authorization", "Bearer " + K)],
        [("token", K)],
        admitted=K,
    ),
    case(
        "ipinfo-bearer-and-token-disagree", IPINFO_ROUTE, [("Authorization", "Bearer " + B)], [("token", K)]
    ),
    case(
        "ipinfo-bearer-padded-with-spaces",
        IPINFO_ROUTE,
        [("Authorization", "Bearer    " + K + "   ")],
        admitted=K,
    ),
    case("ipinfo-bearer-with-spaces-inside", IPINFO_ROUTE, [("Authorization", f"Bearer {K[:20]} {K[20:]}")]),
    case("ipinfo-bearer-empty", IPINFO_ROUTE, [("Authorization", "Bearer ")]),
    case("ipinfo-x-api-key-not-taken", IPINFO_ROUTE, [("x-api-key", K)]),
    case("ipinfo-basic-not-taken", IPINFO_ROUTE, [("Authorization", basic("1", K))]),
    case("ipinfo-token-twice", IPINFO_ROUTE, [], [("token", J), ("token", K)]),
    case("ipinfo-token-empty", IPINFO_ROUTE, [], [("token", "")]),
    case("ipinfo-token-param-upper-case", IPINFO_ROUTE, [], [("TOKEN", K)]),
    case("ipinfo-token-huge", IPINFO_ROUTE, [], [("token", "k" * 50_000)]),
    case("root-bearer", ROOT_ROUTE, [("Authorization", "Bearer " + K)], admitted=K),
    case("root-token-unicode", ROOT_ROUTE, [], [("token", "ключ" * 10)]),
    case("unknown-route-family", "/admin/{proxy+}", [("x-api-key", K)]),
    case("no-credentials-at-all", IPINFO_ROUTE),
]


@pytest.fixture(autouse=True)
def http_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(authorizer, "api_keys", lambda: HTTP_KEYS)


@pytest.mark.parametrize("front", ["rest", "http"])
@pytest.mark.parametrize(("route", "headers", "query", "admitted"), AUTHORIZER_CASES)
def test_an_authorizer_admits_its_familys_key_or_refuses(
    front: str,
    route: str,
    headers: list[tuple[str, str]],
    query: list[tuple[str, str]],
    admitted: str | None,
) -> None:
    assert admitted_key(front, route, headers, query) == admitted


# -- the stack's context ---------------------------------------------------------------------------


def refused(case_id: str, context: Mapping[str, Any], message: str, region: str | None = None) -> Any:
    return pytest.param(dict(context), message, region, id=case_id)


CONTEXT_CASES = [
    refused("apiKeyCacheSeconds-negative", {"apiKeyCacheSeconds": -1}, "apiKeyCacheSeconds must be 0..3600"),
    refused("apiKeyCacheSeconds-a-day", {"apiKeyCacheSeconds": 86_400}, "apiKeyCacheSeconds must be 0..3600"),
    refused(
        "pointerCacheSeconds-negative", {"pointerCacheSeconds": -5}, "pointerCacheSeconds must be 0..3600"
    ),
    refused(
        "wafWebAclArn-not-an-arn", {"wafWebAclArn": "my-acl"}, "wafWebAclArn must be a WAFv2 web ACL's ARN"
    ),
    refused(
        "wafWebAclArn-waf-classic",
        {"wafWebAclArn": "arn:aws:waf-regional:us-east-1:123456789012:webacl/a1b2c3d4"},
        "wafWebAclArn must be a WAFv2 web ACL's ARN",
    ),
    refused(
        "wafWebAclArn-cloudfront-scope",
        {"apiType": "rest", "wafWebAclArn": EXAMPLE_ACL.replace(":regional/", ":global/")},
        "CloudFront (global) web ACL: it takes edge=true",
    ),
    refused(
        "wafWebAclArn-regional-on-the-edge",
        {"edge": True, "wafWebAclArn": EXAMPLE_ACL},
        "wafWebAclArn with edge=true must be a CloudFront (global) web ACL",
    ),
    refused(
        "wafWebAclArn-global-outside-us-east-1",
        {
            "edge": True,
            "wafWebAclArn": EXAMPLE_ACL.replace(":regional/", ":global/").replace("us-east-1", "eu-west-1"),
        },
        "created in us-east-1",
    ),
    refused(
        "wafWebAclArn-on-a-function-url",
        {"apiType": "url", "wafWebAclArn": EXAMPLE_ACL},
        "cannot be associated with an HTTP API or a function URL",
    ),
    refused(
        "wafWebAclArn-shell-suffix",
        {"wafWebAclArn": EXAMPLE_ACL + ";rm -rf /"},
        "wafWebAclArn must be a WAFv2 web ACL's ARN",
    ),
    refused(
        "wafWebAclArn-no-such-region",
        {"wafWebAclArn": EXAMPLE_ACL.replace("us-east-1", "moon")},
        "wafWebAclArn must be a WAFv2 web ACL's ARN",
    ),
    refused(
        "wafWebAclArn-wrong-region",
        {"apiType": "rest", "wafWebAclArn": EXAMPLE_ACL},
        "web ACL of us-east-1, but the stack deploys to eu-west-1",
        region="eu-west-1",
    ),
    refused(
        "wafWebAclArn-on-http-api",
        {"apiType": "http", "wafWebAclArn": EXAMPLE_ACL},
        "cannot be associated with an HTTP API or a function URL",
    ),
    refused(
        "apiThrottleRateLimit-negative", {"apiThrottleRateLimit": -1}, "apiThrottleRateLimit must be 1.."
    ),
    refused("apiThrottleBurstLimit-zero", {"apiThrottleBurstLimit": 0}, "apiThrottleBurstLimit must be 1.."),
    refused("usagePlanRateLimit-1e12", {"usagePlanRateLimit": 1e12}, "usagePlanRateLimit must be 1.."),
    refused("usagePlanRateLimit-text-1e12", {"usagePlanRateLimit": "1e12"}, "usagePlanRateLimit"),
    refused(
        "usagePlanBurstLimit-2-to-the-40", {"usagePlanBurstLimit": 2**40}, "usagePlanBurstLimit must be 1.."
    ),
    refused("usagePlanQuotaLimit-zero", {"usagePlanQuotaLimit": 0}, "usagePlanQuotaLimit must be at least 1"),
    refused(
        "usagePlanQuotaLimit-negative", {"usagePlanQuotaLimit": -10}, "usagePlanQuotaLimit must be at least 1"
    ),
    refused("usagePlanQuotaPeriod-year", {"usagePlanQuotaPeriod": "YEAR"}, "usagePlanQuotaPeriod"),
    refused("datasets-name-with-hash", {"datasets": {"city#v1": {}}}, "'city#v1' is not a dataset name"),
    refused("lookupDatasets-name-with-hash", {"lookupDatasets": "asn#1"}, "'asn#1' is not a dataset name"),
    refused(
        "geoip2Datasets-name-with-hash",
        {"geoip2Datasets": {"city": ["city#2"]}},
        "'city#2' is not a dataset name",
    ),
    refused(
        "feeds-name-with-hash",
        {"feeds": [{"name": "a#b", "vendor": "dbip", "edition": "country-lite"}]},
        "'a#b' is not a dataset name",
    ),
    refused("datasets-broken-json", {"datasets": "{broken"}, "datasets"),
    refused("lookupMemoryMb-64", {"lookupMemoryMb": 64}, "lookupMemoryMb must be 128..10240"),
    refused("loaderMemoryMb-a-terabyte", {"loaderMemoryMb": 1_048_576}, "loaderMemoryMb must be 128..10240"),
    refused(
        "scheduleCron-words", {"scheduleCron": "every day at 3"}, "scheduleCron must be a schedule expression"
    ),
    refused(
        "dataset-scheduleCron-five-fields",
        {"datasets": {"city": {"scheduleCron": "cron(0 3 * * *)"}}},
        "scheduleCron of city must be a schedule expression",
    ),
    refused(
        "alarmEmail-not-an-address", {"alarmEmail": "ops at example"}, "alarmEmail must be an email address"
    ),
    refused("logRetentionDays-zero", {"logRetentionDays": 0}, "logRetentionDays must be one of"),
    refused("mapMaxConcurrency-zero", {"mapMaxConcurrency": 0}, "mapMaxConcurrency must be 1..1000"),
    refused("warmWriteUnitsPerSecond-negative", {"warmWriteUnitsPerSecond": -1}, "warmWriteUnitsPerSecond"),
    refused("sourceUrl-plain-http", {"sourceUrl": "http://example.com/ranges.csv"}, "sourceUrl: url:"),
]


@pytest.mark.parametrize(("context", "message", "region"), CONTEXT_CASES)
def test_a_hostile_context_value_stops_the_stack_with_a_clear_message(
    context: dict[str, Any], message: str, region: str | None
) -> None:
    app = App(context=context)
    with pytest.raises(ConfigError) as refusal:
        IpmetaStack(app, STACK_ID, env=Environment(region=region) if region else None)
    assert message in str(refusal.value)
    # Refused before anything was built: the stack holds no construct yet
    assert [child.node.id for child in app.node.find_child(STACK_ID).node.children] == []


def test_a_licence_key_in_the_context_is_refused_without_being_repeated() -> None:
    secret = "abcdEFGH1234_licence"
    app = App(context={"feeds": [{"vendor": "maxmind", "edition": "GeoLite2-City", "licenseKey": secret}]})
    with pytest.raises(ConfigError, match="unknown licenseKey") as refusal:
        IpmetaStack(app, STACK_ID)
    assert secret not in str(refusal.value)
