import sys, os
sys.path.insert(0, "benchmarks"); sys.path.insert(0, "benchmarks/screen")
import screen, variants
from search_rivals import run_ours
from tuner.data.results import config_key
from concurrent.futures import ProcessPoolExecutor
name, variant, seeds, frac = sys.argv[1], sys.argv[2], range(*map(int, sys.argv[3].split(":"))), float(sys.argv[4])

def job(seed):
    c = screen.case(name)
    s = getattr(variants, variant)(seed)
    vals = run_ours(c, s, "ascending", seed, round(frac * c.size))
    fins = list(s._finished.values())
    first = next((i for i, v in enumerate(vals) if v >= 0.99 * c.optimum), None)
    if first is None:
        return seed, None, "-", len(s._centre or ())
    cfg = fins[first][1]
    src = "centre" if s._centre and config_key(cfg) in s._centre else ("phase" if first < 80 else "later")
    return seed, first + 1, src, len(s._centre or ())

with ProcessPoolExecutor(2) as ex:
    rows = list(ex.map(job, seeds))
from collections import Counter
print(Counter(r[2] for r in rows if r[1] and r[1] <= round(0.025 * 7200)), Counter(r[2] for r in rows))
print(rows)
