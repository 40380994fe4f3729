"""The report's "Why it is fast" section: counters beside the blogs', the
explanations and the roofline, from the profiles of a results folder
(``profiles/*.parquet``; ``tuner.data.counters``). Without profiles the section
says why there are none."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from tuner.data.counters import COUNTERS
from tuner.report.comparisons import Comparison
from tuner.report.counters import counter_tables
from tuner.report.explanations import explanations
from tuner.report.roofline import STEM, draw_roofline
from tuner.report.style import FIGURE_SUFFIXES


def counter_schema() -> pd.DataFrame:
    return pd.DataFrame(
        [(f"`{c.column}`", c.unit, c.meaning, ", ".join(f"`{m}`" for m in c.metrics)) for c in COUNTERS],
        columns=["column", "unit", "what it counts", "ncu metric(s)"],
    )


def profile_content(
    comparisons: list[Comparison],
    profiles: pd.DataFrame | None,
    notes: list[str],
    *,
    published: pd.DataFrame,
    peaks: Mapping[str, Any],
    gpu: str,
    out_dir: Path,
    suffixes: tuple[str, ...] = FIGURE_SUFFIXES,
) -> dict[str, Any]:
    """What the templates' profile section shows (``profile`` in the content)."""
    if profiles is None or profiles.empty:
        why = "; ".join(notes) if notes else "this results folder has no profiles (no sweep sets `profile:`)"
        return {"available": False, "why": why, "notes": notes}
    tables = counter_tables(comparisons, profiles, published)
    changed = explanations(comparisons, profiles)
    files, roof_note = draw_roofline(profiles, peaks, gpu, out_dir, suffixes)
    return {
        "available": True,
        "intro": (
            f"{len(profiles)} configurations profiled with Nsight Compute (one untimed launch each, after the same input placement "
            "and verification as the timed run, caches flushed before each replay pass, clocks left as they were). The counters "
            "are the hardware's; times and GB/s stay those of the timed runs. Blog counters come from nvprof on older GPUs: "
            "efficiencies are comparable, counts only as ratios between rows."
        ),
        "tables": [
            {"key": t.key, "title": t.title, "table": t.table, "verdicts": t.verdicts, "profiled": t.profiled} for t in tables
        ],
        "changed": changed,
        "roofline": {"file": f"{STEM}.png", "path": files[0], "note": roof_note} if files else None,
        "roofline_note": roof_note,
        "schema": counter_schema(),
        "notes": notes,
    }
