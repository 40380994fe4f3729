"""The blogs' published numbers (``tuner/data/published.csv``) and lookups in them.

One row per published number: which blog (``seed``) and table, the kernel
(family, variant, parameters as ``key=value;key=value``), the problem (dtype,
n), the GPU, and ``metric``/``value``/``unit`` (``time_ms``, ``bandwidth_gbs``,
``speedup``, efficiencies in percent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

PUBLISHED_CSV = Path(__file__).resolve().parent / "published.csv"

# Metrics a speed-up can be computed from, in order of preference.
SPEED_METRICS = ("time_ms", "bandwidth_gbs")


def load_published(path: str | Path | None = None) -> pd.DataFrame:
    """The published numbers, with ``params`` parsed into ``param_dict``.

    ``n`` is nullable (some blogs do not state it), ``gpu`` is "" when unstated.
    """
    frame = pd.read_csv(
        path or PUBLISHED_CSV,
        dtype={"seed": "string", "params": "string", "gpu": "string", "note": "string", "variant": "string"},
        keep_default_na=False,
        na_values={"n": [""], "value": [""]},
    )
    frame["n"] = frame["n"].astype("Int64")
    frame["value"] = frame["value"].astype("float64")
    frame["param_dict"] = [parse_params(text) for text in frame["params"]]
    return frame


def parse_params(text: str | None) -> dict[str, Any]:
    """``"block_size=1024;unroll=8"`` -> ``{"block_size": 1024, "unroll": 8}``."""
    params: dict[str, Any] = {}
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        value = value.strip()
        try:
            params[key.strip()] = int(value)
        except ValueError:
            params[key.strip()] = value
    return params


def published_value(
    published: pd.DataFrame,
    tables: Iterable[str],
    variant: str,
    params: Mapping[str, Any] | None = None,
    metrics: Iterable[str] = SPEED_METRICS,
) -> tuple[str, float, str] | None:
    """``(metric, value, gpu)`` of one published configuration, or None.

    Rows must come from ``tables``, have ``variant`` and carry every key of
    ``params`` with that value. The first metric of ``metrics`` that has rows
    wins; several rows (repeated runs in several tables) give their median.
    """
    params = dict(params or {})
    # Masks over the columns instead of filtered copies of the whole table:
    # a report looks up hundreds of published numbers.
    keep = (published["table"].isin(list(tables)) & (published["variant"] == variant)).fillna(False).to_numpy(dtype=bool)
    keep = keep & np.array([all(p.get(k) == v for k, v in params.items()) for p in published["param_dict"]], dtype=bool)
    for metric in metrics:
        picked = keep & (published["metric"] == metric).fillna(False).to_numpy(dtype=bool)
        if picked.any():
            return metric, float(published["value"][picked].median()), str(published["gpu"][picked].iloc[0])
    return None


def published_problem(published: pd.DataFrame, tables: Iterable[str]) -> tuple[str | None, int | None, str]:
    """The dtype, n (None when unstated) and GPU ("" when unstated) of a table."""
    rows = published[published["table"].isin(list(tables))]
    if rows.empty:
        return None, None, ""
    dtype = rows["dtype"].mode().iloc[0] if rows["dtype"].notna().any() else None
    ns = rows["n"].dropna()
    n = int(ns.mode().iloc[0]) if len(ns) else None
    gpus = [g for g in rows["gpu"] if g]
    return dtype, n, (gpus[0] if gpus else "")


def ladder_speedups(published: pd.DataFrame, table: str) -> pd.DataFrame:
    """Published time per ladder step of ``table`` and the speed-up over its
    first step: columns variant, unroll (or None), time_ms, speedup, gpu."""
    rows = published[(published["table"] == table) & (published["metric"] == "time_ms")]
    if rows.empty:
        return pd.DataFrame(columns=["variant", "unroll", "time_ms", "speedup", "gpu"])
    out = pd.DataFrame(
        {
            "variant": rows["variant"].to_numpy(),
            "unroll": [p.get("unroll") if v == "unrolled" else None for v, p in zip(rows["variant"], rows["param_dict"])],
            "time_ms": rows["value"].to_numpy(),
            "gpu": rows["gpu"].to_numpy(),
        }
    )
    out["speedup"] = out["time_ms"].iloc[0] / out["time_ms"]
    return out
