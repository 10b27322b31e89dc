"""CloudFront's hit ratio behind ``edge``, from the range cache's own Zipf workload.

The range cache (``bench/cache.py``) answers any address inside a range it has seen; CloudFront
answers only a request it has seen: the same path (the exact address), query and key, within
``edgeCacheSeconds``. So the edge's hit ratio is the share of lookups whose exact address was
asked within the TTL before, which this replays on the same workload as bench/results/cache.json
(``zipf``: a range by Zipf(1.1) rank over the ASN dataset's ranges, a uniform address inside it,
same seed and count), for one key (every client of a key shares its entries; more keys split them).

Requests arrive evenly over a 30-day month, so a TTL holds ``lookups_per_month / month × TTL``
lookups: each lookup hits when its address is among the previous that many. The first window is
left out (a cold cache); a month longer than the workload is not measured. What it leaves out:
CloudFront's many caches (a request may land on another edge location's; the regional caches
behind them narrow the gap), evictions, and invalidations at each activation (a daily reload
empties the cache once a day). Those all lower the figure: it is an upper bound for one key.

    python -m bench.edge [--lookups 1000000] [--ttl 3600]

Saves bench/results/edge.json and bench/results/edge_hit_ratio.png.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.cache import ZIPF_S, draw_workload, read_ranges
from ipmeta_cli.demo import ASN_FILES

RESULTS = Path(__file__).parent / "results"
MONTH_SECONDS = 30 * 24 * 3600
#: Monthly volumes to replay (the plan's 1 M, 10 M, 100 M); each window must fit the workload.
VOLUMES = (1_000_000, 10_000_000, 30_000_000, 100_000_000, 300_000_000)
#: The volume the plan's default hit ratio is read at.
DEFAULT_VOLUME = 100_000_000


def hit_ratio(addresses: list[Any], window: int) -> float | None:
    """The share of lookups after the first ``window`` whose address was asked in the ``window`` before."""
    if window >= len(addresses):
        return None
    last_seen: dict[Any, int] = {}
    hits = 0
    for index, address in enumerate(addresses):
        seen = last_seen.get(address)
        if index >= window and seen is not None and index - seen <= window:
            hits += 1
        last_seen[address] = index
    return round(hits / (len(addresses) - window), 4)


def chart(by_volume: dict[str, float | None], ttl: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(int(volume), ratio) for volume, ratio in by_volume.items() if ratio is not None]
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    axes.plot([v / 1e6 for v, _ in points], [r for _, r in points], marker="o")
    for volume, ratio in points:
        axes.annotate(f"{ratio:.2f}", (volume / 1e6, ratio), textcoords="offset points", xytext=(0, 6))
    axes.set_xscale("log")
    axes.set_xlabel("lookups per month (millions), one key")
    axes.set_ylabel("share answered by CloudFront")
    axes.set_ylim(0, 1)
    axes.grid(True, alpha=0.3)
    axes.set_title(f"Edge hit ratio, Zipf({ZIPF_S}) over ASN ranges, exact address, TTL {ttl} s", fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main() -> int:
    options = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_argument("--lookups", type=int, default=1_000_000, help="as bench/results/cache.json's zipf")
    options.add_argument("--seed", type=int, default=11, help="as bench/results/cache.json's")
    options.add_argument("--ttl", type=int, default=3600, help="edgeCacheSeconds")
    args = options.parse_args()
    ranges = read_ranges(ASN_FILES)
    addresses = draw_workload(ranges, args.lookups, "zipf", args.seed)
    by_volume = {
        str(volume): hit_ratio(addresses, round(volume / MONTH_SECONDS * args.ttl)) for volume in VOLUMES
    }
    report = {
        "command": shlex.join([Path(sys.executable).name, "-m", "bench.edge", *sys.argv[1:]]),
        "workload": f"bench/results/cache.json's zipf: {args.lookups} lookups, seed {args.seed}, "
        f"Zipf({ZIPF_S}) over {len(ranges)} ranges",
        "distinct_addresses": len(set(addresses)),
        "ttl_seconds": args.ttl,
        "hit_ratio_by_lookups_per_month": by_volume,
        "default_for_the_plan": {
            "lookups_per_month": DEFAULT_VOLUME,
            "hit_ratio": by_volume[str(DEFAULT_VOLUME)],
        },
        "method": "a lookup hits when its exact address was asked within the TTL before (requests "
        "spread evenly over a 30-day month, one key, the first window left out); an upper bound",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "edge.json").write_text(json.dumps(report, indent=2) + "\n")
    chart(by_volume, args.ttl, RESULTS / "edge_hit_ratio.png")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
