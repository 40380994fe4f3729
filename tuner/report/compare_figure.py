"""The figure of ``tuner compare A B``: every configuration's ratio B / A of
median times with its 95 % interval, coloured by verdict, grouped by problem,
with the margin's band and the regression threshold drawn
(``tuner.data.compare`` makes the table; this only draws it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COLOURS = {"FASTER": "#2a9d55", "SAME": "#3b6fb6", "SLOWER": "#d1495b", "AMBIGUOUS": "#9a9a9a"}


def draw(table: pd.DataFrame, path: Path, *, names: tuple[str, str], margin: float, threshold: float) -> Path:
    """Write the figure to ``path`` (its suffix picks the format)."""
    # The object-oriented API, not pyplot: no GUI backend is chosen or needed.
    from matplotlib.figure import Figure

    from tuner.data.selection import problem_label

    ordered = table.sort_values(["family", "dtype", "n", "ratio"], kind="stable").reset_index(drop=True)
    x = np.arange(len(ordered))
    figure = Figure(figsize=(max(8.0, min(24.0, 4 + len(ordered) / 40)), 5.0), layout="constrained")
    axes = figure.add_subplot()
    axes.axhspan(1 / (1 + margin), 1 + margin, color="#3b6fb6", alpha=0.12, lw=0, label=f"margin ±{margin:.1%}")
    axes.axhline(1.0, color="black", lw=0.8)
    axes.axhline(1 + threshold, color="#d1495b", lw=0.8, ls="--", label=f"regression threshold +{threshold:.0%}")
    for verdict, colour in COLOURS.items():
        rows = ordered["verdict"] == verdict
        if rows.any():
            ratio = ordered.loc[rows, "ratio"]
            spread = np.vstack([ratio - ordered.loc[rows, "ratio_low"], ordered.loc[rows, "ratio_high"] - ratio])
            axes.errorbar(x[rows.to_numpy()], ratio, yerr=np.clip(spread, 0, None), fmt="o", ms=2.5, lw=0.6,
                          color=colour, label=f"{verdict} ({int(rows.sum())})")  # fmt: skip
    ticks, labels = [], []
    for (family, dtype, n), group in ordered.groupby(["family", "dtype", "n"], sort=False):
        start, stop = group.index.min(), group.index.max()
        axes.axvline(stop + 0.5, color="#cccccc", lw=0.6)
        ticks.append((start + stop) / 2)
        labels.append(f"{family}\n{problem_label(family, dtype, int(n))}")
    axes.set_xticks(ticks, labels, rotation=90, fontsize=7)
    axes.set_xlim(-1, len(ordered))
    axes.set_ylabel("B / A of the median time (95 % interval)")
    axes.set_title(f"A: {names[0]}   B: {names[1]}", fontsize=9)
    axes.legend(fontsize=7, loc="best")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130)
    return path
