"""The report's energy section: per problem (and operation, where a family's
configurations do different work), median time against joules per
launch of every configuration whose energy was measured, the Pareto front
marked and its knee named, and a table saying whether the trade-off is real:
energy saved for time lost at the knee, and whether the fastest and the most
frugal differ by more than their uncertainties. Rows come from the dataset
(``energy_j`` and friends: ``tuner.measure.energy``); without any, the section
says why there are none.

Each row's ``energy_j_err`` is one standard error from the spread of a few
windows (3 by default: 2 degrees of freedom), so two energies differ, 95 %
sure, where they lie further apart than Student's t (not 2) times their
combined standard error, at the degrees of freedom of both rows' windows
(Welch-Satterthwaite): about 2.8 for two rows of 3 windows. Where a row's
error is unknown, so is whether they differ, and the table says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tuner.data.front import ENERGY, TIME, knee, pareto_mask, with_both
from tuner.data.ties import operation_order, operations
from tuner.report.style import FIGURE_SUFFIXES, blank_figure, shown_name, styled, write

STEM = "energy_front"
MAX_PANELS = 12
# Student's t at 97.5 % for 1 to 30 degrees of freedom (a two-sided 95 % statement;
# between and beyond them: ``t_975``). Written out: scipy is no dependency of the report.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
# The windows behind a row without ``energy_windows`` (a file from elsewhere: a T4
# import): the default of ``EnergyOptions.windows`` (tuner.measure.energy, which the
# report may not import); tests/test_energy.py checks that the two agree.
DEFAULT_WINDOWS = 3


def _problems(dataset: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per problem with energy and, where a family's
    configurations do different work (``Family.operation``: copy's copy and
    read), per operation: a read's joules are no answer for a copy."""
    if ENERGY not in dataset:
        return []
    # Only a finite, positive time and energy place a point (tuner.data.front).
    rows = with_both(dataset[dataset["status"] == "ok"])
    if "source" in rows:
        rows = rows[rows["source"] != "peaks"]
    # A configuration measured by several sources keeps its latest row.
    rows = rows.sort_values("timestamp") if "timestamp" in rows else rows
    rows = rows.drop_duplicates(["family", "dtype", "n", "config_key"], keep="last")
    operation = operations(rows).fillna("").rename("operation")
    groups = rows.groupby([rows["family"], rows["dtype"], rows["n"], operation], sort=False)
    ordered = sorted(groups, key=lambda item: (*item[0][:3], operation_order(item[0][0], item[0][3] or None)))
    return [(_label(*key), group) for key, group in ordered]


def _label(family: str, dtype: str, n: int, operation: str) -> str:
    return f"{family}{f' ({operation})' if operation else ''} {dtype} n={n}"


def t_975(df: float) -> float:
    """Student's t at 97.5 % for ``df`` degrees of freedom (at least 1): the
    table's, linear in 1 / df between its entries and past its last (to the
    normal's 1.96 at infinite df). The quantile is convex in 1 / df, so this
    is never below it but for the table's rounding, and from 2 degrees of
    freedom up at most 1.6 % above it."""
    df = max(1.0, df)
    if df >= len(T_975):
        return 1.96 + (T_975[-1] - 1.96) * len(T_975) / df
    low = math.floor(df)
    share = (1 / df - 1 / (low + 1)) / (1 / low - 1 / (low + 1))  # 1 at a whole df
    return share * T_975[low - 1] + (1 - share) * T_975[low]


def _number(value: Any) -> float:
    """A row's value as a float; nan where it is missing (None, NA, nan)."""
    return float("nan") if value is None or pd.isna(value) else float(value)


def _within_uncertainty(frugal: Mapping, fastest: Mapping) -> bool | None:
    """Whether the two rows' energies lie within Student's t (95 %, at the
    Welch-Satterthwaite degrees of freedom of their windows) times their
    combined standard error; None where either error is unknown. Each error's
    counting term is taken as if it too came from the windows: fewer degrees
    of freedom than it has, so a larger t."""
    errors = [_number(row.get("energy_j_err")) for row in (frugal, fastest)]
    if not all(math.isfinite(err) and err >= 0 for err in errors):
        return None
    degrees = []
    for row in (frugal, fastest):
        windows = _number(row.get("energy_windows"))
        degrees.append(max(1.0, (windows if math.isfinite(windows) else DEFAULT_WINDOWS) - 1))
    combined = math.hypot(*errors)
    spread = sum(err**4 / df for err, df in zip(errors, degrees))
    df = combined**4 / spread if spread > 0 else min(degrees)
    return abs(_number(fastest[ENERGY]) - _number(frugal[ENERGY])) <= t_975(df) * combined


