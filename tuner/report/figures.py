"""The report's figures, each written as PNG and SVG in one style.

Every figure function takes a ``FigureContext`` and returns a ``FigureResult``:
the files it wrote, or none and a note saying which rows were missing. Panels
are one per problem (element type and size) so a figure's name is stable
(``EXPECTED_FIGURES``) however many problems were measured. Figures are built
on ``matplotlib.figure.Figure`` directly (no pyplot), so no global figure state
or GUI backend is involved.
"""

from __future__ import annotations

import math
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from tuner.families.reduce import BANK_CONFLICT_PAIR, LADDER
from tuner.report.published import ladder_speedups
from tuner.report.selection import (
    best,
    best_by,
    format_n,
    is_study,
    peak_fractions,
    problem_label,
    problems,
    select,
)
from tuner.report.studies import StudySummary

# The ladder's order and the bank-conflict pair come from the family itself.
BANK_PAIR = BANK_CONFLICT_PAIR
LADDER_TABLES = {"int32": "reduce_ladder_int32_1050ti", "float32": "reduce_v0_v6_gtx1060"}
DTYPE_ORDER = ("int8", "float16", "float32", "int32")
FAMILY_ORDER = ("copy", "reduce", "vector_add", "offset", "layout", "matmul")

OURS = "#1f77b4"
PUBLISHED = "#ff7f0e"
PEAK_STYLES = {  # peaks key -> (label, line style, colour)
    "theoretical_gbs": ("theoretical peak", "-", "#444444"),
    "read_gbs": ("read peak", ":", "#2ca02c"),
    "copy_gbs": ("copy peak", "--", "#d62728"),
    "cub_reduce_gbs": ("CUB reduce", "-.", "#9467bd"),
}
DPI = 110


def report_style() -> dict[str, Any]:
    """The rcParams every report figure is drawn with."""
    return {
        "figure.facecolor": "white",
        "axes.facecolor": "white",
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": "#dddddd",
        "grid.linewidth": 0.6,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "legend.fontsize": 7.5,
        "legend.frameon": False,
        "figure.titlesize": 12,
        "font.family": "DejaVu Sans",
        "lines.linewidth": 1.6,
        "lines.markersize": 5,
        "axes.prop_cycle": mpl.cycler(color=mpl.colormaps["tab10"].colors),
        "svg.fonttype": "none",  # text stays text: smaller, searchable SVGs
        "svg.hashsalt": "tuner-report",  # stable ids, so unchanged figures diff clean
    }


@contextmanager
def styled() -> Iterator[None]:
    with mpl.rc_context(report_style()):
        yield


@dataclass
class FigureContext:
    """What figures draw from: usable rows, the device, the peaks, the blogs'
    numbers, the study summaries and where to write."""

    ok: pd.DataFrame
    device: Mapping[str, Any]
    peaks: Mapping[str, Any]
    published: pd.DataFrame
    studies: list[StudySummary]
    out_dir: Path

    @property
    def gpu(self) -> str:
        return str(self.device.get("name") or "unknown GPU")

    @property
    def sweeps(self) -> pd.DataFrame:
        return self.ok[~is_study(self.ok).to_numpy(dtype=bool)]


@dataclass
class FigureResult:
    """A figure's files (PNG then SVG), or none and the reason in ``note``.
    ``note`` may also be set when the figure was drawn but some panels were not."""

    stem: str
    caption: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""

    @property
    def drawn(self) -> bool:
        return bool(self.paths)


