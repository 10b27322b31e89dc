"""The blog's four experiments, reproduced by the write model (``ipmeta plan --reproduce-blog``)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ipmeta.schema import keys
from loader.planning import write_model
from loader.planning.write_model import OrderKind, TableSetup, WriteOrder

# -- the blog's experiments --------------------------------------------------------------

#: The blog's file: the shuffled load took under 2 minutes at about 3,600/s, and the
#: provisioned one fell in a single CloudWatch minute averaging 6,000/s: 6,000 × 60.
BLOG_ITEMS: Final = 360_000
#: σ of the log of items per /8. With it a log-normal has the ASN file's concentration: the
#: largest of its IPv4 /8s holds 5.4% of the ranges, and 1 / Σ share² is 71 buckets' worth.
BLOG_BUCKET_SPREAD: Final = 1.07
#: How many synthetic files the blog's experiments run on: which buckets share a partition
#: is luck of the hash, so the model's figure is the median of these files.
BLOG_FILES: Final = 25
BLOG_TOLERANCE: Final = 0.15
#: The /8s that hold no public unicast ranges.
_UNUSED_OCTETS: Final = frozenset({0, 10, 127})
_LAST_UNICAST_OCTET: Final = 223


def synthetic_blog_file(items: int = BLOG_ITEMS, seed: int = 0) -> dict[str, int]:
    """Items per IPv4 /8 bucket, in address order, as unevenly spread as a real range file.

    Bucket sizes are the quantiles of a log-normal, so every file has the same
    sizes; ``seed`` only decides which /8 gets which size.
    """
    octets = [octet for octet in range(_LAST_UNICAST_OCTET + 1) if octet not in _UNUSED_OCTETS]
    normal = statistics.NormalDist()
    weights = [
        math.exp(BLOG_BUCKET_SPREAD * normal.inv_cdf((rank + 0.5) / len(octets)))
        for rank in range(len(octets))
    ]
    random.Random(seed).shuffle(weights)
    scale = items / sum(weights)
    counts = [max(1, round(weight * scale)) for weight in weights]
    counts[counts.index(max(counts))] += items - sum(counts)
    return {keys.bucket_name(4, octet): count for octet, count in zip(octets, counts, strict=True)}


@dataclass(frozen=True, slots=True)
class BlogExperiment:
    name: str
    one_key: bool
    kind: OrderKind
    table: TableSetup
    measured: int

    def order(self, per_bucket: Mapping[str, int]) -> WriteOrder:
        if self.one_key:
            # The blog's first design: every item under partition key "0".
            return WriteOrder.sorted({"0": sum(per_bucket.values())})
        if self.kind is OrderKind.SHUFFLED:
            return WriteOrder.shuffled(per_bucket)
        return WriteOrder.sorted(per_bucket)


#: Part 1's four loads, each with the rate the blog measured.
BLOG_EXPERIMENTS: Final = (
    BlogExperiment(
        "one partition key value, on-demand", True, OrderKind.SORTED, TableSetup.on_demand(), 1_000
    ),
    BlogExperiment(
        "/8 partition keys, sorted, on-demand", False, OrderKind.SORTED, TableSetup.on_demand(), 1_250
    ),
    BlogExperiment("/8 keys, shuffled, on-demand", False, OrderKind.SHUFFLED, TableSetup.on_demand(), 3_600),
    BlogExperiment(
        "/8 keys, shuffled, 10,000 provisioned WCU",
        False,
        OrderKind.SHUFFLED,
        TableSetup.provisioned(10_000),
        6_000,
    ),
)


def reproduce_blog(
    items: int = BLOG_ITEMS,
    files: int = BLOG_FILES,
    client: write_model.Client = write_model.SINGLE_THREAD_CLIENT,
    split: write_model.SplitForHeat = write_model.DEFAULT_SPLIT,
) -> dict[str, Any]:
    """The four loads of the blog's Part 1 through the model, beside what the blog measured.

    Each runs on ``files`` synthetic files; ``model`` is the median file's rate,
    ``model_range`` the slowest and fastest file's.
    """
    per_bucket_files = [synthetic_blog_file(items, seed) for seed in range(files)]
    scenarios = []
    for experiment in BLOG_EXPERIMENTS:
        loads = sorted(
            (
                write_model.estimate_load(
                    experiment.order(per_bucket),
                    experiment.table,
                    client,
                    split,
                    write_model.DEFAULT_ITEM_BYTES,
                )
                for per_bucket in per_bucket_files
            ),
            key=lambda load: load.writes_per_second,
        )
        median = loads[len(loads) // 2]
        model = round(median.writes_per_second)
        scenarios.append(
            {
                "name": experiment.name,
                "model": model,
                "blog": experiment.measured,
                "off_by": round(model / experiment.measured - 1, 3),
                "within": BLOG_TOLERANCE,
                "limited_by": str(median.limited_by),
                "model_range": [round(loads[0].writes_per_second), round(loads[-1].writes_per_second)],
                "seconds": round(median.seconds, 1),
                "partitions": median.partitions_at_end,
            }
        )
    return {
        "dataset": {"items": items, "buckets": len(per_bucket_files[0]), "files": files},
        "client": client.to_json(),
        "split_for_heat": split.to_json(),
        "scenarios": scenarios,
    }
