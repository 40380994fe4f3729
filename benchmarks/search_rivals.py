"""Runs of one search on one exhaustive table, for ``benchmarks/search.py``:
the project's samplers and OptunaHub's AutoSampler through the real study loop
(``run_study`` with the measurement replaced by a look-up in the table), and
Kernel Tuner's strategies through its simulation mode (a cache file made from
the table).

Each run returns the bandwidths of the distinct configurations it measured,
in order: the budget counts distinct configurations, and infeasible
proposals (which the table does not hold) cost nothing.
"""

from __future__ import annotations

import functools
import json
import math
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from optuna.samplers import BaseSampler

from tuner.data.readback import one_line
from tuner.data.results import config_key, plain_value
from tuner.families.base import Family, Problem
from tuner.search.samplers.registry import make_sampler
from tuner.search.study.run import StudyOptions, run_study
from tuner.search.tables.community import SpaceTable, table_family, table_key, table_problem
from tuner.search.tables.community import table_measure as space_measure
from tuner.search.tables.replay import _quiet_optuna, problem_rows, table_domains, table_measure

# Kernel Tuner's names of the rival strategies compared: every single-objective strategy of
# Kernel Tuner 1.5 but brute_force, random_sample (random search is ours, with its expected
# curve), and skopt and pyatf_strategies (packages of their own); each gets max_fevals = the budget.
KT_STRATEGIES = ("hybrid_vndx", "adaptive_tabu_greywolf", "basinhopping", "minimize", "genetic_algorithm", "dual_annealing",
                 "diff_evo", "greedy_ils", "bayes_opt", "pso", "firefly_algorithm", "simulated_annealing", "mls", "greedy_mls",
                 "ordered_greedy_mls")  # fmt: skip
# Kernel Tuner's markers for a failed configuration in its cache, by our status.
KT_MARKER = {"compile_error": "CompilationFailedConfig", "launch_error": "RuntimeFailedConfig", "wrong_result": "RuntimeFailedConfig"}
ORDERS = ("ascending", "descending")
# OptunaHub's AutoSampler: a package of its registry (github.com/optuna/optunahub-registry), whose
# code optunahub fetches at run time, not a package of PyPI.
AUTO_SAMPLER = "samplers/auto_sampler"


@dataclass
class Case:
    """One exhaustive table of one problem, ready to replay."""

    name: str
    family: Family
    problem: Problem
    rows: pd.DataFrame  # one per configuration: ok rows, and (community tables) failed ones
    domains: dict[str, list] = field(default_factory=dict)
    lookup: dict[str, float] = field(default_factory=dict)  # config_key -> GB/s (a failed configuration: 0)
    # Community tables: the look-up of their configurations, and their T1 restrictions
    # (Kernel Tuner is given them, and every parameter, as the hub's own runs were).
    measure: Callable[[dict], dict] | None = None
    restrictions: list[str] | None = None
    # Each configuration with its status and time (ms), as the table holds them: Kernel Tuner's
    # cache is written from these (rows go through pandas, which makes a column of 1 and 0.5
    # floats and of 2**60 + 1 inexact).
    outcomes: list[tuple[dict, str, float | None]] = field(default_factory=list)
    # Community tables: the file's objective and its direction (the look-up holds it as a rate to
    # maximise: 1000 / value where it is minimised).
    objective: str = "bandwidth_gbs"
    minimise: bool = False
    # The kernel it measures (what --held-out-by kernel leaves out together): a community table's file names
    # it (Kernel Tuner's kernel_name), else its folder stands for it; one of the project's, its family.
    kernel: str = ""

    @classmethod
    def from_table(cls, name: str, table: pd.DataFrame, family: Family, problem: Problem) -> "Case":
        rows = problem_rows(table, problem)
        rows = rows[(rows["status"] == "ok") & rows["bandwidth_gbs"].notna()]
        if rows.empty:
            raise ValueError(f"table {name} must hold ok rows for {problem.key}, got none")
        domains = table_domains(rows, family)
        lookup: dict[str, float] = {}
        outcomes = []
        for record in rows.to_dict("records"):
            cfg = _config(record, family, domains)
            lookup[config_key(cfg)] = float(record["bandwidth_gbs"])
            outcomes.append((cfg, "ok", float(record["time_ms_median"])))
        feasible = family.space(problem, domains)
        missing = [cfg for cfg in feasible if config_key(cfg) not in lookup]
        if missing:
            raise ValueError(f"table {name} must hold every feasible configuration, {len(missing)} missing, e.g. {missing[0]}")
        return cls(name, family, problem, rows, domains, lookup, outcomes=outcomes, kernel=family.name)

    @classmethod
    def from_space_table(cls, table: SpaceTable) -> "Case":
        """A community table (``tuner.search.tables.community``): its failed configurations
        are part of the space, cost one evaluation each and score 0."""
        records, lookup, outcomes = [], {}, []
        for values, (status, rate) in table.entries.items():
            cfg = table.config(values)
            time_ms = 1000.0 / rate if rate else None
            records.append(cfg | {"status": status, "bandwidth_gbs": rate, "time_ms_median": time_ms})
            lookup[table_key(table, cfg)] = rate if status == "ok" else 0.0
            outcomes.append((cfg, status, time_ms))
        return cls(table.name, table_family(table), table_problem(table), pd.DataFrame(records), dict(table.params), lookup,
                   space_measure(table), list(table.restrictions), outcomes, table.objective, table.minimise,
                   table.kernel or table.name.split("/")[0])  # fmt: skip

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


