"""Picking rows out of a results dataset: for the report's figures and
tables, and for the profile stage, which profiles the rows the report shows.

Rows are chosen by family, variant and parameters; a sweep's ``source`` name is
only a hint (rows of that sweep are preferred when there are any). Only
``status == "ok"`` rows with a positive bandwidth count for performance.
What a family is (its labels, its rank among families, whether it is
compute-bound) the family says; rows of a family this process has not loaded
(a plug-in's) are read as they were measured.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tuner.data.results import config_params
from tuner.data.ties import operation_order, operations
from tuner.families import REGISTRY, Family
from tuner.families.base import size_text

STUDY_PREFIX = "study:"
SWEEP_PREFIX = "sweep:"


def known_family(name: Any) -> Family | None:
    """The family of that name, where this process has loaded it."""
    return REGISTRY.families.get(str(name)) if name is not None and not pd.isna(name) else None


def counts_flops(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` carry GFLOP/s."""
    return "gflops" in rows and bool(pd.to_numeric(rows["gflops"], errors="coerce").notna().any())


def compute_bound(rows: pd.DataFrame) -> bool:
    """Whether the family of ``rows`` (one family's) is judged by GFLOP/s
    (``Family.compute_bound``), and a share of a bandwidth peak says nothing
    about it. A family this process has not loaded is judged as it was
    measured: by whether its rows carry GFLOP/s."""
    families = rows["family"].dropna().unique() if "family" in rows and len(rows) else []
    known = known_family(families[0]) if len(families) == 1 else None
    return counts_flops(rows) and (known is None or known.compute_bound)


def family_rank(name: str) -> tuple[int, str]:
    """Where a family stands among others in the report's lists (``Family.report_rank``, then by name)."""
    known = known_family(name)
    return (known.report_rank if known is not None else Family.report_rank, str(name))


def usable(dataset: pd.DataFrame) -> pd.DataFrame:
    """The rows that count for performance: status ok, finite positive GB/s and time."""
    if dataset.empty:
        return dataset
    bandwidth = pd.to_numeric(dataset["bandwidth_gbs"], errors="coerce")
    time_ms = pd.to_numeric(dataset["time_ms_median"], errors="coerce")
    keep = (dataset["status"] == "ok").fillna(False) & (bandwidth > 0).fillna(False) & (time_ms > 0).fillna(False)
    return dataset[keep.to_numpy(dtype=bool)]


def measured_families(ok: pd.DataFrame) -> list[str]:
    """The families that ``ok`` rows of a sweep or a study measured, in the
    report's order (``family_rank``). Rows of other sources do not count: the
    peaks stage's copy kernels, which land in every run's dataset, measure the
    device, not the copy family."""
    if ok.empty:
        return []
    source = ok["source"].fillna("")
    tuned = (source.str.startswith(SWEEP_PREFIX) | source.str.startswith(STUDY_PREFIX)).to_numpy(dtype=bool)
    return sorted((str(f) for f in ok["family"][tuned].dropna().unique()), key=family_rank)


def is_study(frame: pd.DataFrame) -> pd.Series:
    return frame["source"].fillna("").str.startswith(STUDY_PREFIX)


