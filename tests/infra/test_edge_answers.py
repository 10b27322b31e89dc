"""What a caller gets through CloudFront: the template's cache in front of the real lookup handler.

The template's distribution and cache policy drive a local stand-in of CloudFront's cache
(``tests.infra.cloudfront``), in front of the real Lambda handler answering from a stand-in store:

- with two CORS origins, each site's page gets its own ``Access-Control-Allow-Origin``, never the
  other's cached answer (``Origin`` is in the cache key whenever CORS is on);
- an error is never cached: a caller's own-address error (it names the address) never reaches the
  next caller with the same key, for every 4xx and 5xx CloudFront would cache;
- a lookup answer is cached (it says ``public``) until an invalidation empties the cache.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest

from ipmeta.api import dependencies
from ipmeta.api.app import app, cors_config
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import ApiSettings
from ipmeta.store.dynamodb import Store
from ipmeta_cli.server import LocalLambdaContext, proxy_event
from stacks.constants import ENV_CORS_ORIGINS, LOOKUP_HANDLER
from testing.stub_store import SlashTwentyFourStore
from tests.infra.cfn import function_by_handler
from tests.infra.cloudfront import CACHED_ERRORS, Answer, CloudFrontStandIn, only_distribution
from tests.infra.conftest import HTTP_EDGE, REST_EDGE, URL_EDGE, VARIANTS, Synthesized
from tests.infra.test_edge import EDGES, lookup_cache

LOOKUP = "/v1/ip/8.8.8.8"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def real_handler(method: str, path: str, query: str, headers: Mapping[str, str], viewer: str) -> Answer:
    from ipmeta.api.handler import handler

    raw = f"{path}?{query}" if query else path
    response = handler(proxy_event(method, raw, dict(headers), b"", viewer), LocalLambdaContext())
    answered = dict(response.get("headers") or {})
    answered |= {name: values[-1] for name, values in (response.get("multiValueHeaders") or {}).items()}
    return Answer(int(response["statusCode"]), answered, response["body"])


class TenIsAGap(SlashTwentyFourStore):
    """Every address in its own /24, but none in 10.0.0.0/8: a caller there is told its address."""

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None:
        return (
            None
            if partition_key.rsplit("#", 1)[1] == "10"
            else super().find_range_piece(partition_key, sort_key)
        )


@pytest.fixture
def origin(monkeypatch: pytest.MonkeyPatch, synthesized: Synthesized) -> Iterator[None]:
    """The handler with the URL_EDGE function's CORS origins, answering from a store of /24s
    (none in 10.0.0.0/8)."""
    _, function = function_by_handler(synthesized.templates[URL_EDGE], LOOKUP_HANDLER)
    origins = function["Properties"]["Environment"]["Variables"][ENV_CORS_ORIGINS].split(",")
    monkeypatch.setattr(app, "_cors", cors_config(ApiSettings(cors_origins=tuple(origins))))
    monkeypatch.setattr(app, "_cors_enabled", True)
    dependencies.install(
        dependencies.Dependencies(
            store=cast(Store, TenIsAGap({"asn": 15169})),
            pointer_cache_seconds=0.0,
            ranges=RangeCache(0),
        )
    )
    yield
    dependencies.install(None)


def test_two_cors_origins_are_both_in_the_cache_key_and_errors_are_kept_zero_seconds(
    synthesized: Synthesized,
) -> None:
    template = synthesized.templates[URL_EDGE]
    assert len(VARIANTS[URL_EDGE]["corsAllowOrigins"]) == 2
    _, cache = lookup_cache(template)
    headers = cache["ParametersInCacheKeyAndForwardedToOrigin"]["HeadersConfig"]["Headers"]
    assert "Origin" in headers
    for variant in EDGES:
        errors = only_distribution(synthesized.templates[variant])["CustomErrorResponses"]
        ttls = {response["ErrorCode"]: response["ErrorCachingMinTTL"] for response in errors}
        assert set(ttls) >= CACHED_ERRORS - {410}, variant  # 410 has no setting; ipmeta never answers it
        assert set(ttls.values()) == {0}, variant
    # No CORS, no Origin in the key: one cache entry for every page
    for variant in (HTTP_EDGE, REST_EDGE):
        _, plain = lookup_cache(synthesized.templates[variant])
        assert "Origin" not in plain["ParametersInCacheKeyAndForwardedToOrigin"]["HeadersConfig"]["Headers"]


@pytest.mark.usefixtures("origin")
def test_each_site_gets_its_own_cors_answer_through_the_edge(synthesized: Synthesized) -> None:
    # Given the distribution of a deployment that allows two sites, and the cache warm for one
    first, second = VARIANTS[URL_EDGE]["corsAllowOrigins"]
    edge = CloudFrontStandIn(synthesized.templates[URL_EDGE], real_handler, Clock())
    answered = edge.request("GET", LOOKUP, headers={"Origin": first}, viewer="203.0.113.7")
    assert answered.status == 200
    assert answered.header("Access-Control-Allow-Origin") == first
    assert (
        edge.request("GET", LOOKUP, headers={"Origin": first}).header("Access-Control-Allow-Origin") == first
    )
    assert edge.origin_requests == 1  # cached: the answer says public
    # When the other site's page asks the same
    other = edge.request("GET", LOOKUP, headers={"Origin": second}, viewer="198.51.100.9")
    # Then it gets its own header, which its browser accepts
    assert other.header("Access-Control-Allow-Origin") == second
    # And a request with no Origin (curl) gets no CORS header from a site's cached answer
    assert edge.request("GET", LOOKUP).header("Access-Control-Allow-Origin") is None


@pytest.mark.usefixtures("origin")
@pytest.mark.parametrize("variant", EDGES)
def test_a_callers_own_address_error_never_reaches_the_next_caller(
    synthesized: Synthesized, variant: str
) -> None:
    clock = Clock()
    edge = CloudFrontStandIn(synthesized.templates[variant], real_handler, clock)
    path = "/geoip/v2.1/city/me"  # the caller's own address, on a cached path
    mine = edge.request("GET", path, viewer="10.1.2.3")
    assert mine.status >= 400, mine
    assert "10.1.2.3" in mine.body
    clock.now += 1
    theirs = edge.request("GET", path, viewer="10.9.8.7")
    assert "10.1.2.3" not in theirs.body, theirs.body
    assert "10.9.8.7" in theirs.body


@pytest.mark.usefixtures("origin")
def test_an_invalidation_empties_what_a_version_answered(synthesized: Synthesized) -> None:
    clock = Clock()
    edge = CloudFrontStandIn(synthesized.templates[URL_EDGE], real_handler, clock)
    edge.request("GET", LOOKUP)
    edge.request("GET", LOOKUP)
    assert edge.origin_requests == 1
    assert edge.invalidate(["/*"]) == 1
    edge.request("GET", LOOKUP)
    assert edge.origin_requests == 2
    # Past edgeCacheSeconds the origin is asked again, invalidation or not
    clock.now += VARIANTS[URL_EDGE]["edgeCacheSeconds"] + 1
    edge.request("GET", LOOKUP)
    assert edge.origin_requests == 3
