"""Exhaustive sweeps, resumable.

Measured rows accumulate in a store (``<gpu>/store/sweeps/<name>/part-*.parquet``)
that no Snakemake rule owns, written every ``flush_every_s`` seconds, so an
interrupted sweep loses at most that much work and a rerun measures only the
configurations the store lacks. The sweep's output file is the store's rows for
the configured grid, written when the sweep is complete.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

import pandas as pd

from tuner import results
from tuner.families.base import Family, Problem


def store_dir(gpu_dir: Path, name: str) -> Path:
    return Path(gpu_dir) / "store" / "sweeps" / name


def grid(family: Family, problem: Problem, params: dict) -> list[dict]:
    """The feasible configurations of the sweep's parameter lists."""
    return family.space(problem, params)


def _identity(frame: pd.DataFrame) -> set[tuple]:
    return set(zip(frame["dtype"], frame["n"].astype(int), frame["config_key"]))


def run_sweep(
    name: str,
    family: Family,
    problems: list[Problem],
    params: dict,
    *,
    store: Path,
    open_problem: Callable[[Family, Problem], object],
    flush_every_s: float = 20.0,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Measure every feasible configuration not yet in ``store``; return the
    store's rows for this grid. ``open_problem`` uploads a problem's inputs and
    returns an object with ``measure(cfg, source) -> row``."""
    store = Path(store)
    done = _identity(results.read(store))
    source = f"sweep:{name}"
    wanted: set[tuple] = set()
    for problem in problems:
        configs = grid(family, problem, params)
        keys = [(problem.dtype, problem.n, results.config_key(c)) for c in configs]
        wanted.update(keys)
        todo = [c for c, k in zip(configs, keys) if k not in done]
        log(f"{source} {problem.key}: {len(configs)} feasible configurations, {len(configs) - len(todo)} already measured")
        if not todo:
            continue
        session = open_problem(family, problem)
        pending: list[dict] = []
        last_write = time.monotonic()
        for i, cfg in enumerate(todo, 1):
            row = session.measure(cfg, source)
            pending.append(row)
            if row["status"] != "ok":
                log(f"  {row['status']}: {row['config_key']}: {str(row.get('error'))[:200]}")
            if time.monotonic() - last_write >= flush_every_s:
                _write_part(store, pending)
                log(f"  {i}/{len(todo)} measured")
                pending, last_write = [], time.monotonic()
        _write_part(store, pending)
        del session  # frees the problem's device buffers before the next problem
    frame = results.read(store)
    if frame.empty:
        return frame
    mask = [k in wanted for k in zip(frame["dtype"], frame["n"].astype(int), frame["config_key"])]
    # A configuration measured twice (e.g. two workers) keeps its latest row.
    return frame[mask].drop_duplicates(["dtype", "n", "config_key"], keep="last").reset_index(drop=True)


def _write_part(store: Path, rows: list[dict]) -> None:
    if rows:
        results.write_atomic(
            results.to_frame(rows), store / f"part-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.parquet"
        )
