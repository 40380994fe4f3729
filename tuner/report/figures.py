"""The report's figures: the figure list (``workflow/report/figures.yaml``:
each figure's stem, title and caption, in the report's order, which the
workflow's rules read too) and how each is drawn (``DRAWN``, by stem), as
``FIGURE_SPECS``.

Each spec names the rows it shows, its x, y and
series columns and the blog tables whose published numbers it draws (orange
diamonds: the blog's speed-up over the table's reference row, applied to our
reference row). ``tuner.report.figure_kit`` turns a spec into panels and files;
``tuner.report.panels`` draws every panel. Panels are one per problem (element
type and size), so a figure's stem is stable however many problems were
measured; ``EXPECTED_FIGURES`` lists the stems (the workflow reads them from the list).
"""

from __future__ import annotations

import contextlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterator

import pandas as pd
import yaml

from tuner.data.selection import problem_label
from tuner.families import REGISTRY
from tuner.families.reduce import BANK_CONFLICT_PAIR
from tuner.report.figure_kit import FigureContext, FigureResult, FigureSpec, draw
from tuner.report.summary_figures import history_panels, importance_panels, overview, peak_panels
from tuner.resources import figure_list_file

DTYPE_ORDER = ("int8", "float16", "float32", "int32")


def _ordered(values: list, order: list) -> pd.Categorical:
    return pd.Categorical(values, categories=list(dict.fromkeys(order)), ordered=True)


# ---- derived columns (x or series labels) of the row figures ----------------------------


def step_key(variant: str, unroll: object) -> str:
    return f"unrolled ×{int(unroll)}" if variant == "unrolled" and pd.notna(unroll) else variant


def _step_order(key: str) -> tuple[int, int]:
    variant, _, unroll = key.partition(" ×")
    return REGISTRY["reduce"].ladder.index("unrolled" if variant == "unrolled" else variant), int(unroll or 0)


def _ladder(rows: pd.DataFrame) -> pd.DataFrame:
    steps = [step_key(v, u) for v, u in zip(rows["variant"], rows["unroll"])]
    return rows.assign(step=_ordered(steps, sorted(steps, key=_step_order)))


def _bank_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    both = rows.groupby(["dtype", "n"])["variant"].transform(lambda v: set(BANK_CONFLICT_PAIR) <= set(v))
    rows = rows[both.astype(bool).to_numpy()]
    problems = sorted(set(zip(rows["dtype"], rows["n"])))
    label = {p: problem_label("reduce", p[0], int(p[1]), tex=True).replace(", ", "\n") for p in problems}
    return rows.assign(problem=_ordered([label[p] for p in zip(rows["dtype"], rows["n"])], [label[p] for p in problems]))


def _copy(rows: pd.DataFrame) -> pd.DataFrame:
    keys = [(v, int(w) if pd.notna(w) else 0) for v, w in zip(rows["variant"], rows["vector_width"])]
    text = {k: f"{k[0]} ×{k[1]}" if k[1] else k[0] for k in keys}
    return rows.assign(kernel=_ordered([text[k] for k in keys], [text[k] for k in sorted(set(keys))]))


def _dtypes(rows: pd.DataFrame) -> pd.DataFrame:
    present = list(rows["dtype"])
    return rows.assign(
        dtype_x=_ordered(present, [d for d in DTYPE_ORDER if d in present] + sorted(set(present) - set(DTYPE_ORDER)))
    )


def _offset_lines(rows: pd.DataFrame) -> pd.DataFrame:
    lines = [
        (f"read, L1 {l1}" if pd.notna(l1) else "read") if v == "read_offset" else "write"
        for v, l1 in zip(rows["variant"], rows["l1_cache"])
    ]
    return rows.assign(line=lines)


