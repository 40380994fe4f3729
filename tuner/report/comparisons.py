"""Our measurements against the blogs' tables, one comparison per table.

Each blog table becomes a list of steps (rows). A step names the kernel we run
for it and the published row it stands beside. Raw times from another GPU and
another problem size are not comparable, so every row compares *speed-ups*:
the time of the step's reference row over the step's time, published and ours,
and ``ratio = our speed-up / published speed-up``.

Each table states one conclusion (the blog's claim) as a rule, and every row
says whether it holds on our data: ``yes``, ``no`` or ``n/a (...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tuner.report.published import published_problem, published_value
from tuner.report.selection import best, format_n, nearest_problem, select

# "At least as fast" allows this much slowdown: run-to-run noise and the
# boost clock move medians by a few percent.
TOLERANCE = 0.05
# "Faster", "slower" and "beats" need a difference of more than this: ten times
# the timer's pass-to-pass repeatability, so a 1 % effect never reads as a lesson
# that still holds.
MARGIN = 0.03

# What a row expects of its time t against the time t_ref of the row it is checked against.
EXPECTATIONS = {
    "baseline": "reference row",
    "faster": f"t < t_ref / {1 + MARGIN:g}",
    "slower": f"t > t_ref * {1 + MARGIN:g}",
    "as_fast": f"t <= t_ref * {1 + TOLERANCE:g}",
    "at_least_prev": f"t <= t_previous * {1 + TOLERANCE:g}",
}

HOLDS_NO_DATA = "n/a (no data)"
HOLDS_BASELINE = "n/a (reference)"


@dataclass(frozen=True)
class Step:
    """One row of a blog table.

    Attributes:
        label: what the row is called in the report.
        variant: our variant.
        must: our parameters that define the step (they must match).
        prefer: our launch parameters the blog used (preferred when measured).
        published: ``(variant, params)`` of the published row; None: no published number.
        expect: a key of ``EXPECTATIONS``.
        ref: label of the row speed-ups are taken over; None: the table's first row.
    """

    label: str
    variant: str
    must: Mapping[str, Any] = field(default_factory=dict)
    prefer: Mapping[str, Any] = field(default_factory=dict)
    published: tuple[str, Mapping[str, Any]] | None = None
    expect: str = "faster"
    ref: str | None = None


@dataclass(frozen=True)
class BlogTable:
    """A published table we reproduce and the conclusion we test on it."""

    key: str
    tables: tuple[str, ...]
    title: str
    family: str
    rule: str
    steps: tuple[Step, ...]
    headline: tuple[str, ...]
    hint: str | None = None
    prefer: Mapping[str, Any] = field(default_factory=dict)


def _pub(variant: str, **params: Any) -> tuple[str, dict[str, Any]]:
    return variant, params


def _ladder(names: list[tuple[str, str, dict]], block: int) -> tuple[Step, ...]:
    """Ladder steps: speed-ups over the first step, each checked against the
    previous one; from the unrolled step on, the blog folded 8 segments."""
    return tuple(
        Step(
            label,
            variant,
            must=must,
            prefer={"block_size": block, **({"unroll": 8} if i >= 3 else {})},
            published=_pub(variant, **must),
            expect="baseline" if i == 0 else "at_least_prev",
        )
        for i, (label, variant, must) in enumerate(names)
    )


LADDER_RULE = f"each ladder step is at least as fast as the previous one (within {TOLERANCE:.0%})"

BLOG_TABLES: tuple[BlogTable, ...] = (
    BlogTable(
        key="reduce_ladder_int32_1050ti",
        tables=("reduce_ladder_int32_1050ti",),
        title="Reduction ladder, int32 (CUDA Freshman 3.5, GTX 1050 Ti)",
        family="reduce",
        rule=LADDER_RULE,
        steps=_ladder(
            [
                ("neighbored", "neighbored", {}),
                ("neighbored_less", "neighbored_less", {}),
                ("interleaved", "interleaved", {}),
                ("unrolled ×8", "unrolled", {"unroll": 8}),
                ("unrolled_warp", "unrolled_warp", {}),
                ("complete", "complete", {}),
                ("complete_template", "complete_template", {}),
            ],
            1024,
        ),
        headline=("complete_template",),
        hint="sweep:reduce_ladder",
        prefer={"offset": 0},
    ),
    BlogTable(
        key="reduce_v0_v6_gtx1060",
        tables=("reduce_v0_v6_gtx1060",),
        title="Reduction v0–v6, float32 (GTX 1060)",
        family="reduce",
        rule=LADDER_RULE,
        steps=_ladder(
            [
                ("neighbored (v0)", "neighbored", {}),
                ("neighbored_less (v1)", "neighbored_less", {}),
                ("interleaved (v2)", "interleaved", {}),
                ("unrolled (v3)", "unrolled", {}),
                ("unrolled_warp (v4)", "unrolled_warp", {}),
                ("complete (v5)", "complete", {}),
                ("shared (v6)", "shared", {}),
            ],
            256,
        ),
        headline=("shared (v6)",),
        hint="sweep:reduce_ladder",
        prefer={"offset": 0},
    ),
    BlogTable(
        key="reduce_unroll_1050ti",
        tables=("reduce_unroll_run1_1050ti", "reduce_unroll_run2_1050ti", "reduce_unroll_run3_1050ti"),
        title="Unrolled reductions, int32, median of runs 1–3 (CUDA Freshman 3.5, GTX 1050 Ti)",
        family="reduce",
        rule=(
            "unroll 4 and unroll 8 beat unroll 2; warp, complete and template unrolling are each at least"
            f" as fast as the previous step (within {TOLERANCE:.0%})"
        ),
        steps=(
            Step("unrolled ×2", "unrolled", {"unroll": 2}, {"block_size": 1024}, _pub("unrolled", unroll=2), "baseline"),
            Step("unrolled ×4", "unrolled", {"unroll": 4}, {"block_size": 1024}, _pub("unrolled", unroll=4), "faster"),
            Step("unrolled ×8", "unrolled", {"unroll": 8}, {"block_size": 1024}, _pub("unrolled", unroll=8), "faster"),
            Step(
                "unrolled_warp ×8", "unrolled_warp", {}, {"block_size": 1024, "unroll": 8}, _pub("unrolled_warp"), "at_least_prev"
            ),
            Step("complete ×8", "complete", {}, {"block_size": 1024, "unroll": 8}, _pub("complete"), "at_least_prev"),
            Step(
                "complete_template ×8",
                "complete_template",
                {},
                {"block_size": 1024, "unroll": 8},
                _pub("complete_template"),
                "at_least_prev",
            ),
        ),
        headline=("unrolled ×8",),
        hint="sweep:reduce_block_unroll",
        prefer={"offset": 0},
    ),
    BlogTable(
        key="reduce_speedup_text_1050ti",
        tables=("reduce_speedup_text_1050ti",),
        title="Speed-ups claimed in the text (CUDA Freshman 3.5, GTX 1050 Ti)",
        family="reduce",
        rule="the unrolled and the completely unrolled kernels beat neighbored",
        steps=(
            Step("neighbored", "neighbored", {}, {"block_size": 1024}, None, "baseline"),
            Step("unrolled", "unrolled", {}, {"block_size": 1024, "unroll": 8}, _pub("unrolled"), "faster"),
            Step("complete ×8", "complete", {}, {"block_size": 1024, "unroll": 8}, _pub("complete"), "faster"),
        ),
        headline=("complete ×8",),
        hint="sweep:reduce_ladder",
        prefer={"offset": 0},
    ),
    BlogTable(
        key="offset_read_m2070",
        tables=("offset_read_m2070",),
        title="Misaligned reads, readOffset (M2070)",
        family="offset",
        rule=f"offset 11 is slower than offset 0 for reads; offset 128 is as fast as offset 0 (within {TOLERANCE:.0%})",
        steps=tuple(
            Step(
                f"offset {offset}, L1 {l1}" + ("" if offset == 0 else f" (vs offset 0, L1 {l1})"),
                "read_offset",
                {"offset": offset, "l1_cache": l1},
                {"block_size": 512},
                _pub("read_offset", offset=offset, l1_cache=l1),
                {0: "baseline", 11: "slower", 128: "as_fast"}[offset],
                f"offset 0, L1 {l1}",
            )
            for l1 in ("ca", "cg")
            for offset in (0, 11, 128)
        ),
        headline=("offset 11, L1 ca (vs offset 0, L1 ca)",),
        hint="sweep:offset_read_write",
    ),
    BlogTable(
        key="offset_write_m2070",
        tables=("offset_write_m2070",),
        title="Misaligned writes, writeOffset (M2070)",
        family="offset",
        rule=f"offset 11 is slower than offset 0 for writes; offset 128 is as fast as offset 0 (within {TOLERANCE:.0%})",
        steps=tuple(
            Step(
                f"offset {offset}",
                "write_offset",
                {"offset": offset},
                {"block_size": 512},
                _pub("write_offset", offset=offset),
                {0: "baseline", 11: "slower", 128: "as_fast"}[offset],
            )
            for offset in (0, 11, 128)
        ),
        headline=("offset 11",),
        hint="sweep:offset_read_write",
    ),
    BlogTable(
        key="offset_unroll_m2070",
        tables=("offset_unroll_m2070",),
        title="Unrolled misaligned reads, readOffsetUnroll4 (M2070)",
        family="offset",
        rule="the 4× unrolled read kernel beats the plain read kernel at every offset",
        steps=tuple(
            step
            for offset in (0, 11, 128)
            for step in (
                Step(
                    f"read, offset {offset}",
                    "read_offset",
                    {"offset": offset},
                    {"block_size": 512, "l1_cache": "ca"},
                    _pub("read_offset", offset=offset),
                    "baseline",
                    f"read, offset {offset}",
                ),
                Step(
                    f"unrolled ×4, offset {offset} (vs read, offset {offset})",
                    "read_offset_unrolled",
                    {"offset": offset, "unroll": 4},
                    {"block_size": 512, "l1_cache": "ca"},
                    _pub("read_offset_unrolled", offset=offset, unroll=4),
                    "faster",
                    f"read, offset {offset}",
                ),
            )
        ),
        headline=("unrolled ×4, offset 11 (vs read, offset 11)",),
        hint="sweep:offset_unroll_blocks",
    ),
    BlogTable(
        key="offset_unroll_block_sweep_m2070",
        tables=("offset_unroll_block_sweep_m2070",),
        title="Block sizes for the unrolled read kernel, offset 0 (M2070)",
        family="offset",
        rule=f"blocks of 512, 256 and 128 threads are at least as fast as 1024 (within {TOLERANCE:.0%})",
        steps=tuple(
            Step(
                f"block {block}" + ("" if block == 1024 else " (vs block 1024)"),
                "read_offset_unrolled",
                {"block_size": block, "unroll": 4, "offset": 0},
                {"l1_cache": "ca"},
                _pub("read_offset_unrolled", block_size=block),
                "baseline" if block == 1024 else "as_fast",
            )
            for block in (1024, 512, 256, 128)
        ),
        headline=("block 256 (vs block 1024)",),
        hint="sweep:offset_unroll_blocks",
    ),
    BlogTable(
        key="aos_soa_m2070",
        tables=("aos_soa_m2070",),
        title="Array of structures vs structure of arrays (M2070)",
        family="layout",
        rule="SoA beats AoS",
        steps=(
            Step("aos", "aos", {}, {"block_size": 128}, _pub("aos"), "baseline"),
            Step("soa (vs aos)", "soa", {}, {"block_size": 128}, _pub("soa"), "faster"),
        ),
        headline=("soa (vs aos)",),
        hint="sweep:layout_aos_soa",
    ),
    BlogTable(
        key="bank_conflict_v100",
        tables=("bank_conflict_v100",),
        title="Shared-memory bank conflicts in a reduction (V100)",
        family="reduce",
        rule="sequential addressing beats interleaved addressing",
        steps=(
            Step("shared_interleaved", "shared_interleaved", {}, {}, _pub("shared_interleaved"), "baseline"),
            Step("shared_sequential (vs interleaved)", "shared_sequential", {}, {}, _pub("shared_sequential"), "faster"),
        ),
        headline=("shared_sequential (vs interleaved)",),
        hint="sweep:reduce_bank_conflicts",
        prefer={"offset": 0},
    ),
    BlogTable(
        key="matmul_v100",
        tables=("matmul_v100",),
        title="Shared-memory matrix multiply (V100)",
        family="matmul",
        rule="shared A and shared A+B both beat naive",
        steps=(
            Step("naive", "naive", {}, {"pitched": 0}, _pub("naive"), "baseline"),
            Step("shared_a (vs naive)", "shared_a", {}, {"pitched": 0}, _pub("shared_a"), "faster"),
            Step("shared_ab (vs naive)", "shared_ab", {}, {"pitched": 0}, _pub("shared_ab"), "faster"),
        ),
        headline=("shared_ab (vs naive)",),
        hint="sweep:matmul_variants",
    ),
    BlogTable(
        key="pitched_matmul",
        tables=("pitched_matmul",),
        title="Pitched vs linear allocation, naive matmul 1000×1000 (GPU not stated)",
        family="matmul",
        rule="pitched beats linear",
        steps=(
            Step("naive, linear", "naive", {"pitched": 0}, {}, _pub("naive", pitched=0), "baseline"),
            Step("naive, pitched (vs linear)", "naive", {"pitched": 1}, {}, _pub("naive", pitched=1), "faster"),
        ),
        headline=("naive, pitched (vs linear)",),
        hint="sweep:matmul_variants",
    ),
    BlogTable(
        key="vector_add_widths",
        tables=("vector_add_widths",),
        title="Vectorised add, float32 (GPU not stated)",
        family="vector_add",
        rule=f"wider vectors are at least as fast (within {TOLERANCE:.0%})",
        steps=tuple(
            Step(
                f"vector width {width}",
                "add",
                {"vector_width": width},
                {"unroll": 1, "block_size": 512, "offset": 0},
                _pub("scalar" if width == 1 else "vector", vector_width=width),
                "baseline" if width == 1 else "at_least_prev",
            )
            for width in (1, 2, 4)
        ),
        headline=("vector width 4",),
        hint="sweep:vector_add_widths",
    ),
    BlogTable(
        key="vector_add_pragma_unroll",
        tables=("vector_add_pragma_unroll",),
        title="#pragma unroll on the add loop, float32 (GPU not stated)",
        family="vector_add",
        rule=f"more unrolling is at least as fast (within {TOLERANCE:.0%})",
        steps=tuple(
            Step(
                f"unroll {unroll}",
                "add",
                {"unroll": unroll},
                {"vector_width": 1, "offset": 0},
                _pub("scalar", unroll=unroll),
                "baseline" if unroll == 1 else "at_least_prev",
            )
            for unroll in (1, 2, 4)
        ),
        headline=("unroll 4",),
        hint="sweep:vector_add_widths",
    ),
)

ROW_COLUMNS = ["step / config", "published (value, GPU)", "ours", "ratio (ours / published)", "conclusion holds?"]


@dataclass
class Comparison:
    """One evaluated blog table.

    Attributes:
        spec: the table.
        published_problem: (dtype, n, gpu) of the blog (n None when unstated).
        our_problem: the (dtype, n) we compare with, or None without data.
        rows: one per step, the ``ROW_COLUMNS`` as text plus numbers
            (published_speedup, our_speedup, ratio_value, our_time_ms, our_gbs).
    """

    spec: BlogTable
    published_problem: tuple[str | None, int | None, str]
    our_problem: tuple[str, int] | None
    rows: pd.DataFrame

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
    variants = sorted({s.variant for s in spec.steps})
    candidates = select(ok, spec.family, variants=variants)
    problem = _choose_problem(candidates, spec, pub_dtype, pub_n)

    labels = [s.label for s in spec.steps]
    chosen: list[pd.Series | None] = []
    for step in spec.steps:
        row = None
        if problem is not None:
            rows = select(
                ok,
                spec.family,
                variants=[step.variant],
                dtype=problem[0],
                n=problem[1],
                must=step.must,
                prefer={**spec.prefer, **step.prefer},
                hint=spec.hint,
            )
            row = best(rows)
        chosen.append(row)
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
            }
        )
    return Comparison(spec, (pub_dtype, pub_n, pub_gpu), problem, pd.DataFrame.from_records(records))


def _choose_problem(candidates: pd.DataFrame, spec: BlogTable, dtype: str | None, n: int | None) -> tuple[str, int] | None:
    """The (dtype, n) with the most of the table's variants, then the one
    nearest to the blog's problem."""
    if candidates.empty:
        return None
    coverage = candidates.groupby(["dtype", "n"])["variant"].nunique()
    most = coverage.max()
    covered = candidates[[coverage.get((d, k), 0) == most for d, k in zip(candidates["dtype"], candidates["n"])]]
    return nearest_problem(covered, dtype, n)


def evaluate_all(ok: pd.DataFrame, published: pd.DataFrame) -> list[Comparison]:
    return [evaluate(spec, ok, published) for spec in BLOG_TABLES]


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