def study_frames(dataset: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Study rows grouped by study name (the source without ``study:``)."""
    rows = dataset[is_study(dataset).to_numpy(dtype=bool)]
    return {str(source)[len(STUDY_PREFIX) :]: group for source, group in rows.groupby("source", sort=True)}


def _matches(frame: pd.DataFrame, column: str, value: Any) -> np.ndarray:
    """Which rows of ``frame`` have ``value`` in ``column`` (one of them for a
    list), as a boolean array; no row where there is no such column."""
    if column not in frame:
        return np.zeros(len(frame), dtype=bool)
    if isinstance(value, (list, tuple, set)):
        return frame[column].isin(list(value)).fillna(False).to_numpy(dtype=bool)
    return (frame[column] == value).fillna(False).to_numpy(dtype=bool)


def select(
    ok: pd.DataFrame,
    family: str,
    *,
    variants: Iterable[str] | None = None,
    dtype: str | None = None,
    n: int | None = None,
    must: Mapping[str, Any] | None = None,
    prefer: Mapping[str, Any] | None = None,
    hint: str | None = None,
) -> pd.DataFrame:
    """Usable rows of ``family`` narrowed step by step.

    ``must`` parameters have to match. ``prefer`` parameters narrow the rows
    one at a time, each only when some rows match it (a preferred launch
    configuration that was not measured is skipped, not fatal). Rows of the
    ``hint`` sweep win over others; study rows are used only when nothing else
    matches, since studies sample the space unevenly.
    """
    # The steps narrow a boolean mask over ``ok``, and the rows are taken once
    # at the end: the results table is wide, and taking its rows is what costs
    # (a report selects a hundred times), not comparing one column.
    keep = _matches(ok, "family", family)
    if variants is not None:
        keep = keep & _matches(ok, "variant", list(variants))
    if dtype is not None:
        keep = keep & _matches(ok, "dtype", dtype)
    if n is not None:
        keep = keep & _matches(ok, "n", n)
    for column, value in (must or {}).items():
        keep = keep & _matches(ok, column, value)
    if not keep.any():
        return ok[keep]
    if hint is not None:
        hinted = keep & _matches(ok, "source", hint)
        if hinted.any():
            keep = hinted
    sweeps = keep & ~is_study(ok).to_numpy(dtype=bool)
    if sweeps.any():
        keep = sweeps
    for column, value in (prefer or {}).items():
        narrowed = keep & _matches(ok, column, value)
        if narrowed.any():
            keep = narrowed
    return ok[keep]


def best(rows: pd.DataFrame) -> pd.Series | None:
    """The row with the highest bandwidth (None if there are no rows)."""
    if rows.empty:
        return None
    return rows.loc[pd.to_numeric(rows["bandwidth_gbs"]).idxmax()]


def best_by(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The highest-bandwidth row of each group of ``keys`` (null keys kept)."""
    if rows.empty:
        return rows
    order = rows.sort_values("bandwidth_gbs", ascending=False, kind="stable")
    return order.drop_duplicates(subset=keys, keep="first").sort_values(keys, kind="stable")


def problems(rows: pd.DataFrame) -> list[tuple[str, int]]:
    """The distinct (dtype, n) of ``rows``, sorted by dtype then n."""
    pairs = {(str(d), int(n)) for d, n in zip(rows["dtype"], rows["n"]) if pd.notna(d) and pd.notna(n)}
    return sorted(pairs)


def nearest_problem(rows: pd.DataFrame, dtype: str | None, n: int | None) -> tuple[str, int] | None:
    """Our (dtype, n) closest to a published one: the same dtype when we have
    it, then the n nearest on a log scale (the largest n when the blog gives none)."""
    candidates = problems(rows)
    if not candidates:
        return None
    same = [p for p in candidates if p[0] == dtype]
    candidates = same or candidates
    if n is None:
        return max(candidates, key=lambda p: (p[1], p[0]))
    return min(candidates, key=lambda p: (abs(math.log2(p[1]) - math.log2(n)), -p[1], p[0]))


def config_text(row: pd.Series, skip: Iterable[str] = ("variant",)) -> str:
    """The parameters of a row that are set, as ``block_size=256, unroll=4``:
    every parameter of its configuration key, as the key holds it, in the
    row's column order, then those the row has no column for. The key, not
    the columns: a profile row keeps only the built-in parameters' columns,
    and a plug-in's integer column that other families' rows leave empty
    reads back as floats (``4.0``)."""
    params = config_params(row.get("config_key"))
    names = [c for c in row.index if c in params] + [p for p in params if p not in row.index]
    return ", ".join(f"{name}={params[name]}" for name in names if name not in skip and params[name] is not None)


def format_n(n: int | None, family: str | None = None, *, tex: bool = False) -> str:
    """A problem's size as ``family`` writes it (``Family.size_text``: ``2^24``, a matrix's ``1000×1000``)."""
    if n is None or pd.isna(n):
        return "n/a"
    known = known_family(family)
    return known.size_text(int(n), tex=tex) if known is not None else size_text(int(n), tex=tex)


def source_counts(dataset: pd.DataFrame) -> tuple[int, int, list[str]]:
    """(distinct sweeps, distinct studies, the other sources) of ``dataset``'s rows."""
    sources = sorted({str(s) for s in dataset["source"].dropna().unique()}) if len(dataset) else []
    sweeps = [s for s in sources if s.startswith(SWEEP_PREFIX)]
    studies = [s for s in sources if s.startswith(STUDY_PREFIX)]
    return len(sweeps), len(studies), [s for s in sources if s not in sweeps and s not in studies]


def problem_label(family: str, dtype: str, n: int, *, tex: bool = False) -> str:
    """A problem as ``family`` names it (``Family.problem_text``: ``int32, n = 2^24``)."""
    known = known_family(family)
    return known.problem_text(dtype, int(n), tex=tex) if known is not None else f"{dtype}, n = {format_n(n, family, tex=tex)}"


def peak_fractions(bandwidth_gbs: float, row: pd.Series | None, peaks: Mapping[str, Any]) -> tuple[float, float]:
    """(fraction of measured copy peak, fraction of theoretical peak).

    From ``peaks`` when it has the value, else from the row's stored fractions
    (which the measuring stage computed from the same peaks)."""

    def fraction(peak_key: str, column: str) -> float:
        peak = peaks.get(peak_key)
        if peak:
            return float(bandwidth_gbs) / float(peak)
        if row is not None and column in row.index and pd.notna(row[column]):
            return float(row[column])
        return float("nan")

    return fraction("copy_gbs", "fraction_of_copy_peak"), fraction("theoretical_gbs", "fraction_of_theoretical_peak")


def family_operations(rows: pd.DataFrame) -> list[tuple[str, str | None, pd.DataFrame]]:
    """(family, operation, its rows) per family of ``rows`` and, where the
    family's configurations do different work (``Family.operation``), per
    operation: by family, then operation in the family's order (the default
    first). The operation is None for a family of one."""
    if rows.empty:
        return []
    named = operations(rows).fillna("")
    groups = []
    for family in sorted(rows["family"].dropna().unique()):
        mine = (rows["family"] == family).to_numpy(dtype=bool)
        for operation in sorted(set(named[mine]), key=lambda op: operation_order(family, op or None)):
            groups.append((family, operation or None, rows[mine & (named == operation).to_numpy(dtype=bool)]))
    return groups


def best_per_family(dataset: pd.DataFrame, peaks: Mapping[str, Any]) -> pd.DataFrame:
    """One row per family (per operation, where its configurations do
    different work: ``family_operations``): its highest-bandwidth ok
    configuration (sweeps and studies alike), with the fractions of the copy
    and theoretical peaks; for a compute-bound family (its rows count GFLOP/s)
    the highest GFLOP/s, without peak fractions."""
    ok = usable(dataset)
    records = []
    for family, operation, rows in family_operations(ok):
        judged_by_flops = compute_bound(rows)
        row = rows.loc[pd.to_numeric(rows["gflops"]).idxmax()] if judged_by_flops else best(rows)
        if row is None:
            continue
        copy_fraction, theoretical_fraction = (
            (np.nan, np.nan) if judged_by_flops else peak_fractions(row["bandwidth_gbs"], row, peaks)
        )
        records.append(
            {
                "family": family,
                "operation": operation,
                "variant": row["variant"],
                "dtype": row["dtype"],
                "n": int(row["n"]),
                "config": config_text(row),
                "source": row["source"],
                "status": row["status"],
                "time_ms": float(row["time_ms_median"]),
                "bandwidth_gbs": float(row["bandwidth_gbs"]),
                "gflops": float(row["gflops"]) if pd.notna(row["gflops"]) else np.nan,
                "fraction_of_copy_peak": copy_fraction,
                "fraction_of_theoretical_peak": theoretical_fraction,
                "compute_bound": judged_by_flops,
            }
        )
    return pd.DataFrame.from_records(
        records,
        columns=[
            "family",
            "operation",
            "variant",
            "dtype",
            "n",
            "config",
            "source",
            "status",
            "time_ms",
            "bandwidth_gbs",
            "gflops",
            "fraction_of_copy_peak",
            "fraction_of_theoretical_peak",
            "compute_bound",
        ],
    )
