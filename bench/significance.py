"""Whether a path got slower beyond the noise, from samples of two trees taken in interleaved rounds.

Round ``i`` runs the path once on each tree, back to back, so whatever slowed the
machine during that round slowed both: the samples are *paired*. The figure is
the geometric mean of the per-round ratios ``head / ref`` (time: above 1 is
slower), with a 95% confidence interval from a paired Student t-test on their
logarithms (``scipy.stats.ttest_rel``). A path is flagged slower only when the
whole interval lies above 1, faster only when it lies below; otherwise the
difference is within the noise this run measured, and ``resolution`` (the
interval's half-width) says how small a change the run could have told apart.

Pure: the runner (``bench.compare``) measures, this module judges.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scipy import stats

CONFIDENCE = 0.95


class Verdict(StrEnum):
    SLOWER = "slower beyond noise"
    FASTER = "faster beyond noise"
    WITHIN_NOISE = "within noise"


@dataclass(frozen=True)
class Comparison:
    """``head`` against ``ref`` on one path: ratios of times, so above 1 is slower."""

    rounds: int
    ratio: float
    low: float
    high: float
    verdict: Verdict
    #: The coefficient of variation of each tree's own samples (the run-to-run noise).
    ref_spread: float
    head_spread: float

    @property
    def resolution(self) -> float:
        """Half the interval's width, as a share: the smallest change this run could separate."""
        return (self.high - self.low) / 2

    def as_dict(self) -> dict[str, object]:
        return {
            "rounds": self.rounds,
            "ratio": round(self.ratio, 4),
            "ci95": [round(self.low, 4), round(self.high, 4)],
            "resolution": round(self.resolution, 4),
            "verdict": str(self.verdict),
            "ref_spread": round(self.ref_spread, 4),
            "head_spread": round(self.head_spread, 4),
        }


def compare(ref: Sequence[float], head: Sequence[float], confidence: float = CONFIDENCE) -> Comparison:
    """Judge ``head`` against ``ref``; ``ref[i]`` and ``head[i]`` were measured in the same round."""
    if len(ref) != len(head):
        raise ValueError(f"unpaired samples: {len(ref)} ref against {len(head)} head")
    if len(ref) < 2:
        raise ValueError("a confidence interval needs at least two rounds")
    if min(*ref, *head) <= 0:
        raise ValueError("times must be positive")
    logs_ref = [math.log(value) for value in ref]
    logs_head = [math.log(value) for value in head]
    differences = [h - r for h, r in zip(logs_head, logs_ref, strict=True)]
    centre = statistics.fmean(differences)
    if statistics.pstdev(differences) == 0:
        # Identical ratios in every round: no spread to test (t is undefined), the interval is a point.
        low = high = centre
    else:
        interval = stats.ttest_rel(logs_head, logs_ref).confidence_interval(confidence)
        low, high = float(interval.low), float(interval.high)
    verdict = Verdict.SLOWER if low > 0 else Verdict.FASTER if high < 0 else Verdict.WITHIN_NOISE
    return Comparison(
        rounds=len(ref),
        ratio=math.exp(centre),
        low=math.exp(low),
        high=math.exp(high),
        verdict=verdict,
        ref_spread=statistics.stdev(ref) / statistics.fmean(ref),
        head_spread=statistics.stdev(head) / statistics.fmean(head),
    )