def run_ours(case: Case, sampler: str | BaseSampler, order: str, seed: int, budget: int, enqueue=(), prior=()) -> list[float]:
    """One study of ``sampler`` (the name of one of the project's strategies, or a sampler
    object seeded with ``seed``) on ``case`` (in-memory storage)."""
    # A name: its sampler, made once (the study is new, in memory: seeded with ``seed`` itself).
    base = make_sampler(sampler, seed, prior=prior) if isinstance(sampler, str) else sampler
    name = sampler if isinstance(sampler, str) else type(sampler).__name__
    # A table look-up measures at once: a next trial asked in a thread meanwhile would race the measurement
    # it should follow, and what the sampler saw would depend on when the thread ran (a loaded host), not
    # on the seed. Strictly ask, measure, tell is what asking ahead gives where the ask wins.
    with _quiet_optuna():
        outcome = run_study(StudyOptions(family=case.family, problem=case.problem, domains=case.ordered_domains(order),
                                         storage=None, study_name=f"bench-{name}-{seed}",
                                         measure=case.measure or table_measure(case.rows, case.family), budget_trials=budget,
                                         timeout_s=None, sampler=base, seed=seed, enqueue=enqueue, ask_ahead=False))  # fmt: skip
    return [float(row["bandwidth_gbs"]) if row.get("status") == "ok" else 0.0 for row in outcome.rows]


@functools.cache
def auto_sampler_class(registry: str | None) -> type[BaseSampler]:
    """OptunaHub's AutoSampler class: from GitHub (``optunahub.load_module``),
    or from ``registry``, a local checkout of OptunaHub's registry, where GitHub
    is out of reach. Loaded once a process (each load runs the module anew).

    Raises:
        ValueError: ``registry`` does not hold the package, or the package does
            not load here (one line naming where it was to come from).
    """
    # load_local_module's registry_root is the checkout's package/ folder, which holds samplers/...
    root = None if registry is None else Path(registry) / "package"
    if root is not None and not (root / AUTO_SAMPLER / "__init__.py").is_file():
        raise ValueError(f"--optunahub-registry {registry}: must be a checkout of OptunaHub's registry holding "
                         f"package/{AUTO_SAMPLER}/__init__.py, which is missing")  # fmt: skip
    import optunahub

    if root is None:
        source = f"--strategies auto: OptunaHub's {AUTO_SAMPLER} must load from GitHub (or give --optunahub-registry DIR)"
        load = functools.partial(optunahub.load_module, AUTO_SAMPLER)
    else:
        source = f"--optunahub-registry {registry}: its {AUTO_SAMPLER} must load here"
        load = functools.partial(optunahub.load_local_module, package=AUTO_SAMPLER, registry_root=str(root))
    try:
        return load().AutoSampler
    except Exception as exc:  # GitHub out of reach, or the registry's own check of cmaes, scipy and torch
        raise ValueError(f"{source}, got {one_line(exc)}") from None  # the registry's message spans lines


def run_auto(case: Case, order: str, seed: int, budget: int, registry: str | None = None) -> list[float]:
    """One study of OptunaHub's AutoSampler (``auto_sampler_class``) on ``case``,
    seeded as ``run_ours`` seeds the project's samplers."""
    with warnings.catch_warnings():
        # Its TPESampler is made with warn_independent_sampling, deprecated since Optuna 4.9: one warning a run.
        warnings.filterwarnings("ignore", "`warn_independent_sampling` has been deprecated", FutureWarning)
        return run_ours(case, auto_sampler_class(registry)(seed=seed), order, seed, budget)


def run_random(case: Case, seed: int, budget: int) -> list[float]:
    """Uniform random search without repeats (what a random sampler that
    never measures a configuration twice does), drawn directly."""
    values = list(case.lookup.values())
    random.Random(seed).shuffle(values)
    return values[:budget]


KT_MAX_COMPLETED = 1_000_000  # configurations a cache is completed to where no restriction narrows the product


