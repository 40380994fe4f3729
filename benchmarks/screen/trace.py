import sys, os, json
sys.path.insert(0, "benchmarks"); sys.path.insert(0, "benchmarks/screen")
import screen, variants
from search_rivals import run_ours
import optuna
name, variant, seed, frac = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
show = sys.argv[5].split(",") if len(sys.argv) > 5 else None
c = screen.case(name)
budget = round(frac * c.size)
s = getattr(variants, variant)(seed)
log = []
orig = type(s).sample_relative
def wrapped(self, study, trial, space):
    cfg = orig(self, study, trial, space)
    st = self._climbs.state if hasattr(self._climbs, "state") else None
    log.append((trial.number, dict(st) if st else None))
    return cfg
type(s).sample_relative = wrapped
vals = run_ours(c, s, "ascending", seed, budget)
opt = c.optimum
best = 0
import itertools
keys = list(s._finished.values())
for i, v in enumerate(vals):
    mark = ""
    if v > best:
        best = v; mark = "*"
    if mark or (show and "all" in show):
        cfg = keys[i][1] if i < len(keys) else None
        st = log[i][1] if i < len(log) and log[i][1] else {}
        ck = "C" if cfg is not None and getattr(s, "_centre", None) and __import__("tuner.data.results", fromlist=["x"]).config_key(cfg) in s._centre else " "
        print(i + 1, ck, round(v / opt, 4), mark, {k: cfg[k] for k in cfg if len(c.domains[k]) > 1} if cfg else None, {k: st.get(k) for k in ("start", "until", "since", "stalled")})
print("optimum", opt, "size", c.size)
