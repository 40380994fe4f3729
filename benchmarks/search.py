"""Search benchmark: the project's search and its rivals replayed on exhaustive
tables, no GPU needed.

For every table (an exhaustive sweep, or a subspace of one) and both orders
of the parameter values, each strategy runs with 50 seeds at budgets of
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

Warm start rows: the default search seeded from another GPU's table of the
same space (its best configurations first, the rest as the model's prior).

    pip install -e '.[bench]'
    python benchmarks/search.py                       # every shipped table, 50 seeds
    python benchmarks/search.py --seeds 5 --tables reduce_space_offset11 --out /tmp/b

Writes ``search-benchmark.txt`` and ``search-benchmark.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# One BLAS thread per worker process: the jobs are many small fits, run in parallel already.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from scipy.stats import fisher_exact  # noqa: E402
from search_rivals import KT_STRATEGIES, ORDERS, Case, kt_cache, run_kt, run_ours, run_random  # noqa: E402

from tuner.data.results import read, write_json_atomic, write_text_atomic  # noqa: E402
from tuner.families import REGISTRY  # noqa: E402
from tuner.families.base import Problem  # noqa: E402
from tuner.search.warm import warm_start  # noqa: E402

FRACTIONS = (0.025, 0.05, 0.10)
SEEDS = 50
OURS = ("ordinal", "tpe")  # the default search, and the one it replaces
WARM_TOP = 5  # evaluations within which a warm start must land within 1 %
TPE_MAX_SPACE = 2000  # larger tables replay without tpe
# Kernel Tuner strategies whose course depends on max_fevals (a cooling schedule,
# scipy's maxfun): one run per budget. The others only stop there.
KT_BUDGET_AWARE = {"hybrid_vndx", "dual_annealing"}
REFERENCE = REPO / "results" / "reference"
GIB = 268435456  # 2^28 int32: the default space's problem
# name -> (table file, source or None, row filter, warm-start table, problem size)
TABLES = {
    "reduce_space": ("nvidia-h200/measurements.parquet", "sweep:reduce_space", None, None, GIB),
    "reduce_space_offset11": ("nvidia-h200/measurements.parquet", "sweep:reduce_space", ("offset", 11), None, GIB),
    "reduce_hard_h200": ("nvidia-h200/sweeps/reduce_hard.parquet", None, None, "reduce_hard_h100", GIB),
    "reduce_hard_h100": ("nvidia-h100-80gb-hbm3/sweeps/reduce_hard.parquet", None, None, "reduce_hard_h200", GIB),
    # The harder space at 2^24 (benchmarks/configs/reduce_hard_2e24.yaml).
    "reduce_hard_2e24_h200": ("nvidia-h200/sweeps/reduce_hard_2e24.parquet", None, None, "reduce_hard_2e24_h100", 2**24),
    "reduce_hard_2e24_h100": (
        "nvidia-h100-80gb-hbm3/sweeps/reduce_hard_2e24.parquet",
        None,
        None,
        "reduce_hard_2e24_h200",
        2**24,
    ),
}


def load_case(name: str) -> Case:
    path, source, keep, _, n = TABLES[name]
    table = read(REFERENCE / path)
    if source is not None:
        table = table[table["source"] == source]
    if keep is not None:
        table = table[table[keep[0]] == keep[1]]
    return Case.from_table(name, table, REGISTRY["reduce"], Problem("reduce", "int32", n))


def _run(task: tuple) -> tuple[tuple, list[float]]:
    """One (table, order, strategy, seed, budget) run; a worker process's job."""
    case_name, order, strategy, seed, budget, cache = task
    case = _CASES[case_name]
    if strategy == "random":
        return task[:5], run_random(case, seed, budget)
    if strategy.startswith("warm:"):
        source = _CASES[strategy.split(":", 1)[1]]
        enqueue, prior = warm_start(source.rows, case.family, case.problem, case.ordered_domains(order))
        return task[:5], run_ours(case, "ordinal", order, seed, budget, enqueue=enqueue, prior=prior)
    if strategy in OURS:
        return task[:5], run_ours(case, strategy, order, seed, budget)
    return task[:5], run_kt(case, strategy, cache, seed, budget)


_CASES: dict[str, Case] = {}


def _init(names: list[str]) -> None:
    for name in names:
        _CASES[name] = load_case(name)


def summarise(case: Case, runs: list[list[float]], budget: int, random_curve: list[float]) -> dict:
    """The figures of one strategy at one budget over its seeds' runs."""
    optimum = case.optimum
    bests = [max(run[:budget], default=0.0) for run in runs]
    firsts = [next((i + 1 for i, v in enumerate(run[:budget]) if v >= 0.99 * optimum), math.inf) for run in runs]
    # Willemsen et al.: time is the objective; bandwidth = bytes / time, same bytes everywhere.
    scores = []
    for b in range(1, budget + 1):
        mean_time = statistics.fmean(1.0 / max(run[:b], default=1e-30) for run in runs)
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
    values = sorted(case.lookup.values())
    n = len(values)
    curve = []
    for b in range(1, budget + 1):
        # P(max is the k-th smallest) = C(k-1, b-1) / C(n, b), in logs for large n.
        total = 0.0
        for k in range(b, n + 1):
            total += values[k - 1] * math.exp(math.lgamma(k) - math.lgamma(b) - math.lgamma(k - b + 1)
                                              - (math.lgamma(n + 1) - math.lgamma(b + 1) - math.lgamma(n - b + 1)))  # fmt: skip
        curve.append(total)
    return curve


