"""Why it is fast (or not): short factual lines built from the counters.

One line per family's best profiled configuration (how much of the DRAM peak
it draws, how well its loads use their sectors, what its warps wait on), and
one per blog conclusion that no longer holds on this GPU: what the counters
say changed between the row and the row it is compared with.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tuner.data.selection import compute_bound, config_text, problem_label
from tuner.report.comparisons import ROW_COLUMNS, Comparison
from tuner.report.counters import profile_row


def best_profiled(profiles: pd.DataFrame) -> pd.DataFrame:
    """Per family, its fastest profiled configuration (GFLOP/s for compute-bound families)."""
    rows = []
    for _, group in profiles.groupby("family", sort=True):
        score = group["gflops"] if compute_bound(group) else group["bandwidth_gbs"]
        if score.notna().any():
            rows.append(group.loc[score.idxmax()])
    return pd.DataFrame(rows)


def _pct(value) -> str:
    return "—" if pd.isna(value) else f"{value:.0f} %"


def family_line(row: pd.Series) -> str:
    """``reduce best (...): 92 % of the DRAM peak, ...: memory-bound.``"""
    family = row["family"]
    variant = f"{row['variant']}, " if pd.notna(row.get("variant")) else ""
    head = f"**{family}** ({variant}{problem_label(family, row['dtype'], int(row['n']))}; {config_text(row)}): "
    dram_gbs = (row["dram_read_bytes"] + row["dram_write_bytes"]) / (row["time_ms_median"] / 1e3) / 1e9
    parts = [f"DRAM {_pct(row['dram_throughput_pct'])} of its peak under the profiler ({dram_gbs:.0f} GB/s at the timed median)"]
    parts.append(
        f"loads use {_pct(row['global_load_efficiency_pct'])} of each sector, stores {_pct(row['global_store_efficiency_pct'])}"
    )
    parts.append(
        f"L1 hits {_pct(row['l1_hit_rate_pct'])}, L2 hits {_pct(row['l2_hit_rate_pct'])}, occupancy {_pct(row['achieved_occupancy_pct'])}"
    )
    waits = {"memory (long scoreboard)": row["long_scoreboard_stall_pct"], "barriers": row["barrier_stall_pct"]}
    reason, share = max(waits.items(), key=lambda kv: -1 if pd.isna(kv[1]) else kv[1])
    if pd.notna(row["gflops"]) and row["fp32_peak_gflops"]:  # a family that counts its FLOPs is compute-bound
        verdict = f"{row['gflops']:.0f} GFLOP/s, {row['gflops'] / row['fp32_peak_gflops']:.0%} of the FP32 peak: judged by arithmetic, not bandwidth"
    elif pd.notna(row["dram_throughput_pct"]) and row["dram_throughput_pct"] >= 60:
        verdict = "memory-bound: the time is the bytes over the DRAM bandwidth"
    else:
        verdict = f"below the memory roof: warps spend {_pct(share)} of their cycles waiting on {reason}"
    return head + "; ".join(parts) + f"; {verdict}."


def _ratio(a, b) -> float:
    return float(a) / float(b) if pd.notna(a) and pd.notna(b) and b else np.nan


def changed_line(comparison: Comparison, index: int, profiles: pd.DataFrame) -> str | None:
    """A failing row of a blog table, explained against the row it is checked against."""
    rows = comparison.rows
    step = comparison.spec.steps[index]
    ref = index - 1 if step.expect == "at_least_prev" else int(rows.iloc[index]["ref_index"])
    mine, theirs = (profile_row(profiles, comparison.chosen[i]) for i in (index, ref))
    if mine is None or theirs is None:
        return None
    label, ref_label = rows.iloc[index][ROW_COLUMNS[0]], rows.iloc[ref][ROW_COLUMNS[0]]
    time = _ratio(mine["time_ms_median"], theirs["time_ms_median"])
    sectors = _ratio(mine["global_load_sectors"], theirs["global_load_sectors"])
    dram = _ratio(mine["dram_read_bytes"] + mine["dram_write_bytes"], theirs["dram_read_bytes"] + theirs["dram_write_bytes"])
    facts = [f"{_pct(mine['global_load_efficiency_pct'])} load efficiency ({sectors:.2f}× the sectors)"]
    if pd.notna(mine["global_store_efficiency_pct"]) and mine["global_store_efficiency_pct"] < 99:
        facts.append(f"{_pct(mine['global_store_efficiency_pct'])} store efficiency")
    facts.append(f"{dram:.2f}× the DRAM bytes")
    why = []
    if sectors > 1.05 and dram < 1.05:
        why.append(
            f"the extra sectors hit in L1/L2 (L2 hits {_pct(theirs['l2_hit_rate_pct'])} → {_pct(mine['l2_hit_rate_pct'])})"
        )
    if pd.notna(time) and pd.notna(dram) and abs(time - dram) <= 0.05 * dram:
        why.append("the time follows the DRAM bytes")
    stall = _ratio(mine["barrier_stall_pct"], theirs["barrier_stall_pct"])
    if pd.notna(stall) and abs(stall - 1) > 0.2:
        why.append(f"barrier waits {_pct(theirs['barrier_stall_pct'])} → {_pct(mine['barrier_stall_pct'])} of warp cycles")
    instructions = _ratio(mine["instructions_per_warp"], theirs["instructions_per_warp"])
    if pd.notna(instructions) and abs(instructions - 1) > 0.2:
        why.append(f"{instructions:.2f}× the instructions per warp")
    tail = f": {'; '.join(why)}" if why else ""
    return f"`{comparison.spec.key}`, {label}: {', '.join(facts)}, and {time:.2f}× the time of {ref_label}{tail}."


def explanations(comparisons: list[Comparison], profiles: pd.DataFrame) -> list[str]:
    """One line per blog conclusion that changed here (each family's section
    says what the counters show of its best profiled configuration: ``family_line``)."""
    changed = []
    for comparison in comparisons:
        for index, holds in enumerate(comparison.rows[ROW_COLUMNS[4]] if comparison.has_data else []):
            if holds == "no":
                line = changed_line(comparison, index, profiles)
                if line:
                    changed.append(line)
    return changed
