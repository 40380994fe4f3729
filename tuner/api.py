"""Tuning from a notebook or a script, in this process: one call.

    import tuner
    from saxpy import saxpy                     # a KernelSpec, or any Family

    every = tuner.tune(saxpy, n=1 << 26)        # every configuration of its space
    some = tuner.tune(saxpy, {"VEC": [2, 4]}, n=1 << 26, budget=20)   # an Optuna study of 20
    every.rows                                  # a DataFrame in the results schema
    every.best                                  # the fastest verified configuration's parameters

It is the pipeline's own measuring, not a copy: the same cubin cache, the
verification against the host reference, the timer, and the durable records
(a sweep's row store, a study's storage), so a call interrupted and made
again measures only what is missing. Its tables land where the pipeline's do
(``<results>/<gpu>/sweeps/<name>.parquet`` or ``studies/<name>.parquet``,
with ``device.json``, ``peaks.json`` and ``measurements.parquet`` of the
folder), so ``python -m tuner best --results <results>/<gpu>`` exports them
and ``python -m tuner.report`` reports them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from tuner.data.paths import GpuFolder, cubin_cache
from tuner.families import REGISTRY, Family, Problem, register
from tuner.families.base import KERNELS_DIR
from tuner.resources import resource_missing
from tuner.search.samplers.registry import DEFAULT_STRATEGY


@dataclass
class Tuned:
    """What ``tune`` measured.

    Attributes:
        rows: one row per configuration (``tuner.data.results`` schema).
        best: the parameters of the fastest verified row (None if none verified).
        best_row: that row.
        folder: the results folder the tables were written to.
    """

    rows: pd.DataFrame
    best: dict | None
    best_row: pd.Series | None
    folder: Path


def tune(
    family: Family | str,
    space: Mapping[str, Sequence] | None = None,
    *,
    n: int,
    dtype: str | None = None,
    budget: int | None = None,
    timeout_s: float | None = None,
    sampler: str = DEFAULT_STRATEGY,
    seed: int = 0,
    name: str | None = None,
    results: str | Path = "results",
    device_index: int = 0,
    timing=None,
) -> Tuned:
    """Measure ``family``'s configurations for a problem of size ``n`` on this
    machine's GPU: all of ``space`` (parameter -> values; omitted parameters
    take every value of the family's) or, with ``budget``, that many chosen by
    an Optuna study with ``sampler``.

    Args:
        timeout_s: a study's seconds: no trial starts after them (with or
            without a ``budget``).
        name: the sweep's or study's name in the results folder (default:
            ``<family>_sweep`` or ``<family>_study``).
        timing: a ``tuner.measure.timing.TimingOptions`` (default: the pipeline's).

    Raises:
        ValueError: a value outside a parameter's rule, an unknown dtype, an
            empty space, a space too large to sweep (``SpaceTooLarge``), or an
            install without its kernels/ (one line naming
            it), before the GPU is touched.
        tuner.device.gpu.GpuUnavailable: no PyCUDA or no CUDA device.
    """
    missing = resource_missing(KERNELS_DIR)
    if missing:
        raise ValueError(missing)
    family = _registered(family)
    dtype = dtype or family.dtypes[0]
    if dtype not in family.dtypes:
        raise ValueError(f"dtype: must be one of {list(family.dtypes)} for family {family.name!r}, got {dtype!r}")
    domains = _domains(family, space)
    problem = Problem(family.name, dtype, int(n))
    listed = family.listed_space(problem, domains) if budget else family.space(problem, domains)  # a study searches any size
    if listed is not None and not listed:
        raise ValueError(f"space: must hold a feasible configuration of {family.name!r} for n={n}, got none")
    study = bool(budget or timeout_s)
    name = name or f"{family.name}_{'study' if study else 'sweep'}"

    from tuner.data import results as tables
    from tuner.measure.timing import TimingOptions

    bench, gpu_dir = _bench(Path(results), device_index, timing or TimingOptions(), seed)
    if study:
        frame = _study(bench, family, problem, domains, gpu_dir, name, budget, timeout_s, sampler, seed)
        tables.write_atomic(frame, GpuFolder(gpu_dir).study(name))
    else:
        frame = _sweep(bench, family, problem, domains, gpu_dir, name)
        tables.write_atomic(frame, GpuFolder(gpu_dir).sweep(name))
    _collect(gpu_dir)
    ok = frame[frame.status == "ok"]
    best_row = ok.loc[ok.bandwidth_gbs.idxmax()] if len(ok) else None
    best = tables.config_params(best_row["config_key"]) if best_row is not None else None
    return Tuned(rows=frame, best=best, best_row=best_row, folder=gpu_dir)


def _registered(family: Family | str) -> Family:
    if isinstance(family, str):
        return REGISTRY[family]
    register(family)  # the stages that read its rows back find it by name
    return family


def _domains(family: Family, space: Mapping[str, Sequence] | None) -> dict[str, list]:
    domains = {p.name: list(p.values) for p in family.params}
    for key, values in (space or {}).items():
        if key not in domains:
            raise ValueError(f"space: parameters must be among {list(domains)} of family {family.name!r}, got {key!r}")
        values = list(values) if isinstance(values, (list, tuple, range)) else [values]
        for value in values:
            if not family.param(key).accepts(value):
                raise ValueError(f"space.{key}: must be {family.param(key).rule_description()}, got {value!r}")
        domains[key] = values
    return domains


def _bench(results: Path, device_index: int, timing, seed: int):
    """The Bench on the GPU, its folder with device.json, and the peaks (measured once per folder)."""
    from tuner.data import results as tables
    from tuner.device.describe import describe
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.peaks import measure_peaks

    gpu = require_gpu(device_index)
    device = describe(gpu)
    folder = GpuFolder(results / device["slug"])
    gpu_dir = folder.path
    tables.write_json_atomic(device, folder.device_json)
    bench = Bench.open(gpu, device, cubin_cache(results), timing=timing, seed=seed)
    peaks_json = folder.peaks_json
    if peaks_json.exists():
        bench.peaks = json.loads(peaks_json.read_text())
    else:  # the yardsticks every row's fractions are of, measured in this run
        peaks, rows = measure_peaks(bench)
        tables.write_atomic(tables.to_frame(rows), folder.peaks_parquet)
        tables.write_json_atomic(peaks, peaks_json)
    return bench, gpu_dir


def _sweep(bench, family: Family, problem: Problem, domains: dict, gpu_dir: Path, name: str) -> pd.DataFrame:
    from tuner.measure.compile import compile_ahead
    from tuner.stages.sweep_store import run_sweep, store_dir

    return run_sweep(name, family, [problem], domains, store=store_dir(gpu_dir, name), open_problem=bench.problem,
                     prepare=compile_ahead(bench.gpu.arch, bench.cache_dir, None), energy_best=bench.has_energy_counter)  # fmt: skip


def _study(bench, family: Family, problem: Problem, domains: dict, gpu_dir: Path, name: str, budget: int | None,
           timeout_s: float | None, sampler: str, seed: int) -> pd.DataFrame:  # fmt: skip
    from tuner.data import results as tables
    from tuner.search.study.run import StudyOptions, run_study, study_rows

    session = bench.problem(family, problem)
    outcome = run_study(StudyOptions.for_strategy(sampler, family=family, problem=problem, domains=domains,
                                                  storage=str(GpuFolder(gpu_dir).optuna_journal), study_name=f"{name}-{problem.key}",
                                                  measure=lambda cfg: session.measure(cfg, f"study:{name}"),
                                                  budget_trials=budget, timeout_s=timeout_s, seed=seed))  # fmt: skip
    return tables.to_frame(study_rows(outcome.storage, outcome.study.study_name), families=[family])


def _collect(gpu_dir: Path) -> None:
    """``measurements.parquet`` of every table in the folder, as the collect stage writes it."""
    from tuner.data import results as tables

    folder = GpuFolder(gpu_dir)
    parts = sorted(folder.sweeps.glob("*.parquet")) + sorted(folder.studies.glob("*.parquet"))
    parts += [folder.peaks_parquet] if folder.peaks_parquet.exists() else []
    tables.write_atomic(tables.collect(parts), folder.measurements)