def _figure(panels: int, columns: int, *, width_in: float = 5.2, height_in: float = 3.6) -> tuple[Figure, list[Any]]:
    rows = max(1, math.ceil(panels / columns))
    columns = min(columns, max(panels, 1))
    # At least 7.5 in wide: a one-panel figure must still fit the GPU name in its title.
    fig = Figure(figsize=(max(width_in * columns, 7.5), height_in * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def _save(fig: Figure, ctx: FigureContext, stem: str, title: str) -> list[Path]:
    fig.suptitle(f"{ctx.gpu} — {title}", fontweight="bold")
    return _write(fig, ctx.out_dir, stem)


def _write(fig: Figure, folder: Path, stem: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix in ("png", "svg"):
        path = folder / f"{stem}.{suffix}"
        # No dates in the metadata: rebuilding unchanged data gives identical files.
        fig.savefig(path, dpi=DPI, metadata={"Date": None} if suffix == "svg" else {"Software": None})
        paths.append(path)
    return paths


def write_placeholder(ctx: FigureContext, result: FigureResult) -> list[Path]:
    """A small image saying the figure was not drawn and why, so that every
    stem of ``EXPECTED_FIGURES`` exists for the workflow; the report does not
    embed it and lists the reason under "Missing data"."""
    with styled():
        fig = Figure(figsize=(7.5, 1.8), layout="constrained")
        fig.suptitle(f"{ctx.gpu} — {FIGURE_TITLES.get(result.stem, result.stem)}", fontweight="bold")
        fig.text(0.5, 0.4, "\n".join(textwrap.wrap(f"Not drawn: {result.note}.", 90)), ha="center", va="center", fontsize=10)
        return _write(fig, ctx.out_dir, result.stem)


def _peak_lines(ax: Any, peaks: Mapping[str, Any], keys: tuple[str, ...] = ("copy_gbs", "theoretical_gbs")) -> None:
    for key in keys:
        value = peaks.get(key)
        if value:
            label, style, colour = PEAK_STYLES[key]
            ax.axhline(float(value), linestyle=style, color=colour, linewidth=1.1, label=f"{label} {float(value):.0f} GB/s")


def _legend(ax: Any, **kwargs: Any) -> None:
    """A legend, only where something is labelled (an empty one warns)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def _headroom(ax: Any, fraction: float = 0.22) -> None:
    """Room above the highest bar or line for a legend in the top corner."""
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + (high - low) * fraction)


def _footroom(ax: Any, fraction: float = 0.4) -> None:
    """Room below the lowest line for a legend in a bottom corner (line plots
    keep a zoomed axis: a few percent between configurations must show)."""
    low, high = ax.get_ylim()
    ax.set_ylim(low - (high - low) * fraction, high)


def _bar_labels(ax: Any, bars: Any, fmt: str) -> None:
    ax.bar_label(bars, fmt=fmt, fontsize=6.5, padding=1.5)


def _log2_axis(ax: Any, values: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(values)
    ax.set_xticklabels([str(v) for v in values])
    ax.minorticks_off()


def _step_key(variant: str, unroll: Any) -> str:
    return f"unrolled ×{int(unroll)}" if variant == "unrolled" and pd.notna(unroll) else variant


def _step_order(key: str) -> tuple[int, int]:
    variant, _, unroll = key.partition(" ×")
    return LADDER.index("unrolled" if variant == "unrolled" else variant), int(unroll or 0)


# ---- (a) the reduction ladder ------------------------------------------------


def ladder_steps(ok: pd.DataFrame, dtype: str, n: int) -> pd.DataFrame:
    """Best row per ladder step (``unrolled`` split by unroll) of one problem,
    in ladder order, with ``step`` and ``speedup`` (over the first step, by time)."""
    rows = select(ok, "reduce", variants=LADDER, dtype=dtype, n=n, prefer={"offset": 0}, hint="sweep:reduce_ladder")
    if rows.empty:
        return rows
    rows = rows.assign(step=[_step_key(v, u) for v, u in zip(rows["variant"], rows["unroll"])])
    steps = best_by(rows, ["step"])
    steps = steps.iloc[sorted(range(len(steps)), key=lambda i: _step_order(steps["step"].iloc[i]))]
    times = steps["time_ms_median"].astype(float).to_numpy()
    return steps.assign(speedup=times[0] / times)


def _published_ladder(ctx: FigureContext, dtype: str, our_steps: list[str]) -> tuple[dict[str, float], str]:
    """Published speed-up per our step key, and a legend label."""
    table = LADDER_TABLES.get(dtype)
    if table is None:
        return {}, ""
    pub = ladder_speedups(ctx.published, table)
    if pub.empty:
        return {}, ""
    unrolled = sorted((s for s in our_steps if s.startswith("unrolled ×")), key=_step_order)
    mapped: dict[str, float] = {}
    for variant, unroll, speedup in zip(pub["variant"], pub["unroll"], pub["speedup"]):
        if variant == "unrolled" and (unroll is None or pd.isna(unroll)):
            key = unrolled[-1] if unrolled else "unrolled"  # factor not stated: our largest
        else:
            key = _step_key(variant, unroll)
        mapped[key] = float(speedup)
    rows = ctx.published[ctx.published["table"] == table]
    n = rows["n"].dropna()
    label = f"published ({rows['gpu'].iloc[0]}, {dtype}, n = {format_n(int(n.iloc[0]), tex=True) if len(n) else '?'})"
    return mapped, label


def fig_reduce_ladder(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "reduce_ladder",
        "Reduction ladder: bandwidth of each step (left) and speed-up over the first step (right), ours beside the blogs' published speed-ups (int32: CUDA Freshman 3.5 on a GTX 1050 Ti; float32: reduce v0–v6 on a GTX 1060).",
    )
    candidates = select(ctx.ok, "reduce", variants=LADDER)
    groups = []
    for dtype, n in problems(candidates):
        steps = ladder_steps(ctx.ok, dtype, n)
        if steps["variant"].nunique() >= 3:
            groups.append((dtype, n, steps))
    if not groups:
        result.note = "no problem with at least 3 reduction-ladder variants measured (status ok)"
        return result
    with styled():
        fig, axes = _figure(2 * len(groups), 2, width_in=6.0, height_in=3.5)
        for i, (dtype, n, steps) in enumerate(groups):
            left, right = axes[2 * i], axes[2 * i + 1]
            x = np.arange(len(steps))
            labels = steps["step"].tolist()
            bars = left.bar(x, steps["bandwidth_gbs"], color=OURS, label="ours")
            _bar_labels(left, bars, "%.0f")
            _peak_lines(left, ctx.peaks, ("copy_gbs",))
            _headroom(left)
            left.set_xticks(x, labels, rotation=40, ha="right")
            left.set_ylabel("bandwidth (GB/s)")
            left.set_title(f"{problem_label('reduce', dtype, n, tex=True)}: bandwidth")
            _legend(left, loc="upper left")

            published, pub_label = _published_ladder(ctx, dtype, labels)
            first_matches = published and labels[0] in published
            width = 0.4 if first_matches else 0.8
            bars = right.bar(x - (width / 2 if first_matches else 0), steps["speedup"], width, color=OURS, label="ours")
            _bar_labels(right, bars, "%.1f×")
            if first_matches:
                pub_values = [published.get(s, np.nan) for s in labels]
                bars = right.bar(x + width / 2, pub_values, width, color=PUBLISHED, label=pub_label)
                _bar_labels(right, bars, "%.1f×")
            _headroom(right)
            right.set_xticks(x, labels, rotation=40, ha="right")
            right.set_ylabel(f"speed-up over {labels[0]} (×)")
            right.set_title(f"{problem_label('reduce', dtype, n, tex=True)}: speed-up")
            _legend(right, loc="upper left")
        result.paths = _save(fig, ctx, result.stem, "reduction ladder")
    missing = sorted(set(LADDER_TABLES) - {d for d, _, _ in groups})
    if missing:
        result.note = f"no ladder measured for {', '.join(missing)}"
    return result


# ---- (b) block size x unroll ---------------------------------------------------


def fig_reduce_block_unroll(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "reduce_block_unroll",
        "Unrolled reduction: bandwidth per block size, one line per unroll factor (best over the other parameters).",
    )
    rows = select(ctx.ok, "reduce", variants=["unrolled"], prefer={"offset": 0}, hint="sweep:reduce_block_unroll")
    groups = [(d, n) for d, n in problems(rows) if rows[(rows["dtype"] == d) & (rows["n"] == n)]["block_size"].nunique() >= 2]
    if not groups:
        result.note = "no unrolled-reduction rows with at least 2 block sizes (status ok)"
        return result
    with styled():
        fig, axes = _figure(len(groups), 2)
        for ax, (dtype, n) in zip(axes, groups):
            mine = rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)]
            for unroll, line in best_by(mine, ["unroll", "block_size"]).groupby("unroll"):
                ax.plot(line["block_size"].astype(int), line["bandwidth_gbs"], marker="o", label=f"unroll {unroll}")
            _log2_axis(ax, sorted(mine["block_size"].dropna().astype(int).unique()))
            _peak_lines(ax, ctx.peaks, ("copy_gbs",))
            ax.set_xlabel("block size (threads)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(problem_label("reduce", dtype, n, tex=True))
            _footroom(ax)
            _legend(ax, loc="lower right", ncols=2)
        result.paths = _save(fig, ctx, result.stem, "unrolled reduction, block size × unroll")
    return result


# ---- bank conflicts --------------------------------------------------------------


def fig_reduce_bank_conflicts(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "reduce_bank_conflicts",
        "Shared-memory reduction with interleaved (bank conflicts) vs sequential addressing: bandwidth per problem (left) and the speed-up of sequential addressing, ours beside the blog's V100 number (right).",
    )
    rows = select(ctx.ok, "reduce", variants=BANK_PAIR, prefer={"offset": 0}, hint="sweep:reduce_bank_conflicts")
    pairs = []
    for dtype, n in problems(rows):
        mine = best_by(rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)], ["variant"])
        if set(mine["variant"]) == set(BANK_PAIR):
            pairs.append((dtype, n, mine.set_index("variant")))
    if not pairs:
        result.note = "no problem with both shared_interleaved and shared_sequential measured (status ok)"
        return result
    pub = ctx.published[
        (ctx.published["table"] == "bank_conflict_v100") & (ctx.published["metric"] == "bandwidth_gbs")
    ].set_index("variant")
    with styled():
        fig, (left, right) = _figure(2, 2, width_in=5.0)
        x = np.arange(len(pairs))
        labels = [problem_label("reduce", d, n, tex=True).replace(", ", "\n") for d, n, _ in pairs]
        for offset, variant, colour in ((-0.2, BANK_PAIR[0], "#aec7e8"), (0.2, BANK_PAIR[1], OURS)):
            bars = left.bar(x + offset, [p.loc[variant, "bandwidth_gbs"] for *_, p in pairs], 0.4, color=colour, label=variant)
            _bar_labels(left, bars, "%.0f")
        _headroom(left)
        left.set_xticks(x, labels)
        left.set_ylabel("bandwidth (GB/s)")
        left.set_title("bandwidth")
        _legend(left, loc="upper left")
        speedups = [p.loc[BANK_PAIR[0], "time_ms_median"] / p.loc[BANK_PAIR[1], "time_ms_median"] for *_, p in pairs]
        names, values, colours = list(labels), list(speedups), [OURS] * len(pairs)
        if set(BANK_PAIR) <= set(pub.index):
            names.append("published\nV100")
            values.append(pub.loc[BANK_PAIR[1], "value"] / pub.loc[BANK_PAIR[0], "value"])
            colours.append(PUBLISHED)
        bars = right.bar(np.arange(len(values)), values, 0.6, color=colours)
        _bar_labels(right, bars, "%.2f×")
        right.axhline(1.0, color="#444444", linewidth=0.8)
        right.set_xticks(np.arange(len(values)), names)
        right.set_ylabel("speed-up of sequential over interleaved (×)")
        right.set_title("sequential / interleaved")
        result.paths = _save(fig, ctx, result.stem, "bank conflicts in a shared-memory reduction")
    return result


# ---- copy --------------------------------------------------------------------------


def fig_copy_widths(ctx: FigureContext) -> FigureResult:
    result = FigureResult("copy_widths", "Copy kernel per vector width and the read-only kernel, against the peaks.")
    rows = select(ctx.ok, "copy", hint="sweep:copy_widths")
    groups = problems(rows)
    if not groups:
        result.note = "no copy-family rows (status ok)"
        return result
    with styled():
        fig, axes = _figure(len(groups), 2)
        for ax, (dtype, n) in zip(axes, groups):
            mine = rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)]
            bars_rows = best_by(mine, ["variant", "vector_width"])
            labels = [
                f"{v} ×{int(w)}" if pd.notna(w) else str(v) for v, w in zip(bars_rows["variant"], bars_rows["vector_width"])
            ]
            colours = [OURS if v == "copy" else "#2ca02c" for v in bars_rows["variant"]]
            bars = ax.bar(np.arange(len(labels)), bars_rows["bandwidth_gbs"], color=colours)
            _bar_labels(ax, bars, "%.0f")
            _peak_lines(ax, ctx.peaks, ("copy_gbs", "read_gbs", "theoretical_gbs"))
            _headroom(ax, 0.3)
            ax.set_xticks(np.arange(len(labels)), labels)
            ax.set_xlabel("variant × vector width (elements per load)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(problem_label("copy", dtype, n, tex=True))
            _legend(ax, loc="upper left", ncols=2)
        result.paths = _save(fig, ctx, result.stem, "copy and read kernels")
    return result


# ---- (c) vector width x element type --------------------------------------------------


def fig_vector_add_widths(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "vector_add_widths",
        "Vector add: bandwidth per element type and vector width (unroll 1 where measured, best over the other parameters).",
    )
    rows = select(ctx.ok, "vector_add", prefer={"unroll": 1, "offset": 0}, hint="sweep:vector_add_widths")
    sizes = sorted({int(n) for n in rows["n"].dropna()})
    if rows.empty or rows["vector_width"].nunique() < 2:
        result.note = "no vector_add rows with at least 2 vector widths (status ok)"
        return result
    with styled():
        fig, axes = _figure(len(sizes), 2)
        for ax, n in zip(axes, sizes):
            mine = best_by(rows[(rows["n"] == n).to_numpy(dtype=bool)], ["dtype", "vector_width"])
            dtypes = [d for d in DTYPE_ORDER if d in set(mine["dtype"])] + sorted(set(mine["dtype"]) - set(DTYPE_ORDER))
            widths = sorted(mine["vector_width"].dropna().astype(int).unique())
            bar_w = 0.8 / max(len(widths), 1)
            for j, width in enumerate(widths):
                values = [mine[(mine["dtype"] == d) & (mine["vector_width"] == width)]["bandwidth_gbs"].max() for d in dtypes]
                bars = ax.bar(np.arange(len(dtypes)) + (j - (len(widths) - 1) / 2) * bar_w, values, bar_w, label=f"width {width}")
                _bar_labels(ax, bars, "%.0f")
            _peak_lines(ax, ctx.peaks, ("copy_gbs",))
            _headroom(ax, 0.25)
            ax.set_xticks(np.arange(len(dtypes)), dtypes)
            ax.set_xlabel("element type")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(f"all element types, n = {format_n(n, tex=True)}")
            _legend(ax, loc="upper left", ncols=3)
        result.paths = _save(fig, ctx, result.stem, "vector add, vector width × element type")
    return result


# ---- (d) misaligned access --------------------------------------------------------


def fig_offset_read_write(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "offset_read_write",
        "Misaligned reads (per L1 mode) and writes: bandwidth per offset in elements (block 512 where measured, best over the other parameters).",
    )
    rows = select(
        ctx.ok, "offset", variants=["read_offset", "write_offset"], prefer={"block_size": 512}, hint="sweep:offset_read_write"
    )
    groups = [(d, n) for d, n in problems(rows) if rows[(rows["dtype"] == d) & (rows["n"] == n)]["offset"].nunique() >= 2]
    if not groups:
        result.note = "no read_offset/write_offset rows with at least 2 offsets (status ok)"
        return result
    with styled():
        fig, axes = _figure(len(groups), 2)
        for ax, (dtype, n) in zip(axes, groups):
            mine = rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)].copy()
            mine["line"] = [
                f"read, L1 {l1}" if v == "read_offset" and pd.notna(l1) else ("read" if v == "read_offset" else "write")
                for v, l1 in zip(mine["variant"], mine["l1_cache"])
            ]
            offsets = sorted(mine["offset"].dropna().astype(int).unique())
            position = {o: i for i, o in enumerate(offsets)}  # categorical axis: 0..16 would crowd on a linear one
            for name, line in best_by(mine, ["line", "offset"]).groupby("line"):
                ax.plot([position[int(o)] for o in line["offset"]], line["bandwidth_gbs"], marker="o", label=name)
            if 11 in position:
                ax.axvspan(position[11] - 0.3, position[11] + 0.3, color="#fdd0a2", alpha=0.5, zorder=0, label="offset 11 (blog)")
            ax.set_xticks(range(len(offsets)), [str(o) for o in offsets])
            ax.set_xlabel("offset (elements)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(problem_label("offset", dtype, n, tex=True))
            _footroom(ax)
            _legend(ax, loc="lower right", ncols=2)
        result.paths = _save(fig, ctx, result.stem, "misaligned reads and writes")
    return result


def fig_offset_unroll_blocks(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "offset_unroll_blocks",
        "Unrolled read kernel: bandwidth per block size, one line per unroll factor (offset 0 and L1 ca where measured).",
    )
    rows = select(
        ctx.ok,
        "offset",
        variants=["read_offset_unrolled"],
        prefer={"offset": 0, "l1_cache": "ca"},
        hint="sweep:offset_unroll_blocks",
    )
    groups = [(d, n) for d, n in problems(rows) if rows[(rows["dtype"] == d) & (rows["n"] == n)]["block_size"].nunique() >= 2]
    if not groups:
        result.note = "no read_offset_unrolled rows with at least 2 block sizes (status ok)"
        return result
    with styled():
        fig, axes = _figure(len(groups), 2)
        for ax, (dtype, n) in zip(axes, groups):
            mine = rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)]
            for unroll, line in best_by(mine, ["unroll", "block_size"]).groupby("unroll", dropna=False):
                ax.plot(line["block_size"].astype(int), line["bandwidth_gbs"], marker="o", label=f"unroll {unroll}")
            _log2_axis(ax, sorted(mine["block_size"].dropna().astype(int).unique()))
            _peak_lines(ax, ctx.peaks, ("copy_gbs",))
            offsets = sorted(mine["offset"].dropna().astype(int).unique())
            ax.set_xlabel("block size (threads)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(f"{problem_label('offset', dtype, n, tex=True)}, offset {', '.join(map(str, offsets))}")
            _footroom(ax)
            _legend(ax, loc="lower right", ncols=2)
        result.paths = _save(fig, ctx, result.stem, "unrolled read kernel, block size sweep")
    return result


# ---- (e) layouts, matmul --------------------------------------------------------------


def fig_layout_aos_soa(ctx: FigureContext) -> FigureResult:
    result = FigureResult("layout_aos_soa", "Array of structures vs structure of arrays: bandwidth per block size.")
    rows = select(ctx.ok, "layout", variants=["aos", "soa"], hint="sweep:layout_aos_soa")
    groups = problems(rows)
    if not groups:
        result.note = "no layout rows (aos/soa, status ok)"
        return result
    with styled():
        fig, axes = _figure(len(groups), 2)
        for ax, (dtype, n) in zip(axes, groups):
            mine = best_by(rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)], ["variant", "block_size"])
            blocks = sorted(mine["block_size"].dropna().astype(int).unique())
            for offset, variant, colour in ((-0.2, "aos", "#aec7e8"), (0.2, "soa", OURS)):
                values = [mine[(mine["variant"] == variant) & (mine["block_size"] == b)]["bandwidth_gbs"].max() for b in blocks]
                bars = ax.bar(
                    np.arange(len(blocks)) + offset, values, 0.4, color=colour, label={"aos": "AoS", "soa": "SoA"}[variant]
                )
                _bar_labels(ax, bars, "%.0f")
            _headroom(ax)
            ax.set_xticks(np.arange(len(blocks)), [str(b) for b in blocks])
            ax.set_xlabel("block size (threads)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(problem_label("layout", dtype, n, tex=True))
            _legend(ax, loc="upper left")
        result.paths = _save(fig, ctx, result.stem, "AoS vs SoA")
    return result


def fig_matmul_variants(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "matmul_variants",
        "Matrix multiply: naive, shared A, shared A+B, each with linear and pitched allocation; bandwidth (left) and GFLOP/s (right), best over tile sizes.",
    )
    rows = select(ctx.ok, "matmul", hint="sweep:matmul_variants")
    groups = problems(rows)
    if not groups:
        result.note = "no matmul rows (status ok)"
        return result
    order = ["naive", "shared_a", "shared_ab"]
    with styled():
        fig, axes = _figure(2 * len(groups), 2, width_in=5.0)
        for i, (dtype, n) in enumerate(groups):
            mine = rows[((rows["dtype"] == dtype) & (rows["n"] == n)).to_numpy(dtype=bool)].copy()
            mine["layout"] = ["pitched" if p == 1 else "linear" for p in mine["pitched"].fillna(0)]
            mine = best_by(mine, ["variant", "layout"])
            variants = [v for v in order if v in set(mine["variant"])] + sorted(set(mine["variant"]) - set(order))
            for ax, column, unit in ((axes[2 * i], "bandwidth_gbs", "bandwidth (GB/s)"), (axes[2 * i + 1], "gflops", "GFLOP/s")):
                for offset, layout, colour in ((-0.2, "linear", "#aec7e8"), (0.2, "pitched", OURS)):
                    values = [mine[(mine["variant"] == v) & (mine["layout"] == layout)][column].max() for v in variants]
                    bars = ax.bar(np.arange(len(variants)) + offset, values, 0.4, color=colour, label=layout)
                    _bar_labels(ax, bars, "%.0f")
                _headroom(ax)
                ax.set_xticks(np.arange(len(variants)), variants)
                ax.set_ylabel(unit)
                ax.set_title(f"{problem_label('matmul', dtype, n)}: {unit.split(' (')[0]}")
                _legend(ax, loc="upper left")
        result.paths = _save(fig, ctx, result.stem, "matrix multiply variants, linear vs pitched")
    return result


# ---- (f) fractions of peak ---------------------------------------------------------------


def family_bests(ctx: FigureContext) -> pd.DataFrame:
    """The best usable row of each family (sweeps and studies)."""
    bests = [best(ctx.ok[(ctx.ok["family"] == f).to_numpy(dtype=bool)]) for f in ctx.ok["family"].dropna().unique()]
    frame = pd.DataFrame([b for b in bests if b is not None])
    if frame.empty:
        return frame
    rank = {f: i for i, f in enumerate(FAMILY_ORDER)}
    return frame.iloc[sorted(range(len(frame)), key=lambda i: (rank.get(frame["family"].iloc[i], 99), frame["family"].iloc[i]))]


def fig_peak_fractions(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "peak_fractions",
        "Each family's best configuration as a fraction of the measured copy peak and of the theoretical peak (1 = the peak); numbers on the bars are GB/s.",
    )
    bests = family_bests(ctx)
    if bests.empty:
        result.note = "no rows with status ok"
        return result
    if not (ctx.peaks.get("copy_gbs") or ctx.peaks.get("theoretical_gbs")):
        result.note = "peaks.json has neither copy_gbs nor theoretical_gbs"
        return result
    with styled():
        fig, (ax,) = _figure(1, 1, width_in=8.5, height_in=4.2)
        fractions = [peak_fractions(row["bandwidth_gbs"], row, ctx.peaks) for _, row in bests.iterrows()]
        x = np.arange(len(bests))
        copy_bars = ax.bar(x - 0.2, [f[0] for f in fractions], 0.4, color=OURS, label="of copy peak")
        theo_bars = ax.bar(x + 0.2, [f[1] for f in fractions], 0.4, color="#aec7e8", label="of theoretical peak")
        ax.bar_label(copy_bars, labels=[f"{v:.0f}" for v in bests["bandwidth_gbs"]], fontsize=6.5, padding=1.5)
        ax.bar_label(theo_bars, fmt="%.2f", fontsize=6.5, padding=1.5)
        ax.axhline(1.0, color="#444444", linewidth=1.0, label="peak = 1")
        copy_gbs, theoretical_gbs = ctx.peaks.get("copy_gbs"), ctx.peaks.get("theoretical_gbs")
        if copy_gbs and theoretical_gbs:
            ax.axhline(
                copy_gbs / theoretical_gbs,
                color=PEAK_STYLES["copy_gbs"][2],
                linestyle="--",
                linewidth=1.0,
                label=f"copy peak / theoretical = {copy_gbs / theoretical_gbs:.2f}",
            )
        if ctx.peaks.get("cub_reduce_gbs") and copy_gbs:
            ax.axhline(
                ctx.peaks["cub_reduce_gbs"] / copy_gbs,
                color=PEAK_STYLES["cub_reduce_gbs"][2],
                linestyle="-.",
                linewidth=1.0,
                label=f"CUB reduce / copy peak = {ctx.peaks['cub_reduce_gbs'] / copy_gbs:.2f}",
            )
        labels = [
            f"{r['family']}\n{r['variant']}\n{problem_label(r['family'], r['dtype'], int(r['n']), tex=True).replace(', ', chr(10))}"
            for _, r in bests.iterrows()
        ]
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_ylabel("fraction of peak bandwidth (1 = peak)")
        ax.set_ylim(0, max(1.15, max(max(f) for f in fractions if not np.isnan(max(f))) * 1.1) if fractions else 1.15)
        ax.set_title(f"copy peak {copy_gbs or float('nan'):.0f} GB/s, theoretical {theoretical_gbs or float('nan'):.0f} GB/s")
        _legend(ax, loc="upper center", bbox_to_anchor=(0.5, -0.32), ncols=3)
        result.paths = _save(fig, ctx, result.stem, "best of each family against the peaks")
    return result


# ---- (g) studies ---------------------------------------------------------------------------


def fig_study_history(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "study_history",
        "Optuna studies: bandwidth of each trial (dots; failed trials as red × at the bottom), the best so far (line) and the best of the exhaustive sweep of the same problem (dashed).",
    )
    studies = [s for s in ctx.studies if len(s.history)]
    if not studies:
        result.note = "no study rows (source study:<name>)"
        return result
    with styled():
        fig, axes = _figure(len(studies), 2)
        for ax, study in zip(axes, studies):
            h = study.history
            ok = h[h["status"] == "ok"]
            ax.scatter(ok["trial"], ok["bandwidth_gbs"], s=14, color="#9fb7d4", label="trial", zorder=2)
            ax.step(h["trial"], h["best_so_far_gbs"], where="post", color=OURS, label="best so far", zorder=3)
            failed = h[h["status"] != "ok"]
            if len(failed):
                bottom = blended_transform_factory(ax.transData, ax.transAxes)
                ax.scatter(
                    failed["trial"],
                    [0.03] * len(failed),
                    marker="x",
                    color="#d62728",
                    transform=bottom,
                    label=f"failed ({len(failed)})",
                    zorder=3,
                    clip_on=False,
                )
            if not np.isnan(study.exhaustive_gbs):
                ax.axhline(
                    study.exhaustive_gbs,
                    color=PUBLISHED,
                    linestyle="--",
                    label=f"exhaustive best {study.exhaustive_gbs:.0f} GB/s ({study.exhaustive_source})",
                )
            ax.set_xlabel("trial (#)")
            ax.set_ylabel("bandwidth (GB/s)")
            ax.set_title(f"{study.name}: {study.family}, {problem_label(study.family, study.dtype, study.n, tex=True)}")
            _legend(ax, loc="best")
        result.paths = _save(fig, ctx, result.stem, "optimisation history")
    no_sweep = [s.name for s in studies if np.isnan(s.exhaustive_gbs)]
    if no_sweep:
        result.note = f"no exhaustive sweep of the same problem for: {', '.join(no_sweep)}"
    return result


def fig_study_importance(ctx: FigureContext) -> FigureResult:
    result = FigureResult(
        "study_importance",
        "Optuna studies: parameter importances for bandwidth (PED-ANOVA over the ok trials, parameters as categories).",
    )
    studies = [s for s in ctx.studies if s.importances]
    skipped = [f"{s.name} ({s.importance_note})" for s in ctx.studies if not s.importances]
    if not studies:
        result.note = "no study with importances: " + ("; ".join(skipped) if skipped else "no study rows (source study:<name>)")
        return result
    with styled():
        fig, axes = _figure(len(studies), 2, height_in=3.0)
        for ax, study in zip(axes, studies):
            items = sorted(study.importances.items(), key=lambda kv: kv[1])
            bars = ax.barh([k for k, _ in items], [v for _, v in items], color=OURS)
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
            ax.set_xlabel("importance (fraction of total)")
            ax.set_xlim(0, max(v for _, v in items) * 1.2 or 1)
            ax.set_title(
                f"{study.name}: {problem_label(study.family, study.dtype, study.n, tex=True)}, {study.ok_trials} ok trials"
            )
        result.paths = _save(fig, ctx, result.stem, "parameter importances")
    if skipped:
        result.note = "importances skipped for " + "; ".join(skipped)
    return result


FIGURES: dict[str, Callable[[FigureContext], FigureResult]] = {
    "reduce_ladder": fig_reduce_ladder,
    "reduce_block_unroll": fig_reduce_block_unroll,
    "reduce_bank_conflicts": fig_reduce_bank_conflicts,
    "copy_widths": fig_copy_widths,
    "vector_add_widths": fig_vector_add_widths,
    "offset_read_write": fig_offset_read_write,
    "offset_unroll_blocks": fig_offset_unroll_blocks,
    "layout_aos_soa": fig_layout_aos_soa,
    "matmul_variants": fig_matmul_variants,
    "peak_fractions": fig_peak_fractions,
    "study_history": fig_study_history,
    "study_importance": fig_study_importance,
}
EXPECTED_FIGURES: tuple[str, ...] = tuple(FIGURES)
FIGURE_TITLES: dict[str, str] = {
    "reduce_ladder": "Reduction ladder",
    "reduce_block_unroll": "Unrolled reduction: block size × unroll",
    "reduce_bank_conflicts": "Bank conflicts in a shared-memory reduction",
    "copy_widths": "Copy and read kernels",
    "vector_add_widths": "Vector add: vector width × element type",
    "offset_read_write": "Misaligned reads and writes",
    "offset_unroll_blocks": "Unrolled read kernel: block size sweep",
    "layout_aos_soa": "AoS vs SoA",
    "matmul_variants": "Matrix multiply: variants, linear vs pitched",
    "peak_fractions": "Best of each family against the peaks",
    "study_history": "Studies: optimisation history",
    "study_importance": "Studies: parameter importances",
}


def draw_all(ctx: FigureContext) -> list[FigureResult]:
    """Every figure of ``EXPECTED_FIGURES``, in that order."""
    return [draw(ctx) for draw in FIGURES.values()]