def benchmark(names: list[str], seeds: int, strategies: list[str], jobs: int, warm: bool = True) -> list[dict]:
    """Every (table, order, strategy, budget) row of the benchmark."""
    _init(names)
    folder = Path(tempfile.mkdtemp(prefix="kt-cache-"))
    tasks = []
    for name in names:
        case = _CASES[name]
        budgets = [case.budget(f) for f in FRACTIONS]
        # Multivariate TPE slows with every trial: 100 runs of 10 % of a large space take hours.
        plan = [s for s in strategies if not (s == "tpe" and case.size > TPE_MAX_SPACE)]
        warm_source = TABLES[name][3]
        if warm and warm_source in TABLES and (REFERENCE / TABLES[warm_source][0]).exists():
            _init([warm_source])
            plan.append(f"warm:{warm_source}")
        for order in ORDERS:
            cache = kt_cache(case, order, folder) if any(s in KT_STRATEGIES for s in plan) else None
            for strategy in plan:
                # Strategies that do not see the budget (ours, random, and Kernel Tuner's that
                # only stop at max_fevals) run once to the largest, cut at each smaller one.
                per_budget = strategy in KT_BUDGET_AWARE
                # A warm start is judged on its first evaluations: run it to the smallest budget.
                last = budgets[:1] if strategy.startswith("warm:") else budgets[-1:]
                for seed in range(seeds):
                    for budget in budgets if per_budget else last:
                        tasks.append((name, order, strategy, seed, budget, cache if strategy in KT_STRATEGIES else None))
    runs: dict[tuple, list[list[float]]] = {}
    with ProcessPoolExecutor(jobs, initializer=_init, initargs=(list(_CASES),)) as pool:
        for (name, order, strategy, _seed, budget), found in pool.map(_run, tasks, chunksize=4):
            runs.setdefault((name, order, strategy, budget), []).append(found)
    rows = []
    for name in names:
        case = _CASES[name]
        budgets = [case.budget(f) for f in FRACTIONS]
        curve = random_expected_best(case, budgets[-1])
        for order in ORDERS:
            for (n, o, strategy, budget), found in runs.items():
                if (n, o) != (name, order):
                    continue
                for b in [x for x in budgets if x <= budget] if strategy not in KT_BUDGET_AWARE else [budget]:
                    row = {"table": name, "order": order, "strategy": strategy, "space": case.size, "optimum_gbs": case.optimum,
                           "near_1pct": sum(v >= 0.99 * case.optimum for v in case.lookup.values())} | summarise(case, found, b, curve)  # fmt: skip
                    if strategy.startswith("warm:"):
                        row["within_1pct_in_5"] = sum(max(r[:WARM_TOP], default=0) >= 0.99 * case.optimum for r in found) / len(
                            found
                        )
                    rows.append(row)
    return rows


def _order_rows(rows: list[dict]) -> list[dict]:
    tables = list(TABLES)
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


COLUMNS = ("strategy", "budget", "within_1pct", "within_2pct", "median_ratio", "median_first_1pct", "score", "behind_p")


def format_rows(rows: list[dict]) -> str:
    """Plain-text tables, one per table and order."""
    lines = []
    for key in dict.fromkeys((r["table"], r["order"]) for r in rows):
        group = [r for r in rows if (r["table"], r["order"]) == key]
        first = group[0]
        lines += ["", f"{key[0]} ({key[1]} values): {first['space']} configurations, optimum {first['optimum_gbs']:.0f} GB/s, "
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


def _cell(column: str, row: dict) -> str:
    value = row.get(column)
    if value is None:
        return "-"
    if column in ("within_1pct", "within_2pct"):
        return f"{value:.0%}"
    if column == "median_first_1pct":
        return f">{row['budget']}" if math.isinf(value) else f"{value:g}"
    if column in ("median_ratio", "score", "behind_p"):
        return f"{value:.3f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="*", default=None, help=f"of {list(TABLES)} (default: every shipped one)")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--strategies", nargs="*", default=["random", *OURS, *KT_STRATEGIES])
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-start rows")
    parser.add_argument("--merge", nargs="*", default=[], help="earlier search-benchmark.json files whose other rows to keep")
    parser.add_argument("--out", default=str(REFERENCE / "nvidia-h200"), help="folder for search-benchmark.{txt,json}")
    args = parser.parse_args(argv)
    names = args.tables if args.tables is not None else [n for n, spec in TABLES.items() if (REFERENCE / spec[0]).exists()]
    unknown = sorted(set(names) - set(TABLES))
    if unknown:
        parser.error(f"--tables must be of {list(TABLES)}, got {unknown}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    rows = benchmark(names, args.seeds, args.strategies, args.jobs, warm=not args.no_warm) if names else []
    for earlier in args.merge:
        fresh = {(r["table"], r["order"], r["strategy"], r["budget"]) for r in rows}
        old = json.loads(Path(earlier).read_text())["rows"]
        rows = [r for r in old if (r["table"], r["order"], r["strategy"], r["budget"]) not in fresh] + rows
    rows = _order_rows(rows)
    _fisher(rows)
    text = format_rows(rows)
    out = Path(args.out)
    write_text_atomic(text + "\n", out / "search-benchmark.txt")
    write_json_atomic({"seeds": args.seeds, "fractions": list(FRACTIONS), "rows": rows}, out / "search-benchmark.json")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
