import sys, os, json, time, math, statistics
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks")); sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks/screen"))
import multiprocessing as mp
import search
from search_rivals import run_ours, run_random
from variants import make

HUBF = {"conv/A100": "../shared/benchmark_hub/convolution_milo/A100.json.gz", "conv/A4000": "../shared/benchmark_hub/convolution_milo/A4000.json.gz",
        "conv/A6000": "../shared/benchmark_hub/convolution_milo/A6000.json.gz", "dd/A100": "../shared/benchmark_hub/dedispersion_milo/A100.json.gz",
        "dd/A4000": "../shared/benchmark_hub/dedispersion_milo/A4000.json.gz", "dd/A6000": "../shared/benchmark_hub/dedispersion_milo/A6000.json.gz"}
ALIAS = {"o11": "reduce_space_offset11", "h2": "reduce_hard_2e24_h200", "h1": "reduce_hard_2e24_h100"}
CASES = {}
def case(t):
    if t not in CASES:
        if t in HUBF:
            from tuner.search.tables import load_table
            CASES[t] = search.Case.from_space_table(load_table(HUBF[t], name=t))
        else:
            CASES[t] = search.load_case(ALIAS.get(t, t))
    return CASES[t]

def job(args):
    t, v, seed, budget = args
    c = case(t)
    if v == "random":
        return args, run_random(c, seed, budget)
    return args, run_ours(c, make(v, seed), "ascending", seed, budget)

if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", nargs="+"); ap.add_argument("--variants", nargs="+")
    ap.add_argument("--seeds", type=int, default=50); ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2); ap.add_argument("--out")
    ap.add_argument("--frac", type=float, default=0.10)
    a = ap.parse_args()
    pass
    tasks = []
    for t in a.tables:
        b = max(200, round(a.frac * case(t).size))
        for v in a.variants:
            for s in range(a.seed0, a.seed0 + a.seeds):
                tasks.append((t, v, s, b))
    t0 = time.time()
    res = {}
    with mp.Pool(a.jobs) as pool:
        for args, run in pool.imap_unordered(job, tasks, chunksize=1):
            res[args] = run
    out = {}
    for (t, v, s, b), run in res.items():
        out.setdefault(t, {}).setdefault(v, {})[s] = run
    if a.out:
        json.dump({t: {v: {str(s): r for s, r in d.items()} for v, d in vv.items()} for t, vv in out.items()}, open(a.out, "w"))
    for t, vv in out.items():
        c = case(t); opt = c.optimum
        fr = [0.025, 0.05, 0.10]
        budgets = [c.budget(f) for f in fr] + [50, 100, 200]
        rc = search.random_expected_best(c, max(budgets))
        for v, runs in vv.items():
            runs = [runs[s] for s in sorted(runs)]
            cells = []
            for bb in budgets:
                sm = search.summarise(c, runs, bb, rc)
                cells.append(f"{bb}:{sm['hits_1pct']:3d}/{len(runs)},{sm['score']:.3f}")
            print(f"{v:22s} {t:10s} " + "  ".join(cells), flush=True)
    print(f"wall {time.time()-t0:.0f}s", file=sys.stderr)
