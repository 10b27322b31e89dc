"""What our code costs per lookup, with the data layer stubbed so only our code is timed.

1. CPU per single lookup through the lookup API's resolver, against a trivial
   powertools route on a resolver with the same configuration (validation on,
   same CORS), in the same run, interleaved. Goal: at most 2.0x.
2. Latency of one batch of 100 IPs against 100 sequential single lookups, with
   the stub answering at once and with a simulated Query latency (a sleep, as a
   network wait releases the GIL).

Run: ``python -m bench.handler`` (``--rounds`` and ``--query-ms`` tune it; ``--record geo``
answers a GeoLite2 City record of the default fields, exact decimals included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, cast

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.api import dependencies
from ipmeta.api.app import app, cors_config
from ipmeta.schema.settings import ApiSettings
from ipmeta.store.dynamodb import Store
from ipmeta_cli.dynalite import PROJECT_ROOT
from ipmeta_cli.server import LocalLambdaContext, proxy_event
from testing.stub_store import SlashTwentyFourStore

RESULTS = PROJECT_ROOT / "bench" / "results" / "handler.json"

BATCH_SIZE = 100


#: What a range holds, by ``--record``: an ASN dataset's, or a GeoLite2 City record with the
#: default fields, as the store reads it (its decimals exact ``Decimal``, written by ``exact_json``).
RECORDS: dict[str, dict[str, Any]] = {
    "asn": {"asn": 13335, "organization": "Cloudflare, Inc.", "country": "US"},
    "geo": {
        "continent.code": "OC",
        "continent.geoname_id": 6255151,
        "continent.names.en": "Oceania",
        "country.geoname_id": 2077456,
        "country.iso_code": "AU",
        "country.names.en": "Australia",
        "registered_country.geoname_id": 2077456,
        "registered_country.iso_code": "AU",
        "registered_country.names.en": "Australia",
        "city.geoname_id": 2174003,
        "city.names.en": "Brisbane",
        "subdivisions.0.geoname_id": 2152274,
        "subdivisions.0.iso_code": "QLD",
        "subdivisions.0.names.en": "Queensland",
        "postal.code": "4101",
        "location.latitude": Decimal("-27.4767"),
        "location.longitude": Decimal("153.017"),
        "location.accuracy_radius": 20,
        "location.time_zone": "Australia/Brisbane",
        "traits.is_anycast": False,
    },
}


def install(stub: SlashTwentyFourStore) -> None:
    dependencies.install(dependencies.Dependencies(store=cast(Store, stub), pointer_cache_seconds=3600.0))


def trivial_resolver() -> APIGatewayRestResolver:
    trivial = APIGatewayRestResolver(enable_validation=True, cors=cors_config(ApiSettings()))

    @trivial.get("/v1/ip/<ip>")
    def echo(ip: str) -> dict[str, str]:
        return {"ip": ip}

    return trivial


Call = Callable[[], dict[str, Any]]


def cpu_per_call(call: Call, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        call()
    return (time.process_time() - started) / count


def wall_time(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def resolve(resolver: APIGatewayRestResolver, event: dict[str, Any]) -> Call:
    def call() -> dict[str, Any]:
        response = resolver.resolve(event, cast(LambdaContext, LocalLambdaContext()))
        assert response["statusCode"] == 200, response
        return response

    return call


def bench_single(rounds: int, per_round: int, record: str = "asn") -> dict[str, float]:
    install(SlashTwentyFourStore(RECORDS[record]))
    event = proxy_event("GET", "/v1/ip/1.0.0.1", {}, b"", "127.0.0.1")
    ours, trivial = resolve(app, event), resolve(trivial_resolver(), event)
    for warm in (ours, trivial):
        cpu_per_call(warm, 200)
    ours_s, trivial_s = [], []
    for _ in range(rounds):  # interleaved, so drift in the machine hits both alike
        ours_s.append(cpu_per_call(ours, per_round))
        trivial_s.append(cpu_per_call(trivial, per_round))
    ours_us, trivial_us = statistics.median(ours_s) * 1e6, statistics.median(trivial_s) * 1e6
    return {"lookup_us": ours_us, "trivial_us": trivial_us, "ratio": ours_us / trivial_us}


def bench_batch(rounds: int, query_seconds: float) -> dict[str, float]:
    install(SlashTwentyFourStore(RECORDS["asn"], query_seconds=query_seconds))
    ips = [f"1.{i}.0.1" for i in range(BATCH_SIZE)]
    singles = [resolve(app, proxy_event("GET", f"/v1/ip/{ip}", {}, b"", "127.0.0.1")) for ip in ips]
    batch_event = proxy_event(
        "POST", "/v1/batch", {"Content-Type": "application/json"}, json.dumps(ips).encode(), "127.0.0.1"
    )
    batch = resolve(app, batch_event)
    assert len(json.loads(batch()["body"])) == BATCH_SIZE
    sequential_s, batch_s = [], []
    for _ in range(rounds):
        sequential_s.append(wall_time(lambda: [single() for single in singles]))
        batch_s.append(wall_time(batch))
    sequential_ms, batch_ms = statistics.median(sequential_s) * 1e3, statistics.median(batch_s) * 1e3
    return {"sequential_ms": sequential_ms, "batch_ms": batch_ms, "speedup": sequential_ms / batch_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--per-round", type=int, default=1000, help="single lookups per round")
    parser.add_argument("--query-ms", type=float, default=2.0, help="simulated Query latency for the batch")
    parser.add_argument("--record", choices=sorted(RECORDS), default="asn", help="what the range holds")
    args = parser.parse_args()

    single = bench_single(args.rounds, args.per_round, args.record)
    report: dict[str, Any] = {"record": args.record, "single_lookup_cpu": single, "batch": {}}
    print("CPU per single lookup, in-process (median of rounds):")
    print(f"  GET /v1/ip/{{ip}} (ours)            {single['lookup_us']:8.1f} us")
    print(f"  trivial route, same resolver config {single['trivial_us']:8.1f} us")
    verdict = "meets" if single["ratio"] <= 2.0 else "misses"
    print(f"  ratio                               {single['ratio']:8.2f} x  ({verdict} the 2.0x goal)")
    for query_ms in (0.0, args.query_ms):
        batch = bench_batch(args.rounds, query_ms / 1000)
        print(f"\n{BATCH_SIZE} IPs, stubbed Query latency {query_ms:g} ms (median wall time):")
        print(f"  {BATCH_SIZE} sequential single lookups  {batch['sequential_ms']:8.1f} ms")
        print(f"  one batch of {BATCH_SIZE}              {batch['batch_ms']:8.1f} ms")
        print(f"  batch speed-up                      {batch['speedup']:8.1f} x")
        report["batch"][f"query_{query_ms:g}_ms"] = batch
    dependencies.install(None)
    results = RESULTS if args.record == "asn" else RESULTS.with_name(f"handler-{args.record}.json")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
