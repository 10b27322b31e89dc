"""A local stand-in of CloudFront's cache, configured by a synthesized template.

No CloudFront is reachable here, so this replays what its documentation says it does with the
template's distribution and cache policies, in front of any origin (a function of the request):

- **the behaviour** is the first whose ``PathPattern`` matches, else the default;
- **the cache key** is the path, the query string (``QueryStringBehavior: all``) and the values
  of the policy's listed headers, nothing else: ``Vary`` is ignored, and the managed
  ``CachingDisabled`` policy caches nothing; only ``GET`` and ``HEAD`` are cached;
- **a 2xx's TTL** is the origin's ``s-maxage`` or ``max-age`` held within the policy's ``MinTTL``
  and ``MaxTTL``, the ``DefaultTTL`` without either, and ``MinTTL`` when it says ``private``,
  ``no-store`` or ``no-cache``;
- **an error's TTL** ("Control how long CloudFront caches errors"): the codes CloudFront caches
  are kept for the greater of their Error Caching Minimum TTL (``CustomErrorResponses``, 10 s by
  default) and the origin's ``max-age``; ``private``, ``no-store`` or ``no-cache`` prevents it
  only for 404, 410, 414 and 501; 416 and the codes it does not cache never are;
- **an invalidation** drops every entry whose path matches one of its paths (``*`` at the end).

What it leaves out: CloudFront's many edge locations and regional caches (one cache here),
evictions, compression and the origin request policy (the origin sees the viewer's request).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: CloudFront's managed cache policy that caches nothing.
CACHING_DISABLED: Final = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
#: The 4xx and 5xx CloudFront caches, and how long when no Error Caching Minimum TTL is set.
CACHED_ERRORS: Final = frozenset({400, 403, 404, 405, 410, 414, 500, 501, 502, 503, 504})
DEFAULT_ERROR_TTL: Final = 10
#: The errors an origin's ``private``, ``no-store`` or ``no-cache`` keeps out of the cache.
ERRORS_THAT_HONOUR_NO_CACHE: Final = frozenset({404, 410, 414, 501})
CACHED_METHODS: Final = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers.items() if key.lower() == name.lower()), None)


#: The origin: (method, path, query, the viewer's headers, the viewer's address) to its answer.
Origin = Callable[[str, str, str, Mapping[str, str], str], Answer]


@dataclass
class _Entry:
    answer: Answer
    expires: float


def only_distribution(template: Mapping[str, Any]) -> Mapping[str, Any]:
    [config] = [
        resource["Properties"]["DistributionConfig"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::CloudFront::Distribution"
    ]
    return dict(config)


def behaviour_for(template: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The behaviour CloudFront applies to ``path``: the first whose pattern matches, else the default."""
    config = only_distribution(template)
    for behaviour in config.get("CacheBehaviors", []):
        pattern = re.escape(behaviour["PathPattern"]).replace(r"\*", ".*").replace(r"\?", ".")
        if re.fullmatch(pattern, path):
            return dict(behaviour)
    return dict(config["DefaultCacheBehavior"])


def _directives(cache_control: str | None) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for part in (cache_control or "").split(","):
        name, _, value = part.strip().lower().partition("=")
        if name:
            found[name] = int(value) if value.isdigit() else None
    return found


@dataclass
class CloudFrontStandIn:
    """One edge cache of the template's distribution in front of ``origin``, on ``clock``'s time."""

    template: Mapping[str, Any]
    origin: Origin
    clock: Callable[[], float]
    origin_requests: int = 0
    _entries: dict[tuple[Any, ...], _Entry] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        query: str = "",
        headers: Mapping[str, str] | None = None,
        viewer: str = "",
    ) -> Answer:
        headers = {name.lower(): value for name, value in (headers or {}).items()}
        policy = self._policy(behaviour_for(self.template, path))
        if policy is None or method not in CACHED_METHODS:
            return self._ask(method, path, query, headers, viewer)
        key = self._key(policy, path, query, headers)
        entry = self._entries.get(key)
        if entry is not None and entry.expires > self.clock():
            return entry.answer
        answer = self._ask(method, path, query, headers, viewer)
        ttl = self._ttl(policy, answer)
        if ttl > 0:
            self._entries[key] = _Entry(answer, self.clock() + ttl)
        return answer

    def invalidate(self, paths: list[str]) -> int:
        """Drop what ``paths`` (``/*``-style) match; how many entries went."""
        patterns = [re.escape(path).replace(r"\*", ".*") for path in paths]
        gone = [key for key in self._entries if any(re.fullmatch(pattern, key[0]) for pattern in patterns)]
        for key in gone:
            del self._entries[key]
        return len(gone)

    def _ask(self, method: str, path: str, query: str, headers: Mapping[str, str], viewer: str) -> Answer:
        self.origin_requests += 1
        return self.origin(method, path, query, headers, viewer)

    def _policy(self, behaviour: Mapping[str, Any]) -> Mapping[str, Any] | None:
        policy_id: Any = behaviour["CachePolicyId"]
        if policy_id == CACHING_DISABLED:
            return None
        resource = self.template["Resources"][policy_id["Ref"]]
        return dict(resource["Properties"]["CachePolicyConfig"])

    @staticmethod
    def _key(policy: Mapping[str, Any], path: str, query: str, headers: Mapping[str, str]) -> tuple[Any, ...]:
        key = policy["ParametersInCacheKeyAndForwardedToOrigin"]
        queries = key["QueryStringsConfig"]["QueryStringBehavior"]
        assert queries in ("all", "none"), queries  # what the stand-in knows
        listed = (
            key["HeadersConfig"].get("Headers", [])
            if key["HeadersConfig"]["HeaderBehavior"] != "none"
            else []
        )
        return (path, query if queries == "all" else "", tuple(headers.get(name.lower()) for name in listed))

    def _ttl(self, policy: Mapping[str, Any], answer: Answer) -> float:
        directives = _directives(answer.header("Cache-Control"))
        max_age = directives.get("s-maxage", directives.get("max-age"))
        refused = bool({"private", "no-store", "no-cache"} & directives.keys())
        if answer.status >= 400:
            if answer.status not in CACHED_ERRORS:
                return 0
            if refused and answer.status in ERRORS_THAT_HONOUR_NO_CACHE:
                return 0
            return max(self._error_ttl(answer.status), float(min(max_age or 0, policy["MaxTTL"])))
        if refused:
            return float(policy["MinTTL"])
        if max_age is None:
            return float(policy["DefaultTTL"])
        return float(min(max(max_age, policy["MinTTL"]), policy["MaxTTL"]))

    def _error_ttl(self, status: int) -> float:
        for response in only_distribution(self.template).get("CustomErrorResponses", []):
            if response["ErrorCode"] == status and "ErrorCachingMinTTL" in response:
                return float(response["ErrorCachingMinTTL"])
        return float(DEFAULT_ERROR_TTL)