def _layouts(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.assign(layout=[{"aos": "AoS", "soa": "SoA"}.get(v, v) for v in rows["variant"]])


def _matmul(rows: pd.DataFrame) -> pd.DataFrame:
    variants, ladder = list(rows["variant"]), REGISTRY["matmul"].ladder
    return rows.assign(
        allocation=["pitched" if p == 1 else "linear" for p in rows["pitched"].fillna(0)],
        kernel=_ordered(variants, [v for v in ladder if v in variants] + sorted(set(variants) - set(ladder))),
    )


# ---- the figures -----------------------------------------------------------------------------

BANDWIDTH_ROWS = dict(ys=("bandwidth_gbs",), peaks=("copy_gbs",))
OVERVIEW = "overview"  # the figure of every blog table: the report shows it first, as the lessons' summary

# How each figure of the list (workflow/report/figures.yaml) is drawn, by stem.
DRAWN: dict[str, dict[str, Any]] = {
    OVERVIEW: dict(
        data=overview,
        columns=1,
        size=(12.0, 8.6),
    ),
    "reduce_ladder": dict(
        family="reduce",
        variants=REGISTRY["reduce"].ladder,
        prefer={"offset": 0},
        hint="sweep:reduce_ladder",
        derive=_ladder,
        x="step",
        ys=("bandwidth_gbs", "speedup"),
        min_x=3,
        peaks=("copy_gbs",),
        published=("reduce_ladder_int32_1050ti", "reduce_v0_v6_gtx1060"),
        published_on=("speedup",),
        match=("dtype",),
        missing="no problem with at least 3 reduction-ladder variants measured (status ok)",
        size=(6.0, 3.5),
    ),
    "reduce_block_unroll": dict(
        family="reduce",
        variants=("unrolled",),
        prefer={"offset": 0},
        hint="sweep:reduce_block_unroll",
        x="block_size",
        group="unroll",
        series_label="unroll {}",
        kind="line",
        log2_x=True,
        min_x=2,
        xlabel="block size (threads)",
        published=("reduce_unroll_1050ti",),
        missing="no unrolled-reduction rows with at least 2 block sizes (status ok)",
        **BANDWIDTH_ROWS,
    ),
    "reduce_bank_conflicts": dict(
        family="reduce",
        variants=BANK_CONFLICT_PAIR,
        prefer={"offset": 0},
        hint="sweep:reduce_bank_conflicts",
        derive=_bank_pairs,
        x="problem",
        group="variant",
        panel=(),
        match=(),
        published=("bank_conflict_v100",),
        missing="no problem with both shared_interleaved and shared_sequential measured (status ok)",
        size=(7.5, 4.0),
    ),
    "copy_widths": dict(
        family="copy",
        hint="sweep:copy_widths",
        derive=_copy,
        x="kernel",
        group="variant",
        xlabel="kernel × vector width (elements per load)",
        ys=("bandwidth_gbs",),
        peaks=("copy_gbs", "read_gbs", "theoretical_gbs"),
        missing="no copy-family rows (status ok)",
    ),
    "vector_add_widths": dict(
        family="vector_add",
        prefer={"unroll": 1, "offset": 0},
        hint="sweep:vector_add_widths",
        derive=_dtypes,
        x="dtype_x",
        group="vector_width",
        series_label="width {}",
        panel=("n",),
        match=("n",),
        xlabel="element type",
        published=("vector_add_widths",),
        missing="no vector_add rows (status ok)",
        **BANDWIDTH_ROWS,
    ),
    "vector_add_unroll": dict(
        family="vector_add",
        prefer={"offset": 0},
        hint="sweep:vector_add_unroll",
        x="unroll",
        group="vector_width",
        series_label="width {}",
        xlabel="unroll factor",
        published=("vector_add_pragma_unroll",),
        missing="no vector_add rows with at least 2 unroll factors (status ok)",
        min_x=2,
        **BANDWIDTH_ROWS,
    ),
    "offset_read_write": dict(
        family="offset",
        variants=("read_offset", "write_offset"),
        prefer={"block_size": 512},
        hint="sweep:offset_read_write",
        derive=_offset_lines,
        x="offset",
        group="line",
        min_x=2,
        labels="ratio",
        xlabel="offset (elements)",
        published=("offset_read_m2070", "offset_write_m2070"),
        missing="no read_offset/write_offset rows with at least 2 offsets (status ok)",
        size=(9.0, 4.2),
        **BANDWIDTH_ROWS,
    ),
    "offset_unroll_blocks": dict(
        family="offset",
        variants=("read_offset_unrolled",),
        prefer={"offset": 0, "l1_cache": "ca"},
        hint="sweep:offset_unroll_blocks",
        x="block_size",
        group="unroll",
        series_label="unroll {}",
        kind="line",
        log2_x=True,
        min_x=2,
        xlabel="block size (threads)",
        published=("offset_unroll_block_sweep_m2070",),
        missing="no read_offset_unrolled rows with at least 2 block sizes (status ok)",
        **BANDWIDTH_ROWS,
    ),
    "layout_aos_soa": dict(
        family="layout",
        variants=("aos", "soa"),
        hint="sweep:layout_aos_soa",
        derive=_layouts,
        x="block_size",
        group="layout",
        xlabel="block size (threads)",
        ys=("bandwidth_gbs",),
        published=("aos_soa_m2070",),
        missing="no layout rows (aos/soa, status ok)",
    ),
    "matmul_variants": dict(
        family="matmul",
        hint="sweep:matmul_variants",
        derive=_matmul,
        x="kernel",
        group="allocation",
        ys=("gflops",),
        published=("matmul_v100", "pitched_matmul"),
        missing="no matmul rows (status ok)",
    ),
    "peak_fractions": dict(
        data=peak_panels,
        columns=1,
        size=(8.5, 4.2),
    ),
    "study_history": dict(
        data=history_panels,
    ),
    "study_importance": dict(
        data=importance_panels,
        size=(5.2, 3.0),
    ),
}



def listed_specs(listed: list[dict], drawn: dict[str, dict[str, Any]] = DRAWN) -> tuple[FigureSpec, ...]:
    """The specs of the figures ``listed`` (the figure list's entries: stem,
    title, caption), in its order, each drawn as ``drawn`` says.

    Raises:
        ValueError: the list and ``drawn`` name different figures, or the list
            names one twice (one line naming the file and the stems).
    """
    stems = [entry["stem"] for entry in listed]
    twice = sorted({s for s in stems if stems.count(s) > 1})
    unlisted, undrawn = sorted(set(drawn) - set(stems)), sorted(set(stems) - set(drawn))
    if twice or unlisted or undrawn:
        raise ValueError(f"{figure_list_file()}: must list each figure tuner/report/figures.py draws once, got "
                         f"{twice} twice, {unlisted} not listed and {undrawn} listed but not drawn")  # fmt: skip
    return tuple(FigureSpec(entry["stem"], entry["title"], entry["caption"], **drawn[entry["stem"]]) for entry in listed)


def read_figure_list() -> list[dict]:
    """The figure list (``workflow/report/figures.yaml``): stem, title and caption of each figure, in order."""
    return yaml.safe_load(figure_list_file().read_text(encoding="utf-8"))


FIGURE_SPECS: tuple[FigureSpec, ...] = listed_specs(read_figure_list())
EXPECTED_FIGURES: tuple[str, ...] = tuple(spec.stem for spec in FIGURE_SPECS)
FIGURE_TITLES: dict[str, str] = {spec.stem: spec.title for spec in FIGURE_SPECS}


@contextlib.contextmanager
def figure_pool(processes: int) -> Iterator[ProcessPoolExecutor | None]:
    """Worker processes for the report's independent work (matplotlib draws on
    one core): at most one per figure; None for ``processes`` <= 1."""
    processes = min(processes, len(FIGURE_SPECS))
    # Workers are not forked from this process (a fork copies its threads'
    # locks: pyarrow's pools) but from a fork server that has imported the
    # drawing code once: each starts at once instead of importing matplotlib.
    if processes <= 1 or "forkserver" not in multiprocessing.get_all_start_methods():
        yield None
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tuner.report.figures"])
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        try:
            pool.submit(int).result()  # starts the fork server now, where its failure can be caught
        except OSError:
            # Its socket lives under TMPDIR, and a cluster's long scratch path passes the 107
            # bytes a socket's path may have ("AF_UNIX path too long"): draw here instead.
            yield None
            return
        yield pool


def drawing(ctx: FigureContext, pool: ProcessPoolExecutor | None) -> Callable[[], list[FigureResult]]:
    """Start drawing every figure in ``pool`` (without one, draw them here);
    the returned call waits for them, in ``EXPECTED_FIGURES`` order."""
    if pool is None:
        drawn = [draw(ctx, spec) for spec in FIGURE_SPECS]
        return lambda: drawn
    futures = [pool.submit(_draw_spec, ctx, index) for index in range(len(FIGURE_SPECS))]
    return lambda: [future.result() for future in futures]


def _draw_spec(ctx: FigureContext, index: int) -> FigureResult:
    return draw(ctx, FIGURE_SPECS[index])
