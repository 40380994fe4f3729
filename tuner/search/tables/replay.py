"""Replay samplers against an exhaustive table, without a GPU.

Each sampler runs through the same ``run_study`` code path as a real search,
with ``measure`` replaced by a look-up of the configuration in a table of
measured rows (an exhaustive sweep). Repeated over seeds, this tells how close
to the table's optimum each sampler gets within each budget, which is how the
default sampler and budget are chosen.

    python -m tuner.search.tables.replay TABLE.parquet --family reduce --dtype int32 --n 268435456
    python -m tuner.search.tables.replay CACHE.json.gz

The table may be a whole ``measurements.parquet``: the problem's rows are
taken from one source (``--source``; default: the source with the most rows
for the problem, the exhaustive sweep). Or it is another tuner's brute-forced
space, a Kernel Tuner cache or a T4 results file (``.json``, gzipped or not;
``--t1`` its T1 file, by default the T1 file beside it, ``T1.json``, ``t1.json`` or ``T1.json.gz``): the space is the
file's, so no family, type or size is named. The default samplers need no
PyTorch; ``--samplers tpe gp random`` adds the GP sampler where PyTorch is
installed.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import optuna
import pandas as pd

from tuner.data.results import config_key, plain_value
from tuner.data.time_to_target import STUDY_CLOCK
from tuner.families.base import Family, Problem
from tuner.search.samplers.registry import STRATEGIES, checked_strategy
from tuner.search.study.run import StudyOptions, run_study

DEFAULT_SAMPLERS = ("ordinal_adaptive", "ordinal", "tpe", "random")  # gp needs PyTorch
DEFAULT_BUDGETS = (8, 16, 32, 64)
DEFAULT_SEEDS = 10
MAX_SEEDS = 10_000  # seeds of one command at most: each is a whole study (its list is made before any runs)
NEAR = 0.02  # "within 2 % of the optimum"

COLUMNS = (
    "sampler",
    "budget",
    "budget_fraction",
    "median_ratio",
    "min_ratio",
    "within_2pct",
    "median_measured",
    "rescued_share",
    "seeds",
)


def problem_rows(table: pd.DataFrame, problem: Problem, source: str | None = None) -> pd.DataFrame:
    """The rows of ``table`` for ``problem`` (a table without ``family``,
    ``dtype`` or ``n`` values is taken to be for it), from one source:
    ``source``, or where the problem's rows come from several (a whole
    ``measurements.parquet``), the one with the most rows: the other sweeps
    and studies cover other grids, and mixed they make no exhaustive table.

    Raises:
        ValueError: no row is for ``problem`` (from ``source``).
    """
    keep = pd.Series(True, index=table.index)
    for column, value in (("family", problem.family), ("dtype", problem.dtype), ("n", problem.n)):
        if column in table and table[column].notna().any():
            keep &= table[column] == value
    rows = table[keep.fillna(False).astype(bool)]
    if rows.empty:
        raise ValueError(f"table must hold rows for problem {problem.key}, got none of its {len(table)} rows")
    sources = rows["source"].value_counts() if "source" in rows else pd.Series(dtype=int)
    if source is None and len(sources) > 1:
        source = str(sources.index[0])
    if source is not None:
        if source not in sources:
            raise ValueError(f"--source must be one of {sorted(sources.index)} for problem {problem.key}, got {source!r}")
        rows = rows[rows["source"] == source]
    return rows


def table_domains(rows: pd.DataFrame, family: Family) -> dict[str, list]:
    """Per parameter, the values present in ``rows``, in the family's order.

    A parameter without a column (or with no value) takes its default, as in a
    sweep that does not list it.

    Raises:
        ValueError: the table holds a value the parameter's rule refuses.
    """
    domains = {}
    for param in family.params:
        if param.name not in rows or rows[param.name].isna().all():
            domains[param.name] = [param.default]
            continue
        present = {plain_value(v) for v in rows[param.name].dropna().unique()}
        outside = sorted((v for v in present if not param.accepts(v)), key=str)
        if outside:
            raise ValueError(f"table values of {param.name} must be {param.rule_description()}, got {outside}")
        listed = [v for v in param.values if v in present]
        # A wider sweep than the family's list: every value, sorted.
        domains[param.name] = listed if len(listed) == len(present) else sorted(present, key=lambda v: (isinstance(v, str), v))
    return domains


def table_measure(rows: pd.DataFrame, family: Family) -> Callable[[dict], dict]:
    """A ``measure`` that looks configurations up in ``rows`` by config_key.

    Keys are recomputed from the parameter columns, so the table's own
    ``config_key`` text does not have to match. A configuration measured more
    than once keeps its last row. One missing from the table comes back as a
    ``launch_error`` "not in table", so gaps and bugs show in the results.
    """
    domains = table_domains(rows, family)
    lookup: dict[str, dict] = {}
    for record in rows.to_dict("records"):
        cfg = {}
        for param in family.params:
            value = plain_value(record.get(param.name))
            cfg[param.name] = domains[param.name][0] if value is None else value
        # Only the measurement travels; the study fills in trial and source,
        # and a replay spends none of the table's wall clock or compile time.
        row = {k: plain_value(v) for k, v in record.items() if k not in ("trial", "source", *STUDY_CLOCK)}
        row = {k: v for k, v in row.items() if v is not None}
        if row.get("status") == "infeasible":
            # The family's constraints said no where the study's did not (or
            # the table was made under other rules): a failure, not a crash.
            row["status"] = "launch_error"
            row["error"] = f"infeasible in table: {row.get('error', '')}"
        # The row speaks of the configuration as the family names it now
        # (a parameter added since the table was measured takes its default).
        lookup[config_key(cfg)] = row | cfg | {"config_key": config_key(cfg)}

    def measure(cfg: dict) -> dict:
        row = lookup.get(config_key(cfg))
        if row is None:
            return {"status": "launch_error", "error": "not in table"}
        return dict(row)

    return measure


def replay(
    table: pd.DataFrame,
    family: Family,
    problem: Problem,
    samplers: Sequence[str] = DEFAULT_SAMPLERS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    seeds: Iterable[int] = range(DEFAULT_SEEDS),
    source: str | None = None,
) -> pd.DataFrame:
    """How close each sampler gets to the optimum of a results table (ideally
    an exhaustive sweep) within each budget: ``replay_space`` over the space
    of ``problem``'s rows (from ``source``, see ``problem_rows``), measured by
    looking configurations up in them (``table_measure``).

    Raises:
        ValueError: bad arguments, or the table has no ``ok`` row.
    """
    checked = _check_arguments(samplers, budgets, seeds)
    rows = problem_rows(table, problem, source)
    ok = rows[(rows["status"] == "ok") & rows["bandwidth_gbs"].notna()]
    if ok.empty:
        statuses = sorted(rows["status"].dropna().unique())
        raise ValueError(f"table must hold an ok row for {problem.key}, got statuses {statuses}")
    domains = table_domains(rows, family)
    return _replay(family, problem, domains, table_measure(rows, family), float(ok["bandwidth_gbs"].max()),
                   len(family.space(problem, domains)), *checked)  # fmt: skip


def replay_space(
    family: Family,
    problem: Problem,
    domains: Mapping[str, list],
    measure: Callable[[dict], dict],
    optimum: float,
    feasible: int,
    samplers: Sequence[str] = DEFAULT_SAMPLERS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    seeds: Iterable[int] = range(DEFAULT_SEEDS),
) -> pd.DataFrame:
    """How close each sampler gets to ``optimum`` within each budget, measuring
    by ``measure`` (a look-up: a results table's, or another tuner's table's,
    ``tuner.search.tables.community.table_measure``).

    One study per sampler and seed runs to the largest budget; the result at a
    smaller budget is its first ``budget`` measurements, which is what a study
    with that budget would have measured (most samplers do not see the budget;
    one that does, ``Strategy.sees_budget``, runs once per budget).

    Args:
        family, problem, domains: the searched space.
        measure: the look-up a study measures by.
        optimum: the space's best ``bandwidth_gbs`` (the ratios' denominator).
        feasible: the number of feasible configurations (the budgets' share).
        samplers: sampler names (see ``tuner.search.study.run.SAMPLERS``).
        budgets: budgets to report, in distinct configurations measured (one
            beyond the space is cut to ``feasible``).
        seeds: sampler seeds; each (sampler, seed) is one study.

    Returns:
        One row per sampler x budget with ``COLUMNS``: ``median_ratio`` and
        ``min_ratio`` of best-found / optimum over seeds, ``within_2pct`` the
        share of seeds within 2 % of the optimum, ``budget_fraction`` the
        budget over ``feasible``, ``median_measured`` the configurations
        actually measured (less than the budget when a study stalled or
        exhausted the space), ``rescued_share`` the share of those
        measurements that the loop drew at random because the sampler was
        stuck (pooled over seeds).

    Raises:
        ValueError: bad arguments.
    """
    return _replay(family, problem, domains, measure, optimum, feasible, *_check_arguments(samplers, budgets, seeds))


def _replay(family: Family, problem: Problem, domains: Mapping[str, list], measure: Callable[[dict], dict], optimum: float,
            feasible: int, samplers: list[str], budgets: list[int], seeds: list[int]) -> pd.DataFrame:  # fmt: skip
    """``replay_space`` on checked arguments; a budget beyond the space is cut to its size."""
    budgets = sorted({min(budget, max(feasible, 1)) for budget in budgets})
    # Per (sampler, budget it ran to), per seed: the measured rows in order, and which were rescues. A sampler
    # that does not see its budget runs once, to the largest, cut at each smaller one; one that does, per budget.
    found: dict[tuple[str, int], list[list[tuple[dict, bool]]]] = {}
    # A look-up measures at once: a trial asked ahead in a thread would race it, and a seed would not give one run.
    with _quiet_optuna():
        for name in samplers:
            for run_to in budgets if STRATEGIES[name].sees_budget else budgets[-1:]:
                for seed in seeds:
                    outcome = run_study(
                        StudyOptions.for_strategy(name, family=family, problem=problem, domains=dict(domains), storage=None,
                                                  study_name=f"replay-{name}-{seed}", measure=measure, budget_trials=run_to,
                                                  timeout_s=None, seed=seed, ask_ahead=False),
                    )
                    trials = outcome.study.get_trials(deepcopy=False)
                    rescued = {t.number for t in trials if "rescue" in t.user_attrs}
                    found.setdefault((name, run_to), []).append([(row, row["trial"] in rescued) for row in outcome.rows])

    result = []
    for name in samplers:
        for budget in budgets:
            runs = found.get((name, budget)) or found[(name, budgets[-1])]
            ratios = [_best([row for row, _ in run[:budget]]) / optimum for run in runs]
            firsts = [run[:budget] for run in runs]
            measured = sum(len(first) for first in firsts)
            rescued = sum(flag for first in firsts for _, flag in first)
            result.append(
                {
                    "sampler": name,
                    "budget": budget,
                    "budget_fraction": budget / feasible,
                    "median_ratio": statistics.median(ratios),
                    "min_ratio": min(ratios),
                    "within_2pct": sum(r >= 1 - NEAR for r in ratios) / len(ratios),
                    "median_measured": statistics.median(len(first) for first in firsts),
                    "rescued_share": rescued / measured if measured else 0.0,
                    "seeds": len(runs),
                }
            )
    return pd.DataFrame(result, columns=list(COLUMNS))


def _check_arguments(samplers: Sequence[str], budgets: Sequence[int], seeds: Iterable[int]) -> tuple[list, list, list]:
    """The samplers, the budgets (sorted, distinct) and the seeds, refused
    before any table is read or study run: unknown names and missing packages
    fail here, not mid-way."""
    samplers = list(samplers)
    seeds = list(seeds)
    budgets = sorted({int(b) for b in budgets})
    if not samplers:
        raise ValueError(f"samplers must not be empty, got {samplers}")
    if not budgets or budgets[0] < 1:
        raise ValueError(f"budgets must be >= 1 and not empty, got {budgets}")
    if not seeds:
        raise ValueError(f"seeds must not be empty, got {seeds}")
    for name in samplers:
        checked_strategy(name)
    return samplers, budgets, seeds


def _share(share: float) -> str:
    """A budget's share of the space, with two digits where it is below 0.1 % (50 of
    116,928 configurations: 0.043 %, not 0.0 %)."""
    if share >= 0.001 or share <= 0:
        return f"{share:.1%}"
    return f"{100 * share:.{1 - math.floor(math.log10(100 * share))}f}%"


def format_table(df: pd.DataFrame) -> str:
    """``replay``'s frame as an aligned plain-text table."""
    formats = {
        "budget_fraction": _share,
        "median_ratio": "{:.3f}".format,
        "min_ratio": "{:.3f}".format,
        "within_2pct": "{:.0%}".format,
        "median_measured": "{:g}".format,
        "rescued_share": "{:.0%}".format,
    }
    header = list(df.columns)
    body = [[formats.get(c, str)(v) for c, v in zip(header, record)] for record in df.itertuples(index=False, name=None)]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    # Text left-aligned, numbers right-aligned, as people read them.
    left = {"sampler"}
    lines = [
        "  ".join(h.ljust(w) if h in left else h.rjust(w) for h, w in zip(header, widths)),
        "  ".join("-" * w for w in widths),
    ]
    for r in body:
        lines.append("  ".join(v.ljust(w) if h in left else v.rjust(w) for h, v, w in zip(header, r, widths)))
    return "\n".join(lines)


