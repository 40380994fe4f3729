"""The 95 % interval of a row's median time: exact order statistics for rows
that keep it, a reading of the quantiles for older rows, and the interval of a
ratio of two medians."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from tuner.data import intervals
from tuner.measure.timing import TimingResult


def coverage(n: int, k: int) -> float:
    """P(x_(k) <= true median <= x_(n+1-k)) for n continuous samples."""
    return 1 - 2 * sum(comb(n, i) for i in range(k)) / 2**n


@pytest.mark.parametrize("n", [6, 10, 11, 20, 37, 100, 364, 2000])
def test_the_ranks_are_the_tightest_pair_that_covers_95_percent(n):
    k, high = intervals.median_ranks(n)
    assert high == n + 1 - k
    assert coverage(n, k) >= 0.95 > coverage(n, k + 1)


def test_ten_samples_give_the_second_and_ninth_and_fewer_than_six_the_whole_sample():
    assert intervals.median_ranks(10) == (2, 9)
    assert intervals.median_ranks(5) == (1, 5) and intervals.median_ranks(1) == (1, 1)
    samples = [1.0, 1.9, 1.2, 1.5, 1.1, 1.4, 1.3, 1.6, 1.8, 1.7]
    assert intervals.median_interval(samples) == (1.1, 1.8)
    with pytest.raises(ValueError, match="n: must be at least 1, got 0"):
        intervals.median_ranks(0)


def test_the_interval_covers_the_true_median_95_percent_of_the_time():
    rng = np.random.default_rng(5)
    # Skewed, like kernel times: a floor and a long right tail.
    hits = sum(
        low <= 1.0 + np.log(2) * 0.01 <= high
        for low, high in (intervals.median_interval(1.0 + rng.exponential(0.01, 30)) for _ in range(4000))
    )
    assert 0.94 <= hits / 4000 <= 0.975  # 95.7 % by the binomial for 30 samples


def test_a_timing_result_row_carries_its_interval():
    samples = np.linspace(1.0, 1.09, 10)
    row = TimingResult(samples_ms=samples, throttled=0, converged=True, wall_s=0.1, flushed=True).as_row()
    assert (row["time_ms_ci_low"], row["time_ms_ci_high"]) == pytest.approx((1.01, 1.08))
    assert row["time_ms_ci_low"] <= row["time_ms_median"] <= row["time_ms_ci_high"]


@pytest.mark.parametrize("n, tolerance", [(10, 0.1), (30, 0.3), (200, 0.3)])
@pytest.mark.parametrize("shape", ["normal", "skewed"])
def test_older_rows_get_an_interval_close_to_the_exact_one_from_their_quantiles(n, tolerance, shape):
    rng = np.random.default_rng(n)
    errors, widths = [], []
    for _ in range(200):
        s = 1 + 0.004 * rng.standard_normal(n)
        if shape == "skewed":
            s += rng.exponential(0.004, n) * (rng.random(n) < 0.2)
        low, high = intervals.median_interval(s)
        p10, median, p90 = np.percentile(s, [10, 50, 90])
        f_low, f_high = intervals.fallback(n, s.min(), p10, median, p90, s.max())
        errors.append(max(abs(f_low - low), abs(f_high - high)) / (high - low))
        widths.append((f_high - f_low) / (high - low))
    assert np.median(errors) < tolerance
    assert 0.85 < np.median(widths) < 1.15


def test_row_intervals_prefer_the_kept_interval_and_say_how_each_was_made():
    rows = pd.DataFrame({
        "samples": [10, 10, None], "time_ms_min": [0.9, 0.9, None], "time_ms_p10": [0.95, 0.95, None],
        "time_ms_median": [1.0, 1.0, 1.0], "time_ms_p90": [1.05, 1.05, None], "time_ms_max": [1.1, 1.1, None],
        "time_ms_ci_low": [0.99, None, None], "time_ms_ci_high": [1.02, None, None],
    }, index=[7, 8, 9])  # fmt: skip
    out = intervals.row_intervals(rows)
    assert list(out.index) == [7, 8, 9]
    assert list(out["how"]) == [intervals.EXACT, intervals.FALLBACK, intervals.NONE]
    assert (out.loc[7, "low"], out.loc[7, "high"]) == (0.99, 1.02)
    assert 0.95 < out.loc[8, "low"] < 1.0 < out.loc[8, "high"] < 1.05
    assert np.isnan(out.loc[9, "low"])


def test_the_ratio_interval_adds_the_two_sides_in_quadrature():
    ratio, low, high = intervals.ratio_interval(1.0, 0.99, 1.01, 1.02, 1.02, 1.02)
    assert ratio == pytest.approx(1.02)
    assert low == pytest.approx(1.02 / 1.01) and high == pytest.approx(1.02 / 0.99)
    ratio, low, high = intervals.ratio_interval(1.0, 0.97, 1.0, 1.0, 1.0, 1.04)
    # B high with A low: both log half-widths add; B low with A high: neither moves.
    assert low == pytest.approx(1.0) and high == pytest.approx(np.exp(np.hypot(np.log(1.04), np.log(1 / 0.97))))
    assert np.isnan(intervals.ratio_interval(0.0, 0, 0, 1.0, 1.0, 1.0)[0])


def test_an_interval_of_fewer_than_six_samples_says_it_is_not_a_95_percent_one():
    from tuner.data.intervals import EXACT, HOW, SHORT, row_intervals

    rows = pd.DataFrame({"samples": [3, 6, 10], "time_ms_median": [1.0, 1.0, 1.0], "time_ms_ci_low": [0.9, 0.95, 0.98],
                         "time_ms_ci_high": [1.1, 1.05, 1.02]})  # fmt: skip
    out = row_intervals(rows)
    assert list(out["how"]) == [SHORT, EXACT, EXACT]
    assert out["low"].tolist() == [0.9, 0.95, 0.98]  # kept, as what it is
    assert "less than 95 %" in HOW[SHORT]


def test_a_ratio_with_an_unknown_side_has_no_interval():
    from tuner.data.intervals import ratio_interval

    ratio, low, high = ratio_interval(1.0, float("nan"), float("nan"), 1.01, 1.0, 1.02)
    assert ratio == pytest.approx(1.01) and np.isnan(low) and np.isnan(high)
    ratio, low, high = ratio_interval(1.0, 1.0, 1.0, 1.01, 1.01, 1.01)  # identical samples: a real, zero-wide interval
    assert (low, high) == pytest.approx((1.01, 1.01))
