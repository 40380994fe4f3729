"""The roofline of one GPU: every family's best profiled configuration at its
arithmetic intensity (FP32 operations counted by ncu over the DRAM bytes ncu
counted) and its achieved GFLOP/s (those operations over the timed median),
under the measured copy peak and the FP32 peak at the clock it ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tuner.report.explanations import best_profiled
from tuner.report.style import FIGURE_SUFFIXES, blank_figure, shown_name, styled, write

STEM = "roofline"


def roofline_points(profiles: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(family, variant, intensity, gflops) of each family's best profiled row
    that does floating-point work, and the families that do none."""
    points, without = [], []
    for family, group in profiles.groupby("family", sort=True):
        flops = group[group["fp32_flops"] > 0]
        if flops.empty:
            without.append(str(family))
            continue
        row = best_profiled(flops).iloc[0]
        dram = row["dram_read_bytes"] + row["dram_write_bytes"]
        points.append({"family": family, "variant": row["variant"], "dtype": row["dtype"], "n": int(row["n"]),
                       "intensity": row["fp32_flops"] / dram if dram else np.nan,
                       "gflops": row["fp32_flops"] / (row["time_ms_median"] / 1e3) / 1e9})  # fmt: skip
    return pd.DataFrame(points, columns=["family", "variant", "dtype", "n", "intensity", "gflops"]), without


def draw_roofline(
    profiles: pd.DataFrame, peaks: Mapping[str, Any], gpu: str, out_dir: Path, suffixes: tuple[str, ...] = FIGURE_SUFFIXES
) -> tuple[list[Path], str]:
    """Write ``roofline.png`` (and ``.svg``: ``suffixes``); returns (files, a note on what it shows or why not)."""
    points, without = roofline_points(profiles)
    points = points[points["intensity"].notna() & (points["intensity"] > 0)]
    compute = float(profiles["fp32_peak_gflops"].max()) if profiles["fp32_peak_gflops"].notna().any() else np.nan
    memory = peaks.get("copy_gbs") or (
        float(profiles["dram_peak_gbs"].max()) if profiles["dram_peak_gbs"].notna().any() else None
    )
    if points.empty or not memory or np.isnan(compute):
        return [], "no profiled configuration with floating-point work, or no peaks to draw the roofs"
    x = np.logspace(
        np.log10(min(points["intensity"].min() / 4, 0.01)),
        np.log10(max(points["intensity"].max() * 4, 4 * compute / memory)),
        200,
    )
    with styled():
        fig = blank_figure(7.5, 4.8)
        ax = fig.subplots()
        ax.loglog(
            x,
            np.minimum(memory * x, compute),
            color="black",
            lw=1.5,
            label=f"roof: copy peak {memory:.0f} GB/s, FP32 peak {compute:.0f} GFLOP/s",
        )
        ax.axvline(compute / memory, color="grey", lw=0.8, ls=":")
        for _, p in points.iterrows():
            ax.scatter(p["intensity"], p["gflops"], s=40, zorder=3, label=f"{p['family']} ({p['variant']}, {p['dtype']})")
            share = p["gflops"] / min(memory * p["intensity"], compute)
            ax.annotate(f"{p['gflops']:.0f} GFLOP/s ({share:.0%} of roof)", (p["intensity"], p["gflops"]), textcoords="offset points",
                        xytext=(6, -12), fontsize=8)  # fmt: skip
        ax.set_xlabel("arithmetic intensity (FP32 FLOP per DRAM byte, counted by ncu)")
        ax.set_ylabel("GFLOP/s (counted FLOP / timed median)")
        ax.set_title(f"Roofline — {shown_name(gpu)}", fontweight="bold")
        ax.legend(fontsize=8, loc="upper left")
        files = write(fig, out_dir, STEM, suffixes)
    note = "families without floating-point work (not on the chart): " + ", ".join(without) if without else ""
    return files, note