def _best(rows: list[dict]) -> float:
    values = [r["bandwidth_gbs"] for r in rows if r.get("status") == "ok" and r.get("bandwidth_gbs") is not None]
    return max(values, default=0.0)


class _quiet_optuna:
    """Silences Optuna's per-trial log lines and warnings during a replay
    (thousands of trials), restoring the previous verbosity afterwards."""

    def __enter__(self) -> None:
        self._verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(logging.WARNING)
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)

    def __exit__(self, *exc: object) -> None:
        self._warnings.__exit__(*exc)
        optuna.logging.set_verbosity(self._verbosity)


def _split(values: Sequence[str]) -> list[str]:
    # Accept both "--samplers tpe gp" and "--samplers tpe,gp".
    return [v for text in values for v in text.split(",") if v]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: replay samplers on a table and print the summary."""
    from tuner.host import OneLineParser, tolerant_console

    tolerant_console()
    parser = OneLineParser(
        prog="python -m tuner.search.tables.replay",
        description="Replay Optuna samplers against an exhaustive results table (no GPU).",
    )
    parser.add_argument("table", help="Parquet file (or folder of them) in the results schema, "
                        "or a Kernel Tuner cache or T4 file (.json, .json.gz)")  # fmt: skip
    parser.add_argument("--family", help="family name, e.g. reduce (a Parquet table's)")
    parser.add_argument("--family-path", action="append",
                        help="a Python file declaring families of one's own, as a config's family_paths (repeatable)")  # fmt: skip
    parser.add_argument("--dtype", help="element type, e.g. int32 (a Parquet table's)")
    parser.add_argument("--n", type=int, help="problem size (a Parquet table's)")
    parser.add_argument("--t1", help="a cache's or T4 file's T1 space description (default: T1.json, t1.json or T1.json.gz beside it)")
    parser.add_argument("--source", help="the rows' source, e.g. sweep:reduce_space (default: the problem's largest)")
    parser.add_argument("--samplers", nargs="+", default=list(DEFAULT_SAMPLERS),
                        help=f"sampler names (default: {' '.join(DEFAULT_SAMPLERS)}; gp needs PyTorch)")  # fmt: skip
    parser.add_argument("--budgets", nargs="+", type=int, default=list(DEFAULT_BUDGETS), help="budgets to report")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds per sampler (0..N-1)")
    args = parser.parse_args(argv)
    if not 1 <= args.seeds <= MAX_SEEDS:
        parser.error(f"--seeds must be from 1 to {MAX_SEEDS}, got {args.seeds}")
    try:  # the samplers' names (and packages) before any table is read
        _check_arguments(_split(args.samplers), args.budgets, range(args.seeds))
    except (ValueError, ImportError) as exc:
        parser.refuse(str(exc))
    from tuner.search.tables.community import table_stem

    if table_stem(Path(args.table).name):  # NAME.json or NAME.json.gz, in any case
        return _replay_community_table(parser, args)
    if args.t1 is not None:
        parser.error(f"--t1 describes a Kernel Tuner cache's or T4 file's space; {args.table} is a Parquet table, got {args.t1}")
    missing = [f"--{name}" for name in ("family", "dtype", "n") if getattr(args, name) is None]
    if missing:
        parser.error(f"a Parquet table needs {' '.join(missing)} (which problem of it to replay)")

    from tuner.data.results import read
    from tuner.errors import DamagedFile

    # Imported here: the registry pulls in every family, which replay's
    # library use (and its tests) do not need.
    families = importlib.import_module("tuner.families")
    try:
        families.load_family_paths(args.family_path or [])
    except ValueError as exc:
        parser.refuse(f"--family-path: {exc}")
    if args.family not in families.REGISTRY.names():
        parser.refuse(f"--family must be one of {families.REGISTRY.names()}, got {args.family!r}")
    family = families.REGISTRY[args.family]
    if not Path(args.table).exists():
        parser.refuse(f"{args.table}: must be a Parquet file or a folder of them, got no such file or folder")
    try:
        table = read(args.table)
    except DamagedFile as exc:  # the message names the file and what is wrong with it
        parser.refuse(str(exc))
    problem = Problem(args.family, args.dtype, args.n)
    try:
        rows = problem_rows(table, problem, args.source)
        df = replay(table, family, problem, _split(args.samplers), args.budgets, range(args.seeds), args.source)
    except (ValueError, ImportError) as exc:
        parser.refuse(str(exc))
    source = f" of {rows['source'].iloc[0]}" if "source" in rows and rows["source"].notna().any() else ""
    print(f"{problem.key}: {len(rows)} table rows{source}, {args.seeds} seeds")
    print(format_table(df))
    return 0


def _replay_community_table(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The command line's form for a Kernel Tuner cache or a T4 file."""
    from tuner.search.tables import community as tables

    given = [f"--{name}" for name in ("family", "dtype", "n", "source") if getattr(args, name) is not None]
    if given:
        parser.error(f"{' '.join(given)} name a Parquet table's problem; {args.table} is its own space, got them")
    try:
        table = tables.load_table(args.table, args.t1)
        unfit = tables.table_unfit(table)
        if unfit:
            raise ValueError(f"{args.table}: {unfit}")
        df = replay_space(tables.table_family(table), tables.table_problem(table), table.params, tables.table_measure(table),
                          table.optimum, table.size, _split(args.samplers), args.budgets, range(args.seeds))  # fmt: skip
    except (ValueError, ImportError) as exc:
        parser.refuse(str(exc))
    direction = "lower" if table.minimise else "higher"
    print(f"{table.name}: {table.size} configurations, {len(table.params)} parameters, {len(table.restrictions)} restrictions, "
          f"ranked by {table.objective} ({direction} is better), {args.seeds} seeds")  # fmt: skip
    print(format_table(df))
    return 0


if __name__ == "__main__":
    sys.exit(main())
