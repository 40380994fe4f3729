"""How a figure spec becomes a figure: rows -> panels -> PNG and SVG.

A ``FigureSpec`` declares a figure: its name, title and caption, which rows it
shows (family, variants, preferred parameters, the sweep to prefer), which
columns are x, y and the series, one panel per value of ``panel`` columns, and
which blog tables (``published``) it draws. ``row_panels`` turns the spec into
``Panel``s (the best row per series and x of each panel), ``published_marks``
places the blogs' numbers on them, and ``draw`` writes the files. Figures that
are not made of result rows (studies, the overview) give their own ``data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import pandas as pd

from tuner.data.selection import best_by, format_n, problem_label, select
from tuner.report.comparisons import Comparison
from tuner.report.panels import HLine, Mark, Panel, draw_panel
from tuner.report.studies import StudySummary
from tuner.report.style import FIGURE_SUFFIXES, PEAK_STYLES, figure_legend, new_figure, placeholder, shown_name, styled, write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# y column -> (axis label, bar label format, panel title suffix)
Y_AXES = {
    "bandwidth_gbs": ("bandwidth (GB/s)", "{:.0f}", "bandwidth"),
    "gflops": ("GFLOP/s", "{:.0f}", "GFLOP/s"),
    "speedup": ("speed-up over {first} (×)", "{:.1f}×", "speed-up"),
}
PROBLEM = ("dtype", "n")  # the order of a comparison's our_problem


@dataclass
class FigureContext:
    """What figures draw from: usable rows, the device, the peaks, the blogs'
    numbers, the evaluated comparisons, the study summaries, where to write and
    which files each figure becomes (``figure_suffixes``, PNG first)."""

    ok: pd.DataFrame
    device: Mapping[str, Any]
    peaks: Mapping[str, Any]
    published: pd.DataFrame
    studies: list[StudySummary]
    out_dir: Path
    comparisons: Mapping[str, Comparison] = field(default_factory=dict)
    figure_suffixes: tuple[str, ...] = FIGURE_SUFFIXES

    @property
    def gpu(self) -> str:
        return shown_name(self.device.get("name") or "unknown GPU")


@dataclass(frozen=True)
class FigureSpec:
    """One figure, declared. Row figures use the selection and column fields;
    ``data`` replaces them for figures made of something else."""

    stem: str
    title: str
    caption: str
    family: str | None = None
    variants: tuple[str, ...] | None = None
    prefer: Mapping[str, Any] = field(default_factory=dict)
    hint: str | None = None
    derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None  # adds (or filters) columns
    x: str = ""
    ys: tuple[str, ...] = ("bandwidth_gbs",)
    group: str | None = None
    series_label: str = "{}"
    panel: tuple[str, ...] = PROBLEM
    kind: str = "bar"
    log2_x: bool = False
    min_x: int = 1
    labels: str = "value"
    xlabel: str = ""
    peaks: tuple[str, ...] = ()
    published: tuple[str, ...] = ()  # blog tables (comparison keys) drawn as marks
    published_on: tuple[str, ...] | None = None  # the ys that carry them (None: all)
    match: tuple[str, ...] = PROBLEM  # panel columns that must equal the comparison's problem
    missing: str = "no rows with status ok"
    columns: int = 2
    size: tuple[float, float] = (5.2, 3.6)
    data: Callable[[FigureContext, FigureSpec], tuple[list[Panel], str]] | None = None


@dataclass
class FigureResult:
    """A figure's files (PNG, then SVG where written), or none and the reason in ``note``
    (``note`` may also say which panels were left out of a drawn figure);
    ``marks``: the published numbers it draws; ``placeholder``: the image
    written instead of a figure that could not be drawn."""

    stem: str
    title: str
    caption: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""
    marks: list[Mark] = field(default_factory=list)
    placeholder: list[Path] = field(default_factory=list)

    @property
    def drawn(self) -> bool:
        return bool(self.paths)

    @property
    def png(self) -> Path | None:
        return next((p for p in self.paths if p.suffix == ".png"), None)


def peak_lines(peaks: Mapping[str, Any], keys: tuple[str, ...]) -> list[HLine]:
    lines = []
    for key in keys:
        if peaks.get(key):
            label, style, colour = PEAK_STYLES[key]
            lines.append(HLine(float(peaks[key]), f"{label} {float(peaks[key]):.0f} GB/s", style, colour))
    return lines


def _panel_title(spec: FigureSpec, key: Mapping[str, Any], y: str) -> str:
    if set(key) == set(PROBLEM):
        title = problem_label(spec.family or "", key["dtype"], key["n"], tex=True)
    elif set(key) == {"n"}:
        title = f"every element type, n = {format_n(key['n'], spec.family, tex=True)}"
    else:
        title = ", ".join(str(v) for v in key.values())
    if len(spec.ys) > 1:
        title = f"{title}: {Y_AXES[y][2]}" if title else Y_AXES[y][2]
    return title


def _column(frame: pd.DataFrame, name: str | None) -> list[Any]:
    return frame[name].tolist() if name else [""] * len(frame)


def row_panels(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    """One panel per value of the spec's ``panel`` columns and per y: the best
    row of each (series, x), then the blogs' numbers that belong on it."""
    rows = select(ctx.ok, spec.family or "", variants=spec.variants, prefer=spec.prefer, hint=spec.hint)
    if spec.derive is not None and not rows.empty:
        rows = spec.derive(rows)
    if rows.empty:
        return [], spec.missing
    keys = list(spec.panel)
    parts = rows.groupby(keys, sort=True, observed=True) if keys else [((), rows)]
    series_cols = [spec.group] if spec.group else []
    panels = []
    for values, part in parts:
        key = dict(zip(keys, values if isinstance(values, tuple) else (values,)))
        reduced = best_by(part, series_cols + [spec.x]).sort_values([spec.x] + series_cols, kind="stable")
        if reduced[spec.x].nunique() < spec.min_x:
            continue
        for y in spec.ys:
            data = pd.DataFrame({"x": _column(reduced, spec.x), "series": _column(reduced, spec.group)})
            if y == "speedup":  # over the first x of the same series, by time
                times = reduced["time_ms_median"].astype(float).to_numpy()
                firsts = pd.Series(times).groupby(data["series"].to_numpy(), sort=False).transform("first")
                data["y"] = firsts.to_numpy() / times
                label = Y_AXES[y][0].format(first=data["x"].iloc[0])
            else:
                data["y"] = reduced[y].astype(float).to_numpy()
                label = Y_AXES[y][0]
            marks = published_marks(ctx, spec, key, y, data)
            panels.append(
                Panel(
                    kind=spec.kind,
                    title=_panel_title(spec, key, y),
                    data=data,
                    xlabel=spec.xlabel,
                    ylabel=label,
                    fmt=Y_AXES[y][1],
                    labels=spec.labels,
                    series_label=spec.series_label,
                    log2_x=spec.log2_x,
                    marks=marks,
                    hlines=peak_lines(ctx.peaks, spec.peaks) if y == "bandwidth_gbs" else [],
                )
            )
    return panels, "" if panels else f"{spec.missing} (fewer than {spec.min_x} values of {spec.x} in every panel)"