def energy_table(dataset: pd.DataFrame) -> pd.DataFrame | None:
    """One line per problem with energy: its fastest's joules per launch (±
    one standard error), power and joules per byte, the front's size, and the
    knee's trade-off."""
    lines = []
    for label, rows in _problems(dataset):
        found = knee(rows)
        fastest, frugal = found.fastest, found.frugal
        per_byte = fastest.get("energy_j_per_byte")
        within, saves = _within_uncertainty(frugal, fastest), 1 - frugal[ENERGY] / fastest[ENERGY]
        if found.points == 1:
            trade = "none: the fastest is also the most frugal"
        elif within is None:
            trade = f"uncertainty unknown (no energy_j_err on a row): the most frugal saves {saves:.1%}"
        elif within:
            trade = f"within the uncertainty: the most frugal saves {saves:.1%}"
        else:
            trade = (
                f"{found.energy_saved:.1%} less energy for {found.time_lost:.1%} more time (ratio {found.ratio:.2f})"
                if found.ratio is not None
                else "n/a"
            )
        lines.append(
            {
                "problem": label,
                "with energy": len(rows),
                "fastest: mJ per launch": f"{fastest[ENERGY] * 1e3:.4g} ± {fastest.get('energy_j_err', float('nan')) * 1e3:.2g}",
                "W": f"{fastest.get('power_w_energy', float('nan')):.0f}",
                "pJ per byte": f"{per_byte * 1e12:.1f}" if per_byte is not None and np.isfinite(per_byte) else "—",
                "on the front": found.points,
                "at the knee": trade,
            }
        )
    return pd.DataFrame(lines) if lines else None


def draw_energy(
    dataset: pd.DataFrame, gpu: str, out_dir: Path, suffixes: tuple[str, ...] = FIGURE_SUFFIXES
) -> tuple[list[Path], str]:
    """``energy_front.png`` (and ``.svg``: ``suffixes``): a panel per problem with at least two
    configurations with energy; returns (files, a note on what is left out)."""
    problems = [(key, rows) for key, rows in _problems(dataset) if len(rows) >= 2]
    if not problems:
        return [], "no problem has two configurations with energy (a sweep with `energy: true` draws one)"
    left_out = len(problems) - MAX_PANELS
    problems = problems[:MAX_PANELS]
    columns = min(3, len(problems))
    panel_rows = math.ceil(len(problems) / columns)
    with styled():
        fig = blank_figure(max(4.6 * columns, 7.5), 3.6 * panel_rows + 0.8)
        axes = np.atleast_1d(fig.subplots(panel_rows, columns, squeeze=False)).ravel()
        for ax in axes[len(problems) :]:
            ax.set_visible(False)
        for ax, (label, rows) in zip(axes, problems):
            t, e = rows[TIME].to_numpy(float), rows[ENERGY].to_numpy(float) * 1e3
            err = rows["energy_j_err"].to_numpy(float) * 1e3 if "energy_j_err" in rows else None
            on = pareto_mask(t, e)
            ax.errorbar(
                t[~on], e[~on], yerr=None if err is None else err[~on], fmt="o", ms=3, color="0.6", lw=0.6, label="measured"
            )
            order = np.argsort(t[on])
            ax.errorbar(t[on][order], e[on][order], yerr=None if err is None else err[on][order], fmt="-o", ms=4, color="C3",
                        lw=1.2, label="Pareto front")  # fmt: skip
            found = knee(rows)
            if found.points > 2:
                ax.scatter([found.knee[TIME]], [found.knee[ENERGY] * 1e3], s=120, facecolors="none", edgecolors="black", zorder=4,
                           label=f"knee: −{found.energy_saved:.1%} energy, +{found.time_lost:.1%} time")  # fmt: skip
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("median time (ms)")
            ax.set_ylabel("mJ per launch (± 1 s.e.)")
            ax.legend(fontsize=7)
        fig.suptitle(f"Time against energy — {shown_name(gpu)}", fontweight="bold")
        files = write(fig, out_dir, STEM, suffixes)
    note = f"{left_out} more problems with energy are in the table only" if left_out > 0 else ""
    return files, note


def energy_content(
    dataset: pd.DataFrame, *, gpu: str, out_dir: Path, suffixes: tuple[str, ...] = FIGURE_SUFFIXES
) -> dict[str, Any]:
    """What the templates' energy section shows (``energy`` in the content)."""
    table = energy_table(dataset)
    if table is None:
        return {"available": False, "why": "no verified row has energy (sweeps measure their fastest by default on GPUs "
                                           "with NVML's energy counter; `energy: true` measures every configuration)"}  # fmt: skip
    files, note = draw_energy(dataset, gpu, Path(out_dir), suffixes)
    return {
        "available": True,
        "intro": (
            "Joules per launch from NVML's total-energy counter: the configuration launched back to back over windows aligned "
            "to the counter's updates (about 100 ms apart), energy over launches, ± one standard error from the windows' spread "
            "and the launches counted at each boundary; clocks and power limits as the GPU had them. Launches back to back run "
            "with a warm L2, unlike the timed samples. The fastest and the most frugal differ where they lie further apart than "
            "Student's t for the windows' degrees of freedom (95 %; about 2.8 for two rows of 3 windows) times their combined "
            "standard error; where a row's error is unknown, so is whether they differ."
        ),
        "table": table,
        "figure": {"file": f"{STEM}.png", "path": files[0], "note": note} if files else None,
        "figure_note": note,
    }
