"""Counter tables: each blog table's rows with their hardware counters, ours
beside the blog's, and the blog's conclusions drawn from counters checked on
ours.

``tuner/data/counter_tables.yaml`` says which counters a table shows and which
conclusions it tests. Our row for a step is the very configuration the timing
comparison chose (``Comparison.chosen``), found in the profiles by source,
dtype, n and configuration key; a step whose configuration was not profiled
says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from tuner.data.counters import COUNTERS, counter
from tuner.data.published import published_value
from tuner.report.comparisons import Comparison

SPEC_YAML = Path(__file__).resolve().parents[1] / "data" / "counter_tables.yaml"
KEY = ["source", "dtype", "n", "config_key"]
MARGIN, TOLERANCE = 0.03, 0.05  # as the timing comparisons: "<"/">" need 3 %, "~" allows 5 %

# The blogs' nvprof metrics (published.csv) and the counter of ours that measures the same thing.
PUBLISHED_COUNTERS = {
    "gld_efficiency_pct": "global_load_efficiency_pct",
    "gst_efficiency_pct": "global_store_efficiency_pct",
    "gld_transactions": "global_load_sectors",
    "gst_transactions": "global_store_sectors",
    "stall_sync_pct": "barrier_stall_pct",
    "inst_per_warp": "instructions_per_warp",
    "gld_throughput_gbs": "global_load_throughput_gbs",
    "branch_efficiency_pct": "branch_efficiency_pct",
    "branch_count": "branches",
    "divergent_branch_count": "divergent_branches",
}
SHORT = {c.column: c.column.removesuffix("_pct").removesuffix("_gbs").replace("_", " ") for c in COUNTERS}


@dataclass
class CounterTable:
    key: str
    title: str
    table: pd.DataFrame  # text cells: step, then counter columns (blog / ours)
    verdicts: pd.DataFrame  # rule, counter, ours, holds
    values: pd.DataFrame  # numbers: one row per step, our counters (NaN where not profiled)
    profiled: int


def load_specs(path: Path = SPEC_YAML) -> list[dict]:
    specs = yaml.safe_load(path.read_text(encoding="utf-8"))
    known = {c.column for c in COUNTERS}
    for spec in specs:
        unknown = [c for c in spec["counters"] + [k["column"] for k in spec["conclusions"]] if c not in known]
        if unknown:
            raise ValueError(f"{path.name}: table {spec['table']} names unknown counters {unknown}")
    return specs


def profile_row(profiles: pd.DataFrame, row: pd.Series | None) -> pd.Series | None:
    """The profile of the measured ``row``'s configuration, or None."""
    if row is None or profiles.empty:
        return None
    # One mask over the key columns, then one row taken: not a filtered copy per column.
    hit = np.ones(len(profiles), dtype=bool)
    for column in KEY:
        hit = hit & (profiles[column] == row[column]).fillna(False).to_numpy(dtype=bool)
    return profiles.iloc[int(np.argmax(hit))] if hit.any() else None


def fmt(value: float, column: str) -> str:
    if value is None or pd.isna(value):
        return "—"
    unit = counter(column).unit
    if unit.startswith("%"):
        return f"{value:.1f} %"
    if abs(value) >= 1e5:
        return f"{value:.3g}"
    return f"{value:.3g}" if unit in ("sectors/request", "conflicts/request") else f"{value:,.4g}"


def _published(published: pd.DataFrame, tables: list[str], step, column: str) -> float:
    if step.published is None or not tables:
        return np.nan
    metrics = [m for m, ours in PUBLISHED_COUNTERS.items() if ours == column]
    found = published_value(published, tables, step.published[0], step.published[1], metrics=metrics)
    return found[1] if found else np.nan


def counter_table(comparison: Comparison, spec: dict, profiles: pd.DataFrame, published: pd.DataFrame) -> CounterTable:
    steps = comparison.spec.steps
    ours = [profile_row(profiles, row) for row in (comparison.chosen or (None,) * len(steps))]
    values = pd.DataFrame(
        [{c: (float(p[c]) if p is not None else np.nan) for c in spec["counters"]} for p in ours],
        index=[s.label for s in steps],
    )
    blog = {c: [_published(published, spec["published"], s, c) for s in steps] for c in spec["counters"]}
    cells = {"step / config": [s.label for s in steps]}
    for column in spec["counters"]:
        name = f"{SHORT[column]} ({counter(column).unit})"
        if any(pd.notna(v) for v in blog[column]):
            cells[f"{name}, blog"] = [fmt(v, column) for v in blog[column]]
            cells[f"{name}, ours"] = [fmt(v, column) for v in values[column]]
        else:
            cells[name] = [fmt(v, column) for v in values[column]]
    table = pd.DataFrame(cells)
    for i, row in enumerate(comparison.chosen or ()):
        if row is not None and ours[i] is None:
            table.iloc[i, 0] += " (not profiled)"
    verdicts = pd.DataFrame(
        [check(values, c) for c in spec["conclusions"]],
        columns=["conclusion (from the blog's counters)", "ours", "holds on our data"],
    )
    return CounterTable(comparison.spec.key, comparison.spec.title, table, verdicts, values, sum(p is not None for p in ours))


def check(values: pd.DataFrame, conclusion: dict) -> tuple[str, str, str]:
    """(rule, our numbers, yes / no / n/a) of one conclusion on our counters."""
    column = conclusion["column"]
    left, relation, right = conclusion["check"]
    a = values[column].get(left, np.nan)
    b = float(right) if isinstance(right, (int, float)) else values[column].get(right, np.nan)
    shown = f"{left}: {fmt(a, column)}; " + (
        f"{right}: {fmt(b, column)}" if not isinstance(right, (int, float)) else f"vs {right}"
    )
    if pd.isna(a) or pd.isna(b):
        return conclusion["rule"], shown, "n/a (not profiled)"
    holds = {"<": a * (1 + MARGIN) < b, ">": a > b * (1 + MARGIN), "~": abs(a - b) <= TOLERANCE * max(abs(b), 1e-12)}[relation]
    return conclusion["rule"], shown, "yes" if holds else "no"


def counter_tables(comparisons: list[Comparison], profiles: pd.DataFrame, published: pd.DataFrame) -> list[CounterTable]:
    """One table per blog table that has a counter spec, in the comparisons' order."""
    specs = {s["table"]: s for s in load_specs()}
    return [counter_table(c, specs[c.spec.key], profiles, published) for c in comparisons if c.spec.key in specs]
