"""One study worker against a measured table, and the study's rows once its
workers are done: the multi-worker study of a GPU run (shared storage, claims,
one budget) with the measurement replaced by a table look-up, so that it runs
on any host, e.g. as jobs of a cluster against a shared PostgreSQL study.

    python -m tuner.search.replay_study worker TABLE --family reduce --dtype int32 --n 268435456 \\
        --storage postgresql+psycopg2://tuner@db-host/tuning --study NAME --budget 40 --seed 1 --out worker-1.json
    python -m tuner.search.replay_study rows --storage URL --study NAME --budget 40 --out rows.parquet

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
from typing import Sequence

import optuna
import pandas as pd

from tuner.data import results
from tuner.errors import EXIT_DAMAGED_FILE, DamagedFile
from tuner.families.base import Problem
from tuner.search.replay import problem_rows, table_domains, table_measure
from tuner.search.strategies import DEFAULT_STRATEGY
from tuner.search.study import open_storage, run_study, study_rows


def worker(args: argparse.Namespace) -> dict:
    """Run one worker of the study until the study's budget is spent."""
    family = importlib.import_module("tuner.families").REGISTRY[args.family]
    table = results.read(args.table)
    if args.source:
        table = table[table["source"] == args.source]
    rows = problem_rows(table, Problem(args.family, args.dtype, args.n))
    lookup = table_measure(rows, family)
    measured: list[str] = []

    def measure(cfg: dict) -> dict:
        measured.append(results.config_key(cfg))
        return lookup(cfg)

    name = args.worker or f"replay{args.seed}@{socket.gethostname()}"
    outcome = run_study(family=family, problem=Problem(args.family, args.dtype, args.n), domains=table_domains(rows, family),
                        storage=args.storage, study_name=args.study, measure=measure, budget_trials=args.budget,
                        timeout_s=None, sampler=args.sampler, seed=args.seed, worker=name)  # fmt: skip
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
    from tuner.host import tolerant_console

    tolerant_console()
    parser = argparse.ArgumentParser(prog="python -m tuner.search.replay_study", description=__doc__,
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
        return _run(args)
    except DamagedFile as error:  # a table or the study's journal: which, why, and the command that recovers
        print(f"error: {error}", file=sys.stderr)
        return EXIT_DAMAGED_FILE


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
