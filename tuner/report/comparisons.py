"""Our measurements against the blogs' tables, one comparison per table.

Each blog table (``tuner/data/blog_conclusions.yaml`` and ``blog_steps.csv``,
read by ``tuner.data.blog_tables``) is a list of steps (rows). A step names
the kernel we run for it and the published row it stands beside. Raw times
from another GPU and another problem size are not comparable, so every row
compares *speed-ups*: the time of the step's reference row over the step's
time, published and ours, and ``ratio = our speed-up / published speed-up``.

Each table states one conclusion (the blog's claim) as a rule, and every row
says whether it holds on our data: ``yes``, ``no`` or ``n/a (...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tuner.data.blog_rows import choose
from tuner.data.blog_tables import BlogTable, Step, load_blog_tables
from tuner.data.published import published_problem, published_value
from tuner.data.selection import format_n

# "At least as fast" allows this much slowdown: run-to-run noise and the
# boost clock move medians by a few percent.
TOLERANCE = 0.05
# "Faster", "slower" and "beats" need a difference of more than this: ten times
# the timer's pass-to-pass repeatability, so a 1 % effect never reads as a lesson
# that still holds.
MARGIN = 0.03

HOLDS_NO_DATA = "n/a (no data)"
HOLDS_BASELINE = "n/a (reference)"

BLOG_TABLES: tuple[BlogTable, ...] = load_blog_tables(tolerance=f"{TOLERANCE:.0%}")

ROW_COLUMNS = ["step / config", "published (value, GPU)", "ours", "ratio (ours / published)", "conclusion holds?"]


@dataclass
class Comparison:
    """One evaluated blog table.

    Attributes:
        spec: the table.
        published_problem: (dtype, n, gpu) of the blog (n None when unstated).
        our_problem: the (dtype, n) we compare with, or None without data.
        rows: one per step, the ``ROW_COLUMNS`` as text plus numbers
            (published_speedup, our_speedup, ratio_value, our_time_ms, our_gbs)
            and ``ref_index``, the position of the row its speed-up is over.
        chosen: per step, our row it was measured with (None without data).
    """

    spec: BlogTable
    published_problem: tuple[str | None, int | None, str]
    our_problem: tuple[str, int] | None
    rows: pd.DataFrame
    chosen: tuple[pd.Series | None, ...] = field(default_factory=tuple)

    @property
    def has_data(self) -> bool:
        return self.our_problem is not None


def _published_speed(published: pd.DataFrame, spec: BlogTable, step: Step, ref: Step) -> tuple[str, float]:
    """(cell text, published speed-up over ``ref``; NaN when unknown)."""
    if step.published is None:
        return "—", np.nan
    variant, params = step.published
    found = published_value(published, spec.tables, variant, params, metrics=("time_ms", "bandwidth_gbs", "speedup"))
    if found is None:
        return "—", np.nan
    metric, value, gpu = found
    gpu = gpu or "GPU not stated"
    unit = {"time_ms": "ms", "bandwidth_gbs": "GB/s", "speedup": "×"}[metric]
    if metric == "speedup":
        return f"{value:g}× ({gpu})", value
    text = f"{value:.4g} {unit} ({gpu})"
    if step is ref or ref.published is None:
        return text, 1.0 if step is ref else np.nan
    ref_found = published_value(published, spec.tables, ref.published[0], ref.published[1], metrics=(metric,))
    if ref_found is None:
        return text, np.nan
    ref_value = ref_found[1]
    speedup = ref_value / value if metric == "time_ms" else value / ref_value
    return f"{text} → {speedup:.2f}×", speedup


def _holds(step: Step, index: int, times: list[float], labels: list[str], ref_label: str | None) -> str:
    if step.expect == "baseline":
        return HOLDS_BASELINE
    if step.expect == "at_least_prev":
        check = index - 1
    else:
        check = labels.index(ref_label) if ref_label in labels else 0
    t, t_ref = times[index], times[check]
    if np.isnan(t) or np.isnan(t_ref):
        return HOLDS_NO_DATA
    verdict = {
        "faster": t * (1 + MARGIN) < t_ref,
        "slower": t > t_ref * (1 + MARGIN),
        "as_fast": t <= t_ref * (1 + TOLERANCE),
        "at_least_prev": t <= t_ref * (1 + TOLERANCE),
    }[step.expect]
    return "yes" if verdict else "no"


def evaluate(spec: BlogTable, ok: pd.DataFrame, published: pd.DataFrame) -> Comparison:
    """Compare one blog table with the usable rows ``ok``."""
    pub_dtype, pub_n, pub_gpu = published_problem(published, spec.tables)
    problem, chosen = choose(spec, ok, published)
    labels = [s.label for s in spec.steps]
    times = [float(r["time_ms_median"]) if r is not None else np.nan for r in chosen]

    records = []
    for index, (step, row) in enumerate(zip(spec.steps, chosen)):
        ref_label = step.ref or labels[0]
        ref_index = labels.index(ref_label) if ref_label in labels else 0
        ref = spec.steps[ref_index]
        pub_text, pub_speedup = _published_speed(published, spec, step, ref)
        if row is None:
            ours_text, our_speedup, gbs = "no data", np.nan, np.nan
        else:
            gbs = float(row["bandwidth_gbs"])
            our_speedup = times[ref_index] / times[index] if not np.isnan(times[ref_index]) else np.nan
            ours_text = f"{times[index]:.4g} ms, {gbs:.4g} GB/s"
            if index != ref_index and not np.isnan(our_speedup):
                ours_text += f" → {our_speedup:.2f}×"
            differs = [
                f"{k}={row[k]}"
                for k, v in {**spec.prefer, **step.prefer}.items()
                if k in row.index and pd.notna(row[k]) and row[k] != v
            ]
            if differs:
                ours_text += f" ({', '.join(differs)})"
        if index == ref_index:
            ratio_value, ratio_text = np.nan, "—"
        else:
            ratio_value = our_speedup / pub_speedup if pub_speedup and not np.isnan(pub_speedup) else np.nan
            ratio_text = "n/a" if np.isnan(ratio_value) else f"{ratio_value:.2f}"
        records.append(
            {
                ROW_COLUMNS[0]: step.label,
                ROW_COLUMNS[1]: pub_text,
                ROW_COLUMNS[2]: ours_text,
                ROW_COLUMNS[3]: ratio_text,
                ROW_COLUMNS[4]: _holds(step, index, times, labels, ref_label),
                "published_speedup": pub_speedup,
                "our_speedup": our_speedup,
                "ratio_value": ratio_value,
                "our_time_ms": times[index],
                "our_gbs": gbs,
                "ref_index": ref_index,
            }
        )
    return Comparison(spec, (pub_dtype, pub_n, pub_gpu), problem, pd.DataFrame.from_records(records), tuple(chosen))


def evaluate_all(ok: pd.DataFrame, published: pd.DataFrame) -> list[Comparison]:
    return [evaluate(spec, ok, published) for spec in BLOG_TABLES]


def table_verdict(comparison: Comparison) -> str:
    """The table's conclusion on our data: yes, no, or n/a (no data)."""
    holds = [h for h in comparison.rows[ROW_COLUMNS[4]] if h in ("yes", "no") or h == HOLDS_NO_DATA]
    decided = [h for h in holds if h in ("yes", "no")]
    if not decided:
        return HOLDS_NO_DATA
    if "no" in decided:
        return f"no ({decided.count('no')} of {len(decided)} rows fail)"
    missing = len(holds) - len(decided)
    return "yes" + (f" ({missing} rows without data)" if missing else "")


def summary(comparisons: list[Comparison]) -> pd.DataFrame:
    """The headline rows of every comparison: claim, blog number, ours, ratio, holds."""
    records = []
    for comparison in comparisons:
        for label in comparison.spec.headline:
            row = comparison.rows[comparison.rows[ROW_COLUMNS[0]] == label]
            if row.empty:
                continue
            row = row.iloc[0]
            records.append(
                {
                    "claim": f"{comparison.spec.rule} — {label}",
                    "blog table": comparison.spec.key,
                    "blog number": row[ROW_COLUMNS[1]],
                    "ours": row[ROW_COLUMNS[2]],
                    "ratio": row[ROW_COLUMNS[3]],
                    "holds": row[ROW_COLUMNS[4]],
                }
            )
    return pd.DataFrame.from_records(records, columns=["claim", "blog table", "blog number", "ours", "ratio", "holds"])


def problem_text(dtype: str | None, n: int | None, family: str, gpu: str = "") -> str:
    text = f"{dtype or 'dtype not stated'}, " + ("n not stated" if n is None else f"n = {format_n(n, family)}")
    return text + (f", {gpu}" if gpu else "")
