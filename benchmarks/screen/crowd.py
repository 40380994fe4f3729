import sys
sys.path.insert(0, "benchmarks"); sys.path.insert(0, "benchmarks/screen")
import screen, variants
from search_rivals import run_ours
c = screen.case(sys.argv[1])
for seed in range(int(sys.argv[2])):
    s = variants.base(seed)
    vals = run_ours(c, s, "ascending", seed, round(0.025 * c.size))
    first = None; best=0
    for i in range(len(vals)):
        top = max(vals[:i+1]); n = sum(v >= 0.97*top for v in vals[:i+1])
        if n >= 10: first = i+1; break
    hit = next((i+1 for i,v in enumerate(vals) if v >= 0.99*c.optimum), None) if not c.minimise else None
    print(seed, "crowd at", first, "hit", hit)
