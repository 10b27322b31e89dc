"""Huge ranges: ``::/0``, ``0.0.0.0/0``, ``2000::/3`` and ``fc00::/7`` each load in seconds, in little memory.

Before covers, ``::/0`` became 16.7 M items (killed after 2 minutes at 7 GB)
and ``2000::/3`` 2.1 M (20 s, 1 GB). Each row here is loaded on its own, with
a smaller range inside it that must win (last-wins), end to end into dynalite:
``ipmeta load`` as a child process, its wall time and peak RSS (the child's
``ru_maxrss``, pool workers included) measured. Then addresses spread over the
huge range are looked up in one batch through the lookup the API serves
(``Store`` and ``ipmeta.lookup.answers.lookup_addresses``) and compared with what the rows say.

Goals (issue 12): under 10 s and under 300 MB each, every answer right.

``python -m bench.huge``; saves ``bench/results/huge.json``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from ipmeta.lookup.answers import CombinedResult, lookup_addresses
from ipmeta.lookup.catalog import Target, Targets
from ipmeta.schema.ips import Address
from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta.store.dynamodb import Store, make_client
from ipmeta_cli.dynalite import PROJECT_ROOT, Dynalite
from loader.store.table_creation import create_table_if_missing

RESULTS: Final = Path(__file__).with_name("results") / "huge.json"
#: Each huge row, and a smaller range inside it that comes later in the file (so it wins).
ROWS: Final = {
    "::/0": "2001:db8::/32",
    "0.0.0.0/0": "10.1.2.0/24",
    "2000::/3": "2001:db8:1::/48",
    "fc00::/7": "fd00:1234::/32",
}
PROBES: Final = 2_000
GOAL_SECONDS: Final = 10.0
GOAL_RSS_MB: Final = 300.0


def write_csv(huge: str, inner: str, path: Path) -> None:
    lines = ["network,label"]
    lines += [f"{huge},huge", f"{inner},inner"]
    path.write_text("\n".join(lines) + "\n")


def load_in_child(source: Path, endpoint: str, table: str, data_dir: Path) -> dict[str, Any]:
    """``ipmeta load`` as its own process on the bench's dynalite: wall seconds, peak RSS (workers too).

    The table is created here: the CLI creates one only for its own local store.
    """
    create_table_if_missing(make_client(Settings(table, endpoint, 0.0)), table)
    data_dir.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    command = [sys.executable, "-m", "ipmeta_cli.main", "load", str(source), "--json"]
    environment = {**os.environ, ENV_DYNAMODB_ENDPOINT: endpoint, ENV_TABLE_NAME: table}
    finished = subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=data_dir, env=environment
    )
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report = json.loads(finished.stdout[finished.stdout.index("{") :])
    return {
        "seconds": round(seconds, 2),
        # RUSAGE_CHILDREN holds the largest child so far: loads run smallest-first would hide
        # a larger one, so it is read after each and is an upper bound for this load.
        "peak_rss_mb": round(max(peak, before) / 1024, 1),
        "items": report.get("items"),
        "covers": report.get("covers"),
    }


def probe(store: Store, version: int, huge: str, inner: str) -> dict[str, Any]:
    """Addresses spread over the huge range (and its edges, and the inner range): answers as the rows say."""
    rng = random.Random(7)
    outer, small = ipaddress.ip_network(huge), ipaddress.ip_network(inner)
    first, last = int(outer.network_address), int(outer.broadcast_address)
    values = [first, last, int(small.network_address), int(small.broadcast_address)]
    values += [rng.randint(first, last) for _ in range(PROBES)]
    values += [rng.randint(int(small.network_address), int(small.broadcast_address)) for _ in range(100)]
    addresses = [Address(outer.version, value) for value in values]
    targets = Targets((Target(store.dataset, version),))
    with ThreadPoolExecutor(max_workers=8) as executor:
        answers = lookup_addresses(lambda _dataset: store, targets, addresses, executor)
    wrong = []
    for address, value in zip(addresses, values, strict=True):
        expected = "inner" if int(small.network_address) <= value <= int(small.broadcast_address) else "huge"
        answer = answers[address]
        found = answer.merged_data().get("label") if isinstance(answer, CombinedResult) else None
        if found != expected:
            wrong.append({"ip": str(ipaddress.ip_address(value)), "expected": expected, "found": found})
    return {"probes": len(values), "wrong": len(wrong), "first_wrong": wrong[:5]}


def main() -> int:
    results: dict[str, Any] = {"command": "python -m bench.huge", "rows": {}}
    with tempfile.TemporaryDirectory(prefix="ipmeta-huge-", dir=PROJECT_ROOT / ".data") as folder:
        work = Path(folder)
        with Dynalite() as endpoint:
            for number, (huge, inner) in enumerate(ROWS.items()):
                source = work / f"huge-{number}.csv"
                write_csv(huge, inner, source)
                table = f"huge-{number}"
                figures = load_in_child(source, endpoint, table, work / f"data-{number}")
                store = Store.from_settings(Settings(table, endpoint, 0.0))
                version = store.read_active_version(consistent=True)
                assert version is not None, f"{huge}: nothing was activated"
                figures["answers"] = probe(store, version, huge, inner)
                figures["meets_goals"] = (
                    figures["seconds"] < GOAL_SECONDS
                    and figures["peak_rss_mb"] < GOAL_RSS_MB
                    and figures["answers"]["wrong"] == 0
                )
                results["rows"][f"{huge} with {inner} inside"] = figures
                print(huge, json.dumps(figures), flush=True)
    results["goals"] = {"seconds_under": GOAL_SECONDS, "peak_rss_mb_under": GOAL_RSS_MB, "wrong_answers": 0}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(row["meets_goals"] for row in results["rows"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