def kt_unrestricted_note(case: Case) -> str | None:
    """One line where Kernel Tuner's strategies would pay for configurations the
    table lacks: it has no restrictions, and the product of its values is larger
    than the configurations it holds (a cache without its T1 file); else None."""
    if case.restrictions:
        return None
    product = math.prod(len(values) for values in case.domains.values())
    absent = product - len(case.outcomes)
    if absent <= 0:
        return None
    return (f"{case.name}: {absent:,} of the {product:,} combinations of its values are not in the table and no restriction "
            "leaves them out; Kernel Tuner's strategies draw them as InvalidConfig, each one of their max_fevals (the "
            "project's strategies never propose them): give the space's T1 file beside the table")  # fmt: skip


def kt_cache(case: Case, order: str, folder: Path, tag: str = "") -> tuple[Path, dict[str, list]]:
    """A Kernel Tuner cache file (in ``folder``, its name starting with ``tag``)
    holding every configuration of ``case`` with its median time as Kernel
    Tuner's ``time`` (minimised; the same bytes for every configuration, so the
    same order as bandwidth).

    Raises:
        ValueError: Kernel Tuner's cache could not tell the table's values apart
            (its keys join the values' text with commas), the table leaves out
            configurations of a product too large to list for it, or Kernel
            Tuner cannot build the space of its restrictions.
    """
    # Fixed parameters are left out, except where restrictions may name them.
    params = {name: values for name, values in case.ordered_domains(order).items() if len(values) > 1 or case.restrictions}
    names = list(params)
    for name, values in params.items():
        texts = [str(value) for value in values]
        if len(set(texts)) < len(texts) or any("," in text for text in texts):
            raise ValueError(f"{case.name}: Kernel Tuner's cache keys join values' text with commas, so the values of "
                             f"{name} must read apart without commas, got {values[:20]}")  # fmt: skip
    # A table's configuration may give a value as another type that compares equal (1.0 for 1); the
    # cache keys must be the text of the values Kernel Tuner is given, so each is read as its domain's.
    canonical = {name: {value: value for value in values} for name, values in params.items()}
    cache = {}
    for cfg, status, time_ms in case.outcomes:
        cfg = {**cfg, **{name: canonical[name].get(cfg[name], cfg[name]) for name in names}}
        entry = {name: cfg[name] for name in names}
        if status == "ok":
            time_ms = float(time_ms)
            entry |= {"time": time_ms, "times": [time_ms], "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}
        else:
            entry |= {"time": KT_MARKER[status], "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}
        cache[",".join(str(cfg[name]) for name in names)] = entry
    # Simulation mode needs every configuration its restrictions allow (or, without any, the whole
    # product) in the cache: those the table lacks (Kernel Tuner's InvalidConfig entries, which a
    # replay table leaves out, or a table that is not complete) are InvalidConfig to it too. A
    # limit on threads above any GPU's keeps this a superset of the space Kernel Tuner builds.
    product = math.prod(len(values) for values in params.values())
    if not case.restrictions and len(cache) < product:
        if product > KT_MAX_COMPLETED:
            raise ValueError(f"{case.name}: Kernel Tuner needs every configuration of the product of the values or "
                             f"restrictions that leave out the rest; give the table's T1 file")  # fmt: skip
    if case.restrictions or len(cache) < product:
        from kernel_tuner.searchspace import Searchspace

        try:
            listed = Searchspace(params, list(case.restrictions or []), 1 << 30).list
        except Exception as exc:  # its parser reads less of Python than a T1 file may hold
            raise ValueError(f"{case.name}: Kernel Tuner must build the space of its restrictions "
                             f"{list(case.restrictions or [])[:5]}, got {type(exc).__name__}: {str(exc)[:200]}") from None  # fmt: skip
        for values in listed:
            key = ",".join(str(value) for value in values)
            if key not in cache:
                cache[key] = dict(zip(names, values)) | {"time": "InvalidConfig", "compile_time": 0.0,
                                                         "verification_time": 0.0, "benchmark_time": 0.0}  # fmt: skip
    path = folder / f"{tag}{'-' if tag else ''}{case.name.replace('/', '-')}-{order}.json"
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
                                              restrictions=case.restrictions or None,
                                              strategy=strategy, strategy_options=options, simulation_mode=True,
                                              cache=str(path), quiet=True, verbose=False)  # fmt: skip
    seen: dict[str, float] = {}
    for result in results:
        # A failed configuration (an error marker as its time) cost an evaluation: it counts, as 0.
        if not result or any(name not in result for name in params):
            continue
        cfg = fixed | {name: plain_value(result[name]) for name in params}
        key = config_key({name: cfg[name] for name in case.domains})
        if key not in seen and key in case.lookup:
            seen[key] = case.lookup[key]
    return list(seen.values())[:budget]
