"""The report document: its content gathered once, rendered by two templates.

``build_content`` collects what the report says (text, pandas tables, figure
results, study summaries); ``templates/report.md.j2`` and
``templates/report.html.j2`` lay it out. Tables are written by pandas
(``DataFrame.to_markdown`` and ``DataFrame.to_html``), so the two documents
always hold the same numbers. Inline markup in the text is limited to `code`,
**bold** and powers such as 2^28 (2<sup>28</sup> in the HTML). The HTML embeds
every figure as a base64 PNG: the file alone shows them all. Which documents
a folder gets is its format (``tuner.report.formats``).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from tuner.data.selection import config_text, measured_families, problem_label, source_counts, usable
from tuner.data.time_to_target import seconds_text
from tuner.report.comparisons import (
    MARGIN,
    ROW_COLUMNS,
    TOLERANCE,
    Comparison,
    problem_text,
    summary,
    table_verdict,
)
from tuner.report.figure_kit import FigureResult
from tuner.report.figures import OVERVIEW
from tuner.report.formats import DEFAULT_FORMAT, FORMATS
from tuner.report.lessons import lesson_scope, scope_text
from tuner.report.studies import StudySummary
from tuner.report.style import shown_name

TEMPLATES = Path(__file__).resolve().parent / "templates"



_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_POWER = re.compile(r"(\d+)\^(\d+)")


def inline_html(text: Any) -> Markup:
    """Escaped text with `code`, **bold** and 2^28 as HTML."""
    text = html.escape(str(text), quote=False)
    text = _CODE.sub(r"<code>\1</code>", text)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    return Markup(_POWER.sub(r"\1<sup>\2</sup>", text))


def _verdict_html(text: Any) -> Markup:
    cell = inline_html(text)
    verdict = str(text).split(" ")[0]
    return Markup(f'<span class="{verdict}">{cell}</span>') if verdict in ("yes", "no") else cell


def html_table(frame: pd.DataFrame) -> Markup:
    """``frame`` (text cells) as an HTML table, inline markup rendered."""
    cells = frame.rename(columns=lambda c: str(inline_html(c)))
    cells = cells.apply(lambda column: column.map(_verdict_html))
    return Markup(cells.to_html(index=False, escape=False, border=0, classes="data", na_rep="—"))


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` (text cells) as a Markdown pipe table; cells are kept verbatim."""
    cells = frame.astype(str).apply(lambda column: column.str.replace("|", "\\|").str.replace("\n", " "))
    return cells.to_markdown(index=False, tablefmt="github", disable_numparse=True)


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(inline=inline_html, html_table=html_table, markdown_table=markdown_table, data_uri=data_uri)
    return env


def _text(value: Any) -> str:
    if value is None or value is pd.NA:
        return "—"
    if isinstance(value, float):
        return "—" if np.isnan(value) else f"{value:.4g}"
    return str(value)


