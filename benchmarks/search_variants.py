"""Screening of ``OrdinalSampler`` variants for issue 27 (a search that leads
on the benchmark hub's tables without losing the project's own): each variant
is registered under a name for this process only, then replayed as
``benchmarks/search.py`` replays a strategy (same runs, same methodology
score), on the hub's convolution or dedispersion tables (10 seeds) or the
project's own (50 seeds), ascending values.

    PYTHONPATH=. python benchmarks/search_variants.py og_t_sp20 10 50 conv dd h2

(``conv``/``dd``: the hub's convolution/dedispersion tables; ``h2``: the
H200's 2^24 table; ``h200``: both 2^24 tables; ``own``: every own table).
Figures: ``benchmarks/results/search-variants.txt``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import search as S  # noqa: E402
from search_rivals import run_ours  # noqa: E402

from tuner.search import samplers as SM  # noqa: E402
from tuner.search.ordinal import GLOBAL_PHASE, OrdinalSampler  # noqa: E402

HUB = Path(__file__).resolve().parents[2] / "shared" / "benchmark_hub"
VARIANTS = {
    "og": {},  # ordinal_global
    "og_sp10": {"start_phase": 10},  # a Parzen phase right after the start
    "og_sp20": {"start_phase": 20},
    "og_pf": {"portfolio": True},  # Thompson sampling between the climb's step and a Parzen draw
    "o_pf": {"portfolio": True, "global_phase": 0},
    "og_t": {"typical_first": True},  # a random (typical) configuration before the centre and corners
    "og_t_sp10": {"typical_first": True, "start_phase": 10},
    "og_t_sp20": {"typical_first": True, "start_phase": 20},
    "og_t_sp30": {"typical_first": True, "start_phase": 30},
    "og_t_pf": {"typical_first": True, "portfolio": True},
    "og_t_sp20_as": {"typical_first": True, "start_phase": 20, "phase_aside": True},  # the start phase beside the climb
    "og_tr3": {"track": 3},  # every third proposal a Parzen draw beside the climb
    "og_u1": {"optimism": 1.0},  # steps ranked by an upper confidence bound of the model
    "og_u01": {"optimism": 0.1},
}
for _name, _kw in VARIANTS.items():
    _kw = {"global_phase": GLOBAL_PHASE, **_kw}
    SM.STRATEGIES[_name] = SM.Strategy(lambda seed, prior, kw=_kw: OrdinalSampler(seed=seed, prior=prior, **kw), _name, uses_prior=True)
S.OURS = S.OURS + tuple(VARIANTS)


def main(argv: list[str]) -> None:
    var, seeds_hub, seeds_own, parts = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    S.FIXED[:] = [50, 100, 200]
    S.FRACTIONS[:] = [0.025, 0.05, 0.10]
    hub = S.hub_files([str(HUB / "convolution_milo"), str(HUB / "dedispersion_milo")])
    S.HUB.update(hub)
    tables = []
    if "conv" in parts:
        tables += [t for t in hub if "conv" in t]
    if "dd" in parts:
        tables += [t for t in hub if "dedisp" in t]
    if "own" in parts:
        tables += ["reduce_space_offset11", "reduce_hard_2e24_h200", "reduce_hard_2e24_h100", "reduce_hard_h200", "reduce_hard_h100"]
    if "h200" in parts:
        tables += ["reduce_hard_2e24_h200", "reduce_hard_2e24_h100"]
    if "h2" in parts:
        tables += ["reduce_hard_2e24_h200"]
    scores: dict[str, list[float]] = {}
    for table in tables:
        started = time.time()
        case = S.load_case(table)
        own = table not in hub
        budgets = [case.budget(0.025), case.budget(0.05)] if own else S.budgets_of(case)
        runs = [run_ours(case, var, "ascending", seed, budgets[-1]) for seed in range(seeds_own if own else seeds_hub)]
        line = []
        for b in budgets:
            within = np.mean([max(r[:b]) >= 0.99 * case.optimum for r in runs])
            score = None if own else S.methodology_score(case, runs, b)
            tags = [f"{f:.1%}" for f in S.FRACTIONS if case.budget(f) == b] + ([f"{b}ev"] if b in S.FIXED else [])
            line.append(f"{'/'.join(tags)}:{within:.0%}" + (f",{score:.3f}" if score is not None else ""))
            for tag in tags if score is not None else []:
                scores.setdefault(tag, []).append(score)
        print(f"{table:28s} {time.time() - started:5.0f}s  " + "  ".join(line), flush=True)
    if scores:
        means = {tag: np.mean(scores[tag]) for tag in ["2.5%", "5.0%", "10.0%", "50ev", "100ev", "200ev"] if tag in scores}
        print("AGG", var, " ".join(f"{tag}:{m:.3f}" for tag, m in means.items()), "all", f"{np.mean(list(means.values())):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
