"""One section per family of the dataset, whatever the family.

The lessons' figures and blog tables know the built-in families; this section
knows none of them. All it shows comes from the rows: a family's parameters
are the names in its rows' configuration keys (``param_columns``), never a
list of the package's, and GFLOP/s takes the place of GB/s where the rows
count floating-point work (``compute_bound``). Per family: a figure
(``family_<name>``: one panel per parameter that varies, the best at each of
its values, a bar per problem), the best configuration of each problem (of
each operation, where the family's configurations do different work: every
parameter, grid and block, GB/s and share of the copy peak), what each
parameter's values reached, the counters of its best profiled configuration
and its studies.

The figures are named after their family, so the workflow cannot declare them
as outputs (``EXPECTED_FIGURES`` is one fixed list): the report embeds and
links them.
"""

from __future__ import annotations

import re
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from tuner.data.results import param_columns
from tuner.data.selection import (
    compute_bound,
    config_text,
    family_operations,
    measured_families,
    peak_fractions,
    problem_label,
    problems,
    source_counts,
)
from tuner.report.explanations import best_profiled, family_line
from tuner.report.figure_kit import FigureContext, FigureResult, FigureSpec, peak_lines, render
from tuner.report.panels import Panel
from tuner.report.studies import StudySummary
from tuner.report.style import styled, write

STEM_PREFIX = "family_"
UNITS = {"bandwidth_gbs": ("GB/s", "bandwidth (GB/s)"), "gflops": ("GFLOP/s", "GFLOP/s")}
# Past this many bars in a panel their value labels overlap; the axis still reads.
MAX_LABELLED_BARS = 8


def rows_of(frame: pd.DataFrame, family: str) -> pd.DataFrame:
    return frame[(frame["family"] == family).fillna(False).to_numpy(dtype=bool)]


def scored_rows(ok: pd.DataFrame, family: str) -> pd.DataFrame:
    """The family's usable rows that carry the value it is judged by."""
    rows = rows_of(ok, family)
    return rows[pd.to_numeric(rows[metric_of(rows)]).notna().to_numpy(dtype=bool)]


def metric_of(rows: pd.DataFrame) -> str:
    """The column a family is judged by: GFLOP/s where its rows count them, else GB/s."""
    return "gflops" if compute_bound(rows) else "bandwidth_gbs"


