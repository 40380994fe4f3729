"""The project's sweep beside Kernel Tuner's brute force, on the same kernel,
space and GPU, in one process.

The kernel is ``kernels/vector_add.cu`` (the vector_add family), the space its
``vector_add_widths`` sweep: vector widths 1, 2, 4, 8 (those that fit a
16-byte load) x blocks 512, 1024, one pass (``grid_blocks_per_sm`` 0), at one
dtype and size. Kernel Tuner gets the same source with its knobs as its tune
parameters (``BLOCK``, ``VEC``, ``UNROLL``: it writes them as ``#define``s, the
way our nvcc command passes ``-D``), the same grid (n over BLOCK x VEC x
UNROLL) and the numpy sum as its answer, and runs ``strategy="brute_force"``
with its defaults (7 launches per configuration, mean time, no L2 flush).
Ours is ``tuner.stages.sweep_store.measure_sweep``, as ``python -m tuner sweep``
runs it (nvcc ahead in threads, verification on the device, the L2 flushed
before every sample, sampling until the median's interval is tight), then
each configuration once more without the flush (hot: the state Kernel Tuner
measures).

It prints:

- wall time per configuration, all in (from a cold cubin cache for ours, so
  both compile every configuration), and Kernel Tuner's own split (compile,
  verify, benchmark, framework);
- per configuration, Kernel Tuner's time over ours, hot (the same state: the
  two timers) and cold (ours flushed);
- each side's winner and whether it lies in the other side's tie set (the
  configurations not shown slower than the winner by more than 0.5 %,
  ``tuner.data.ties``; Kernel Tuner's intervals come from its 7 times).

    python benchmarks/vs_kernel_tuner.py [--dtype float32] [--n 268435456] [--out vs-kernel-tuner.txt]

Needs a GPU, nvcc, PyCUDA and Kernel Tuner (``pip install -e '.[cuda,bench]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: this copy of the package

WIDTHS = (1, 2, 4, 8)
BLOCKS = (512, 1024)
C_TYPE = {"int8": "signed char", "float16": "__half", "float32": "float", "int32": "int"}


def space(dtype: str, widths=WIDTHS, blocks=BLOCKS) -> list[dict]:
    """The configurations both tune, as our parameters (widths that fit a 16-byte load)."""
    itemsize = np.dtype(dtype).itemsize
    return [{"vector_width": w, "block_size": b, "unroll": 1, "grid_blocks_per_sm": 0}
            for w in widths for b in blocks if w * itemsize <= 16]  # fmt: skip


def kt_params(configs: list[dict]) -> dict[str, list[int]]:
    """Kernel Tuner's tune parameters: the kernel's own define names."""
    return {"BLOCK": sorted({c["block_size"] for c in configs}), "VEC": sorted({c["vector_width"] for c in configs}),
            "UNROLL": sorted({c["unroll"] for c in configs})}  # fmt: skip


def ours_of(kt: dict) -> dict:
    """Our parameters of a Kernel Tuner result row."""
    return {"vector_width": int(kt["VEC"]), "block_size": int(kt["BLOCK"]), "unroll": int(kt["UNROLL"]), "grid_blocks_per_sm": 0}


def label(cfg: dict) -> str:
    return f"width {cfg['vector_width']} block {cfg['block_size']}"


def interval(times_ms) -> tuple[float, float, float]:
    """(median, low, high) of a list of times: the same 95 % rank interval as our rows."""
    from tuner.data.intervals import median_interval

    times = np.asarray(times_ms, dtype="float64")
    low, high = median_interval(times)
    return float(np.median(times)), low, high


def tie_keys(table: dict[str, tuple[float, float, float]]) -> tuple[str, set[str]]:
    """(winner, its tie set) of {key: (median, low, high)} by the rule of
    ``tuner.data.ties``: not shown slower than the winner by more than the margin."""
    from tuner.data.intervals import MARGIN, ratio_interval

    winner = min(table, key=lambda k: table[k][0])
    return winner, {k for k, entry in table.items() if ratio_interval(*table[winner], *entry)[1] <= 1 + MARGIN}


# ---- the GPU parts ------------------------------------------------------------------


def run_ours(dtype: str, n: int, configs: list[dict], cache: Path, work: Path):
    """The project's sweep of ``configs`` from a cold cubin cache, then each
    configuration hot. Returns (rows, hot medians by key, wall seconds)."""
    from tuner.device.describe import describe
    from tuner.device.gpu import require_gpu
    from tuner.families import REGISTRY, Problem
    from tuner.measure.bench import Bench
    from tuner.measure.compile import compile_ahead
    from tuner.stages.sweep_store import measure_sweep, sweep_rows

    gpu = require_gpu()
    device = describe(gpu)
    bench = Bench.open(gpu, device, cache)
    family, problem = REGISTRY["vector_add"], Problem("vector_add", dtype, n)
    domains = {"vector_width": sorted({c["vector_width"] for c in configs}), "block_size": sorted({c["block_size"] for c in configs}),
               "unroll": [1], "grid_blocks_per_sm": [0]}  # fmt: skip
    store = work / "store"
    started = time.perf_counter()
    measure_sweep("vs_kernel_tuner", family, [problem], domains, store=store, open_problem=bench.problem,
                  prepare=compile_ahead(gpu.arch, cache, None), log=lambda line: None)  # fmt: skip
    wall = time.perf_counter() - started
    rows = sweep_rows(store, family, [problem], domains)
    session = bench.problem(family, problem)
    defaults = {p.name: p.default for p in family.params}
    hot = {}
    for cfg in configs:
        row = session.measure(defaults | cfg, "vs_kernel_tuner:hot", flush_l2=False)
        hot[row["config_key"]] = (row["time_ms_median"], row["time_ms_ci_low"], row["time_ms_ci_high"])
    return rows, hot, wall, device


def run_kernel_tuner(dtype: str, n: int, configs: list[dict]):
    """Kernel Tuner's brute force over the same space. Returns (results, wall seconds)."""
    import kernel_tuner

    from tuner.families.base import KERNELS_DIR

    rng = np.random.default_rng(0)
    if dtype in ("int8", "int32"):
        high = 64 if dtype == "int8" else 2**30
        a, b = (rng.integers(-high, high, n).astype(dtype) for _ in range(2))
    else:
        a, b = (rng.uniform(-1, 1, n).astype(dtype) for _ in range(2))
    c = np.zeros_like(a)
    itemsize = np.dtype(dtype).itemsize
    started = time.perf_counter()
    results, _env = kernel_tuner.tune_kernel(
        "vector_add", str(KERNELS_DIR / "vector_add.cu"), n, [a, b, c, np.uint64(n)], kt_params(configs),
        grid_div_x=["BLOCK", "VEC", "UNROLL"], block_size_names=["BLOCK"], restrictions=[f"VEC*{itemsize}<=16"],
        answer=[None, None, (a + b).astype(dtype), None], atol=4e-3 if dtype == "float16" else 1e-6,  # float16: a rounding of sums up to 2
        compiler_options=[f"-I{KERNELS_DIR}", f"-DELEM={C_TYPE[dtype]}"], lang="CUDA", strategy="brute_force", quiet=True,
    )  # fmt: skip
    return results, time.perf_counter() - started


