"""Search benchmark: the project's search and its rivals replayed on exhaustive
tables, no GPU needed.

For every table (an exhaustive sweep, or a subspace of one) and both orders
of the parameter values, each strategy (by default random search, the project's
own, Optuna's TPE and GP samplers where their packages import, and Kernel
Tuner's; OptunaHub's AutoSampler, ``auto``, when named) runs with 50 seeds at budgets of
2.5 %, 5 % and 10 % of the space (distinct configurations measured). Per
strategy and budget it reports the share of seeds within 1 % and 2 % of the
table's optimum, the median best / optimum, the median number of evaluations
to the first configuration within 1 % (">B" where half the seeds never got
there), and the score of Willemsen et al.'s methodology for comparing
auto-tuning optimisers: at every evaluation count b up to the budget, the
mean best time of the strategy over seeds, scored (random - strategy) /
(random - optimum) against random search's expected best of b draws; the
score is the mean of that curve (0: no better than random, 1: the optimum at
once). "behind p" is the one-sided Fisher exact test of the strategy's 1 %
hits against the best Kernel Tuner strategy's at the same budget: below 0.05
it is significantly behind.

Warm start rows: `ordinal` (the default until `ordinal_global`) seeded from another GPU's table of the
same space (its best configurations first, the rest as the model's prior).

The community's brute-forced spaces (``--hub``: Kernel Tuner cache files or
T4 files, with the T1 file beside them for their restrictions; e.g. the
benchmark hub of the Auto-Tuning Association, AutoTuningAssociation/
benchmark_hub, MIT licence, DOI 10.5281/zenodo.15364124) replay the same way
(``tuner.search.tables.community``): a configuration absent from the table is
infeasible and costs nothing; a failed one costs an evaluation and scores 0.
There ``score_m`` is the methodology's own score (the ``autotuning-methodology``
package: its calculated random-search baseline and standardisation, over
function evaluations 1..budget, of the median best time over seeds), and an
aggregate table gives each strategy's mean over the tables per budget. A table
whose correct configurations are all equally fast (or a single one) has nothing
to search and is refused; from the evaluation where that baseline reaches the
optimum (about 40 % of a space of distinct times) the standardisation divides by
zero, so a row at such a budget has no ``score_m``, which one line says.

``--held-out`` scores every table (the project's too) with the methodology, each figure
with a 95 % interval over seeds (a bootstrap of the seeds), and chooses a default among the
strategies leaving each table out in turn (``search_heldout``): the figures of a strategy on
tables it was not chosen on, and the choice made per budget. ``--held-out-by kernel`` leaves
every table of a kernel out at once. ``--tables`` takes community tables by path too, as ``--hub`` does.

    pip install -e '.[bench]'
    python benchmarks/search.py                       # every shipped table, 50 seeds
    python benchmarks/search.py --seeds 5 --tables reduce_space_offset11 --out /tmp/b
    python benchmarks/search.py --tables --hub ../shared/benchmark_hub/convolution_milo \
        ../shared/benchmark_hub/dedispersion_milo --seeds 10 --jobs 1 --fixed 50 100 200 --orders ascending \
        --out benchmarks/results --name search-hub      # the community's spaces only
    python benchmarks/search.py --tables reduce_space_offset11 ../shared/benchmark_hub/convolution_milo \
        --strategies ordinal ordinal_global ordinal_switch --fixed 50 100 --orders ascending --no-warm \
        --held-out --seeds 5 --out /tmp/b                # held-out figures with intervals over seeds
    python benchmarks/search.py --tables --hub ../shared/benchmark_hub/convolution_milo --strategies auto tpe \
        --optunahub-registry ../optunahub-registry --fixed 50 --out /tmp/b    # AutoSampler from a local checkout

Writes ``NAME.txt`` (the command, its wall time and the tables) and ``NAME.json`` under
``--out`` (``--name``, a plain file name, default ``search-benchmark``), both or neither; the default ``--out`` is
``results/search-benchmark/`` (untracked). Every option and input (the tables, the ``--merge`` files, ``--out``)
is checked before the first run: a bad one stops it in one line naming it, the rule and the value. The shipped runs
are ``benchmarks/results/search-*.txt`` (``docs/search.md``): only an ``--out`` naming that folder rewrites them.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# One BLAS thread per worker process: the jobs are many small fits, run in parallel already.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402
from scipy.special import gammaln  # noqa: E402
from scipy.stats import fisher_exact  # noqa: E402
from search_files import merged_rows, name_unfit, prepare_out, ranking_clash, ranking_of, remove_empty, write_outputs  # noqa: E402
from search_heldout import BOOTSTRAP, differences, format_held_out, held_out, mean_difference, table_scores  # noqa: E402
from search_rivals import (  # noqa: E402
    KT_STRATEGIES,
    ORDERS,
    Case,
    auto_sampler_class,
    kt_cache,
    kt_unrestricted_note,
    run_auto,
    run_kt,
    run_ours,
    run_random,
)

from tuner.data.readback import one_line  # noqa: E402
from tuner.data.results import read  # noqa: E402
from tuner.families import REGISTRY  # noqa: E402
from tuner.families.base import Problem  # noqa: E402
from tuner.host import OneLineParser  # noqa: E402
from tuner.search.samplers.registry import DEFAULT_STRATEGY, STRATEGIES, missing_modules  # noqa: E402
from tuner.search.study.warm import warm_start  # noqa: E402
from tuner.search.tables.community import load_table, table_label, table_stem, table_unfit  # noqa: E402

DEFAULT_FRACTIONS = (0.025, 0.05, 0.10)  # of each space
SEEDS = 50
MAX_SEEDS = 10_000  # seeds of one command at most: each is a whole run per strategy, table and order
# The default search, the project's others, and Optuna's TPE and GP samplers (run through the study loop).
OURS = ("ordinal_global", "ordinal", "ordinal_best", "ordinal_adaptive", "ordinal_budget", "ordinal_switch", "ordinal_relay", "interactions", "tpe", "gp")
WARM_TOP = 5  # evaluations within which a warm start must land within 1 %
# Model-based samplers slow with every trial (multivariate TPE and the GP sampler refit on every trial,
# Kernel Tuner's bayes_opt its Gaussian process on every evaluation; the GP sampler took 2 to 5 minutes
# of a core for 200 trials of the hub's spaces): by default each runs
# to at most this many trials, and budgets beyond it are left out of its rows (--cap changes it; 0: no
# cap). bayes_opt's reaches every budget of the hub's convolution and dedispersion spaces. AutoSampler
# (auto) has TPE's: on these spaces (every parameter categorical) it hands every trial after its first
# random ones to a multivariate TPESampler.
DEFAULT_CAPS = {"tpe": 300, "gp": 200, "auto": 300, "bayes_opt": 1200}
# Kernel Tuner strategies whose course depends on max_fevals (a cooling schedule,
# scipy's maxfun): one run per budget. The others only stop there.
KT_BUDGET_AWARE = {"hybrid_vndx", "dual_annealing", "simulated_annealing"}
GIB = 268435456  # 2^28 int32: the default space's problem
# name -> (table file under the repository, source or None, row filter, warm-start table, problem size)
TABLES = {
    # The default config's reduce_space sweep on an H200 (benchmarks/tables/README.md).
    "reduce_space": ("benchmarks/tables/reduce_space_h200.parquet", None, None, None, GIB),
    "reduce_space_offset11": ("benchmarks/tables/reduce_space_h200.parquet", None, ("offset", 11), None, GIB),
    # benchmarks/configs/reduce_hard.yaml swept on each GPU (benchmarks/tables/README.md).
    "reduce_hard_h200": ("benchmarks/tables/reduce_hard_h200.parquet", None, None, "reduce_hard_h100", GIB),
    "reduce_hard_h100": ("benchmarks/tables/reduce_hard_h100.parquet", None, None, "reduce_hard_h200", GIB),
    # The harder space at 2^24 (benchmarks/configs/reduce_hard_2e24.yaml).
    "reduce_hard_2e24_h200": ("benchmarks/tables/reduce_hard_2e24_h200.parquet", None, None, "reduce_hard_2e24_h100", 2**24),
    "reduce_hard_2e24_h100": ("benchmarks/tables/reduce_hard_2e24_h100.parquet", None, None, "reduce_hard_2e24_h200", 2**24),
}


# Community tables of this run: label -> file (set by main, passed to worker processes).
HUB: dict[str, str] = {}


def hub_files(paths: list[str]) -> dict[str, str]:
    """label -> file of the community tables in ``paths`` (files, or folders of
    them, ``NAME.json`` or ``NAME.json.gz``): Kernel Tuner caches and T4 results
    files; in a folder, not its T1 file nor Kernel Tuner's metadata files
    (``GPU-metadata``), and not a GPU's T4 results (``GPU_T4``, ``GPU-results``)
    where a file of that GPU's name is beside them (its cache: the same space twice),
    nor its ``GPU-results`` beside its ``GPU_T4``."""
    found: dict[str, str] = {}
    for given in paths:
        path = Path(given)
        try:  # a folder on the way that cannot be searched makes exists() raise, not say False
            is_folder = path.is_dir() if path.exists() else None
        except OSError as exc:
            raise ValueError(f"--hub {given}: must be a table file or a folder of them that can be read, got "
                             f"{type(exc).__name__}: {exc.strerror or exc}") from None  # fmt: skip
        if is_folder is None:
            raise ValueError(f"--hub {given}: must be a table file or a folder of them, and does not exist")
        if not is_folder:
            files = [path]
        else:
            try:
                files = sorted(f for f in path.iterdir() if f.is_file() and not f.name.startswith(".") and table_stem(f.name))
            except OSError as exc:
                raise ValueError(f"--hub {given}: must be a folder that can be listed, got {type(exc).__name__}: {exc}") from None
            stems = {table_stem(f.name).lower() for f in files}
            files = [f for f in files if not _not_a_table_of_its_own(table_stem(f.name).lower(), stems)]
            if not files:
                raise ValueError(f"--hub {given}: a folder must hold a table (a Kernel Tuner cache or T4 file, NAME.json or "
                                 "NAME.json.gz, besides its T1.json and metadata files), got none")  # fmt: skip
        for f in files:
            label = table_label(f)
            if label in found and Path(found[label]).resolve() != f.resolve():
                raise ValueError(f"--hub {given}: two tables would be named {label}: {found[label]} and {f}")
            found.setdefault(label, str(f))
    return found


def _not_a_table_of_its_own(stem: str, stems: set[str]) -> bool:
    """Whether a folder's file (its lower-case ``stem``, beside ``stems``) is its
    T1, a metadata file, or results read from another file of the folder."""
    if stem == "t1" or stem.endswith("-metadata"):
        return True
    if any(stem.endswith(suffix) and stem.removesuffix(suffix) in stems for suffix in ("_t4", "-results")):
        return True  # the GPU's cache is beside it
    return stem.endswith("-results") and f"{stem.removesuffix('-results')}_t4" in stems  # its T4 is read


# OptunaHub's AutoSampler (search_rivals.auto_sampler_class): only when named, as its code comes from GitHub.
AUTO = "auto"
KNOWN = ("random", *OURS, AUTO, *KT_STRATEGIES)


def sees_budget(strategy: str) -> bool:
    """Whether ``strategy``'s course depends on its budget: it runs once per budget."""
    return strategy in KT_BUDGET_AWARE or (strategy in STRATEGIES and STRATEGIES[strategy].sees_budget)


