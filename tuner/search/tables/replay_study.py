"""One study worker against a measured table, and the study's rows once its
workers are done: the multi-worker study of a GPU run (shared storage, claims,
one budget) with the measurement replaced by a table look-up, so that it runs
on any host, e.g. as jobs of a cluster against a shared PostgreSQL study.

    python -m tuner.search.tables.replay_study worker TABLE --family reduce --dtype int32 --n 268435456 \\
        --storage postgresql+psycopg2://tuner@db-host/tuning --study NAME --budget 40 --seed 1 --out worker-1.json
    python -m tuner.search.tables.replay_study rows --storage URL --study NAME --budget 40 --out rows.parquet

``worker`` writes what it did (measured, lost, stop reason, the configuration
keys it measured); ``rows`` writes the study's rows and refuses (exit 1) a
study whose rows are not exactly the budget's worth of distinct configurations.
"""

from __future__ import annotations

import argparse
import importlib
import json
import socket
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

import optuna
import pandas as pd

from tuner.data import results
from tuner.errors import Refusal
from tuner.families.base import Problem
from tuner.search.samplers.registry import DEFAULT_STRATEGY, SAMPLERS, missing_modules
from tuner.search.study.run import StudyOptions, open_storage, run_study, study_rows
from tuner.search.study.storage_spec import storage_problem, stored_file_missing
from tuner.search.tables.replay import problem_rows, table_domains, table_measure


def worker(args: argparse.Namespace) -> dict:
    """Run one worker of the study until the study's budget is spent.

    Raises:
        ValueError: the table holds no rows of the problem (from ``--source``).
        DamagedFile: the table cannot be read.
    """
    family = importlib.import_module("tuner.families").REGISTRY[args.family]
    table = results.read(args.table)
    rows = problem_rows(table, Problem(args.family, args.dtype, args.n), args.source)
    lookup = table_measure(rows, family)
    measured: list[str] = []

    def measure(cfg: dict) -> dict:
        measured.append(results.config_key(cfg))
        return lookup(cfg)

    name = args.worker or f"replay{args.seed}@{socket.gethostname()}"
    outcome = run_study(StudyOptions.for_strategy(args.sampler, family=family, problem=Problem(args.family, args.dtype, args.n),
                                                  domains=table_domains(rows, family), storage=args.storage,
                                                  study_name=args.study, measure=measure, budget_trials=args.budget,
                                                  timeout_s=None, seed=args.seed, worker=name))  # fmt: skip
    return {"worker": name, "measured": outcome.measured, "lost": outcome.lost, "stop_reason": outcome.stop_reason,
            "total_measured": outcome.total_measured, "keys": measured}  # fmt: skip


def study_summary(storage: str, study: str, budget: int | None) -> tuple[pd.DataFrame, dict, str | None]:
    """The study's rows, their counts, and what is wrong with them (None if nothing)."""
    opened = open_storage(storage)
    loaded = optuna.load_study(study_name=study, storage=opened)
    frame = results.to_frame(study_rows(opened, study))
    keys = Counter(frame["config_key"])
    trials = loaded.get_trials(deepcopy=False)
    by_worker = Counter(
        t.user_attrs.get("worker") for t in trials if "status" in t.user_attrs
    )  # measured trials carry their status
    summary = {"rows": len(frame), "distinct": len(keys), "duplicated": sum(n - 1 for n in keys.values()), "budget": budget,
               "trials": len(trials), "rows_by_worker": dict(sorted(by_worker.items(), key=str))}  # fmt: skip
    problem = None
    if summary["duplicated"]:
        problem = f"{summary['duplicated']} configurations measured more than once"
    elif budget is not None and len(frame) != budget:
        problem = f"{len(frame)} rows for a budget of {budget}"
    return frame, summary, problem


def main(argv: Sequence[str] | None = None) -> int:
    from tuner.host import OneLineParser, tolerant_console

    tolerant_console()
    parser = OneLineParser(prog="python -m tuner.search.tables.replay_study", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="run one study worker against a table")
    w.add_argument("table", help="Parquet file (or folder) in the results schema, e.g. an exhaustive sweep")
    w.add_argument("--family", required=True)
    w.add_argument("--dtype", required=True)
    w.add_argument("--n", required=True, type=int)
    w.add_argument("--source", help="only the table's rows of this source, e.g. sweep:reduce_space")
    w.add_argument("--sampler", default=DEFAULT_STRATEGY)
    w.add_argument("--seed", type=int, default=0, help="sampler seed; give each worker its own")
    w.add_argument("--worker", help="this worker's name in the study (default: replay<seed>@<host>)")
    for p in (w, sub.add_parser("rows", help="write the study's rows; exit 1 unless they are the budget, each once")):
        p.add_argument(
            "--storage", required=True, help="the study storage shared by the workers (a database URL or journal path)"
        )
        p.add_argument("--study", required=True, help="the study's name in the storage")
        p.add_argument("--budget", type=int, required=True, help="distinct configurations the study measures")
        p.add_argument("--out", help="where to write (worker: a JSON summary; rows: Parquet)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        refused = _refused(args)  # names and records first: nothing is read or written where one is wrong
        if refused:
            parser.refuse(refused)
        return _run(args)
    except ValueError as error:  # the table holds no rows of the problem: which rule, which value
        parser.refuse(str(error))
    except Refusal as error:  # a table or the study's journal damaged: which, why, and the command that recovers
        print(error.line(), file=sys.stderr)
        return error.exit_status


def _refused(args: argparse.Namespace) -> str | None:
    """Why the command cannot run as given, in one line (None where it can):
    an unknown family or sampler, a table that is not there, a storage that
    cannot serve, a study the storage does not hold."""
    unfit = storage_problem(args.storage)
    if unfit:
        return f"--storage: {unfit}"
    if args.command == "worker":
        names = importlib.import_module("tuner.families").REGISTRY.names()
        if args.family not in names:
            return f"--family: must be one of {names}, got {args.family!r}"
        if args.sampler not in SAMPLERS:
            return f"--sampler: must be one of {list(SAMPLERS)}, got {args.sampler!r}"
        missing = missing_modules(args.sampler)
        if missing:
            return f"--sampler: {args.sampler!r} needs the packages {missing}, which are not installed"
        if not Path(args.table).exists():
            return f"{args.table}: must be a Parquet file or a folder of them, got no such file or folder"
        return None
    missing_file = stored_file_missing(args.storage)
    if missing_file:
        return f"--storage: {missing_file}"
    held = optuna.get_all_study_names(storage=open_storage(args.storage))
    if args.study not in held:
        return f"--study: must be a study of {args.storage} {held}, got {args.study!r}"
    return None


def _run(args) -> int:
    if args.command == "worker":
        report = worker(args)
        if args.out:
            results.write_json_atomic(report, args.out)
        print(json.dumps({k: v for k, v in report.items() if k != "keys"}))
        return 0
    frame, summary, problem = study_summary(args.storage, args.study, args.budget)
    print(json.dumps(summary))
    if problem:
        print(f"error: study {args.study}: {problem}", file=sys.stderr)
        return 1
    if args.out:
        results.write_atomic(frame, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