def report(
    dtype: str, n: int, rows, hot: dict, ours_wall: float, kt_results: list[dict], kt_wall: float, device: dict
) -> list[str]:
    from tuner.data.results import config_key
    from tuner.families import REGISTRY

    defaults = {p.name: p.default for p in REGISTRY["vector_add"].params}
    ok = rows[rows["status"] == "ok"]
    kt_ok = [r for r in kt_results if isinstance(r.get("time"), (int, float)) and np.isfinite(r["time"])]
    lines = [f"{device['name']}: vector_add {dtype}, n = {n}, {len(ok)} configurations (ours), {len(kt_ok)} (Kernel Tuner)", ""]
    lines.append(f"wall per configuration, all in: ours {1e3 * ours_wall / max(len(ok), 1):.1f} ms (sweep: nvcc ahead, verify on the "
                 f"device, L2 flushed per sample, stop on the median's interval); Kernel Tuner {1e3 * kt_wall / max(len(kt_ok), 1):.1f} ms")  # fmt: skip
    if kt_ok:
        split = {
            k: np.mean([r.get(k, 0.0) for r in kt_ok])
            for k in ("compile_time", "verification_time", "benchmark_time", "framework_time")
        }
        lines.append(
            "Kernel Tuner per configuration: " + ", ".join(f"{k.removesuffix('_time')} {v:.1f} ms" for k, v in split.items())
        )
    ours_cold = {r["config_key"]: (r["time_ms_median"], r["time_ms_ci_low"], r["time_ms_ci_high"]) for _, r in ok.iterrows()}
    theirs = {config_key(defaults | ours_of(r)): interval(r.get("times") or [r["time"]]) for r in kt_ok}
    lines += [
        "",
        f"{'configuration':22s} {'ours cold':>10s} {'ours hot':>10s} {'KT':>10s} {'KT/hot':>8s} {'KT/cold':>8s}   (ms, medians)",
    ]
    for key in sorted(theirs, key=lambda k: theirs[k][0]):
        cfg = json.loads(key)
        cold, warm, kt = ours_cold.get(key, (np.nan,) * 3)[0], hot.get(key, (np.nan,) * 3)[0], theirs[key][0]
        lines.append(f"{label(cfg):22s} {cold:10.4f} {warm:10.4f} {kt:10.4f} {kt / warm:8.4f} {kt / cold:8.4f}")
    if ours_cold and theirs:
        ours_winner, ours_ties = tie_keys(ours_cold)
        hot_winner, hot_ties = tie_keys(hot)
        kt_winner, kt_ties = tie_keys(theirs)
        lines += [
            "",
            f"our winner (cold): {label(json.loads(ours_winner))}, tie set of {len(ours_ties)}; "
            f"in Kernel Tuner's tie set: {'yes' if ours_winner in kt_ties else 'no'}",
            f"our winner (hot): {label(json.loads(hot_winner))}, tie set of {len(hot_ties)}; "
            f"in Kernel Tuner's tie set: {'yes' if hot_winner in kt_ties else 'no'}",
            f"Kernel Tuner's winner: {label(json.loads(kt_winner))}, tie set of {len(kt_ties)}; "
            f"in our cold tie set: {'yes' if kt_winner in ours_ties else 'no'}, in our hot one: {'yes' if kt_winner in hot_ties else 'no'}",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="float32", choices=sorted(C_TYPE), help="element type (default float32)")
    parser.add_argument("--n", type=int, default=1 << 28, help="elements (default 2^28)")
    parser.add_argument("--out", help="also write the lines to this file")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n: must be at least 1, got {args.n}")
    from tuner.device.gpu import GpuUnavailable

    configs = space(args.dtype)
    with tempfile.TemporaryDirectory(prefix="vs-kernel-tuner-") as tmp:
        # Ours first, from an empty cubin cache of its own; then Kernel Tuner, which
        # compiles through PyCUDA with no cache and makes a context of its own.
        try:
            rows, hot, ours_wall, device = run_ours(args.dtype, args.n, configs, Path(tmp) / "cubins", Path(tmp))
        except GpuUnavailable as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        kt_results, kt_wall = run_kernel_tuner(args.dtype, args.n, configs)
    text = "\n".join(report(args.dtype, args.n, rows, hot, ours_wall, kt_results, kt_wall, device)) + "\n"
    sys.stdout.write(text)
    if args.out:
        from tuner.data.results import write_text_atomic

        write_text_atomic(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
