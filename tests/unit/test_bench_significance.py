"""The comparison across commits can fail: a planted slowdown is flagged, noise alone is not.

Each trial simulates interleaved rounds of a 10 s path on two trees: a drift both
trees share within a round (how busy the machine was) and each run's own noise.
Trials are seeded, so the counts below are exact on every run.
"""

from __future__ import annotations

import random
import statistics

import pytest

from bench.significance import CONFIDENCE, Verdict, compare

ROUNDS = 8
TRIALS = 200


def noisy_rounds(seed: int, slowdown: float = 0.0, noise: float = 0.03) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    ref, head = [], []
    for _ in range(ROUNDS):
        machine = rng.uniform(0.9, 1.1)
        ref.append(10 * machine * rng.gauss(1, noise))
        head.append(10 * (1 + slowdown) * machine * rng.gauss(1, noise))
    return ref, head


def test_a_planted_twenty_percent_slowdown_is_flagged_in_every_trial() -> None:
    comparisons = [compare(*noisy_rounds(seed, slowdown=0.20)) for seed in range(TRIALS)]
    assert {comparison.verdict for comparison in comparisons} == {Verdict.SLOWER}
    # And the interval holds the planted ratio nearly always (95% of trials, give or take)
    held = sum(comparison.low <= 1.2 <= comparison.high for comparison in comparisons)
    assert held >= 0.9 * TRIALS


def test_equal_trees_are_flagged_only_at_the_tests_own_error_rate() -> None:
    # Noise alone: a 95% interval misses 1 in 20 trials; the noise here is not quite log-normal
    verdicts = [compare(*noisy_rounds(1000 + seed)).verdict for seed in range(TRIALS)]
    false_flags = sum(verdict is not Verdict.WITHIN_NOISE for verdict in verdicts)
    assert false_flags <= 2 * (1 - CONFIDENCE) * TRIALS


def test_a_faster_head_is_flagged_faster_never_slower() -> None:
    verdicts = {compare(*noisy_rounds(seed, slowdown=-0.20)).verdict for seed in range(TRIALS)}
    assert verdicts == {Verdict.FASTER}


@pytest.mark.parametrize(("noise", "resolves_three_percent"), [(0.02, True), (0.04, False)])
def test_eight_rounds_resolve_three_percent_only_when_a_run_varies_by_two_percent(
    noise: float, resolves_three_percent: bool
) -> None:
    # bench.compare's default rounds; its report's `resolution` tells which case a run was in
    resolutions = [compare(*noisy_rounds(seed, noise=noise)).resolution for seed in range(TRIALS)]
    assert (statistics.median(resolutions) < 0.03) is resolves_three_percent


def test_identical_ratios_in_every_round_give_a_point_interval() -> None:
    comparison = compare([10.0, 12.0, 11.0], [12.0, 14.4, 13.2])
    assert comparison.verdict is Verdict.SLOWER
    assert comparison.low == pytest.approx(1.2) == comparison.high


def test_unpaired_or_single_rounds_are_refused() -> None:
    with pytest.raises(ValueError, match="unpaired"):
        compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="two rounds"):
        compare([1.0], [1.0])


def test_the_planted_slowdown_names_paths_the_runner_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.compare import PLANT_VARIABLE, planted_slowdowns

    monkeypatch.setenv(PLANT_VARIABLE, "prepare:0.2,load:0.05")
    assert planted_slowdowns() == {"prepare": 0.2, "load": 0.05}
    monkeypatch.setenv(PLANT_VARIABLE, "prepar:0.2")
    with pytest.raises(SystemExit, match="no path 'prepar'"):
        planted_slowdowns()
