"""Replays search variants (``variants.make``) on the hub's convolution tables
(copied into ``hubdata/``) and the project's own tables, as ``benchmarks/search.py``
replays a strategy, and prints per budget the seeds within 1 % and the anytime score."""

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks/screen"))
import search  # noqa: E402
from search_rivals import run_ours, run_random  # noqa: E402
from variants import make  # noqa: E402

HUB = {f"{kernel}/{gpu}": f"hubdata/{folder}/{gpu}.json.gz" for kernel, folder in (("conv", "convolution_milo"), ("dd", "dedispersion_milo"))
       for gpu in ("A100", "A4000", "A6000")}  # fmt: skip
OWN = {"o11": "reduce_space_offset11", "h2": "reduce_hard_2e24_h200", "h1": "reduce_hard_2e24_h100"}
CASES = {}


def case(name):
    if name not in CASES:
        if name in HUB:
            from tuner.search.tables import load_table

            CASES[name] = search.Case.from_space_table(load_table(HUB[name], name=name))
        else:
            CASES[name] = search.load_case(OWN.get(name, name))
    return CASES[name]


def job(args):
    table, variant, seed, budget = args
    if variant == "random":
        return args, run_random(case(table), seed, budget)
    return args, run_ours(case(table), make(variant, seed), "ascending", seed, budget)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", nargs="+")
    parser.add_argument("--variants", nargs="+")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--seed0", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--frac", type=float, default=0.10)
    args = parser.parse_args()
    tasks = [(table, variant, seed, max(200, round(args.frac * case(table).size)))
             for table in args.tables for variant in args.variants for seed in range(args.seed0, args.seed0 + args.seeds)]  # fmt: skip
    start = time.time()
    with mp.Pool(args.jobs) as pool:
        runs = dict(pool.imap_unordered(job, tasks, chunksize=1))
    grouped = {}
    for (table, variant, seed, _), run in runs.items():
        grouped.setdefault(table, {}).setdefault(variant, {})[seed] = run
    if args.out:
        with open(args.out, "w") as out:
            json.dump({t: {v: {str(s): r for s, r in d.items()} for v, d in vv.items()} for t, vv in grouped.items()}, out)
    for table, by_variant in grouped.items():
        c = case(table)
        budgets = [c.budget(f) for f in (0.025, 0.05, 0.10)] + [50, 100, 200]
        expected = search.random_expected_best(c, max(budgets))
        for variant, by_seed in by_variant.items():
            seeded = [by_seed[s] for s in sorted(by_seed)]
            cells = []
            for budget in budgets:
                summary = search.summarise(c, seeded, budget, expected)
                cells.append(f"{budget}:{summary['hits_1pct']:3d}/{len(seeded)},{summary['score']:.3f}")
            print(f"{variant:22s} {table:10s} " + "  ".join(cells), flush=True)
    print(f"wall {time.time() - start:.0f}s", file=sys.stderr)
