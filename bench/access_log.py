"""The url front's access log: the bytes of one line, and what a request costs at the default sample.

Through the real handler and a function URL's event (``ipmeta_cli.events``) with the key checked
in the function, every line kept (rate 1), over the shapes a line takes: lookups from an IPv4 and
an IPv6 caller (200), an IPv6 address asked with a refused key (401), a malformed address (400),
an unknown route (404), a GeoIP2 and an ipinfo lookup. Lambda's request ids are UUIDs, as the
local context's are; the stub store answers at once (``testing.stub_store``), so ``ms`` is short,
as a warm lookup's is (two or three digits either way). CloudWatch bills each line's bytes plus 26.

Then the default sample (``accessLogSampleRate`` 0.01) over 20,000 answered lookups, to check the
sampling keeps what the model says it keeps (``loader.planning.costs.UrlLogging``).

    python -m bench.access_log

Saves bench/results/access_log.json.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from ipmeta.api import dependencies
from ipmeta.api.fronts import key_check
from ipmeta.api.handler import handler
from ipmeta.schema.settings import ENV_ACCESS_LOG_SAMPLE_RATE
from ipmeta.store.dynamodb import Store
from ipmeta_cli.events import function_url_event
from ipmeta_cli.server import LocalLambdaContext
from testing.stub_store import SlashTwentyFourStore

RESULTS = Path(__file__).parent / "results" / "access_log.json"
KEY = "k" * 40
CALLER_V4 = "203.0.113.254"
CALLER_V6 = "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe"
BASIC = "Basic " + base64.b64encode(f"123456:{KEY}".encode()).decode()
#: One request of each shape a line takes: (name, path, headers, caller).
SHAPES: tuple[tuple[str, str, dict[str, str], str], ...] = (
    ("lookup-ipv4", "/v1/ip/198.51.100.200", {"x-api-key": KEY}, CALLER_V4),
    ("lookup-from-ipv6", "/v1/ip/198.51.100.200", {"x-api-key": KEY}, CALLER_V6),
    ("lookup-fields", "/v1/ip/198.51.100.200?fields=asn,organization", {"x-api-key": KEY}, CALLER_V4),
    ("geoip2-city", "/geoip/v2.1/city/198.51.100.200", {"authorization": BASIC}, CALLER_V4),
    ("ipinfo", "/ipinfo/198.51.100.200", {"authorization": "Bearer " + KEY}, CALLER_V4),
    ("refused-key-ipv6", "/v1/ip/2001:db8:85a3:1234:5678:8a2e:370:7334", {"x-api-key": "wrong"}, CALLER_V6),
    ("malformed-address", "/v1/ip/999.1.1.1", {"x-api-key": KEY}, CALLER_V4),
    ("unknown-route", "/v1/nowhere", {"x-api-key": KEY}, CALLER_V6),
)
SAMPLED_REQUESTS = 20_000


def lines_of(path: str, headers: dict[str, str], caller: str, count: int = 1) -> list[str]:
    """The access-log lines ``count`` requests write (the handler's other output is not JSON)."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        for _ in range(count):
            handler(function_url_event("GET", path, headers, b"", caller), LocalLambdaContext())
    return [line for line in output.getvalue().splitlines() if line.startswith('{"requestId"')]


def main() -> int:
    dependencies.install(
        dependencies.Dependencies(
            store=cast(Store, SlashTwentyFourStore({"asn": 64500, "organization": "Example"})),
            pointer_cache_seconds=3600.0,
        )
    )
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"default": KEY})))
    os.environ[ENV_ACCESS_LOG_SAMPLE_RATE] = "1"
    shapes: dict[str, Any] = {}
    for name, path, headers, caller in SHAPES:
        [line] = lines_of(path, headers, caller)
        shapes[name] = {"bytes": len(line.encode()), "line": json.loads(line)}
    os.environ[ENV_ACCESS_LOG_SAMPLE_RATE] = "0.01"
    sampled = lines_of("/v1/ip/198.51.100.200", {"x-api-key": KEY}, CALLER_V4, SAMPLED_REQUESTS)
    sizes = [shape["bytes"] for shape in shapes.values()]
    report = {
        "command": "python -m bench.access_log",
        "line_bytes_by_shape": shapes,
        "line_bytes": {"max": max(sizes), "mean": round(statistics.mean(sizes), 1)},
        "cloudwatch_overhead_bytes_per_event": 26,
        "default_sample": {
            "sample_rate": 0.01,
            "answered_requests": SAMPLED_REQUESTS,
            "lines": len(sampled),
            "share_logged": round(len(sampled) / SAMPLED_REQUESTS, 4),
        },
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({key: value for key, value in report.items() if key != "line_bytes_by_shape"}, indent=2))
    key_check.install(None)
    dependencies.install(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
