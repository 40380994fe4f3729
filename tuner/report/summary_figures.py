"""The figures that are not made of result rows: the overview of the blogs'
conclusions, the best of each family against the peaks, and the studies.

Each is a ``data`` function of a ``FigureSpec`` (see ``tuner.report.figures``):
``(context, spec) -> (panels, note)``; no panels means the figure is skipped
and ``note`` says why.
"""

from __future__ import annotations

import textwrap

import pandas as pd

from tuner.data.selection import best, compute_bound, family_rank, peak_fractions, problem_label
from tuner.report.comparisons import ROW_COLUMNS, Comparison, table_verdict
from tuner.report.figure_kit import FigureContext, FigureSpec
from tuner.report.panels import HLine, Panel
from tuner.report.style import PEAK_STYLES


def _verdict(comparison: Comparison) -> tuple[bool | None, str]:
    verdict = table_verdict(comparison)
    if verdict.startswith("yes"):
        return True, "holds"
    if verdict.startswith("no"):
        return False, "does not hold" + verdict[2:].replace(" rows fail)", " rows)")
    return None, "no data"


def overview(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    """Per blog table with rows of ours, its headline row: published and our speed-up, and the verdict."""
    records = []
    for comparison in ctx.comparisons.values():
        if not comparison.has_data:  # a lesson this dataset did not measure is left out, not drawn empty
            continue
        label = comparison.spec.headline[0]
        rows = comparison.rows[comparison.rows[ROW_COLUMNS[0]] == label]
        if rows.empty:
            continue
        holds, verdict = _verdict(comparison)
        records.append(
            {
                "x": "\n".join(textwrap.wrap(comparison.spec.title, 62)) + f"\n→ {label}",
                "y": rows["our_speedup"].iloc[0],
                "published": rows["published_speedup"].iloc[0],
                "holds": holds,
                "verdict": verdict,
                "table": comparison.spec.key,
            }
        )
    if not records:
        return [], "no blog table has rows of ours to compare with"
    data = pd.DataFrame.from_records(records)
    panel = Panel(
        "dumbbell", "speed-up of each table's headline row over its reference row", data, xlabel="speed-up (×, log scale)"
    )
    return [panel], ""


def family_bests(ctx: FigureContext) -> pd.DataFrame:
    """The best usable row of each bandwidth-bound family (sweeps and studies)."""
    rows = {f: ctx.ok[(ctx.ok["family"] == f).to_numpy(dtype=bool)] for f in ctx.ok["family"].dropna().unique()}
    bests = [best(mine) for mine in rows.values() if not compute_bound(mine)]
    frame = pd.DataFrame([b for b in bests if b is not None])
    if frame.empty:
        return frame
    return frame.iloc[sorted(range(len(frame)), key=lambda i: family_rank(frame["family"].iloc[i]))]


def peak_panels(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    bests = family_bests(ctx)
    copy_gbs, theoretical_gbs, cub_gbs = (ctx.peaks.get(k) for k in ("copy_gbs", "theoretical_gbs", "cub_reduce_gbs"))
    if bests.empty:
        return [], "no rows with status ok"
    if not (copy_gbs or theoretical_gbs):
        return [], "peaks.json has neither copy_gbs nor theoretical_gbs"
    records = []
    for _, row in bests.iterrows():
        variant = f"{row['variant']}\n" if pd.notna(row["variant"]) else ""  # a plug-in family may have none
        problem = problem_label(row["family"], row["dtype"], int(row["n"]), tex=True).replace(", ", "\n")
        label = f"{row['family']}\n{variant}{problem}"
        for series, value in zip(("of copy peak", "of theoretical peak"), peak_fractions(row["bandwidth_gbs"], row, ctx.peaks)):
            records.append({"x": label, "series": series, "y": value})
    lines = [HLine(1.0, "peak = 1", "-", "#444444")]
    if copy_gbs and theoretical_gbs:
        lines.append(
            HLine(
                copy_gbs / theoretical_gbs,
                f"copy peak / theoretical = {copy_gbs / theoretical_gbs:.2f}",
                "--",
                PEAK_STYLES["copy_gbs"][2],
            )
        )
    if cub_gbs and copy_gbs:
        lines.append(
            HLine(
                cub_gbs / copy_gbs, f"CUB reduce / copy peak = {cub_gbs / copy_gbs:.2f}", "-.", PEAK_STYLES["cub_reduce_gbs"][2]
            )
        )
    title = f"copy peak {copy_gbs or float('nan'):.0f} GB/s, theoretical {theoretical_gbs or float('nan'):.0f} GB/s"
    data = pd.DataFrame.from_records(records)
    return [Panel("bar", title, data, ylabel="fraction of peak bandwidth (1 = peak)", fmt="{:.2f}", hlines=lines)], ""


def history_panels(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    studies = [s for s in ctx.studies if len(s.history)]
    if not studies:
        return [], "no study rows (source study:<name>)"
    panels = []
    for study in studies:
        h = study.history
        data = pd.DataFrame(
            {"trial": h["trial"], "status": h["status"], "y": h["bandwidth_gbs"], "best_so_far": h["best_so_far_gbs"]}
        )
        lines = []
        if pd.notna(study.exhaustive_gbs):
            lines.append(
                HLine(study.exhaustive_gbs, f"exhaustive best {study.exhaustive_gbs:.0f} GB/s ({study.exhaustive_source})")
            )
        title = f"{study.name}: {study.family}, {problem_label(study.family, study.dtype, study.n, tex=True)}"
        panels.append(Panel("history", title, data, xlabel="trial (#)", ylabel="bandwidth (GB/s)", hlines=lines))
    no_sweep = [s.name for s in studies if pd.isna(s.exhaustive_gbs)]
    return panels, f"no exhaustive sweep of the same problem for: {', '.join(no_sweep)}" if no_sweep else ""


def importance_panels(ctx: FigureContext, spec: FigureSpec) -> tuple[list[Panel], str]:
    studies = [s for s in ctx.studies if s.importances]
    skipped = [f"{s.name} ({s.importance_note})" for s in ctx.studies if not s.importances]
    if not studies:
        return [], "no study with importances: " + ("; ".join(skipped) if skipped else "no study rows (source study:<name>)")
    panels = []
    for study in studies:
        items = sorted(study.importances.items(), key=lambda kv: kv[1])
        data = pd.DataFrame({"x": [k for k, _ in items], "y": [v for _, v in items]})
        title = f"{study.name}: {problem_label(study.family, study.dtype, study.n, tex=True)}, {study.ok_trials} ok trials"
        panels.append(Panel("barh", title, data, xlabel="importance (fraction of total)"))
    return panels, "importances skipped for " + "; ".join(skipped) if skipped else ""
