"""One panel-drawing helper for every figure of the report.

A ``Panel`` is the data of one axes, already chosen and reduced: ``x``, ``y``
and ``series`` columns, the blogs' numbers (``Mark``) and reference lines
(``HLine``). ``draw_panel`` draws it by its ``kind``:

* ``bar``: grouped bars, one colour per series, labelled with their value (or
  with their ratio to the series' first bar);
* ``line``: one line per series over a numeric x (log2 for block sizes);
* ``barh``: one horizontal bar per x;
* ``history``: a study's trials, its best so far and failed trials;
* ``dumbbell``: per row, the published and our speed-up on a log axis, and
  whether the conclusion holds.

Value axes of bars and lines start at zero, so a few percent look like a few
percent. A published number is an orange diamond (``gid``
``published:<table>:<n>``) with its speed-up written beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.transforms import blended_transform_factory

from tuner.report.style import FAILS, HOLDS, OURS, PUBLISHED, SERIES


@dataclass(frozen=True)
class Mark:
    """A published number drawn on a panel.

    ``y`` is our reference value times the published speed-up (on a speed-up
    axis, the speed-up itself): where this GPU would be if it gained what the
    blog's GPU gained.
    """

    x: Any
    series: Any
    y: float
    speedup: float
    table: str
    legend: str


@dataclass(frozen=True)
class HLine:
    y: float
    label: str
    style: str = "--"
    colour: str = "#444444"


@dataclass
class Panel:
    kind: str
    title: str
    data: pd.DataFrame
    xlabel: str = ""
    ylabel: str = ""
    fmt: str = "{:.0f}"
    labels: str = "value"  # value | ratio | none
    series_label: str = "{}"
    log2_x: bool = False
    marks: list[Mark] = field(default_factory=list)
    hlines: list[HLine] = field(default_factory=list)


def draw_panel(ax: Any, panel: Panel) -> None:
    """Draw ``panel`` on ``ax`` (see the module docstring for the kinds)."""
    {"bar": _bars, "line": _lines, "barh": _barh, "history": _history, "dumbbell": _dumbbell}[panel.kind](ax, panel)
    ax.set_title(panel.title)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    for line in panel.hlines:
        ax.axhline(line.y, linestyle=line.style, color=line.colour, linewidth=1.1, label=line.label)
    if panel.kind in ("bar", "line", "history"):
        values = [*panel.data["y"].dropna(), *(m.y for m in panel.marks), *(h.y for h in panel.hlines)]
        top = max(values, default=1.0)
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)


def _series(data: pd.DataFrame) -> list[Any]:
    return list(dict.fromkeys(data["series"]))


def _colour(series: list[Any], index: int) -> str:
    return OURS if len(series) == 1 else SERIES[index % len(SERIES)]


def _mark(ax: Any, x: float, mark: Mark, lower: bool = False) -> None:
    """An orange diamond at ``(x, mark.y)`` and its speed-up, written below-right
    of it (a line lower for every second mark, so neighbours do not collide)."""
    ax.plot(
        [x],
        [mark.y],
        marker="D",
        markersize=6.5,
        color=PUBLISHED,
        markeredgecolor="black",
        markeredgewidth=0.6,
        linestyle="none",
        zorder=5,
        gid=f"published:{mark.table}",
        label=mark.legend,
    )
    ax.annotate(
        f"{mark.speedup:.2f}×",
        (x, mark.y),
        xytext=(6, -14 if lower else -3),
        textcoords="offset points",
        va="top",
        fontsize=7,
        color="#a04000",
        fontweight="bold",
        zorder=6,
        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
    )


def _bars(ax: Any, panel: Panel) -> None:
    data = panel.data
    categories = list(dict.fromkeys(data["x"]))
    series = _series(data)
    width = 0.8 / len(series)
    offsets = {s: (j - (len(series) - 1) / 2) * width for j, s in enumerate(series)}
    position = {c: i for i, c in enumerate(categories)}
    for j, name in enumerate(series):
        mine = data[data["series"] == name].set_index("x")["y"]
        values = np.array([mine.get(c, np.nan) for c in categories], dtype=float)
        label = "ours" if len(series) == 1 else panel.series_label.format(name)
        bars = ax.bar(np.arange(len(categories)) + offsets[name], values, width, color=_colour(series, j), label=label)
        if panel.labels == "none":
            continue
        texts = [panel.fmt.format(v) if not np.isnan(v) else "" for v in values]
        if panel.labels == "ratio" and len(values) and values[0] > 0:
            texts = texts[:1] + [f"{v / values[0]:.2f}×" if not np.isnan(v) else "" for v in values[1:]]
        ax.bar_label(bars, labels=texts, fontsize=6.5, padding=1.5)
    ax.set_xticks(np.arange(len(categories)), [str(c) for c in categories])
    if (
        max((len(str(c)) for c in categories), default=0) > 9
        and len(categories) > 4
        and not any("\n" in str(c) for c in categories)
    ):
        ax.tick_params(axis="x", labelrotation=35)
        for tick in ax.get_xticklabels():
            tick.set_horizontalalignment("right")
    for i, mark in enumerate(m for m in panel.marks if m.x in position):
        _mark(ax, position[mark.x] + offsets.get(mark.series, 0.0), mark, lower=i % 2 == 1)


def _lines(ax: Any, panel: Panel) -> None:
    data = panel.data
    series = _series(data)
    for j, name in enumerate(series):
        line = data[data["series"] == name]
        label = "ours" if len(series) == 1 else panel.series_label.format(name)
        ax.plot(line["x"].astype(float), line["y"], marker="o", color=_colour(series, j), label=label)
    if panel.log2_x:
        ticks = sorted({int(x) for x in data["x"]})
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    for i, mark in enumerate(panel.marks):
        _mark(ax, float(mark.x), mark, lower=i % 2 == 1)


def _barh(ax: Any, panel: Panel) -> None:
    data = panel.data
    bars = ax.barh([str(x) for x in data["x"]], data["y"], color=OURS)
    ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    ax.set_xlim(0, (data["y"].max() * 1.2) or 1)


def _history(ax: Any, panel: Panel) -> None:
    h = panel.data
    ok = h[h["status"] == "ok"]
    ax.scatter(ok["trial"], ok["y"], s=14, color="#9fb7d4", label="trial", zorder=2)
    ax.step(h["trial"], h["best_so_far"], where="post", color=OURS, label="best so far", zorder=3)
    failed = h[h["status"] != "ok"]
    if len(failed):
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        ax.scatter(
            failed["trial"],
            [0.03] * len(failed),
            marker="x",
            color=FAILS,
            transform=bottom,
            label="failed trial",
            zorder=3,
            clip_on=False,
        )


def _dumbbell(ax: Any, panel: Panel) -> None:
    """Rows top to bottom; x: speed-up (log). Columns: x (row label), y (ours),
    published, holds (True/False/None), verdict (text), table. Right of the
    axes: the ratio ours / published and the verdict."""
    data = panel.data.reset_index(drop=True)
    rows = np.arange(len(data))[::-1]
    right = blended_transform_factory(ax.transAxes, ax.transData)  # x in axes fractions, y in rows
    for row, (_, r) in zip(rows, data.iterrows()):
        points = [v for v in (r["published"], r["y"]) if pd.notna(v)]
        if len(points) == 2:
            ax.plot(points, [row, row], color="#bbbbbb", linewidth=2.5, zorder=1, solid_capstyle="round")
        if pd.notna(r["published"]):
            ax.plot([r["published"]], [row], marker="D", markersize=7, color=PUBLISHED, markeredgecolor="black",
                    markeredgewidth=0.6, linestyle="none", zorder=3, gid=f"published:{r['table']}",
                    label="published speed-up (blog's GPU)")  # fmt: skip
        if pd.notna(r["y"]):
            ax.plot([r["y"]], [row], marker="o", markersize=7, color=OURS, linestyle="none", zorder=3,
                    label="our speed-up (this GPU)")  # fmt: skip
        ratio = r["y"] / r["published"] if pd.notna(r["y"]) and pd.notna(r["published"]) else np.nan
        colour = {True: HOLDS, False: FAILS}.get(r["holds"], "#777777")
        ax.text(1.02, row, "—" if np.isnan(ratio) else f"{ratio:.2f}", transform=right, va="center", ha="left", fontsize=8)
        ax.text(1.11, row, r["verdict"], transform=right, va="center", ha="left", fontsize=8, color=colour, fontweight="bold")
    for x, text in ((1.02, "ratio"), (1.11, "conclusion")):
        ax.text(x, len(data) - 0.45, text, transform=right, va="bottom", ha="left", fontsize=8, color="#444444")
    ax.axvline(1.0, color="#444444", linewidth=0.9, zorder=0)
    ax.set_xscale("log")
    values = [v for v in [*data["y"], *data["published"]] if pd.notna(v) and v > 0]
    low, high = (min(values), max(values)) if values else (0.5, 2.0)
    ax.set_xlim(min(low, 1.0) / 1.3, max(high, 1.0) * 1.3)
    ticks = [t for t in (0.5, 0.7, 1, 1.5, 2, 3, 5, 10, 20, 50) if low / 1.3 <= t <= high * 1.3] or [1]
    ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(rows, list(data["x"]), fontsize=8)
    ax.set_ylim(-0.7, len(data) - 0.3)
    ax.grid(axis="y", visible=False)