def strategies_unfit(strategies: list[str]) -> str | None:
    """Why these strategies cannot run here (unknown, or a package missing), or None."""
    unknown = sorted(set(strategies) - set(KNOWN))
    if unknown:
        return f"must be of {list(KNOWN)}, got {unknown}"
    for name in strategies:
        if needs(name):
            return f"{name} needs {needs(name)}, which do not import here"
    return None


def needs(name: str) -> list[str]:
    """The packages strategy ``name`` needs that do not import here."""
    if name in KT_STRATEGIES:
        return [] if _imports("kernel_tuner") else ["kernel_tuner"]
    if name == AUTO:  # what its registry code imports is checked when main loads it
        return [] if _imports("optunahub") else ["optunahub"]
    return missing_modules(name) if name in OURS else []


def _imports(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def installed(names: tuple[str, ...]) -> list[str]:
    """The strategies of ``names`` whose optional packages (the GP sampler's PyTorch, Kernel Tuner) are installed."""
    return [name for name in names if not needs(name)]


def chunk_size(tasks: int, jobs: int | None) -> int:
    """Tasks a worker takes at once: chunks save the pool's round trips on short runs, but a
    chunk runs in one worker, so a few long runs (a GP sampler's) each get their own."""
    return max(1, tasks // (4 * (jobs or os.cpu_count() or 1)))


@dataclass(frozen=True)
class Budgets:
    """The budgets a run is judged at: fractions of each space, and numbers of
    evaluations (those larger than a space are left out there)."""

    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    fixed: tuple[int, ...] = ()

    def of(self, case: Case) -> list[int]:
        return sorted({case.budget(f) for f in self.fractions} | {b for b in self.fixed if b <= case.size})

    def labels(self, case: Case, budget: int) -> list[str]:
        """What ``budget`` stands for on ``case`` (``5.0%``, ``200 evaluations``)."""
        return [f"{f:.1%}" for f in self.fractions if case.budget(f) == budget] + (
            [f"{budget} evaluations"] if budget in self.fixed else [])  # fmt: skip


def load_case(name: str) -> Case:
    if name in HUB:
        return Case.from_space_table(load_table(HUB[name], name=name))
    path, source, keep, _, n = TABLES[name]
    table = read(REPO / path)
    if source is not None:
        table = table[table["source"] == source]
    if keep is not None:
        table = table[table[keep[0]] == keep[1]]
    return Case.from_table(name, table, REGISTRY["reduce"], Problem("reduce", "int32", n))


def hub_case(name: str) -> Case:
    """Community table ``name`` of ``HUB``, checked for what the benchmark needs.

    Raises:
        ValueError: the file cannot be read as a table, or holds nothing to search
            (one line naming it, the rule and the value).
    """
    path = HUB[name]
    try:
        table = load_table(path, name=name)  # a ValueError's message names the file, the rule and the value
    except (TypeError, AttributeError, KeyError, RecursionError) as exc:  # a field of a type the reader does not expect
        raise ValueError(f"--hub {path}: must be a Kernel Tuner cache or a T4 file a replay reads, got {one_line(exc)}") from None
    why = table_unfit(table)
    if why:
        raise ValueError(f"--hub {path}: {why}")
    try:
        return Case.from_space_table(table)
    except (ValueError, TypeError) as exc:  # e.g. a name that is not text (a lone surrogate)
        raise ValueError(f"--hub {path}: must be a table a replay can hold, got {one_line(exc)}") from None


def _run(task: tuple) -> tuple[tuple, list[float]]:
    """One (table, order, strategy, seed, budget) run; a worker process's job."""
    case_name, order, strategy, seed, budget, cache = task
    case = _CASES[case_name]
    if strategy == "random":
        return task[:5], run_random(case, seed, budget)
    if strategy.startswith("warm:"):
        source = _CASES[strategy.split(":", 1)[1]]
        enqueue, prior = warm_start(source.rows, case.family, case.problem, case.ordered_domains(order))
        # The shipped warm-start rows were measured with ``ordinal``; kept so that they compare.
        return task[:5], run_ours(case, "ordinal", order, seed, budget, enqueue=enqueue, prior=prior)
    if strategy in OURS:
        return task[:5], run_ours(case, strategy, order, seed, budget)
    if strategy == AUTO:
        return task[:5], run_auto(case, order, seed, budget, _OPTUNAHUB_REGISTRY)
    try:
        return task[:5], run_kt(case, strategy, cache, seed, budget)
    except Exception as exc:  # Kernel Tuner's own failure on a table it was handed whole: told, not fatal
        return task[:5], f"seed {seed}, budget {budget}: {one_line(exc)}"


_CASES: dict[str, Case] = {}
# Where AutoSampler's code comes from in this process: a local checkout of OptunaHub's registry, or None
# for GitHub (benchmark's optunahub_registry, handed to each worker process by _init).
_OPTUNAHUB_REGISTRY: str | None = None


def _init(names: list[str], hub: dict[str, str] | None = None, optunahub_registry: str | None = None) -> None:
    global _OPTUNAHUB_REGISTRY
    HUB.update(hub or {})
    _OPTUNAHUB_REGISTRY = optunahub_registry
    for name in names:
        if name not in _CASES:  # main loads (and checks) every case before the runs
            _CASES[name] = load_case(name)


def summarise(case: Case, runs: list[list[float]], budget: int, random_curve: list[float]) -> dict:
    """The figures of one strategy at one budget over its seeds' runs."""
    optimum = case.optimum
    bests = [max(run[:budget], default=0.0) for run in runs]
    firsts = [next((i + 1 for i, v in enumerate(run[:budget]) if v >= 0.99 * optimum), math.inf) for run in runs]
    # Willemsen et al.: time is the objective; bandwidth = bytes / time, same bytes everywhere.
    scores = []
    # Before a run finds a valid configuration (a failed one scores 0) its best is the space's worst.
    worst = min(v for v in case.lookup.values() if v > 0)
    for b in range(1, budget + 1):
        mean_time = statistics.fmean(1.0 / max(max(run[:b], default=0.0), worst) for run in runs)
        random_time, best_time = 1.0 / random_curve[b - 1], 1.0 / optimum
        scores.append((random_time - mean_time) / (random_time - best_time) if random_time > best_time else 1.0)
    return {
        "budget": budget,
        "within_1pct": sum(b >= 0.99 * optimum for b in bests) / len(runs),
        "within_2pct": sum(b >= 0.98 * optimum for b in bests) / len(runs),
        "median_ratio": statistics.median(bests) / optimum,
        "median_first_1pct": statistics.median(firsts),
        "hits_1pct": sum(b >= 0.99 * optimum for b in bests),
        "median_evaluations": statistics.median(min(len(run), budget) for run in runs),
        "score": statistics.fmean(scores),
        "seeds": len(runs),
    }


def random_expected_best(case: Case, budget: int) -> list[float]:
    """Expected best bandwidth of b distinct uniform draws, b = 1..budget."""
    values = np.sort(np.fromiter(case.lookup.values(), float))
    n = len(values)
    k = np.arange(1, n + 1, dtype=float)
    curve = []
    for b in range(1, min(budget, n) + 1):
        # P(max is the k-th smallest) = C(k-1, b-1) / C(n, b), in logs for large n.
        tail = k[b - 1 :]
        log_p = gammaln(tail) - gammaln(b) - gammaln(tail - b + 1) - (gammaln(n + 1) - gammaln(b + 1) - gammaln(n - b + 1))
        curve.append(float(np.dot(values[b - 1 :], np.exp(log_p))))
    return curve + [curve[-1]] * (budget - len(curve))


class _SearchspaceStats:
    """What the methodology's random-search baseline reads of a search space
    (``autotuning_methodology.searchspace_statistics.SearchspaceStatistics``,
    which loads T4 files) made from a case: its valid times, minimised."""

    minimization = True

    def __init__(self, case: Case) -> None:
        times = np.sort([1000.0 / v for v in case.lookup.values() if v > 0])
        self.objective_performances_total_sorted = times
        failed = sum(v <= 0 for v in case.lookup.values())
        self.objective_performances_total_sorted_nan = np.concatenate([times, [np.nan] * failed])

    def total_performance_absolute_optimum(self) -> float:
        return float(self.objective_performances_total_sorted[0])


def methodology_score(case: Case, runs: list[list[float]], budget: int, stats=None) -> float | None:
    """Willemsen et al.'s score with their package's code: the median over
    seeds of the best time found within b evaluations, standardised against
    their calculated random-search baseline, averaged over b = 1..budget
    (None where the package is not installed). Before a run finds a valid
    configuration its best is the space's worst time."""
    try:
        from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    except ImportError:
        return None
    stats = stats or _SearchspaceStats(case)
    if baseline_reaches_optimum(stats, budget) is not None:
        return None  # their standardisation divides by (optimum - baseline): no score (see unscored_budgets)
    worst = float(stats.objective_performances_total_sorted[-1])
    best = np.full((len(runs), budget), worst)
    for i, run in enumerate(runs):
        found = np.maximum.accumulate(np.array(run[:budget] or [0.0], float))
        times = np.where(found > 0, 1000.0 / np.maximum(found, 1e-300), worst)
        best[i, : len(times)] = times
        best[i, len(times) :] = times[-1]  # a run that ended early keeps its best
    curve = np.median(best, axis=0)
    fevals = np.arange(1, budget + 1)
    standardised = RandomSearchCalculatedBaseline(stats).get_standardised_curve(fevals, curve, "fevals")
    return float(np.mean(standardised))


def baseline_reaches_optimum(stats, budget: int) -> int | None:
    """The first number of evaluations, up to ``budget``, at which the
    methodology's calculated random-search baseline reaches the space's optimum
    (its standardisation then divides by zero: no score at that budget or
    beyond), or None. On a space of distinct times it does at about 40 % of the
    configurations, sooner where several tie at the optimum."""
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    curve = RandomSearchCalculatedBaseline(stats).get_curve(np.arange(1, budget + 1), "fevals")
    # Within a hair: its smoothing may land the curve's last point a rounding error off the optimum.
    reached = np.flatnonzero(curve <= stats.total_performance_absolute_optimum() * (1 + 1e-9))
    return int(reached[0]) + 1 if reached.size else None


def unscored_budgets(case: Case, budgets: list[int]) -> str | None:
    """One line on the budgets of ``case`` that get no methodology score
    (``baseline_reaches_optimum``), or None: every budget is scored, or the
    package is not installed."""
    try:
        import autotuning_methodology.baseline  # noqa: F401
    except ImportError:
        return None
    if not budgets:
        return None
    first = baseline_reaches_optimum(_SearchspaceStats(case), budgets[-1])
    if first is None:
        return None
    left = [b for b in budgets if b >= first]
    return (f"{case.name}: no score_m at budgets {left}: the methodology's random-search baseline reaches the optimum "
            f"at evaluation {first} of its {case.size} configurations (its score divides by their difference); "
            "the other figures are kept")  # fmt: skip


def benchmark(names: list[str], seeds: int, strategies: list[str], jobs: int, warm: bool = True,
              orders: tuple[str, ...] = ORDERS, caps: dict[str, int] = DEFAULT_CAPS,
              budgets_at: Budgets = Budgets(), optunahub_registry: str | None = None,
              runs_out: dict | None = None) -> tuple[list[dict], list[str]]:  # fmt: skip
    """(every (table, order, strategy, budget) row of the benchmark, at the
    budgets of ``budgets_at``; a note per Kernel Tuner strategy that failed on
    a table, whose rows of that table are left out); ``caps``: a strategy's most
    trials a run (0: none); ``optunahub_registry``: a local checkout of
    OptunaHub's registry that ``auto`` loads AutoSampler from (None: GitHub);
    ``runs_out``, where given, gets every seed's run by (table, order, strategy,
    budget run to)."""
    with tempfile.TemporaryDirectory(prefix="kt-cache-") as folder:  # Kernel Tuner's caches of the tables, this run's only
        return _benchmark(names, seeds, strategies, jobs, warm, orders, caps, budgets_at, optunahub_registry, Path(folder),
                          runs_out)  # fmt: skip


def _benchmark(names: list[str], seeds: int, strategies: list[str], jobs: int, warm: bool, orders: tuple[str, ...],
               caps: dict[str, int], budgets_at: Budgets, optunahub_registry: str | None,
               folder: Path, runs_out: dict | None = None) -> tuple[list[dict], list[str]]:  # fmt: skip
    _init(names)
    tasks = []
    budgets_by = {name: budgets_at.of(_CASES[name]) for name in names}
    for name in names:
        case = _CASES[name]
        budgets = budgets_by[name]
        plan = list(strategies)
        warm_source = TABLES[name][3] if name in TABLES else None
        if warm and warm_source in TABLES and (REPO / TABLES[warm_source][0]).exists():
            _init([warm_source])
            plan.append(f"warm:{warm_source}")
        for order in orders:
            # Each table's own file name: two tables' labels may flatten to the same text.
            cache = kt_cache(case, order, folder, f"{names.index(name)}") if any(s in KT_STRATEGIES for s in plan) else None
            for strategy in plan:
                # Strategies that do not see the budget (most of ours, random, and Kernel Tuner's
                # that only stop at max_fevals) run once to the largest, cut at each smaller one.
                per_budget = sees_budget(strategy)
                # A warm start is judged on its first evaluations: run it to the smallest budget.
                last = budgets[:1] if strategy.startswith("warm:") else budgets[-1:]
                if caps.get(strategy) and budgets[-1] > caps[strategy]:
                    last = [max([b for b in budgets if b <= caps[strategy]], default=budgets[0])]
                for seed in range(seeds):
                    for budget in budgets if per_budget else last:
                        tasks.append((name, order, strategy, seed, budget, cache if strategy in KT_STRATEGIES else None))
    runs: dict[tuple, list[list[float]]] = {}
    failed: dict[tuple[str, str], list[str]] = {}  # (table, Kernel Tuner strategy) -> its failed runs' lines
    with ProcessPoolExecutor(jobs, initializer=_init, initargs=(list(_CASES), dict(HUB), optunahub_registry)) as pool:
        for done, ((name, order, strategy, _seed, budget), found) in enumerate(pool.map(_run, tasks, chunksize=chunk_size(len(tasks), jobs)), 1):
            if isinstance(found, str):
                failed.setdefault((name, strategy), []).append(found)
            else:
                runs.setdefault((name, order, strategy, budget), []).append(found)
            if done % 50 == 0 or done == len(tasks):  # a long run says how far it is
                print(f"{done}/{len(tasks)} runs ({name}, {strategy})", file=sys.stderr, flush=True)
    # A strategy that failed in some runs of a table is left out of it whole: a share of the seeds would not compare.
    runs = {key: found for key, found in runs.items() if (key[0], key[2]) not in failed}
    if runs_out is not None:
        runs_out.update(runs)
    total = {key: sum(1 for task in tasks if (task[0], task[2]) == key) for key in failed}
    notes = [f"{strategy} on {name}: Kernel Tuner failed in {len(lines)} of {total[(name, strategy)]} runs "
             f"(the first: {lines[0]}); its rows of this table are left out" for (name, strategy), lines in failed.items()]  # fmt: skip
    rows = []
    for name in names:
        case = _CASES[name]
        budgets = budgets_by[name]
        curve = random_expected_best(case, budgets[-1])
        # Once per table: case.optimum scans the table (quadratic inside the sum on 10^4 points).
        optimum = case.optimum
        near = sum(v >= 0.99 * optimum for v in case.lookup.values())
        for order in orders:
            for (n, o, strategy, budget), found in runs.items():
                if (n, o) != (name, order):
                    continue
                for b in [budget] if sees_budget(strategy) else [x for x in budgets if x <= budget]:
                    row = {"table": name, "order": order, "strategy": strategy, "space": case.size, "optimum_gbs": case.optimum,
                           "near_1pct": near} | summarise(case, found, b, curve)  # fmt: skip
                    if name in HUB:
                        row |= {"objective": case.objective, "minimise": case.minimise}
                        row["score_m"] = methodology_score(case, found, b)
                        row["budget_of"] = budgets_at.labels(case, b)
                    if strategy.startswith("warm:"):
                        row["within_1pct_in_5"] = sum(max(r[:WARM_TOP], default=0) >= 0.99 * case.optimum for r in found) / len(
                            found
                        )
                    rows.append(row)
    return rows, notes


def _order_rows(rows: list[dict]) -> list[dict]:
    tables = list(TABLES) + sorted({r["table"] for r in rows} - set(TABLES))
    return sorted(rows, key=lambda r: (tables.index(r["table"]), r["order"], r["budget"], -r["within_1pct"], r["strategy"]))


def _fisher(rows: list[dict]) -> None:
    """Adds ``behind_p`` (one-sided Fisher exact test against the best Kernel
    Tuner strategy at the same table, order and budget) and ``best_kt``."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["table"], row["order"], row["budget"]), []).append(row)
    for group in groups.values():
        kt = [r for r in group if r["strategy"] in KT_STRATEGIES]
        if not kt:
            continue
        best = max(kt, key=lambda r: (r["hits_1pct"], -r["median_first_1pct"]))
        for row in group:
            table = [[row["hits_1pct"], row["seeds"] - row["hits_1pct"]], [best["hits_1pct"], best["seeds"] - best["hits_1pct"]]]
            row["behind_p"] = float(fisher_exact(table, alternative="less").pvalue)
            row["best_kt"] = best["strategy"]


COLUMNS = ("strategy", "budget", "within_1pct", "within_2pct", "median_ratio", "median_first_1pct", "score", "score_m", "behind_p")


def _optimum_text(row: dict) -> str:
    """A table's optimum as its file gives it: GB/s for the project's tables; for a community
    table its objective (``ranking_of``: a time in ms where an older row does not name it)."""
    optimum, objective, minimise = ranking_of(row)
    if objective is None:
        return f"{optimum:.0f} GB/s"
    value = 1000 / optimum if minimise else optimum
    return f"{value:.4g} ms" if objective == "time" else f"{objective} {value:.4g}"


def format_rows(rows: list[dict]) -> str:
    """Plain-text tables, one per table and order."""
    lines = []
    for key in dict.fromkeys((r["table"], r["order"]) for r in rows):
        group = [r for r in rows if (r["table"], r["order"]) == key]
        first = group[0]
        optimum = _optimum_text(first)
        lines += ["", f"{key[0]} ({key[1]} values): {first['space']} configurations, optimum {optimum}, "
                      f"{first['near_1pct']} within 1 %"]  # fmt: skip
        body = [[_cell(c, r) for c in COLUMNS] for r in group]
        widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(COLUMNS)]
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(COLUMNS, widths))))
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(b, widths))) for b in body]
        warm = [r for r in group if "within_1pct_in_5" in r]
        for r in warm[:1]:
            lines.append(f"{r['strategy']}: within 1 % in <= {WARM_TOP} evaluations for {r['within_1pct_in_5']:.0%} of seeds")
    return "\n".join(lines).lstrip("\n")


def aggregate(rows: list[dict]) -> list[dict]:
    """Per strategy and budget (a fraction of each space, or a number of
    evaluations): the mean over the community tables of the methodology's
    score and of the share of seeds within 1 %, where the strategy has every
    table's row; ``all`` is the mean over those budgets."""
    hub = [r for r in rows if r.get("score_m") is not None]
    tables = {r["table"] for r in hub}
    labels = list(dict.fromkeys(label for r in sorted(hub, key=lambda r: r["budget"]) for label in r["budget_of"]))
    labels.sort(key=lambda x: (not x.endswith("%"), float(x.split()[0].rstrip("%"))))
    out = []
    for strategy in dict.fromkeys(r["strategy"] for r in hub):
        entry = {"strategy": strategy}
        for label in labels:
            mine = [r for r in hub if r["strategy"] == strategy and label in r["budget_of"]]
            if {r["table"] for r in mine} == tables:
                entry[label] = (statistics.fmean(r["score_m"] for r in mine), statistics.fmean(r["within_1pct"] for r in mine))
        scored = [v[0] for k, v in entry.items() if k != "strategy"]
        entry["all"] = statistics.fmean(scored) if len(scored) == len(labels) else None
        out.append(entry)
    return sorted(out, key=lambda e: -(e["all"] if e["all"] is not None else -9))


def format_aggregate(entries: list[dict]) -> str:
    if not entries:
        return ""
    labels = [k for k in entries[0] if k not in ("strategy", "all")]
    labels = list(dict.fromkeys(k for e in entries for k in e if k not in ("strategy", "all")))
    header = ["strategy", *labels, "all"]
    body = [[e["strategy"], *(f"{e[k][0]:.3f} ({e[k][1]:.0%})" if k in e else "-" for k in labels),
             f"{e['all']:.3f}" if e["all"] is not None else "-"] for e in entries]  # fmt: skip
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["Aggregate over the community tables: methodology score (share of seeds within 1 %) per budget",
             "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))),
             "  ".join("-" * w for w in widths)]  # fmt: skip
    lines += ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(b, widths))) for b in body]
    return "\n".join(lines)


