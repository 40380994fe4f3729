"""One look for every report figure: rcParams, colours, figure size, writing.

Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot), so no
global figure state or GUI backend is involved.
"""

from __future__ import annotations

import io
import math
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import matplotlib as mpl

if TYPE_CHECKING:
    from matplotlib.figure import Figure

OURS = "#1f77b4"
PUBLISHED = "#ff7f0e"  # the blogs' numbers, and only they, are orange
HOLDS = "#2a7d2a"
FAILS = "#c0392b"
# Series colours: no orange or red, which mean "published" and "copy peak".
SERIES = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#7f7f7f", "#bcbd22", "#aec7e8")
# The most characters of a name (the GPU's, from device.json) a figure or the text shows: a
# name of a million characters took minutes to lay out in every figure title.
NAME_LIMIT = 120


def shown_name(value: Any, limit: int = NAME_LIMIT) -> str:
    """``value`` as a figure or the text shows it: on one line, cut to ``limit``
    characters with an ellipsis where longer."""
    text = str(value)
    if len(text) > 4 * limit:  # only the head is shown: not a million characters split
        text = text[: 4 * limit]
        cut = True
    else:
        cut = False
    text = " ".join(text.split())
    if cut or len(text) > limit:
        return text[: limit - 1].rstrip() + "…"
    return text


PEAK_STYLES = {  # peaks key -> (label, line style, colour)
    "theoretical_gbs": ("theoretical peak", "-", "#444444"),
    "read_gbs": ("read peak", ":", "#2ca02c"),
    "copy_gbs": ("copy peak", "--", "#d62728"),
    "cub_reduce_gbs": ("CUB reduce", "-.", "#9467bd"),
}
DPI = 110
# The files each figure is written to, by default: PNG (which the documents show) and SVG.
FIGURE_SUFFIXES = (".png", ".svg")


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
        "legend.fontsize": 8,
        "legend.frameon": False,
        "figure.titlesize": 12,
        "font.family": "DejaVu Sans",
        "lines.linewidth": 1.6,
        "lines.markersize": 5,
        "axes.prop_cycle": mpl.cycler(color=list(SERIES)),
        "svg.fonttype": "none",  # text stays text: smaller, searchable SVGs
        "svg.hashsalt": "tuner-report",  # stable ids, so unchanged figures diff clean
    }


@contextmanager
def styled() -> Iterator[None]:
    with mpl.rc_context(report_style()):
        yield


def blank_figure(width_in: float, height_in: float) -> Figure:
    """An empty figure laid out by matplotlib's constrained layout."""
    # matplotlib.figure is slow to import: loaded where a figure is made, so
    # that reading the figure list (the workflow does, on every start) stays quick.
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def new_figure(panels: int, columns: int, *, width_in: float = 5.2, height_in: float = 3.6) -> tuple[Figure, list[Any]]:
    """A figure with ``panels`` axes on a grid of ``columns`` (extra cells hidden)."""
    rows = max(1, math.ceil(panels / columns))
    columns = min(columns, max(panels, 1))
    # At least 7.5 in wide: a one-panel figure must still fit the GPU name in its title.
    fig = blank_figure(max(width_in * columns, 7.5), height_in * rows + 0.9)
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def figure_legend(fig: Figure, axes: list[Any], columns: int = 4) -> None:
    """One legend below the panels: every distinct label of every axes."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label and not label.startswith("_"):
                seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=min(columns, len(seen)))


def write(fig: Figure, folder: Path, stem: str, suffixes: tuple[str, ...] = FIGURE_SUFFIXES) -> list[Path]:
    """``<stem>.png`` and/or ``<stem>.svg`` in ``folder`` (``suffixes``, PNG
    first), without dates (rebuilding unchanged data gives identical files)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    engine = fig.get_layout_engine()
    try:
        for suffix in suffixes:
            path = folder / f"{stem}{suffix}"
            if suffix == ".png":
                _write_png(fig, path)
            else:
                fig.savefig(path, dpi=DPI, metadata={"Date": None})
            paths.append(path)
            # The layout is in inches, the same for both files: solved once, for the first.
            fig.set_layout_engine("none")
    finally:
        fig.set_layout_engine(engine)
    return paths


def _write_png(fig: Figure, path: Path) -> None:
    """A figure holds few colours (white, the series, grey and their anti-aliased
    edges): written with a palette of 256 it looks the same at about a third of
    the bytes of the RGBA image matplotlib writes."""
    from PIL import Image  # matplotlib's own dependency

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=DPI, metadata={"Software": None})
    drawn.seek(0)
    with Image.open(drawn) as image:
        dpi = image.info.get("dpi")
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    palette.save(path, format="PNG", optimize=True, dpi=dpi)


def placeholder(folder: Path, stem: str, title: str, note: str, suffixes: tuple[str, ...] = FIGURE_SUFFIXES) -> list[Path]:
    """A small image saying a figure was not drawn and why, so every expected
    stem exists for the workflow; the report does not embed it."""
    with styled():
        fig = blank_figure(7.5, 1.8)
        fig.suptitle(title, fontweight="bold")
        fig.text(0.5, 0.4, "\n".join(textwrap.wrap(f"Not drawn: {note}.", 90)), ha="center", va="center", fontsize=10)
        return write(fig, folder, stem, suffixes)
