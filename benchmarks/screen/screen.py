"""Screen OrdinalSampler variants (variants.py beside this file) on exhaustive tables: per seed, the first
evaluation within 1 % of the optimum; per table and variant, the seeds within 1 % by 2.5 / 5 / 10 % of the space.

    FRAC=0.05 JOBS=16 python benchmarks/screen/screen.py convA100,convA4000 base,ucb 0:200

FRAC: the budget as a share of the space (0.1); JOBS: worker processes (2); OUTFILE: where the per-seed JSON goes."""

import importlib
import json
import os
import sys
import time

sys.path.insert(0, "benchmarks")
from concurrent.futures import ProcessPoolExecutor

from search_rivals import Case, run_ours

from tuner.data.results import read
from tuner.families import REGISTRY
from tuner.families.base import Problem
from tuner.search.tables import load_table

OWN = {
    "reduce_hard_2e24_h200": "results/reference/nvidia-h200/sweeps/reduce_hard_2e24.parquet",
    "reduce_hard_2e24_h100": "results/reference/nvidia-h100-80gb-hbm3/sweeps/reduce_hard_2e24.parquet",
}

HUB = os.environ.get("HUB_DIR", "../shared/benchmark_hub")  # the benchmark hub's files (a copy on a lent host)
HUBS = {
    "convA100": f"{HUB}/convolution_milo/A100.json.gz",
    "convA4000": f"{HUB}/convolution_milo/A4000.json.gz",
    "convA6000": f"{HUB}/convolution_milo/A6000.json.gz",
    "ddA100": f"{HUB}/dedispersion_milo/A100.json.gz",
    "ddA4000": f"{HUB}/dedispersion_milo/A4000.json.gz",
    "ddA6000": f"{HUB}/dedispersion_milo/A6000.json.gz",
    # benchmarks/results/unseen-rtx2080ti/README.md says where this cache comes from; its T1.json beside it
    "rtx": os.environ.get("RTX_CACHE", "hubdata/rtx2080ti.json"),
}
CASES = {}


def case(name):
    if name not in CASES:
        if name in HUBS:
            CASES[name] = Case.from_space_table(load_table(HUBS[name], name=name))
        else:
            CASES[name] = Case.from_table(name, read(OWN[name]), REGISTRY["reduce"], Problem("reduce", "int32", 2**24))
    return CASES[name]


def make(variant, seed):
    mod = importlib.import_module("variants")
    return getattr(mod, variant)(seed)


def job(t):
    name, variant, seed = t
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    c = case(name)
    budget = max(1, round(float(os.environ.get("FRAC", "0.1")) * c.size))
    vals = run_ours(c, make(variant, seed), "ascending", seed, budget)
    opt = c.optimum
    first = next((i + 1 for i, v in enumerate(vals) if v >= 0.99 * opt), None)
    return name, variant, seed, first, c.size


if __name__ == "__main__":
    names = sys.argv[1].split(",")
    variants = sys.argv[2].split(",")
    seeds = range(*map(int, sys.argv[3].split(":")))
    t0 = time.time()
    tasks = [(n, v, s) for n in names for v in variants for s in seeds]
    res = {}
    with ProcessPoolExecutor(int(os.environ.get("JOBS", "2"))) as ex:
        for name, variant, seed, first, size in ex.map(job, tasks, chunksize=1):
            res.setdefault((name, variant), []).append((seed, first, size))
    out = []
    for (name, variant), rows in res.items():
        size = rows[0][2]
        cnt = [sum(1 for _, f, _ in rows if f is not None and f <= round(fr * size)) for fr in (0.025, 0.05, 0.1)]
        miss5 = [s for s, f, _ in rows if f is None or f > round(0.05 * size)]
        print(f"{name:10s} {variant:20s} {cnt[0]:3d} {cnt[1]:3d} {cnt[2]:3d} / {len(rows)}  miss5={miss5[:30]}")
        out.append(dict(name=name, variant=variant, rows=rows))
    json.dump(out, open(os.environ.get("OUTFILE", f"/tmp/screen-{int(t0)}.json"), "w"))
    print(f"{time.time() - t0:.0f} s")