def _cell(column: str, row: dict) -> str:
    value = row.get(column)
    if value is None:
        return "-"
    if column in ("within_1pct", "within_2pct"):
        return f"{value:.0%}"
    if column == "median_first_1pct":
        return f">{row['budget']}" if math.isinf(value) else f"{value:g}"
    if column in ("median_ratio", "score", "score_m", "behind_p"):
        return f"{value:.3f}"
    return str(value)


def kernel_of(name: str) -> str:
    """The kernel table ``name`` measures (``Case.kernel``: the hub's convolutions and the RTX 2080 Ti's are one)."""
    return _CASES[name].kernel


def held_out_text(names: list[str], orders: tuple[str, ...], strategies: list[str], runs: dict, budgets_at: Budgets,
                  reps: int, by_kernel: bool = False) -> tuple[str, dict]:  # fmt: skip
    """The held-out table of this run's ``runs`` (``search_heldout``) over every
    (table, order), scored with the methodology's score on the project's tables
    too, and a summary for the JSON file; ``by_kernel``: each table's kernel is
    left out whole (``kernel_of``), not the table alone."""
    scores, units, groups = {}, [], {}
    for name in names:
        case = _CASES[name]
        stats = _SearchspaceStats(case)
        at = {label: b for b in budgets_at.of(case) for label in budgets_at.labels(case, b)}
        until = baseline_reaches_optimum(stats, max(at.values()))
        for order in orders:
            unit = name if len(orders) == 1 else f"{name} ({order})"
            units.append(unit)
            # A table searched in another order is the same table: it is left out with it.
            groups[unit] = kernel_of(name) if by_kernel else name
            for strategy in strategies:
                ran = sorted(b for (n, o, s, b) in runs if (n, o, s) == (name, order, strategy))
                merged = None
                # A budget's figures come from the runs that reached it: the one run of a strategy that does not
                # see its budget, a run per budget of one that does (sees_budget); a capped one lacks the rest.
                for run_to in ran:
                    served = {label: b for label, b in at.items()
                              if (b == run_to if sees_budget(strategy) else b <= run_to)}  # fmt: skip
                    if not served:
                        continue
                    part = table_scores(stats, case.optimum, runs[(name, order, strategy, run_to)], served, until, reps,
                                        seed=len(scores))  # fmt: skip
                    if merged is None:
                        merged = part
                    else:
                        for field_ in ("score", "share", "score_boot", "share_boot"):
                            getattr(merged, field_).update(getattr(part, field_))
                if merged is not None:
                    scores[(unit, strategy)] = merged
    labels = [f"{b} evaluations" for b in budgets_at.fixed] + [f"{f:.1%}" for f in budgets_at.fractions]
    result = held_out(scores, units, strategies, labels, groups)
    # Each of ours against the default and the two it was chosen between.
    references = dict.fromkeys((DEFAULT_STRATEGY, "ordinal_global", "ordinal"))
    checks = [(s, ref, differences(scores, units, s, ref, labels), mean_difference(scores, units, s, ref, labels))
              for s in strategies for ref in references
              if s != ref and ref in strategies and s in OURS]  # fmt: skip
    summary = {"labels": labels, "choices": result["choices"], "choices_at": result["choices_at"], "groups": groups,
               "aggregate": {name: {label: list(v) for label, v in entry.items()} for name, entry in result["aggregate"].items()},
               "per_table": [{"table": t, "strategy": s, **{label: list(v) for label, v in cells.items()}}
                             for (t, s), cells in result["per_table"].items()]}  # fmt: skip
    return format_held_out(result, labels, checks), summary


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="*", default=None,
                        help=f"of {list(TABLES)} (default: every shipped one), or paths as --hub takes them")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--strategies", nargs="*", default=None,
                        help="default: random, ours, Optuna's (those whose packages are installed) and Kernel Tuner's")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-start rows")
    parser.add_argument("--merge", nargs="*", default=[], help="earlier search-benchmark.json files whose other rows to keep")
    parser.add_argument("--out", default=str(REPO / "results" / "search-benchmark"),
                        help="folder for NAME.{txt,json} (default results/search-benchmark, untracked)")
    parser.add_argument("--hub", nargs="*", default=[], help="community tables: Kernel Tuner caches or T4 files, or folders of them")
    parser.add_argument("--fixed", nargs="*", type=int, default=[], help="budgets in evaluations, beside the fractions (e.g. 50 100 200)")
    parser.add_argument("--fractions", nargs="*", type=float, default=list(DEFAULT_FRACTIONS), help="budgets as fractions of each space")
    parser.add_argument("--orders", nargs="+", choices=ORDERS, default=list(ORDERS), help="orders of the parameter values")
    parser.add_argument("--held-out", action="store_true",
                        help="also the held-out table: every table (the project's too) scored with the methodology, with "
                             "95 %% intervals over seeds, and a default chosen leaving each table out")  # fmt: skip
    parser.add_argument("--held-out-by", choices=("table", "kernel"), default=None,
                        help="what the held-out choice leaves out at a time: one table, or every table of its kernel (the "
                             "one a community table's file names, else its folder; the family of one of the project's)")  # fmt: skip
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="resamples of the seeds behind each interval")
    parser.add_argument("--name", default="search-benchmark", help="the output files' name (NAME.txt, NAME.json)")
    parser.add_argument("--cap", nargs="*", default=[], metavar="STRATEGY=TRIALS",
                        help=f"most trials of a model-based sampler's run (default {DEFAULT_CAPS}; 0: none)")  # fmt: skip
    parser.add_argument("--optunahub-registry", default=None, metavar="DIR",
                        help="a local checkout of github.com/optuna/optunahub-registry (its package/samplers/auto_sampler) "
                             "that the auto strategy loads AutoSampler from (default: optunahub fetches it from GitHub)")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.monotonic()
    names = args.tables if args.tables is not None else [n for n, spec in TABLES.items() if (REPO / spec[0]).exists()]
    names = list(dict.fromkeys(names))  # a table, strategy or order named twice runs once
    # A name that is no shipped table but a path is a community table (a Kernel Tuner cache or T4 file, or a folder).
    paths = [n for n in names if n not in TABLES and Path(n).exists()]
    names = [n for n in names if n not in paths]
    args.hub = [*args.hub, *paths]
    unknown = sorted(set(names) - set(TABLES))
    if unknown:
        parser.refuse(f"--tables must be of {list(TABLES)}, got {unknown}")
    if not 1 <= args.seeds <= MAX_SEEDS:
        parser.refuse(f"--seeds must be from 1 to {MAX_SEEDS}, got {args.seeds}")
    if not 1 <= args.bootstrap <= MAX_SEEDS:
        parser.refuse(f"--bootstrap must be from 1 to {MAX_SEEDS}, got {args.bootstrap}")
    if args.held_out and args.merge:
        parser.refuse(f"--held-out needs every seed's run of this command, which --merge files do not hold, got --merge {args.merge}")
    if args.held_out_by is not None and not args.held_out:
        parser.refuse(f"--held-out-by chooses what the held-out table leaves out, so it needs --held-out, got --held-out-by {args.held_out_by} alone")
    if any(b < 1 for b in args.fixed):
        parser.refuse(f"--fixed budgets must be >= 1, got {args.fixed}")
    if args.jobs is not None and args.jobs < 1:
        parser.refuse(f"--jobs must be >= 1, got {args.jobs}")
    if any(not 0 < f <= 1 for f in args.fractions) or not (args.fractions or args.fixed):
        parser.refuse(f"--fractions must be in (0, 1] and some budget given, got {args.fractions} and --fixed {args.fixed}")
    why = name_unfit(args.name)
    if why:
        parser.refuse(f"--name {why}")
    if not args.out:
        parser.refuse("--out must name a folder, got ''")
    strategies = args.strategies if args.strategies is not None else ["random", *installed((*OURS, *KT_STRATEGIES))]
    strategies = list(dict.fromkeys(strategies))
    why = strategies_unfit(strategies)
    if why:
        parser.refuse(f"--strategies {why}")
    if args.optunahub_registry is not None and AUTO not in strategies:
        parser.refuse(f"--optunahub-registry {args.optunahub_registry}: only for --strategies {AUTO}, which must be named, got {strategies}")
    try:
        caps = DEFAULT_CAPS | {name: int(trials) for name, trials in (item.split("=") for item in args.cap)}
    except ValueError:
        parser.refuse(f"--cap must be STRATEGY=TRIALS (an integer), got {args.cap}")
    odd = {name: trials for name, trials in caps.items() if name not in KNOWN or trials < 0}
    if odd:
        parser.refuse(f"--cap must be STRATEGY=TRIALS, a strategy of --strategies' choices and trials >= 0, got {odd}")
    # Every input read before any run: a damaged table or merged file stops here, in one line.
    HUB.clear()  # one run's tables (main may run twice in a process: the tests)
    _CASES.clear()  # and cases: a worker loads every case here, a hub table's only while HUB names it
    budgets_at = Budgets(tuple(args.fractions), tuple(args.fixed))
    try:
        HUB.update(hub_files(args.hub))
        for name in names:
            _CASES[name] = load_case(name)
        for name in HUB:
            _CASES[name] = hub_case(name)
        merged = [merged_rows(path) for path in args.merge]
        # What this run will write for each table, as a row would say it, beside the merged files' rows.
        planned = [{"table": name, "order": order, "optimum_gbs": _CASES[name].optimum}
                   | ({"objective": _CASES[name].objective, "minimise": _CASES[name].minimise} if name in HUB else {})
                   for name in [*names, *HUB] for order in args.orders]  # fmt: skip
        clash = ranking_clash([("this run's tables", planned), *zip(args.merge, merged)])
        if clash:
            raise ValueError(clash)
        if AUTO in strategies:  # loaded here, not first in a worker: a registry that lacks it stops in one line
            auto_sampler_class(args.optunahub_registry)
    except ValueError as error:
        parser.refuse(str(error))
    names += list(HUB)
    if not names and not merged:
        parser.refuse("--tables and --hub must name a table (or --merge a file), got none: nothing to run")
    for name in names:
        if not budgets_at.of(_CASES[name]):
            parser.refuse(f"--fixed {args.fixed}: table {name} has {_CASES[name].size} configurations, fewer than every "
                         "budget, and --fractions gives none: it would have no budget")  # fmt: skip
    if args.held_out_by == "kernel" and len(kernels := {kernel_of(name) for name in names}) < 2:
        parser.refuse(f"--held-out-by kernel leaves each kernel's tables out to choose on the others', so the tables must "
                      f"measure two kernels or more, got {sorted(kernels)}")  # fmt: skip
    notes = [note for name in HUB if (note := unscored_budgets(_CASES[name], budgets_at.of(_CASES[name])))]
    if any(strategy in KT_STRATEGIES for strategy in strategies):
        notes += [note for name in HUB if (note := kt_unrestricted_note(_CASES[name]))]
    for note in notes:
        print(f"{parser.prog}: note: {note}", file=sys.stderr, flush=True)
    out = Path(args.out)
    try:  # last of the checks: a run stopped before it leaves no folder behind
        created = prepare_out(out, args.name)
    except ValueError as error:
        parser.refuse(str(error))
    runs: dict = {}
    try:  # a table Kernel Tuner's cache cannot hold stops before the runs (kt_cache)
        rows, failures = benchmark(names, args.seeds, strategies, args.jobs, warm=not args.no_warm,
                                   orders=tuple(dict.fromkeys(args.orders)), caps=caps, budgets_at=budgets_at,
                                   optunahub_registry=args.optunahub_registry, runs_out=runs) if names else ([], [])  # fmt: skip
    except ValueError as error:
        remove_empty(created)
        parser.refuse(str(error))
    for note in failures:
        print(f"{parser.prog}: note: {note}", file=sys.stderr, flush=True)
    notes += failures
    for old in merged:
        fresh = {(r["table"], r["order"], r["strategy"], r["budget"]) for r in rows}
        rows = [r for r in old if (r["table"], r["order"], r["strategy"], r["budget"]) not in fresh] + rows
    rows = _order_rows(rows)
    _fisher(rows)
    summary = aggregate(rows)
    text = format_rows(rows) + ("\n\n" + format_aggregate(summary) if summary else "")
    held = None
    if args.held_out and names:
        held_text, held = held_out_text(names, tuple(dict.fromkeys(args.orders)), strategies, runs, budgets_at, args.bootstrap,
                                        by_kernel=args.held_out_by == "kernel")  # fmt: skip
        text += "\n\n" + held_text
    text += "".join(f"\n\n{n}" for n in notes)
    command = " ".join(["python benchmarks/search.py", *(argv if argv is not None else sys.argv[1:])])
    wall = f"{time.monotonic() - started:.0f} s wall, jobs={args.jobs or os.cpu_count()}"
    print(text)  # first: were the files not written, the results are still here
    try:
        write_outputs(out, args.name, f"{command}\n{wall}\n\n{text}\n",
                      {"command": command, "wall": wall, "seeds": args.seeds, "fractions": list(budgets_at.fractions),
                       "fixed": list(budgets_at.fixed), "rows": rows, "aggregate": summary}
                      | ({"held_out": held} if held is not None else {}))  # fmt: skip
    except (OSError, ValueError) as error:
        remove_empty(created)
        parser.refuse(f"--out {out}: {args.name}.txt and {args.name}.json must be written there, got {type(error).__name__}: "
                     f"{str(error)[:200]} (neither was)")  # fmt: skip
    return 0



if __name__ == "__main__":
    sys.exit(main())