def figure_stem(family: str) -> str:
    """``family_<name>``, the name reduced to characters every file system takes."""
    return STEM_PREFIX + re.sub(r"[^A-Za-z0-9_-]+", "_", family)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def plain(value: Any) -> Any:
    """An integer stored as a float (a column that other families' rows leave
    empty reads back as floats) as the integer it is: ``4``, not ``4.0``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return value


def ordered_values(values: pd.Series) -> list[Any]:
    """The distinct values set in ``values``: numbers in numeric order, anything
    else in the order the rows first hold them (a sweep's rows follow the order
    its family and config list the values: ``none, ldg, stream``, not alphabetical)."""
    distinct = list(dict.fromkeys(v for v in values.dropna()))
    if all(_is_number(v) for v in distinct):
        return sorted(distinct, key=float)
    return distinct


def varying(rows: pd.DataFrame) -> list[str]:
    """The parameters (from the rows' configuration keys) with more than one value among ``rows``."""
    return [p for p in param_columns(rows) if len(ordered_values(rows[p])) > 1]


def best_at_each_value(rows: pd.DataFrame, param: str, metric: str) -> pd.DataFrame:
    """Per problem and value of ``param``: the row with the highest ``metric``
    (best over every other parameter), in value order then problem order."""
    part = rows[rows[param].notna().to_numpy(dtype=bool)]  # a parameter only some variants have
    top = part.sort_values(metric, ascending=False, kind="stable").drop_duplicates(["dtype", "n", param])
    value_rank = {v: i for i, v in enumerate(ordered_values(part[param]))}
    problem_rank = {p: i for i, p in enumerate(problems(top))}
    order = sorted(range(len(top)), key=lambda i: (value_rank[top[param].iloc[i]],
                                                   problem_rank[(str(top["dtype"].iloc[i]), int(top["n"].iloc[i]))]))  # fmt: skip
    return top.iloc[order]


def parameter_panels(family: str, rows: pd.DataFrame, peaks: Mapping[str, Any]) -> list[Panel]:
    """One panel per parameter that varies: the best at each of its values, a bar per problem."""
    metric = metric_of(rows)
    panels = []
    for param in varying(rows):
        top = best_at_each_value(rows, param, metric)
        data = pd.DataFrame({
            "x": [str(plain(v)) for v in top[param]],
            "series": [problem_label(family, d, int(n), tex=True) for d, n in zip(top["dtype"], top["n"])],
            "y": pd.to_numeric(top[metric]).astype(float).to_numpy(),
        })  # fmt: skip
        panels.append(Panel(
            "bar", param, data, ylabel=f"best {UNITS[metric][1]}",
            labels="value" if len(data) <= MAX_LABELLED_BARS else "none",
            hlines=peak_lines(peaks, ("copy_gbs",)) if metric == "bandwidth_gbs" else [],
        ))  # fmt: skip
    return panels


def figure_title(family: str, rows: pd.DataFrame) -> str:
    return f"{family}: best {UNITS[metric_of(rows)][0]} at each parameter value"


def figure_spec(family: str, rows: pd.DataFrame, panels: int) -> FigureSpec:
    unit = UNITS[metric_of(rows)][0]
    only = problems(rows)
    title = figure_title(family, rows)
    caption = (
        f"`{family}`: for each parameter that varies in its rows, the best {unit} measured at each of its values "
        "(best over every other parameter), one bar per problem"
        + (", against the measured copy peak." if unit == "GB/s" else ".")
    )
    if len(only) == 1:  # one problem, one bar per value: the legend says "ours", so the figure names the problem
        title += f" ({problem_label(family, *only[0], tex=True)})"
        caption += f" Problem: {problem_label(family, *only[0])}."
    return FigureSpec(figure_stem(family), title, caption, columns=min(3, panels), size=(4.4, 3.3))


def family_figure(ctx: FigureContext, family: str) -> FigureResult:
    """Write ``family_<name>.png`` (and ``.svg``: ``ctx.figure_suffixes``; no files when no parameter varies)."""
    rows = scored_rows(ctx.ok, family)
    panels = parameter_panels(family, rows, ctx.peaks)
    spec = figure_spec(family, rows, len(panels))
    # The document's title (the image's alt text) without the figure's TeX.
    result = FigureResult(spec.stem, figure_title(family, rows), spec.caption)
    if not panels:
        result.note = "no parameter takes more than one value in its rows"
        return result
    with styled():
        result.paths = write(render(ctx, spec, panels), ctx.out_dir, spec.stem, ctx.figure_suffixes)
    return result


def drawing(ctx: FigureContext, pool: ProcessPoolExecutor | None) -> Callable[[], dict[str, FigureResult]]:
    """Start drawing each family's figure in ``pool`` (without one, here); the
    returned call waits for them: family -> its figure."""
    families = measured_families(ctx.ok)
    if pool is None:
        drawn = {family: family_figure(ctx, family) for family in families}
        return lambda: drawn
    futures = {family: pool.submit(family_figure, ctx, family) for family in families}
    return lambda: {family: future.result() for family, future in futures.items()}


# ---- the section's text and tables ------------------------------------------------------


def _launch(text: Any) -> str:
    return f"({text.replace(',', ', ')})" if isinstance(text, str) and text else "—"


def best_table(family: str, rows: pd.DataFrame, peaks: Mapping[str, Any]) -> pd.DataFrame:
    """Per problem, its best configuration (per operation, with a column for
    it, where the family's configurations do different work:
    ``family_operations``): every parameter, grid and block, and the GB/s and
    share of the copy peak (GFLOP/s first for a compute-bound family)."""
    metric = metric_of(rows)
    answers = family_operations(rows)
    with_operations = any(operation is not None for _, operation, _ in answers)
    records = []
    for dtype, n in problems(rows):
        for _, operation, of_operation in answers:
            mine = of_operation[((of_operation["dtype"] == dtype) & (of_operation["n"] == n)).fillna(False).to_numpy(dtype=bool)]
            if mine.empty:
                continue
            top = mine.loc[pd.to_numeric(mine[metric]).idxmax()]
            gbs = float(top["bandwidth_gbs"])
            numbers = (
                [f"{float(top['gflops']):.0f}", f"{gbs:.1f}"]
                if metric == "gflops"
                else [f"{gbs:.1f}", f"{peak_fractions(gbs, top, peaks)[0]:.1%}"]
            )
            named = [operation or "—"] if with_operations else []
            records.append([problem_label(family, dtype, n), *named, config_text(top, skip=()), _launch(top["grid"]),
                            _launch(top["block"]), *numbers, f"`{top['source']}`"])  # fmt: skip
    numbers = ["GFLOP/s", "GB/s"] if metric == "gflops" else ["GB/s", "of copy peak"]
    operation_column = ["operation"] if with_operations else []
    return pd.DataFrame(records, columns=["problem", *operation_column, "configuration", "grid", "block", *numbers, "source"])


def effects_table(family: str, rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """On the problem of the family's best row: per parameter, the best at each
    of its values and how far apart its best and worst value are; and that problem."""
    metric = metric_of(rows)
    top = rows.loc[pd.to_numeric(rows[metric]).idxmax()]
    problem = rows[((rows["dtype"] == top["dtype"]) & (rows["n"] == top["n"])).fillna(False).to_numpy(dtype=bool)]
    records = []
    for param in param_columns(problem):
        values = best_at_each_value(problem, param, metric)
        if values.empty:
            continue
        numbers = pd.to_numeric(values[metric]).astype(float).to_numpy()
        if len(values) == 1:
            records.append([f"`{param}`", f"fixed at {plain(values[param].iloc[0])}", "—"])
            continue
        cells = [f"{plain(v)}: {y:.0f}" for v, y in zip(values[param], numbers)]
        cells[int(np.argmax(numbers))] = f"**{cells[int(np.argmax(numbers))]}**"
        records.append([f"`{param}`", " · ".join(cells), f"{numbers.max() / numbers.min():.2f}×"])
    label = problem_label(family, top["dtype"], int(top["n"]))
    unit = UNITS[metric][0]
    return pd.DataFrame(records, columns=["parameter", f"best {unit} at each value", "best ÷ worst value"]), label


def summary_text(family: str, rows: pd.DataFrame, all_rows: pd.DataFrame) -> str:
    sweeps, studies, others = source_counts(all_rows)
    sources = f"{sweeps} sweep{'s' * (sweeps != 1)}, {studies} stud{'ies' if studies != 1 else 'y'}"
    sources += "".join(f", `{other}`" for other in others)
    names = ", ".join(f"`{p}`" for p in param_columns(rows)) or "none"
    count = len(problems(rows))
    judged = "GFLOP/s (its rows count floating-point work)" if metric_of(rows) == "gflops" else "GB/s"
    return (f"{len(rows)} ok rows of {len(all_rows)} ({sources}) on {count} problem{'s' * (count != 1)}, judged by {judged}. "
            f"Its parameters, read from its rows' configuration keys: {names}.")  # fmt: skip


def study_line(study: StudySummary) -> str:
    """One study of the family in a line (its full summary is under Studies)."""
    line = f"study `{study.name}`: {len(study.history)} trials, {study.ok_trials} ok"
    if study.best is not None:
        line += f"; best {study.best_gbs:.1f} GB/s ({config_text(study.best, skip=())})"
        if not np.isnan(study.exhaustive_gbs):
            line += f", {study.best_gbs / study.exhaustive_gbs:.1%} of the exhaustive sweep's best"
    if study.importances:
        top = sorted(study.importances.items(), key=lambda kv: -kv[1])
        line += "; importances " + ", ".join(f"{name} {value:.2f}" for name, value in top)
    return line


def counters_line(family: str, profiles: pd.DataFrame | None) -> str | None:
    """What the counters say of the family's best profiled configuration; None without profiles."""
    if profiles is None or profiles.empty:
        return None
    mine = rows_of(profiles, family)
    best = best_profiled(mine) if len(mine) else pd.DataFrame()
    return family_line(best.iloc[0]) if len(best) else f"no configuration of `{family}` was profiled"


def family_sections(
    ctx: FigureContext,
    dataset: pd.DataFrame,
    figures: Mapping[str, FigureResult],
    profiles: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """Per family a sweep or a study measured, what its section shows (see the module docstring)."""
    sections = []
    for family in measured_families(ctx.ok):
        rows = scored_rows(ctx.ok, family)
        effects, problem = effects_table(family, rows)
        figure = figures.get(family)
        sections.append({
            "name": family,
            "summary": summary_text(family, rows, rows_of(dataset, family)),
            "best": best_table(family, rows, ctx.peaks),
            "effects": effects,
            "effects_problem": problem,
            "figure": figure if figure is not None and figure.drawn else None,
            "figure_note": figure.note if figure is not None else "",
            "counters": counters_line(family, profiles),
            "studies": [study_line(s) for s in ctx.studies if s.family == family],
        })  # fmt: skip
    return sections
