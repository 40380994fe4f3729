"""Screening of OrdinalSampler variants on the community's tables and our own,
50 seeds, in parallel (benchmarks/results/search-variants.txt has the figures).

Each variant is a subclass of OrdinalSampler written here, not an option of
the shipped sampler; a name joins a base and options with '+':

    ordinal                the shipped default
    probe                  one random feasible configuration measured first and
                           used by nothing else (not the start's distances, the
                           climbs or the model): the rest is ordinal's, one trial later
    probe_pow2late         probe; climbs after the first restart may also step a
                           numeric parameter to any power-of-two value of its domain
    pow2                   ordinal, every climb with those power-of-two steps
    +alt / +altp           restarts alternate between a far-apart point (ordinal's)
                           and a Parzen phase (ordinal_global's); altp: the Parzen phase first
    +og                    a Parzen phase after every restart (ordinal_global)
    +p=N +gp=N +k=N +n=N   patience, Parzen phase length, top_k, number of probes

    python benchmarks/search_variants.py '{"probe+alt": ["conv", "dd", "h2", "h1"]}' --seeds 50 --jobs 16 --out /tmp/v.json
    python benchmarks/search_variants.py --score /tmp/v.json      # needs autotuning-methodology

Groups: conv, dd (the hub's convolution and dedispersion tables, from --hub),
h2, h1 (our 2^24 hard tables), o11, or any table name of benchmarks/search.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from multiprocessing import Pool
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import numpy as np  # noqa: E402
import search as S  # noqa: E402
from search_rivals import run_ours  # noqa: E402

from tuner.data.results import config_key  # noqa: E402
from tuner.search.ordinal import GLOBAL_PHASE, PROGRESS, OrdinalSampler  # noqa: E402
from tuner.search.ordinal_history import RunningRead  # noqa: E402

HUB = REPO.parent / "shared" / "benchmark_hub"


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


class Probe(OrdinalSampler):
    def __init__(self, *args, probes: int = 1, pow2: str = "", alternate: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.probes, self.pow2, self.alternate = probes, pow2, alternate  # pow2: "", "late" or "always"

    def bind(self, dists, feasible, enumerated):
        super().bind(dists, feasible, enumerated)
        self._pow2_steps = {}
        if self.alternate:
            self._climbs = _alternating(self.patience, PROGRESS, self.global_phase, self.alternate == "altp")

    def sample_relative(self, study, trial, search_space):
        if search_space and self._dists is not None and trial.number < self.probes:
            rng = random.Random(self.seed * 7 + 1 + 1000 * trial.number)
            taken = set().union(*self._asked.values()) if self._asked else set()
            cfg = self._unseen(taken | self._taken, rng)
            if cfg is not None:
                self._asked.setdefault(trial.number, set()).add(config_key(cfg))
                return cfg
        return super().sample_relative(study, trial, search_space)

    def _seen(self, trial):
        seen = super()._seen(trial)
        return (seen[0], seen[1], None) if seen is not None and trial.number < self.probes else seen

    def _spread(self, visited, rng):
        probes = set().union(*(self._asked.get(n, set()) for n in range(self.probes)))
        return super()._spread(visited - probes, rng)

    def _neighbours(self, key, cfg):
        found = super()._neighbours(key, cfg)
        if not self.pow2 or (self.pow2 == "late" and self._climbs.state["start"] == 0):
            return found
        if key not in self._pow2_steps:
            more, have = list(found), {k for k, _ in found}
            for name, (ordered, values) in self._order.items():
                if ordered and not all(_is_pow2(v) for v in values):
                    for value in values:
                        candidate = {**cfg, name: value}
                        if (
                            _is_pow2(value)
                            and value != cfg[name]
                            and config_key(candidate) not in have
                            and self._feasible(candidate)
                        ):
                            more.append((config_key(candidate), candidate))
            self._pow2_steps[key] = more
        return self._pow2_steps[key]


def _alternating(patience: int, progress: float, phase: int, parzen_first: bool) -> RunningRead:
    """ordinal_history.climb_read, with the Parzen phase after every other restart."""

    def fold(state, key, cfg, value):
        if value > state["best"] * (1 + progress):
            state["best"], state["since"] = value, 0
        elif state["seen"] >= state["until"]:
            state["since"] += 1
        state["seen"] += 1
        if patience and state["since"] >= patience:
            state["restarts"] += 1
            parzen = (state["restarts"] % 2 == 1) == parzen_first
            state.update(start=state["seen"], best=0.0, since=0, until=state["seen"] + (phase if parzen else 0))

    return RunningRead(lambda: {"start": 0, "best": 0.0, "since": 0, "seen": 0, "until": 0, "restarts": 0}, fold, dict)


def make(name: str, seed: int) -> OrdinalSampler:
    base, *options = name.split("+")
    if base == "ordinal" and not options:
        return OrdinalSampler(seed=seed)
    kwargs: dict = {
        "probes": 0 if base in ("ordinal", "pow2") else 1,
        "pow2": {"probe_pow2late": "late", "pow2": "always"}.get(base, ""),
    }
    for option in options:
        if option in ("alt", "altp", "og"):
            kwargs.setdefault("global_phase", GLOBAL_PHASE)
            kwargs["alternate"] = "" if option == "og" else option
        else:
            key, value = option.split("=")
            kwargs[{"p": "patience", "gp": "global_phase", "k": "top_k", "n": "probes"}[key]] = int(value)
    return Probe(seed=seed, **kwargs)


_CASES: dict = {}


def _init(hub: list[str]) -> None:
    S.HUB.update(S.hub_files(hub))
    S.FIXED[:] = [50, 100, 200]


def _job(task):
    variant, table, seed = task
    if table not in _CASES:
        _CASES[table] = S.load_case(table)
    case = _CASES[table]
    return task, run_ours(case, make(variant, seed), "ascending", seed, S.budgets_of(case)[-1])


def _summary(runs: dict) -> dict:
    """Per variant and table: each seed's first evaluation within 1 % and the
    median over seeds of the best time so far (the methodology's input)."""
    out = {}
    for variant, tables in runs.items():
        for table, by_seed in tables.items():
            case = _CASES.get(table) or S.load_case(table)
            worst_time = 1000.0 / min(v for v in case.lookup.values() if v > 0)
            rows = [by_seed[s] for s in sorted(by_seed)]
            best = np.full((len(rows), max(len(r) for r in rows)), worst_time)
            for i, run in enumerate(rows):
                found = np.maximum.accumulate(np.array(run or [0.0], float))
                times = np.where(found > 0, 1000.0 / np.maximum(found, 1e-300), worst_time)
                best[i, : len(times)], best[i, len(times) :] = times, times[-1]
            firsts = [next((i + 1 for i, v in enumerate(r) if v >= 0.99 * case.optimum), None) for r in rows]
            out.setdefault(variant, {})[table] = {"firsts": firsts, "median_time": np.median(best, axis=0).tolist(),
                                                  "budgets": S.budgets_of(case)}  # fmt: skip
    return out


def score(paths: list[str]) -> None:
    """Per table and budget: the share of seeds within 1 % and (hub) the methodology score; per variant the aggregate."""
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    merged: dict = {}
    for path in paths:
        for variant, tables in json.loads(Path(path).read_text()).items():
            merged.setdefault(variant, {}).update(tables)
    for variant, tables in merged.items():
        per_budget: dict = {}
        for table, found in sorted(tables.items()):
            case = _CASES.get(table) or S.load_case(table)
            _CASES[table] = case
            labels = {case.budget(f): f"{f:.1%}" for f in S.FRACTIONS}
            cells = []
            for b in found["budgets"]:
                label, within = labels.get(b, f"{b}ev"), np.mean([f is not None and f <= b for f in found["firsts"]])
                cell = f"{label}:{within:.0%}"
                if table in S.HUB:
                    baseline = RandomSearchCalculatedBaseline(S._SearchspaceStats(case))
                    curve = baseline.get_standardised_curve(np.arange(1, b + 1), np.array(found["median_time"][:b]), "fevals")
                    per_budget.setdefault(label, []).append(float(np.mean(curve)))
                    cell += f",{per_budget[label][-1]:.3f}"
                cells.append(cell)
            print(f"{variant:16s} {table:26s} {'  '.join(cells)}")
        if per_budget:
            means = {label: np.mean(v) for label, v in per_budget.items()}
            print(f"AGG {variant} over {len(per_budget['50ev'])} hub tables: "
                  + " ".join(f"{k}:{v:.3f}" for k, v in means.items()) + f"  all {np.mean(list(means.values())):.3f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", help='JSON: {"variant": ["group or table", ...]}')
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--hub", nargs="*", default=[str(HUB / "convolution_milo"), str(HUB / "dedispersion_milo")])
    parser.add_argument("--out", default="search-variants.json")
    parser.add_argument("--score", nargs="*", help="summaries to score instead of running")
    args = parser.parse_args(argv)
    _init(args.hub)
    if args.score:
        score(args.score)
        return 0
    hub = list(S.HUB)
    groups = {"conv": [t for t in hub if "conv" in t], "dd": [t for t in hub if "dedisp" in t], "h2": ["reduce_hard_2e24_h200"],
              "h1": ["reduce_hard_2e24_h100"], "o11": ["reduce_space_offset11"]}  # fmt: skip
    tasks = [
        (v, t, s) for v, gs in json.loads(args.plan).items() for g in gs for t in groups.get(g, [g]) for s in range(args.seeds)
    ]
    started, runs = time.time(), {}
    with Pool(args.jobs, initializer=_init, initargs=(args.hub,)) as pool:
        for (variant, table, seed), run in pool.imap_unordered(_job, tasks):
            runs.setdefault(variant, {}).setdefault(table, {})[seed] = run
    Path(args.out).write_text(json.dumps(_summary(runs)))
    print(f"{len(tasks)} runs in {time.time() - started:.0f} s on {args.jobs} processes; summary in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
