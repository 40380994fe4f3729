"""The time-energy front of measured rows and its knee, for the search
(``tuner.search.study.pareto``) and the report (``tuner.report.energy``) alike.

The front: the rows no other row beats in both median time and joules per
launch. Its knee: the point farthest inside the straight line from the
fastest point to the most frugal, in the front's own normalised units; there
the ratio of energy saved to time lost (both relative to the fastest) says
whether the trade-off is worth it.

Only a time and an energy that are both finite and positive place a row: a
missing, infinite, zero or negative value is a measurement gone wrong, and on
a front it would be the fastest or the most frugal of all. The knee counts
identical points once, however many configurations measured them (the first
row stands for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

TIME, ENERGY = "time_ms_median", "energy_j"  # the row columns of the two objectives


def placed(values: Sequence[float]) -> np.ndarray:
    """True where a value can place a point: finite and positive."""
    v = np.asarray(values, dtype=float)
    return np.isfinite(v) & (v > 0)


def pareto_mask(times: Sequence[float], energies: Sequence[float]) -> np.ndarray:
    """True where no other point is at least as good in both and better in
    one (both minimised); points with a value that is not finite and positive
    are never on it."""
    t, e = np.asarray(times, dtype=float), np.asarray(energies, dtype=float)
    valid = placed(t) & placed(e)
    mask = np.zeros(t.size, dtype=bool)
    for i in np.flatnonzero(valid):
        others = valid & (t <= t[i]) & (e <= e[i]) & ((t < t[i]) | (e < e[i]))
        mask[i] = not others.any()
    return mask


@dataclass(frozen=True)
class Knee:
    """The front's fastest, most frugal and knee points (rows), and at the
    knee, energy saved and time lost as fractions of the fastest's."""

    fastest: Mapping
    frugal: Mapping
    knee: Mapping
    energy_saved: float
    time_lost: float
    points: int  # distinct (time, energy) points on the front

    @property
    def ratio(self) -> float | None:
        """Energy saved per time lost at the knee (None: no trade-off, the
        fastest is also the most frugal)."""
        return self.energy_saved / self.time_lost if self.time_lost > 0 else None

    def sentence(self) -> str:
        if self.points == 1:
            return "no trade-off: the fastest configuration is also the most frugal"
        ratio = f"{self.ratio:.2f}" if self.ratio is not None else "n/a"
        return (f"{self.points} configurations on the front; at its knee {self.energy_saved:.1%} less energy "
                f"for {self.time_lost:.1%} more time (ratio {ratio}); the most frugal saves "
                f"{1 - self.frugal[ENERGY] / self.fastest[ENERGY]:.1%} for {self.frugal[TIME] / self.fastest[TIME] - 1:.1%}")  # fmt: skip


def _objectives(rows: pd.DataFrame, time: str, energy: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows' times and energies as floats (nan where missing)."""
    return tuple(rows[column].to_numpy(dtype=float, na_value=np.nan) for column in (time, energy))


def with_both(rows: pd.DataFrame, time: str = TIME, energy: str = ENERGY) -> pd.DataFrame:
    """The rows whose time and energy can both place a point (``placed``)."""
    times, energies = _objectives(rows, time, energy)
    return rows[placed(times) & placed(energies)]


def knee(rows: pd.DataFrame, time: str = TIME, energy: str = ENERGY) -> Knee | None:
    """The knee of the Pareto front of ``rows`` (None: no row has both a
    finite, positive time and energy)."""
    # The front is found on the two columns alone: a table of many problems asks
    # for one knee each, and copying every column of every row would cost more.
    times, energies = _objectives(rows, time, energy)
    positions = np.flatnonzero(placed(times) & placed(energies))
    if positions.size == 0:
        return None
    # Identical points count once: the first row of each stands for it, so the
    # front's size and its ends do not depend on how often a point was measured.
    _, first = np.unique(np.column_stack([times[positions], energies[positions]]), axis=0, return_index=True)
    positions = positions[np.sort(first)]
    positions = positions[pareto_mask(times[positions], energies[positions])]
    # Fastest first; no two points of the front share both values.
    positions = positions[np.lexsort((energies[positions], times[positions]))]
    t, e = times[positions], energies[positions]
    chosen = 0
    if len(positions) > 2:
        # Normalised so that fastest -> (0, 1) and most frugal -> (1, 0); the knee
        # lies farthest below the line between them (t + e = 1).
        inside = 1 - (t - t[0]) / (t[-1] - t[0]) - (e - e[-1]) / (e[0] - e[-1])
        chosen = int(np.argmax(inside)) if inside.max() > 0 else len(positions) - 1
    elif len(positions) == 2:
        chosen = 1

    def row(i: int) -> dict:
        return rows.iloc[int(positions[i])].to_dict()

    return Knee(fastest=row(0), frugal=row(-1), knee=row(chosen),
                energy_saved=float(1 - e[chosen] / e[0]), time_lost=float(t[chosen] / t[0] - 1),
                points=len(positions))  # fmt: skip
