"""Runs of one search on one exhaustive table, for ``benchmarks/search.py``:
the project's samplers through the real study loop (``run_study`` with the
measurement replaced by a look-up in the table), and Kernel Tuner's
strategies through its simulation mode (a cache file made from the table).

Each run returns the bandwidths of the distinct configurations it measured,
in order: the budget counts distinct configurations, and infeasible
proposals (which the table does not hold) cost nothing.
"""

from __future__ import annotations

import json
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tuner.data.results import config_key, plain_value
from tuner.families.base import Family, Problem
from tuner.search.replay import _quiet_optuna, problem_rows, table_domains, table_measure
from tuner.search.samplers import make_sampler
from tuner.search.study import run_study

# Kernel Tuner's names of the rivals the issue names (hybrid_vndx where the
# installed version has it); each gets max_fevals = the budget.
KT_STRATEGIES = ("hybrid_vndx", "basinhopping", "minimize", "genetic_algorithm", "dual_annealing", "greedy_ils")
ORDERS = ("ascending", "descending")


@dataclass
class Case:
    """One exhaustive table of one problem, ready to replay."""

    name: str
    family: Family
    problem: Problem
    rows: pd.DataFrame  # ok rows, one per configuration
    domains: dict[str, list] = field(default_factory=dict)
    lookup: dict[str, float] = field(default_factory=dict)  # config_key -> GB/s

    @classmethod
    def from_table(cls, name: str, table: pd.DataFrame, family: Family, problem: Problem) -> "Case":
        rows = problem_rows(table, problem)
        rows = rows[(rows["status"] == "ok") & rows["bandwidth_gbs"].notna()]
        if rows.empty:
            raise ValueError(f"table {name} must hold ok rows for {problem.key}, got none")
        domains = table_domains(rows, family)
        lookup: dict[str, float] = {}
        for record in rows.to_dict("records"):
            lookup[config_key(_config(record, family, domains))] = float(record["bandwidth_gbs"])
        feasible = family.space(problem, domains)
        missing = [cfg for cfg in feasible if config_key(cfg) not in lookup]
        if missing:
            raise ValueError(f"table {name} must hold every feasible configuration, {len(missing)} missing, e.g. {missing[0]}")
        return cls(name, family, problem, rows, domains, lookup)

    @property
    def size(self) -> int:
        return len(self.lookup)

    @property
    def optimum(self) -> float:
        return max(self.lookup.values())

    def ordered_domains(self, order: str) -> dict[str, list]:
        """The parameter values as listed (ascending) or each list reversed."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {list(ORDERS)}, got {order!r}")
        return {name: list(values) if order == "ascending" else list(reversed(values)) for name, values in self.domains.items()}

    def budget(self, fraction: float) -> int:
        return max(1, round(fraction * self.size))


def _config(record: dict, family: Family, domains: dict[str, list]) -> dict:
    cfg = {}
    for param in family.params:
        value = plain_value(record.get(param.name))
        cfg[param.name] = domains[param.name][0] if value is None else value
    return cfg


def run_ours(case: Case, sampler: str, order: str, seed: int, budget: int, enqueue=(), prior=()) -> list[float]:
    """One study of the project's ``sampler`` on ``case`` (in-memory storage)."""
    base = make_sampler(sampler, seed, prior=prior) if prior else sampler
    with _quiet_optuna():
        outcome = run_study(family=case.family, problem=case.problem, domains=case.ordered_domains(order), storage=None,
                            study_name=f"bench-{sampler}-{seed}", measure=table_measure(case.rows, case.family),
                            budget_trials=budget, timeout_s=None, sampler=base, seed=seed, enqueue=enqueue)  # fmt: skip
    return [float(row["bandwidth_gbs"]) if row.get("status") == "ok" else 0.0 for row in outcome.rows]


def run_random(case: Case, seed: int, budget: int) -> list[float]:
    """Uniform random search without repeats (what a random sampler that
    never measures a configuration twice does), drawn directly."""
    values = list(case.lookup.values())
    random.Random(seed).shuffle(values)
    return values[:budget]


def kt_cache(case: Case, order: str, folder: Path) -> tuple[Path, dict[str, list]]:
    """A Kernel Tuner cache file holding every configuration of ``case`` with
    its median time as Kernel Tuner's ``time`` (minimised; the same bytes for
    every configuration, so the same order as bandwidth)."""
    params = {name: values for name, values in case.ordered_domains(order).items() if len(values) > 1}
    names = list(params)
    cache = {}
    for record in case.rows.to_dict("records"):
        cfg = _config(record, case.family, case.domains)
        entry = {name: cfg[name] for name in names}
        time_ms = float(record["time_ms_median"])
        entry |= {"time": time_ms, "times": [time_ms], "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}
        cache[",".join(str(cfg[name]) for name in names)] = entry
    path = folder / f"{case.name}-{order}.json"
    header = {"device_name": case.name, "kernel_name": case.problem.family, "problem_size": [case.problem.n],
              "tune_params_keys": names, "tune_params": params, "objective": "time", "cache": cache}  # fmt: skip
    path.write_text(json.dumps(header))
    return path, params


def run_kt(case: Case, strategy: str, cache: tuple[Path, dict[str, list]], seed: int, budget: int) -> list[float]:
    """One Kernel Tuner ``strategy`` run in simulation mode with ``max_fevals = budget``."""
    import kernel_tuner

    path, params = cache
    fixed = {name: values[0] for name, values in case.domains.items() if name not in params}
    options = {"max_fevals": budget} | ({"budget": budget} if strategy == "hybrid_vndx" else {})
    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(case.problem.family, "/* simulated */", (case.problem.n,), [], params,
                                              strategy=strategy, strategy_options=options, simulation_mode=True,
                                              cache=str(path), quiet=True, verbose=False)  # fmt: skip
    seen: dict[str, float] = {}
    for result in results:
        if not result or "__error__" in result or not isinstance(result.get("time"), (int, float)):
            continue
        cfg = fixed | {name: plain_value(result[name]) for name in params}
        key = config_key({name: cfg[name] for name in case.domains})
        if key not in seen:
            seen[key] = case.lookup[key]
    return list(seen.values())[:budget]
