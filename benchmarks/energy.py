"""Energy beside time on this GPU, at the GPU's own clocks and power
limits (nothing is set). Prints, and with --out writes as JSON:

(a) repeatability: one configuration's joules per launch measured --repeats
    times (default 10): mean, standard deviation, spread, each measurement's
    stated standard error, the counter's update period, and the cost in
    seconds per configuration;
(b) known different work: the same configuration on n and 2n elements
    (vector_add and copy): the energy ratio (about 2 expected) beside the
    time ratio;
(c) the trade-off: per family, a two-objective study (time, energy) over a
    small space (tuner.search.study.pareto; NSGA-II, --budget trials, or the whole
    space with --exhaustive), its Pareto front and the ratio of energy saved
    to time lost at its knee. The studies go to --storage (a journal file), so

        optuna-dashboard <storage>

    shows each front with both objectives.

    python benchmarks/energy.py --out energy.json
    python benchmarks/energy.py --parts a b --repeats 10
    python benchmarks/energy.py --parts c --families vector_add matmul --exhaustive
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

# Small spaces of what changes instructions and power at nearly equal time
# (vector width, unroll, grid size, cache hints), per family: (dtype, n, domains).
SPACES = {
    "vector_add": ("float32", 1 << 28, {"vector_width": [1, 2, 4], "unroll": [1, 2, 4], "block_size": [256, 1024],
                                        "grid_blocks_per_sm": [0, 8]}),
    "copy": ("float32", 1 << 28, {"variant": ["copy"], "vector_width": [1, 2, 4], "unroll": [1, 4], "block_size": [256, 1024],
                                  "grid_blocks_per_sm": [0, 8], "cache_hint": ["none", "stream"]}),
    "reduce": ("int32", 1 << 28, {"variant": ["shuffle", "unrolled_warp"], "vector_width": [1, 4], "unroll": [1, 8],
                                  "block_size": [256, 1024], "grid_blocks_per_sm": [0, 4], "finish": ["atomic"]}),
    "matmul": ("float32", 2048, {"variant": ["naive", "shared_a", "shared_ab"], "tile": [8, 16, 32], "pitched": [0, 1]}),
}  # fmt: skip
REPEAT_CASE = ("vector_add", "float32", 1 << 28, {"vector_width": 4})
WORK_CASES = [("vector_add", "float32", 1 << 27, {"vector_width": 4}), ("copy", "float32", 1 << 27, {"vector_width": 4})]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--parts", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"], help="which parts to run (default: all)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="(a) measurements of one configuration (default: 10)")
    parser.add_argument("--repeat-n", type=int, default=REPEAT_CASE[2],
                        help="(a) elements of the repeated vector add (default: %(default)s; a short kernel's energy "
                             "includes the host's launch gaps)")  # fmt: skip
    from tuner.measure.energy import EnergyOptions  # numpy only: the knobs' defaults

    parser.add_argument("--batch-s", type=float, default=EnergyOptions.batch_s,
                        help="seconds a batch of launches lasts between two counter reads (default: %(default)s)")  # fmt: skip
    parser.add_argument("--windows", type=int, default=3, help="windows per energy measurement (default: 3)")
    parser.add_argument("--updates", type=int, default=2, help="counter updates per window (default: 2, about 200 ms on an H100)")
    parser.add_argument("--families", nargs="+", default=list(SPACES), choices=list(SPACES), help="(c) families (default: all)")
    parser.add_argument("--budget", type=int, default=24, help="(c) trials per study (default: 24)")
    parser.add_argument("--exhaustive", action="store_true", help="(c) measure each small space whole (its true front)")
    from tuner.search.samplers.registry import DEFAULT_PARETO_STRATEGY, PARETO_SAMPLERS  # no Optuna: the registry only

    parser.add_argument("--sampler", default=DEFAULT_PARETO_STRATEGY, choices=PARETO_SAMPLERS,
                        help=f"(c) sampler (default: {DEFAULT_PARETO_STRATEGY})")  # fmt: skip
    parser.add_argument(
        "--storage", default="results/energy-benchmark/optuna.log", help="(c) Optuna storage (default: %(default)s)"
    )
    parser.add_argument("--cache", default="results/.cubin-cache", help="cubin cache folder (default: %(default)s)")
    parser.add_argument("--device-index", type=int, default=0, help="CUDA device (default: 0)")
    parser.add_argument("--out", help="also write the numbers as JSON here")
    args = parser.parse_args(argv)
    if args.repeats < 2:
        parser.error(f"--repeats must be >= 2 (a spread needs two), got {args.repeats}")
    if args.batch_s <= 0:
        parser.error(f"--batch-s must be > 0, got {args.batch_s}")
    if args.repeat_n < 1:
        parser.error(f"--repeat-n must be >= 1, got {args.repeat_n}")
    if args.budget < 1:
        parser.error(f"--budget must be >= 1, got {args.budget}")
    return args


def config(family, overrides) -> dict:
    return {p.name: p.default for p in family.params} | overrides


def repeatability(bench, args) -> dict:
    from tuner.families import REGISTRY, Problem
    from tuner.measure.energy import counter_reads

    name, dtype, _, overrides = REPEAT_CASE
    n = args.repeat_n
    family = REGISTRY[name]
    session = bench.problem(family, Problem(name, dtype, n))
    cfg = config(family, overrides)
    row = session.measure(cfg, "benchmark:energy", energy=False)  # verified and timed once
    assert row["status"] == "ok", row.get("error")
    launch = session.launch(cfg)
    results, clocks_seen = [], []
    for _ in range(args.repeats):
        results.append(bench.joules(launch.run, restore=launch.restore))
        clocks_seen.append(bench.clocks.sm_clock_mhz())
    joules = np.array([r.joules for r in results])
    reads = counter_reads(bench.clocks.energy_mj, 20)  # what a batch must outlast (tuner.measure.energy.READ_MARGIN)
    stated = np.array([r.err for r in results])
    cost = np.array([r.wall_s for r in results])
    out = {
        "case": f"{name} {dtype} n={n} {overrides}",
        "time_ms_median": row["time_ms_median"],
        "joules": joules.tolist(),
        "stated_err_j": stated.tolist(),
        "sm_clock_mhz": clocks_seen,
        "mean_j": float(joules.mean()),
        "std_j": float(joules.std(ddof=1)),
        "rel_spread": float(joules.std(ddof=1) / joules.mean()),
        "range_rel": float((joules.max() - joules.min()) / joules.mean()),
        "median_stated_rel_err": float(np.median(stated / joules)),
        "update_ms": float(np.median([r.update_s for r in results]) * 1e3),
        "power_w": float(np.mean([r.power_w for r in results])),
        "launch_ms_back_to_back": float(np.mean([r.launch_ms for r in results])),
        "batch": results[0].batch,
        "counter_read_ms": float(np.median(reads) * 1e3),
        "cost_s_mean": float(cost.mean()),
        "cost_s_max": float(cost.max()),
        "j_per_byte": float(joules.mean() / family.bytes_moved(cfg, Problem(name, dtype, n))),
    }
    print(f"\n(a) repeatability, {out['case']}, {args.repeats} measurements of {args.windows} windows x {args.updates} updates:")
    print(f"    {out['mean_j'] * 1e3:.2f} mJ per launch, sd {out['std_j'] * 1e3:.3f} mJ ({out['rel_spread']:.2%}), "
          f"range {out['range_rel']:.2%}; stated standard error (median) {out['median_stated_rel_err']:.2%}")  # fmt: skip
    print(f"    {out['power_w']:.0f} W, {out['j_per_byte'] * 1e12:.1f} pJ per byte; counter period {out['update_ms']:.1f} ms; "
          f"back to back {out['launch_ms_back_to_back']:.3f} ms per launch (timed median {row['time_ms_median']:.3f} ms), "
          f"{out['batch']} launches a batch; a counter read takes {out['counter_read_ms']:.3f} ms")  # fmt: skip
    print(f"    cost: {out['cost_s_mean']:.2f} s per configuration (max {out['cost_s_max']:.2f} s)")
    print("    each (mJ ± stated, SM MHz after): " + ", ".join(f"{j * 1e3:.1f} ± {e * 1e3:.1f} @{c}"
                                                           for j, e, c in zip(joules, stated, clocks_seen)))  # fmt: skip
    return out


def known_work(bench, args) -> list[dict]:
    from tuner.families import REGISTRY, Problem

    lines = []
    print("\n(b) known different work: the same configuration on n and 2n elements")
    for name, dtype, n, overrides in WORK_CASES:
        family = REGISTRY[name]
        cfg = config(family, overrides)
        rows = []
        for size in (n, 2 * n):
            session = bench.problem(family, Problem(name, dtype, size))
            rows.append(session.measure(cfg, "benchmark:energy", energy=True))
            del session
        assert all(r["status"] == "ok" and r.get("energy_j") for r in rows), [r.get("error") for r in rows]
        one, two = rows
        ratio = two["energy_j"] / one["energy_j"]
        err = ratio * float(np.hypot(one["energy_j_err"] / one["energy_j"], two["energy_j_err"] / two["energy_j"]))
        line = {"case": f"{name} {dtype} n={n} vs {2 * n}", "energy_ratio": ratio, "energy_ratio_err": err,
                "time_ratio": two["time_ms_median"] / one["time_ms_median"], "energy_j": [one["energy_j"], two["energy_j"]],
                "energy_j_err": [one["energy_j_err"], two["energy_j_err"]], "power_w": [one["power_w_energy"], two["power_w_energy"]],
                "j_per_byte": [one["energy_j_per_byte"], two["energy_j_per_byte"]]}  # fmt: skip
        lines.append(line)
        print(f"    {line['case']}: energy x{ratio:.3f} ± {err:.3f} (time x{line['time_ratio']:.3f}); "
              f"{one['energy_j'] * 1e3:.2f} ± {one['energy_j_err'] * 1e3:.2f} and {two['energy_j'] * 1e3:.2f} ± "
              f"{two['energy_j_err'] * 1e3:.2f} mJ; {one['energy_j_per_byte'] * 1e12:.1f} and "
              f"{two['energy_j_per_byte'] * 1e12:.1f} pJ per byte")  # fmt: skip
    return lines


def fronts(bench, args) -> list[dict]:
    from tuner.families import REGISTRY, Problem
    from tuner.search.study.pareto import knee, run_pareto_study

    lines = []
    mode = "the whole space" if args.exhaustive else f"{args.sampler}, {args.budget} trials"
    print(f"\n(c) the trade-off per family ({mode}); studies in {args.storage}")
    for name in args.families:
        dtype, n, searched = SPACES[name]
        family = REGISTRY[name]
        problem = Problem(name, dtype, n)
        domains = {p.name: list(searched.get(p.name, [p.default])) for p in family.params}
        space = family.space(problem, domains)
        session = bench.problem(family, problem)
        started = time.perf_counter()
        outcome = run_pareto_study(family=family, problem=problem, domains=domains, storage=args.storage,
                                   measure=lambda cfg, s=session: s.measure(cfg, "benchmark:energy", energy=True),
                                   study_name=f"energy-{name}-{dtype}-n{n}{'-all' if args.exhaustive else ''}",
                                   budget_trials=len(space) if args.exhaustive else args.budget, sampler=args.sampler,
                                   enqueue=space if args.exhaustive else ())  # fmt: skip
        seconds = time.perf_counter() - started
        del session
        found = knee(outcome.rows) if len(outcome.rows) else None
        line = {"family": name, "problem": problem.key, "space": len(space), "measured": len(outcome.rows), "seconds": seconds}
        if found is None:
            print(f"    {name} {problem.key}: no configuration with energy")
            lines.append(line)
            continue
        fastest, frugal = found.fastest, found.frugal
        within = abs(fastest["energy_j"] - frugal["energy_j"]) <= 2 * float(
            np.hypot(fastest.get("energy_j_err", 0.0), frugal.get("energy_j_err", 0.0))
        )
        line |= {"front": found.points, "ratio_at_knee": found.ratio, "energy_saved_at_knee": found.energy_saved,
                 "time_lost_at_knee": found.time_lost, "fastest": {k: fastest.get(k) for k in ("config_key", "time_ms_median", "energy_j", "energy_j_err")},
                 "frugal": {k: frugal.get(k) for k in ("config_key", "time_ms_median", "energy_j", "energy_j_err")},
                 "knee": {k: found.knee[k] for k in ("config_key", "time_ms_median", "energy_j")}, "within_uncertainty": bool(within)}  # fmt: skip
        lines.append(line)
        print(f"    {name} {problem.key}: {len(outcome.rows)} of {len(space)} configurations measured in {seconds:.0f} s; {found.sentence()}"
              + ("; the fastest and the most frugal differ by less than 2 standard errors" if within else ""))  # fmt: skip
        print(f"      fastest {fastest['time_ms_median']:.4f} ms, {fastest['energy_j'] * 1e3:.3f} ± {fastest.get('energy_j_err', float('nan')) * 1e3:.3f} mJ"
              f"  {fastest['config_key']}")  # fmt: skip
        print(f"      frugal  {frugal['time_ms_median']:.4f} ms, {frugal['energy_j'] * 1e3:.3f} ± {frugal.get('energy_j_err', float('nan')) * 1e3:.3f} mJ"
              f"  {frugal['config_key']}")  # fmt: skip
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    import optuna

    from tuner.device.describe import describe
    from tuner.device.gpu import GpuUnavailable, require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.energy import EnergyOptions

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        gpu = require_gpu(args.device_index)
    except GpuUnavailable as error:
        print(f"error: {error}")
        return 2
    device = describe(gpu)
    options = EnergyOptions(windows=args.windows, updates=args.updates, batch_s=args.batch_s)
    bench = Bench.open(gpu, device, args.cache, energy=options)
    if not bench.has_energy_counter:
        print(f"error: {device['name']}: NVML gives no total-energy counter here (nvmlDeviceGetTotalEnergyConsumption)")
        return 2
    clocks = bench.clocks
    print(f"{device['name']}: SM clock {clocks.sm_clock_mhz():.0f} of {clocks.max_sm_clock_mhz():.0f} MHz, "
          f"{clocks.snapshot().get('power_w', float('nan')):.0f} W now; clocks and power limits left as they are")  # fmt: skip
    report = {"device": device["name"], "windows": args.windows, "updates": args.updates, "batch_s": args.batch_s}
    if "a" in args.parts:
        report["repeatability"] = repeatability(bench, args)
    if "b" in args.parts:
        report["known_work"] = known_work(bench, args)
    if "c" in args.parts:
        report["fronts"] = fronts(bench, args)
    print(f"\n{bench.phase_summary()}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2, default=float))
        print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
