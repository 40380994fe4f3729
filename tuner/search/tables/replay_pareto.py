"""``python -m tuner.search.tables.replay_pareto``: the time-energy study
(``tuner.search.study.pareto``) replayed on a table of rows with energy."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tuner.data.front import ENERGY, TIME, knee
from tuner.data.results import read
from tuner.errors import DamagedFile
from tuner.families import REGISTRY, Problem
from tuner.host import OneLineParser
from tuner.search.samplers.registry import DEFAULT_PARETO_STRATEGY, PARETO_SAMPLERS
from tuner.search.study.pareto import run_pareto_study
from tuner.search.study.storage_spec import storage_problem
from tuner.search.tables.replay import problem_rows, table_domains, table_measure


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tuner.search.tables.replay_pareto TABLE --family F --dtype D --n N``: the
    time-energy study replayed on a table of rows with energy (a sweep with
    ``energy: true``), stored in ``--storage`` for ``optuna-dashboard``; prints
    its front and knee."""
    parser = OneLineParser(prog="python -m tuner.search.tables.replay_pareto", description=main.__doc__)
    parser.add_argument("table", help="a Parquet file (or folder) of rows with energy_j")
    parser.add_argument("--family", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--source", help="the rows' source (default: the problem's largest)")
    parser.add_argument("--storage", default="pareto.log", help="Optuna storage: a journal file or URL (default: pareto.log)")
    parser.add_argument("--budget", type=int, help="trials (default: the table's feasible configurations, all of them enqueued)")
    parser.add_argument("--sampler", default=DEFAULT_PARETO_STRATEGY, choices=PARETO_SAMPLERS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-bound", type=float, help="trials slower than this many times the table's fastest are infeasible")
    args = parser.parse_args(argv)
    if args.family not in REGISTRY.names():
        parser.refuse(f"--family must be one of {REGISTRY.names()}, got {args.family!r}")
    unfit = storage_problem(args.storage)
    if unfit:
        parser.refuse(f"--storage: {unfit}")
    family, problem = REGISTRY[args.family], Problem(args.family, args.dtype, args.n)
    if not Path(args.table).exists():
        parser.refuse(f"{args.table}: must be a Parquet file or a folder of them, got no such file or folder")
    try:
        rows = problem_rows(read(args.table), problem, args.source)
        if ENERGY not in rows or rows[ENERGY].isna().all():
            raise ValueError(f"table must hold rows with energy_j for {problem.key} (a sweep with energy: true), got none")
        domains = table_domains(rows, family)
        space = family.space(problem, domains)
    except (ValueError, DamagedFile) as error:  # the table's rows: which rule, which value
        parser.refuse(str(error))
    ok = rows[rows["status"] == "ok"]
    outcome = run_pareto_study(family=family, problem=problem, domains=domains, measure=table_measure(rows, family),
                               storage=args.storage, study_name=f"pareto/{problem.key}", budget_trials=args.budget or len(space),
                               sampler=args.sampler, seed=args.seed, time_bound=args.time_bound,
                               fastest_ms=float(ok[TIME].min()) if len(ok) else None, enqueue=() if args.budget else space)  # fmt: skip
    found = knee(outcome.rows) if len(outcome.rows) else None
    print(f"{problem.key}: {len(outcome.rows)} configurations with energy of {len(space)}; "
          f"{found.sentence() if found else 'none with energy'}; study pareto/{problem.key} in {args.storage}")  # fmt: skip
    for _, row in outcome.front.iterrows():
        print(f"  {row[TIME]:.4f} ms  {row[ENERGY] * 1e3:.3f} mJ  {row['config_key']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
