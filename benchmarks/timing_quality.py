"""How good is the timer? Prints, for this GPU:

- the peaks (device-to-device copy, read-only stream, theoretical, CUB reduction);
- for three problems of different lengths (2^24 and 2^28 int32 reduction, a 2^20
  vector add): samples taken, wall time spent measuring, relative spread, and the
  hot (no L2 flush) vs flushed difference;
- repeatability: the same configurations in two separate passes of one run, and
  the median absolute difference between the passes.

    python benchmarks/timing_quality.py [--out timing.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from tuner.device.describe import describe
from tuner.device.gpu import require_gpu
from tuner.families import REGISTRY, Problem
from tuner.measure.bench import Bench
from tuner.measure.peaks import measure_peaks

REDUCE_BEST = {"variant": "shuffle", "block_size": 512, "unroll": 8, "vector_width": 4, "offset": 0,
               "grid_blocks_per_sm": 0, "cache_hint": "none", "min_blocks": 0}  # fmt: skip
CASES = [
    ("reduce 2^24 int32", "reduce", Problem("reduce", "int32", 1 << 24), REDUCE_BEST),
    ("reduce 2^28 int32", "reduce", Problem("reduce", "int32", 1 << 28), REDUCE_BEST),
    ("vector_add 2^20 float32", "vector_add", Problem("vector_add", "float32", 1 << 20), None),
]


def default_config(family, overrides=None):
    return {p.name: p.default for p in family.params} | (overrides or {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    args = parser.parse_args()
    gpu = require_gpu()
    device = describe(gpu)
    bench = Bench.open(gpu, device, ".cubin-cache")
    peaks, _ = measure_peaks(bench)
    report = {"device": device["name"], "peaks": peaks, "cases": [], "repeatability": {}}
    print(f"\n{device['name']}: copy {peaks['copy_gbs']:.0f} GB/s, read-only {peaks['read_gbs']:.0f} GB/s, "
          f"theoretical {peaks['theoretical_gbs']:.0f} GB/s, CUB reduce {peaks['cub_reduce_gbs'] or float('nan'):.0f} GB/s")  # fmt: skip
    print(
        f"\n{'case':26s} {'mode':8s} {'samples':>7s} {'wall ms':>8s} {'median us':>10s} {'spread %':>8s} {'GB/s':>7s} {'conv':>5s}"
    )
    for label, family_name, problem, cfg in CASES:
        if family_name not in REGISTRY.families:
            print(f"{label:26s} (family {family_name} not available)")
            continue
        family = REGISTRY[family_name]
        session = bench.problem(family, problem)
        cfg = default_config(family, cfg)
        rows = {mode: session.measure(cfg, "benchmark", flush_l2=(mode == "flushed")) for mode in ("flushed", "hot")}
        for mode, row in rows.items():
            assert row["status"] == "ok", row["error"]
            print(f"{label:26s} {mode:8s} {row['samples']:7d} {row['measure_wall_s'] * 1e3:8.1f} {row['time_ms_median'] * 1e3:10.2f} "
                  f"{row['rel_spread'] * 100:8.2f} {row['bandwidth_gbs']:7.0f} {str(row['converged']):>5s}")  # fmt: skip
        hot_vs_flushed = rows["hot"]["time_ms_median"] / rows["flushed"]["time_ms_median"] - 1
        print(f"{'':26s} hot vs flushed median time: {hot_vs_flushed * 100:+.1f} %")
        report["cases"].append({"case": label, "hot_vs_flushed": hot_vs_flushed, **{m: {k: r[k] for k in (
            "samples", "measure_wall_s", "time_ms_median", "rel_spread", "bandwidth_gbs", "converged")} for m, r in rows.items()}})  # fmt: skip
        del session
    # Repeatability: 12 configurations of the reduction at 2^28, two separate passes.
    family = REGISTRY["reduce"]
    session = bench.problem(family, Problem("reduce", "int32", 1 << 28))
    configs = [default_config(family, REDUCE_BEST | {"block_size": b, "unroll": u, "vector_width": v})
               for b in (256, 1024) for u in (2, 8) for v in (1, 2, 4)]  # fmt: skip
    passes = [[session.measure(c, "benchmark")["time_ms_median"] for c in configs] for _ in range(2)]
    diffs = np.abs(np.array(passes[0]) / np.array(passes[1]) - 1)
    report["repeatability"] = {
        "configs": len(configs),
        "median_abs_diff": float(np.median(diffs)),
        "max_abs_diff": float(diffs.max()),
    }
    print(f"\nrepeatability over {len(configs)} configurations (reduce 2^28 int32), two passes: "
          f"median |difference| {np.median(diffs) * 100:.2f} %, max {diffs.max() * 100:.2f} %")  # fmt: skip
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=2, default=float)


if __name__ == "__main__":
    main()