def published_marks(ctx: FigureContext, spec: FigureSpec, key: Mapping[str, Any], y: str, data: pd.DataFrame) -> list[Mark]:
    """The published speed-ups of the spec's blog tables that land on this
    panel: each at the (x, series) of the row we compared with, at the panel's
    value of the reference row times the published speed-up."""
    if spec.published_on is not None and y not in spec.published_on:
        return []
    marks = []
    for table in spec.published:
        comparison = ctx.comparisons.get(table)
        if comparison is None or comparison.our_problem is None:
            continue
        problem = dict(zip(PROBLEM, comparison.our_problem))
        if any(column in key and key[column] != problem[column] for column in spec.match):
            continue
        gpu = comparison.published_problem[2] or "GPU not stated"
        legend = f"published speed-up ({gpu})" if y == "speedup" else f"published ({gpu}): our reference × the blog's speed-up"
        for index, row in comparison.rows.iterrows():
            speedup, ref_index = float(row["published_speedup"]), int(row["ref_index"])
            step, ref = comparison.chosen[index], comparison.chosen[ref_index]
            if index == ref_index or not np.isfinite(speedup) or step is None or ref is None:
                continue
            if spec.variants is not None and step["variant"] not in spec.variants:
                continue
            pair = pd.DataFrame([ref, step])
            pair = spec.derive(pair) if spec.derive is not None else pair
            if len(pair) != 2:
                continue
            (ref_x, x), (ref_series, series) = _column(pair, spec.x), _column(pair, spec.group)
            base = data[(data["x"] == ref_x) & (data["series"] == ref_series)]["y"]
            if len(base) and (data["x"] == x).any():
                marks.append(Mark(x, series, float(base.iloc[0]) * speedup, speedup, table, legend))
    return marks


def render(ctx: FigureContext, spec: FigureSpec, panels: list[Panel]) -> Figure:
    """The figure of ``panels`` (call inside ``styled()``)."""
    width, height = spec.size
    fig, axes = new_figure(len(panels), spec.columns, width_in=width, height_in=height)
    for ax, panel in zip(axes, panels):
        draw_panel(ax, panel)
    published = [line for ax in axes for line in ax.get_lines() if (line.get_gid() or "").startswith("published:")]
    for number, line in enumerate(published):  # SVG ids must be unique: published:<table>:<n>
        line.set_gid(f"{line.get_gid()}:{number}")
    fig.suptitle(f"{ctx.gpu} — {spec.title}", fontweight="bold")
    figure_legend(fig, axes)
    return fig


def build(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    return (spec.data or row_panels)(ctx, spec)


def draw(ctx: FigureContext, spec: FigureSpec) -> FigureResult:
    """Write ``<stem>.png`` (and ``.svg``: ``ctx.figure_suffixes``), or a placeholder saying why not."""
    result = FigureResult(spec.stem, spec.title, spec.caption)
    with styled():
        panels, result.note = build(ctx, spec)
        if not panels:
            # Also replaces a figure left by an earlier build, which would contradict this report.
            title = f"{ctx.gpu} — {spec.title}"
            result.placeholder = placeholder(ctx.out_dir, spec.stem, title, result.note, ctx.figure_suffixes)
            return result
        result.paths = write(render(ctx, spec, panels), ctx.out_dir, spec.stem, ctx.figure_suffixes)
    result.marks = [mark for panel in panels for mark in panel.marks]
    return result
