"""Time to target: how many evaluations and how much wall time a study's rows
took to come within 1 % of a target bandwidth (its own final best, or the
exhaustive optimum of the same problem).

Wall time counts from the start of the ``tune`` command that measured the
rows (``stage_started_at``) to the end of the row that first reached the
target (``stage_elapsed_s``), so compiling, loading and the search itself are
all in it; the nvcc seconds up to then (``compile_s`` summed over the rows, and
over workers where several measured) are also given on their own. A study
resumed after a stop is timed over the spans its runs were running (the gap
between two runs does not count). Rows written before these columns existed
have no wall time: evaluations are then counted in trial order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

WITHIN = 0.99  # "within 1 %": at least 99 % of the target
STUDY_CLOCK = ("stage_started_at", "stage_elapsed_s", "compile_s")  # the columns a study's wall clock is kept in
_EPOCH = pd.Timestamp(0, tz="UTC")


@dataclass(frozen=True)
class Timeline:
    """A study's rows in the order they finished.

    Attributes:
        bandwidth_gbs: per row, its GB/s (NaN unless ok).
        wall_s: per row, wall seconds from the study's start to the end of the
            row (NaN throughout when not recorded).
        compile_s: per row, nvcc seconds up to the end of the row (cumulative).
        note: why wall time is missing ("" when recorded).
    """

    bandwidth_gbs: np.ndarray
    wall_s: np.ndarray
    compile_s: np.ndarray
    note: str = ""

    @property
    def recorded(self) -> bool:
        return not self.note

    @property
    def evaluations(self) -> int:
        return len(self.bandwidth_gbs)


@dataclass(frozen=True)
class Reach:
    """The first row at or above ``WITHIN`` of ``target_gbs``.

    Attributes:
        target_gbs: the bandwidth aimed at.
        evaluations: rows measured up to and including that row (None: never reached).
        wall_s, compile_s: wall and nvcc seconds up to the end of that row
            (None where never reached or not recorded).
        total_evaluations, total_wall_s, total_compile_s: the whole study's.
        note: why wall time is missing ("" when recorded).
        within: the fraction of ``target_gbs`` that counts as reached.
    """

    target_gbs: float
    evaluations: int | None
    wall_s: float | None
    compile_s: float | None
    total_evaluations: int
    total_wall_s: float | None
    total_compile_s: float | None
    note: str = ""

    within: float = WITHIN

    def sentence(self, what: str) -> str:
        """E.g. "within 1 % of its final best after 12 evaluations, 3.4 s (compile 0.8 s)"."""
        near = f"within {(1 - self.within) * 100:g} % of {what}"
        if self.evaluations is None:
            spent = f", {seconds_text(self.total_wall_s)}" if self.total_wall_s is not None else ""
            return f"never {near} ({self.total_evaluations} evaluations{spent})"
        if self.wall_s is None:
            return f"{near} after {self.evaluations} evaluations ({self.note}; counted in trial order)"
        return (
            f"{near} after {self.evaluations} evaluations, {seconds_text(self.wall_s)} (compile {seconds_text(self.compile_s)})"
        )


def seconds_text(seconds: float | None) -> str:
    """3.4 s, 4 min 25 s, 1 h 05 min."""
    if seconds is None or np.isnan(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _covered(finish: np.ndarray, spans: list[tuple[float, float]]) -> np.ndarray:
    """Per finish time, the seconds of ``spans`` (merged where they overlap) before it."""
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.array([sum(max(0.0, min(end, t) - start) for start, end in merged) for t in finish], dtype=float)


def timeline(rows: pd.DataFrame) -> Timeline:
    """The rows (one study, one problem; any status) in the order they finished."""
    ok = (rows["status"] == "ok").fillna(False).to_numpy(dtype=bool)
    bandwidth = np.where(ok, pd.to_numeric(rows["bandwidth_gbs"], errors="coerce").to_numpy(dtype=float), np.nan)
    timed = (
        rows[list(STUDY_CLOCK)].notna().all(axis=1) if all(c in rows for c in STUDY_CLOCK) else pd.Series(False, index=rows.index)
    )
    trial = pd.to_numeric(rows["trial"], errors="coerce").to_numpy(dtype=float) if "trial" in rows else np.zeros(len(rows))
    if len(rows) == 0 or not timed.all():
        order = np.argsort(np.nan_to_num(trial, nan=np.inf), kind="stable")
        note = "wall time not recorded" + (f" for {int((~timed).sum())} of {len(rows)} rows" if timed.any() else "")
        nan = np.full(len(rows), np.nan)
        return Timeline(bandwidth[order], nan, nan, note)
    started = ((rows["stage_started_at"] - _EPOCH).dt.total_seconds()).to_numpy(dtype=float)
    elapsed = rows["stage_elapsed_s"].to_numpy(dtype=float)
    finish = started + elapsed
    spans = [(start, start + float(elapsed[started == start].max())) for start in np.unique(started)]
    order = np.lexsort((trial, finish))
    wall = _covered(finish[order], spans)
    compiled = np.cumsum(rows["compile_s"].to_numpy(dtype=float)[order])
    return Timeline(bandwidth[order], wall, compiled)


def reach(line: Timeline, target_gbs: float, within: float = WITHIN) -> Reach:
    """When ``line`` first came within ``within`` of ``target_gbs``."""
    hits = np.flatnonzero(line.bandwidth_gbs >= within * target_gbs) if np.isfinite(target_gbs) else []
    last = line.evaluations - 1

    def at(values: np.ndarray, index: int | None) -> float | None:
        return None if index is None or index < 0 or not line.recorded else float(values[index])

    first = int(hits[0]) if len(hits) else None
    return Reach(target_gbs=float(target_gbs), evaluations=None if first is None else first + 1,
                 wall_s=at(line.wall_s, first), compile_s=at(line.compile_s, first), total_evaluations=line.evaluations,
                 total_wall_s=at(line.wall_s, last), total_compile_s=at(line.compile_s, last), note=line.note,
                 within=within)  # fmt: skip


def to_final_best(rows: pd.DataFrame, within: float = WITHIN) -> Reach | None:
    """When the rows first came within ``within`` of their own best (None: no ok row)."""
    line = timeline(rows)
    best = np.nanmax(line.bandwidth_gbs) if np.isfinite(line.bandwidth_gbs).any() else np.nan
    return reach(line, best, within) if np.isfinite(best) else None