def frame(columns: tuple[str, ...], rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame([[_text(v) for v in row] for row in rows], columns=list(columns))


# ---- the tables --------------------------------------------------------------------------


def environment_table(device: Mapping[str, Any]) -> pd.DataFrame:
    def get(key: str) -> Any:
        value = device.get(key)
        return "unknown" if value in (None, "") else value

    l2 = device.get("l2_bytes")
    rows = [
        ("GPU", shown_name(get("name"))),
        ("compute capability", get("compute_capability")),
        ("multiprocessors", get("sm_count")),
        ("L2 cache", f"{l2 / 2**20:.0f} MiB" if l2 else "unknown"),
        ("memory clock (MHz)", get("memory_clock_mhz")),
        ("memory bus width (bits)", get("bus_width_bits")),
        ("driver", get("driver_version")),
        ("CUDA", get("cuda_version")),
        ("nvcc", get("nvcc_version")),
        ("PyCUDA", get("pycuda_version")),
        ("git commit", f"`{device['git_commit']}`" if device.get("git_commit") else "unknown"),
    ]
    return frame(("item", "value"), rows)


def peaks_table(peaks: Mapping[str, Any]) -> pd.DataFrame:
    theoretical = peaks.get("theoretical_gbs")
    descriptions = {
        "theoretical_gbs": "memory clock × bus width × 2 (DDR) / 8",
        "copy_gbs": "measured: best device-to-device copy kernel (read + write)",
        "read_gbs": "measured: best read-only streaming kernel",
        "cub_reduce_gbs": "measured: CUB device reduction, int32 (the library reference for reduce)",
        "cub_reduce_float32_gbs": "measured: CUB device reduction, float32",
    }
    rows = []
    for key, text in descriptions.items():
        name, value = key.removesuffix("_gbs").replace("_", " "), peaks.get(key)
        if value:
            fraction = f"{float(value) / float(theoretical):.1%}" if theoretical else "—"
            rows.append((name, f"{float(value):.1f}", fraction, text))
        else:
            rows.append((name, "not measured", "—", text))
    return frame(("peak", "GB/s", "of theoretical", "what it is"), rows)


def reductions_table(dataset: pd.DataFrame, peaks: Mapping[str, Any]) -> pd.DataFrame | None:
    """Per reduction problem: the best complete reduction (finished on the
    device, all of it timed), the only one compared with CUB, beside the best
    partial pass (one sum per block, the last sum left to the host)."""
    if "finish" not in dataset:
        return None
    ok = dataset[(dataset["status"] == "ok").fillna(False).to_numpy(dtype=bool)]
    # The families that finish a reduction on the device or leave it to the host (their rows set finish).
    ok = ok[ok["family"].isin(set(ok["family"][ok["finish"].notna().to_numpy(dtype=bool)])).to_numpy(dtype=bool)]
    cub = {"int32": peaks.get("cub_reduce_gbs"), "float32": peaks.get("cub_reduce_float32_gbs")}
    rows = []
    for (family, dtype, n), group in ok.groupby(["family", "dtype", "n"], sort=True):
        complete = group[group["finish"].notna() & (group["finish"] != "host")]
        if complete.empty:
            continue
        best = complete.loc[complete["bandwidth_gbs"].idxmax()]
        partial = group.drop(complete.index)["bandwidth_gbs"].max()
        reference = cub.get(dtype)
        rows.append((
            problem_label(family, dtype, n), f"{best['bandwidth_gbs']:.1f}", f"`{best['finish']}`",
            f"{best['bandwidth_gbs'] / reference:.3f}x" if reference else "CUB not measured",
            f"{partial:.1f}" if pd.notna(partial) else "—",
        ))  # fmt: skip
    columns = ("problem", "complete GB/s", "finish", "complete / CUB", "partial GB/s (not compared)")
    return frame(columns, rows) if rows else None


def bests_table(bests: pd.DataFrame) -> pd.DataFrame:
    def share(value: float, compute_bound: bool) -> str:
        if compute_bound:
            return "— (compute-bound)"
        return f"{value:.1%}" if pd.notna(value) else "—"

    # An operation column only where a family's configurations do different work (copy: copy and read).
    operations = "operation" in bests and bests["operation"].notna().any()
    rows = [
        (
            r["family"],
            *([r["operation"] if pd.notna(r["operation"]) else "—"] if operations else []),
            r["variant"],
            problem_label(r["family"], r["dtype"], r["n"]),
            r["config"],
            f"{r['bandwidth_gbs']:.1f}",
            share(r["fraction_of_copy_peak"], r["compute_bound"]),
            share(r["fraction_of_theoretical_peak"], r["compute_bound"]),
            f"{r['gflops']:.0f}" if pd.notna(r["gflops"]) else "—",
            f"`{r['source']}`",
        )
        for _, r in bests.iterrows()
    ]
    columns = (
        "family",
        *(["operation"] if operations else []),
        "variant",
        "problem",
        "configuration",
        "GB/s",
        "of copy peak",
        "of theoretical peak",
        "GFLOP/s",
        "source",
    )
    return frame(columns, rows)


def comparison_section(comparison: Comparison) -> dict[str, Any]:
    spec = comparison.spec
    dtype, n, gpu = comparison.published_problem
    ours = "no data" if comparison.our_problem is None else problem_text(*comparison.our_problem, spec.family)
    text = (
        f"Conclusion tested: **{spec.rule}**. Holds on our data: **{table_verdict(comparison)}**. "
        f"Published: {problem_text(dtype, n, spec.family, gpu or 'GPU not stated')} (`{', '.join(spec.tables)}`). "
        f"Ours: {ours}."
    )
    return {"key": spec.key, "title": spec.title, "text": text, "table": comparison.rows[ROW_COLUMNS].astype(str)}


def figure_item(result: FigureResult) -> dict[str, Any]:
    return {
        "stem": result.stem,
        "title": result.title,
        "caption": result.caption,
        "drawn": result.drawn,
        "note": result.note,
        "file": result.png.name if result.png else "",
        "path": result.png,
    }


def study_items(study: StudySummary) -> list[str]:
    items = [
        f"problem: {study.family}, {problem_label(study.family, study.dtype, study.n)}; "
        f"{len(study.history)} trials, {study.ok_trials} ok",
    ]
    if study.best is not None:
        trial = int(study.best["trial"]) if pd.notna(study.best["trial"]) else "?"
        variant = f"`{study.best['variant']}`; " if pd.notna(study.best["variant"]) else ""  # a plug-in may have none
        items.append(f"best: {study.best_gbs:.1f} GB/s at trial {trial} ({variant}{config_text(study.best)})")
    if not np.isnan(study.exhaustive_gbs):
        reach = study.trials_to_reach(0.98)
        items.append(
            f"exhaustive best: {study.exhaustive_gbs:.1f} GB/s (`{study.exhaustive_source}`); the study reached "
            f"{study.best_gbs / study.exhaustive_gbs:.1%} of it" + (f", 98 % after {reach} trials" if reach else ", never 98 %")
        )
    else:
        items.append("no exhaustive sweep of the same problem to compare with")
    items += time_to_target_items(study)
    if study.importances:
        top = sorted(study.importances.items(), key=lambda kv: -kv[1])
        items.append("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    else:
        items.append(f"importances skipped: {study.importance_note}")
    return items + list(study.notes)


def time_to_target_items(study: StudySummary) -> list[str]:
    """Evaluations and wall time (compile included, and apart) to within 1 % of
    the study's own final best and of the exhaustive best."""
    own = study.reach_final_best()
    if own is None:
        return []
    parts = [own.sentence("its final best")]
    exhaustive = study.reach_exhaustive()
    if exhaustive is not None:
        parts.append(exhaustive.sentence("the exhaustive best"))
    items = ["time to target: " + "; ".join(parts)]
    if own.total_wall_s is not None:
        items.append(f"the whole study: {own.total_evaluations} evaluations, {seconds_text(own.total_wall_s)} "
                     f"(compile {seconds_text(own.total_compile_s)}), from the start of its tune command")  # fmt: skip
    return items


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def intro(dataset: pd.DataFrame) -> str:
    """The header line: rows, and how many distinct sweeps and studies they come from."""
    ok_count = int((dataset["status"] == "ok").sum()) if len(dataset) else 0
    sweeps, studies, others = source_counts(dataset)
    sources = [_count(sweeps, "sweep"), _count(studies, "study", "studies")]
    if others:
        sources.append(f"{_count(len(others), 'other source')} ({', '.join(f'`{s}`' for s in others)})")
    return (
        f"{len(dataset)} result rows ({ok_count} with status ok) from {', '.join(sources[:-1])} and {sources[-1]}. "
        "Only rows with status `ok` count for performance; bandwidth is the fewest bytes the computation must move "
        "over the median time (GB/s = 10^9 bytes/s)."
    )


def headline_table(head: pd.DataFrame) -> pd.DataFrame:
    """The headline row of each blog table (``comparisons.summary``), as the report shows it."""
    rows = [(r["blog table"], r["claim"].split(" — ")[-1], r["blog number"], r["ours"], r["ratio"], r["holds"])
            for _, r in head.iterrows()]  # fmt: skip
    return frame(("blog table", "row", "blog number", "ours", "ratio", "holds"), rows)


def compute_bound_text(bests: pd.DataFrame) -> str:
    """The sentence on the families judged by GFLOP/s ("" without any)."""
    names = [f"`{f}`" for f in bests["family"][bests["compute_bound"].astype(bool)]] if len(bests) else []
    if not names:
        return ""
    return (f"{', '.join(names)} {'counts' if len(names) == 1 else 'count'} floating-point work and {'is' if len(names) == 1 else 'are'} "
            "compute-bound: the best is the highest GFLOP/s, and a share of a bandwidth peak says nothing about it.")  # fmt: skip


def operations_text(bests: pd.DataFrame) -> str:
    """The sentence on the families whose configurations do different work ("" without any)."""
    if "operation" not in bests or not bests["operation"].notna().any():
        return ""
    named = bests[bests["operation"].notna()].groupby("family", sort=False)["operation"]
    parts = [f"`{family}` ({', '.join(ops)})" for family, ops in named]
    return (f"The configurations of {', '.join(parts)} do different work: each operation has its own best, "
            "since the fastest of one is no answer for another.")  # fmt: skip


def build_content(
    *,
    dataset: pd.DataFrame,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    comparisons: list[Comparison],
    bests: pd.DataFrame,
    figures: list[FigureResult],
    studies: list[StudySummary],
    families: list[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Everything the templates show; ``notes`` lists every missing-data line.
    ``families``: the sections of ``tuner.report.family_sections``."""
    present = set(measured_families(usable(dataset)))
    left_out, lesson_notes = lesson_scope(present, comparisons, figures)
    shown = [c for c in comparisons if c.has_data]
    notes: list[str] = []
    if bests.empty:
        notes.append("no rows with status ok: no best configurations")
    notes += lesson_notes
    notes += [f"figure `{r.stem}`: {'partly drawn, ' if r.drawn else 'skipped, '}{r.note}"
              for r in figures if r.note and r.stem not in left_out]  # fmt: skip
    if not studies:
        notes.append("no study rows (source study:<name>)")

    head = summary(shown)
    items = [figure_item(r) for r in figures]
    return {
        "title": f"Kernel autotuning report — {shown_name(device.get('name') or 'unknown GPU')}",
        "intro": intro(dataset),
        "scope": scope_text(present),
        "overview": next((f for f in items if f["stem"] == OVERVIEW and f["drawn"] and f["stem"] not in left_out), None),
        "figures": [f for f in items if f["stem"] != OVERVIEW and f["drawn"] and f["stem"] not in left_out],
        "tolerance": f"{TOLERANCE:.0%}",
        "margin": f"{MARGIN:.0%}",
        "summary": headline_table(head) if shown else None,
        "verdicts": frame(
            ("blog table", "conclusion", "holds on our data"), [(c.spec.key, c.spec.rule, table_verdict(c)) for c in shown]
        ),
        "bests": None if bests.empty else bests_table(bests),
        "compute_bound": compute_bound_text(bests),
        "operations": operations_text(bests),
        "families": [{**f, "figure": figure_item(f["figure"]) if f["figure"] else None} for f in families],
        "environment": environment_table(device),
        "peaks": peaks_table(peaks),
        "reductions": reductions_table(dataset, peaks),
        "comparisons": [comparison_section(c) for c in shown],
        "studies": [{"name": s.name, "items": study_items(s)} for s in studies],
        "notes": notes,
    }


def write_documents(
    content: Mapping[str, Any], out_dir: Path, names: tuple[str, ...] = FORMATS[DEFAULT_FORMAT].documents
) -> list[Path]:
    """The documents ``names`` (``report.md``, ``report.html``) in ``out_dir``."""
    env = environment()
    paths = []
    for name in names:
        text = env.get_template(f"{name}.j2").render(**content)
        path = out_dir / name
        path.write_text(re.sub(r"\n{3,}", "\n\n", text), encoding="utf-8")
        paths.append(path)
    return paths
