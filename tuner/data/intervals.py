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
max), 1 - 2^(1-n) sure.

Rows measured since this module carry the interval (``time_ms_ci_low``,
``time_ms_ci_high``). Older rows do not: for them the same ranks are read off
their quantiles (``fallback``: p10 and p90 scaled as normal quantiles, min and
max where the ranks lie outside them). On normal, log-normal and skewed samples
its ends land a median of 2 % (10 samples) to 17 % (20 to 50 samples) of the
exact interval's width from the exact ends, and its width is unbiased
(``tests/test_intervals.py``); each interval says which way it was made.

The ratio ``B / A`` of two medians gets the interval of ``log B - log A``, the
two sides' log half-widths (the lower of one with the upper of the other)
added in quadrature: the two measurements are independent.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the timer imports this module in measuring processes, which never import pandas
    import pandas as pd

LEVEL = 0.95
EXACT = "order statistics"
FALLBACK = "from quantiles"
NONE = "none"
_NORMAL = NormalDist()
HOW = {
    EXACT: "95 % distribution-free interval of the median from order statistics of the kept samples",
    FALLBACK: "the same ranks read off the row's min, p10, median, p90 and max (rows measured before the interval was kept)",
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
    values = (minimum, p10, median, p90, maximum)
    if n < 2 or not all(math.isfinite(v) for v in values):
        return float("nan"), float("nan")
    k, _ = median_ranks(n)
    low, high = (k - 1) / (n - 1), (n - k) / (n - 1)
    if low < 0.1:
        return float(np.interp(low, (0.0, 0.1), (minimum, p10))), float(np.interp(high, (0.9, 1.0), (p90, maximum)))
    scale = _NORMAL.inv_cdf(high) / _NORMAL.inv_cdf(0.9)
    return median - (median - p10) * scale, median + (p90 - median) * scale


def row_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Per row of ``frame`` (results rows): ``low`` and ``high``, the 95 %
    interval of ``time_ms_median``, and ``how`` it was made (``EXACT``,
    ``FALLBACK`` or ``NONE``, keys of ``HOW``); same index as ``frame``."""
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

    stored = column("time_ms_ci_low").notna() & column("time_ms_ci_high").notna()
    out.loc[stored, "low"] = column("time_ms_ci_low")[stored]
    out.loc[stored, "high"] = column("time_ms_ci_high")[stored]
    out.loc[stored, "how"] = EXACT
    quantiles = [column(c) for c in ("samples", "time_ms_min", "time_ms_p10", "time_ms_median", "time_ms_p90", "time_ms_max")]
    for index in frame.index[~stored.to_numpy()]:
        n, *values = (q[index] for q in quantiles)
        if not math.isfinite(n):
            continue
        low, high = fallback(int(n), *values)
        if math.isfinite(low) and math.isfinite(high):
            out.loc[index, ["low", "high", "how"]] = [low, high, FALLBACK]
    return out


def ratio_interval(a: float, a_low: float, a_high: float, b: float, b_low: float, b_high: float) -> tuple[float, float, float]:
    """(ratio, low, high): ``b / a`` and its 95 % interval from the two
    medians' intervals (log half-widths in quadrature); nan where a median is
    missing, and the point itself where an interval is."""
    if not (a > 0 and b > 0):
        return float("nan"), float("nan"), float("nan")

    def logs(low: float, centre: float, high: float) -> tuple[float, float]:
        down = math.log(centre / low) if low > 0 else 0.0
        up = math.log(high / centre) if high > 0 else 0.0
        return (down if math.isfinite(down) else 0.0), (up if math.isfinite(up) else 0.0)

    a_down, a_up = logs(a_low, a, a_high)
    b_down, b_up = logs(b_low, b, b_high)
    ratio = b / a
    # B / A is smallest when B sits low and A high, largest the other way round.
    return ratio, ratio * math.exp(-math.hypot(b_down, a_up)), ratio * math.exp(math.hypot(b_up, a_down))
