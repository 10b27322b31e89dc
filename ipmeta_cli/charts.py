"""PNG charts of a load: where its items go, and how hot its write order runs.

Drawn with matplotlib (a CLI dependency, never in a Lambda), headless (Agg).
``ipmeta load --chart DIR`` and ``ipmeta plan --chart DIR`` write both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

#: Buckets named on the items-per-bucket chart.
NAMED_BUCKETS: Final = 12
ITEMS_PER_BUCKET: Final = "items-per-bucket.png"
WRITE_ORDER_HEAT: Final = "write-order-heat.png"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    return plt


def items_per_bucket_chart(per_bucket: Mapping[str, int], path: Path, title: str) -> Path:
    """The hottest buckets by name, and every bucket's items: how uneven the partitions are."""
    plt = _pyplot()
    ranked = sorted(per_bucket.items(), key=lambda entry: -entry[1])
    total = sum(per_bucket.values()) or 1
    figure, (hottest, everything) = plt.subplots(
        1, 2, figsize=(12, 5.5), dpi=110, gridspec_kw={"width_ratios": [1, 1.4]}
    )
    top = ranked[:NAMED_BUCKETS][::-1]
    hottest.barh([name for name, _ in top], [count / total * 100 for _, count in top], color="#c44e52")
    hottest.set_xlabel("share of the load's items (%)")
    hottest.set_title(f"The {len(top)} hottest buckets")
    hottest.grid(axis="x", alpha=0.3)
    everything.bar(range(len(ranked)), [count for _, count in ranked], width=1.0, color="#4c72b0")
    everything.set_yscale("log")
    everything.set_xlabel(f"every bucket, largest first ({len(ranked):,} in all)")
    everything.set_ylabel("items (log scale)")
    everything.set_title(title)
    everything.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def write_order_chart(
    series: Mapping[str, Sequence[float]], overall_share: float, window: int, path: Path
) -> Path:
    """The hottest bucket's share of each window of writes, for each write order (sorted, shuffled...)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(11, 5), dpi=110)
    styles = {"sorted": "#c44e52", "shuffled": "#55a868", "as-written": "#4c72b0"}
    for name, shares in series.items():
        axes.plot(
            [index * window for index in range(len(shares))],
            shares,
            label=name,
            color=styles.get(name),
            linewidth=0.8 if name == "sorted" else 1.2,
        )
    axes.axhline(
        overall_share, color="black", linestyle="--", linewidth=0.8, label="its share of the whole load"
    )
    axes.axhline(1.5 * overall_share, color="grey", linestyle=":", linewidth=0.8, label="1.5 × that share")
    axes.set_xlabel(f"writes, in the order they are sent ({window:,}-write windows)")
    axes.set_ylabel("share of the window taken by its hottest bucket")
    axes.set_ylim(0, 1.02)
    axes.set_title("Write order heat: sorted input writes one partition at a time, the shuffle spreads it")
    axes.legend(loc="upper right", fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
