"""The anytime-valid confidence sequence of the success-rate figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalstop_ros.stats.intervals import mixture_confidence_sequence


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"values": [0.5, 1.2]}, r"`values` must lie in \[0, 1\]; found 1.2 at index 1"),
    ({"values": [0.5, float("nan")]}, r"`values` must lie in \[0, 1\]; found nan at index 1"),
    ({"values": [[0.5]]}, r"`values` must be one-dimensional; found shape \(1, 1\)"),
    ({"values": [0.5], "alpha": 1.0}, r"`alpha` must lie in \(0, 1\); found 1.0"),
    ({"values": [0.5], "tightest_at": 0}, r"`tightest_at` must be a positive integer; found 0"),
])
def test_validation_messages(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mixture_confidence_sequence(**kwargs)


def test_band_contains_the_mean_and_shrinks() -> None:
    mean, low, high = mixture_confidence_sequence(np.tile([1.0, 0.0, 1.0, 1.0], 50), alpha=0.05)
    assert np.all(low <= mean) and np.all(mean <= high)
    widths = high - low
    assert widths[-1] < widths[49] < widths[9]
    # the radius after n is sqrt(2 (n/4 + rho)(log(1/alpha) + log(1 + n/(4 rho)) / 2)) / n (module docstring)
    assert math.isclose(float(mean[-1]), 0.75)


def test_time_uniform_coverage_monte_carlo() -> None:
    # P(the band ever misses p over 300 Bernoulli(p) trials) <= alpha; Ville's bound, so the
    # estimate sits well below it.  2000 runs: SE <= sqrt(0.05 * 0.95 / 2000) = 0.0049.
    rng = np.random.default_rng(20240611)
    alpha, p, runs = 0.05, 0.3, 2000
    misses = 0
    for _ in range(runs):
        _, low, high = mixture_confidence_sequence((rng.random(300) < p).astype(float), alpha=alpha, tightest_at=100)
        misses += bool(((low > p) | (high < p)).any())
    rate = misses / runs
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert rate <= alpha + 3 * se, f"miss rate {rate:.4f} (SE {se:.4f}) above alpha {alpha} + 3 SE"
