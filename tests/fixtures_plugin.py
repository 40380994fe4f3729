"""A synthetic results dataset of a plug-in family alone: a tiled matrix
transpose whose parameters (``tile``, ``block_rows``, ``pad``) are none of
the package's built-in lessons' and two of which (``block_rows``, ``pad``) no
built-in family has at all.

Rows are written as a run of the plug-in would write them (``results.read``
keeps the plug-in's parameter columns), with a sweep over two problems, one
Optuna study and a few rows that did not run. The made-up landscape has one
optimum per problem: tile 32, 8 rows of threads, pad 1.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
from fixtures_report import DEVICE, FLOAT_NAN, PEAKS

from tuner.data.results import config_key, to_frame

FAMILY = "transpose_tiled"
PARAMS = {"tile": (8, 16, 32, 64), "block_rows": (1, 2, 4, 8), "pad": (0, 1)}
SIDES = (4096, 8192)
STUDY = "transpose_search"


def _bandwidth(p: dict[str, Any], side: int) -> float:
    fraction = {8: 0.55, 16: 0.8, 32: 0.95, 64: 0.7}[p["tile"]]
    fraction *= {1: 0.8, 2: 0.9, 4: 0.96, 8: 1.0}[p["block_rows"]]
    fraction *= 1.0 if p["pad"] else 0.75  # bank conflicts on the shared tile's columns
    return fraction * (0.9 if side < 8192 else 1.0) * PEAKS["copy_gbs"]


def _row(source: str, side: int, p: dict[str, Any], *, status: str = "ok", trial: int | None = None) -> dict[str, Any]:
    n = side * side
    bytes_moved = 2 * 4 * n
    row = {
        **FLOAT_NAN,
        "run_id": "synthetic-plugin-run",
        "timestamp": "2025-01-01T00:00:00Z",
        "source": source,
        "trial": trial,
        "gpu": DEVICE["name"],
        "gpu_slug": DEVICE["slug"],
        "family": FAMILY,
        "dtype": "float32",
        "n": n,
        **p,
        "config_key": config_key(p),
        "grid": f"{side // p['tile']},{side // p['tile']},1",
        "block": f"{p['tile']},{p['block_rows']},1",
        "status": status,
        "bytes_moved": bytes_moved,
    }
    if status == "ok":
        bandwidth = _bandwidth(p, side)
        time_ms = bytes_moved / (bandwidth * 1e9) * 1e3
        row.update(
            time_ms_median=time_ms, time_ms_min=time_ms * 0.99, time_ms_max=time_ms * 1.02, samples=50,
            bandwidth_gbs=bandwidth, fraction_of_copy_peak=bandwidth / PEAKS["copy_gbs"],
            fraction_of_theoretical_peak=bandwidth / PEAKS["theoretical_gbs"],
        )  # fmt: skip
    else:
        row.update(error=f"synthetic {status}")
    return row


def make_plugin_dataset(seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """(rows, device, peaks): a sweep of the whole space on two problems, a
    study of 20 trials on the larger one and rows that did not run."""
    rng = np.random.default_rng(seed)
    space = [dict(zip(PARAMS, values)) for values in itertools.product(*PARAMS.values())]
    rows = []
    for side, p in itertools.product(SIDES, space):
        feasible = p["block_rows"] <= p["tile"] and p["tile"] * p["block_rows"] <= 1024
        rows.append(_row("sweep:transpose_space", side, p, status="ok" if feasible else "infeasible"))
    for trial, index in enumerate(rng.choice(len(space), size=20, replace=False)):
        rows.append(_row(f"study:{STUDY}", SIDES[-1], space[index], trial=trial))
    rows.append(_row("sweep:transpose_space", SIDES[-1], {"tile": 64, "block_rows": 8, "pad": 1}, status="compile_error"))
    return to_frame(rows + _peaks_rows(), keep_unknown=True), dict(DEVICE), dict(PEAKS)


def _peaks_rows() -> list[dict[str, Any]]:
    """The copy kernels the peaks stage measures: every run's dataset holds them (source ``peaks``)."""
    rows = []
    for variant, gbs in (("copy", PEAKS["copy_gbs"]), ("read", PEAKS["read_gbs"])):
        p = {"variant": variant, "block_size": 512, "vector_width": 4}
        n, bytes_moved = 2**28, (2 if variant == "copy" else 1) * 4 * 2**28
        time_ms = bytes_moved / (gbs * 1e9) * 1e3
        rows.append({**FLOAT_NAN, "run_id": "synthetic-plugin-run", "timestamp": "2025-01-01T00:00:00Z", "source": "peaks",
                     "family": "copy", "dtype": "int32", "n": n, **p, "config_key": config_key(p), "status": "ok",
                     "bytes_moved": bytes_moved, "time_ms_median": time_ms, "bandwidth_gbs": gbs})  # fmt: skip
    return rows
