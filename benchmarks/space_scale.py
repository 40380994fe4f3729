"""What a study costs on large spaces: its setup and each ask, on synthetic
replay tables of 10^4 to 10^6 configurations, without a GPU.

    python benchmarks/space_scale.py [--sizes 4 5 6] [--trials 200] [--strategies ordinal_global interactions]

Each table has six ordered parameters of 10 values cut to the size asked
(10^4: four of them), and, with ``--restricted``, a restriction written as
an expression that leaves out the configurations whose first two values add
up to more than 12 (about a quarter of the space) as a T1 file would. Each
configuration's rate is a smooth function of its values plus a fixed jitter,
so the search has somewhere to go. A study runs through the real study loop
(``run_study``, in-memory storage) and is timed from its start:

* **setup**: until the first configuration is measured (the space listed
  and checked against its restrictions, every configuration's key);
* **ask**: between one measurement and the next (the sampler's proposal,
  its claim, Optuna's bookkeeping), median and 95th percentile;
* **RSS**: the process's peak resident memory after the run.

Prints a table; nothing is written.
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.search.study.run import StudyOptions, run_study  # noqa: E402
from tuner.search.tables.community import SpaceTable, restriction_check, table_family, table_measure, table_problem  # noqa: E402
from tuner.search.tables.replay import _quiet_optuna  # noqa: E402

RESTRICTION = "p0 + p1 <= 12"


def synthetic_table(exponent: int, restricted: bool) -> SpaceTable:
    """10^exponent configurations of ``exponent`` parameters of 10 values each
    (fewer where ``restricted`` leaves some out)."""
    params = {f"p{i}": list(range(10)) for i in range(exponent)}
    jitter = random.Random(0)
    check = restriction_check([RESTRICTION] if restricted else [])
    entries = {}
    for values in itertools.product(*params.values()):
        if restricted and check(dict(zip(params, values))):
            continue
        smooth = sum(((v - 3) % 7) * (i + 1) for i, v in enumerate(values))
        entries[values] = ("ok", 1.0 + smooth**0.5 + 0.05 * jitter.random())
    return SpaceTable(f"synthetic-1e{exponent}", params, [RESTRICTION] if restricted else [], entries)


def time_study(table: SpaceTable, strategy: str, trials: int) -> dict:
    stamps: list[float] = []
    looked_up = table_measure(table)

    def measure(cfg: dict) -> dict:
        stamps.append(time.perf_counter())
        return looked_up(cfg)

    started = time.perf_counter()
    with _quiet_optuna():
        outcome = run_study(StudyOptions.for_strategy(strategy, family=table_family(table), problem=table_problem(table),
                                                      domains=dict(table.params), storage=None, study_name=strategy,
                                                      measure=measure, budget_trials=trials, timeout_s=None,
                                                      seed=0))  # fmt: skip
    asks = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"space": table.size, "strategy": strategy, "trials": len(outcome.rows), "setup_s": stamps[0] - started,
            "ask_ms": 1e3 * statistics.median(asks), "ask_p95_ms": 1e3 * sorted(asks)[int(0.95 * (len(asks) - 1))],
            "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[4, 5, 6], help="powers of ten of the spaces (2 to 6)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--strategies", nargs="+", default=["ordinal_global"])
    parser.add_argument("--restricted", action="store_true", help=f"leave out what {RESTRICTION!r} excludes")
    args = parser.parse_args(argv)
    if any(not 2 <= s <= 6 for s in args.sizes) or args.trials < 2:
        parser.error(f"--sizes must be of 2 to 6 and --trials >= 2, got {args.sizes} and {args.trials}")
    header = f"{'space':>9}  {'strategy':<15} {'trials':>6}  {'setup_s':>7}  {'ask_ms':>6}  {'ask_p95_ms':>10}  {'rss_gb':>6}"
    print(header, "-" * len(header), sep="\n")
    for exponent in args.sizes:
        table = synthetic_table(exponent, args.restricted)
        for strategy in args.strategies:
            r = time_study(table, strategy, args.trials)
            print(f"{r['space']:>9}  {strategy:<15} {r['trials']:>6}  {r['setup_s']:>7.2f}  {r['ask_ms']:>6.1f}  "
                  f"{r['ask_p95_ms']:>10.1f}  {r['rss_gb']:>6.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
