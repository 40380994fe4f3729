"""How sure a median time is: the 95 % confidence interval of each row's median,
and of the ratio of two rows' medians.

The interval is the distribution-free one from order statistics: sorted, the
``n`` kept samples ``x_(1) <= ... <= x_(n)`` bracket the true median with
probability ``1 - 2 P(B <= k - 1)``, ``B ~ Binomial(n, 1/2)``, between ``x_(k)``
and ``x_(n+1-k)``; ``k`` is the largest rank that keeps that at or above 95 %.
It needs no assumption about the shape of the samples (a kernel's times are
skewed: a preempted or late-clocked sample lands far to the right), it is exact
for the 10 samples most rows stop at (``x_(2)``, ``x_(9)``: 97.9 %), it costs
two numbers per row where a bootstrap would need the samples, which the rows do
not keep, and it is the rank rule the timer's stopping test already uses
(``tuner/measure/timing.py``, there in its normal approximation). Below 6
samples no pair of ranks reaches 95 %: the interval is the whole sample (min to
max), 1 - 2^(1-n) sure (75 % at 3 samples), and it says so (``SHORT``): the
timer's wall-time cap can stop a slow kernel after one to five samples.

Rows measured since this module carry the interval (``time_ms_ci_low``,
``time_ms_ci_high``). Older rows do not: for them the same ranks are read off
their quantiles (``fallback``: p10 and p90 scaled as normal quantiles, min and
max where the ranks lie outside them). On normal, log-normal and skewed samples
its ends land a median of 2 % (10 samples) to 17 % (20 to 50 samples) of the
exact interval's width from the exact ends, and its width is unbiased
(``tests/test_intervals.py``); each interval says which way it was made.

The ratio ``B / A`` of two medians gets the interval of ``log B - log A``, the
two sides' log half-widths (the lower of one with the upper of the other)
added in quadrature: the two measurements are independent. Where either side
has no interval the ratio has none either (nan ends): a missing interval is
not a certain figure.
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the timer imports this module in measuring processes, which never import pandas
    import pandas as pd

LEVEL = 0.95
# The smallest difference between two medians the project calls real: below it two
# configurations (in one run, ``tuner.data.ties``) or two runs of one configuration
# (``tuner.data.compare``) are the same. nvbench-compare-robust's default; on one GPU
# model, two runs of the same configurations agree within it in most cases.
MARGIN = 0.005
EXACT = "order statistics"
FALLBACK = "from quantiles"
SHORT = "min to max"
NONE = "none"
SURE_SAMPLES = 6  # the fewest samples whose order statistics bracket the median 95 % sure
_NORMAL = NormalDist()
HOW = {
    EXACT: "95 % distribution-free interval of the median from order statistics of the kept samples",
    FALLBACK: "the same ranks read off the row's min, p10, median, p90 and max (rows measured before the interval was kept)",
    SHORT: "the whole sample, min to max, of fewer than 6 samples: less than 95 % sure (75 % at 3 samples, 0 % at 1)",
    NONE: "no interval: the row lacks its sample count or quantiles",
}


@lru_cache(maxsize=4096)
def median_ranks(n: int) -> tuple[int, int]:
    """(k, n + 1 - k), 1-based: the order statistics that bracket the median
    with at least 95 % probability (the outermost pair, (1, n), below 6 samples)."""
    if n < 1:
        raise ValueError(f"n: must be at least 1, got {n}")
    total = 1 << n
    # Integers throughout (2^n overflows a float past n = 1023). ``term`` is
    # comb(n, k) and ``cumulative`` P(B <= k - 1) * 2^n; rank k + 1 is kept
    # while P(B <= k) <= (1 - LEVEL) / 2 = 1 / 40.
    term, cumulative, k = 1, 0, 0
    while (cumulative + term) * 40 <= total:
        cumulative += term
        k += 1
        term = term * (n - k + 1) // k
    k = max(k, 1)
    return k, n + 1 - k


def median_interval(samples_ms) -> tuple[float, float]:
    """The 95 % interval of the median of ``samples_ms`` (nan, nan if empty)."""
    s = np.sort(np.asarray(samples_ms, dtype=np.float64))
    if s.size == 0:
        return float("nan"), float("nan")
    low, high = median_ranks(int(s.size))
    return float(s[low - 1]), float(s[high - 1])


def fallback(n: int, minimum: float, p10: float, median: float, p90: float, maximum: float) -> tuple[float, float]:
    """The interval of the median of ``n`` samples known only by these quantiles
    (as ``numpy.percentile`` gives them). The order statistics of
    ``median_ranks`` sit at quantile levels ``(k - 1) / (n - 1)`` and
    ``(n - k) / (n - 1)``; between p10 and p90 each side is scaled as a normal
    quantile from the median (its own side's distance to p10 or p90, so a
    skewed row keeps its skew); outside them, as for 10 samples or fewer, the
    level is read off a straight line to min or max. A straight line from p10
    to the median instead would be about 40 % too wide at a few hundred
    samples (a normal's density peaks at its median)."""
    low, high = fallbacks(
        np.array([n], dtype="float64"), *(np.array([v], dtype="float64") for v in (minimum, p10, median, p90, maximum))
    )
    return float(low[0]), float(high[0])


def fallbacks(n, minimum, p10, median, p90, maximum) -> tuple[np.ndarray, np.ndarray]:
    """``fallback`` over arrays (nan where a value is missing or n < 2)."""
    n = np.asarray(n, dtype="float64")
    usable = np.isfinite(n) & (n >= 2)
    for v in (minimum, p10, median, p90, maximum):
        usable &= np.isfinite(v)
    ranks = {int(m): median_ranks(int(m))[0] for m in np.unique(n[usable])}
    k = np.array([ranks.get(int(m), 1) if ok else 1 for m, ok in zip(n, usable)], dtype="float64")
    span = np.where(usable, n - 1, 1.0)
    low_level, high_level = (k - 1) / span, (n - k) / span
    edge = low_level < 0.1
    scale = np.array([_NORMAL.inv_cdf(min(max(q, 0.5), 1 - 1e-12)) for q in np.where(usable & ~edge, high_level, 0.9)])
    scale = scale / _NORMAL.inv_cdf(0.9)
    low = np.where(edge, minimum + (p10 - minimum) * low_level / 0.1, median - (median - p10) * scale)
    high = np.where(edge, p90 + (maximum - p90) * (high_level - 0.9) / 0.1, median + (p90 - median) * scale)
    return np.where(usable, low, np.nan), np.where(usable, high, np.nan)


def row_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Per row of ``frame`` (results rows): ``low`` and ``high``, the 95 %
    interval of ``time_ms_median``, and ``how`` it was made (``EXACT``,
    ``FALLBACK``, ``SHORT`` or ``NONE``, keys of ``HOW``); same index as
    ``frame``. A ``SHORT`` interval is kept, but it is not a 95 % one."""
    import pandas as pd

    out = pd.DataFrame(index=frame.index, columns=["low", "high", "how"])
    out["low"], out["high"], out["how"] = np.nan, np.nan, NONE
    out = out.astype({"low": "float64", "high": "float64", "how": "object"})
    if frame.empty:
        return out

    def column(name: str) -> pd.Series:
        if name not in frame:
            return pd.Series(np.nan, index=frame.index, dtype="float64")
        return pd.to_numeric(frame[name], errors="coerce").astype("float64")

    stored = (column("time_ms_ci_low").notna() & column("time_ms_ci_high").notna()).to_numpy()
    low, high = fallbacks(
        *(column(c).to_numpy() for c in ("samples", "time_ms_min", "time_ms_p10", "time_ms_median", "time_ms_p90", "time_ms_max"))
    )
    derived = ~stored & np.isfinite(low) & np.isfinite(high)
    out["low"] = np.where(stored, column("time_ms_ci_low"), np.where(derived, low, np.nan))
    out["high"] = np.where(stored, column("time_ms_ci_high"), np.where(derived, high, np.nan))
    out["how"] = np.where(stored, EXACT, np.where(derived, FALLBACK, NONE))
    known = stored | derived
    out.loc[known & (column("samples").to_numpy() < SURE_SAMPLES), "how"] = SHORT
    return out


def ratio_interval(a: float, a_low: float, a_high: float, b: float, b_low: float, b_high: float) -> tuple[float, float, float]:
    """(ratio, low, high): ``b / a`` and its 95 % interval from the two
    medians' intervals (log half-widths in quadrature); nan where a median is
    missing, and nan ends where an interval is."""
    ratio, low, high = ratio_intervals(*(np.array([x], dtype="float64") for x in (a, a_low, a_high, b, b_low, b_high)))
    return float(ratio[0]), float(low[0]), float(high[0])


def ratio_intervals(a, a_low, a_high, b, b_low, b_high) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ratio_interval`` over arrays."""
    with np.errstate(divide="ignore", invalid="ignore"):
        valid = (a > 0) & (b > 0)

        def half(top, bottom):  # a log half-width; nan where the interval is unknown
            width = np.log(top / bottom)
            return np.where(np.isfinite(width), np.maximum(width, 0.0), np.nan)

        a_down, a_up = half(a, a_low), half(a_high, a)
        b_down, b_up = half(b, b_low), half(b_high, b)
        ratio = np.where(valid, b / a, np.nan)
    # B / A is smallest when B sits low and A high, largest the other way round.
    return ratio, ratio * np.exp(-np.hypot(b_down, a_up)), ratio * np.exp(np.hypot(b_up, a_down))
