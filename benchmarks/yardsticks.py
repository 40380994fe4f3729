"""Are our yardsticks as strong as an independent harness? And do the tuned
kernels beat them? One process, one GPU, prints (and with --out writes) tables:

1. Yardsticks. Ours: ``tuner/measure/peaks.py`` (device copy, read stream, CUB
   reduce for int32 and float32), timed by ``Bench.time`` (L2 flushed, a hold
   kernel before the start event, median of samples). Independent: CuPy on the
   same card (CUB through ``cupy.sum`` with the CUB accelerator, CuPy's
   device-to-device memcpy and ``copyto``, a read kernel of our own written
   for CuPy and tuned over a few shapes), timed two ways with no flush: one
   call between two events (``cupyx.profiler.benchmark``) and a batch of
   back-to-back calls between two events, the queue hiding every launch; the
   faster of the two counts. A yardstick holds when the independent figure is
   at most 1 % above ours.
2. Reductions at 2^28: each ``finish`` of a few strong shuffle shapes, the
   complete ones (finished on the device, all of it timed) against CUB timed
   the same way; the partial pass (``host``) for reference only.
3. Vector add at 2^28 against the device copy.

With ``--diagnose``, also the CUB sum, the best partial reduction and the copy
timed under each of: the L2 flush on or off, a short or long hold.

    python benchmarks/yardsticks.py [--out yardsticks.txt] [--diagnose]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import replace

os.environ.setdefault("CUPY_ACCELERATORS", "cub")  # before CuPy is imported: its reductions go through CUB

N = 1 << 28
SHAPES = [  # strong shuffle shapes from the H100 and H200 sweeps: (block, unroll, vector width, blocks per SM, hint)
    (1024, 8, 4, 0, "none"),
    (512, 8, 4, 0, "none"),
    (1024, 4, 4, 4, "none"),
    (512, 4, 4, 8, "none"),
    (1024, 8, 4, 0, "stream"),
]
FINISHES = ("host", "second_pass", "last_block", "atomic")
VECTOR_ADD = [(b, u, g) for b in (256, 512, 1024) for u in (1, 4) for g in (0, 16)]
READ_SOURCE = r"""
extern "C" __global__ void read_words(const uint4* __restrict__ p, unsigned long long n, unsigned* sink) {
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + (UNROLL - 1) * threads < n; i += UNROLL * threads) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(p + i + u * threads);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += threads) { uint4 v = __ldcs(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (acc == 0x9E3779B9u) sink[0] = acc;  // a use the compiler cannot drop
}
"""


def ratio_line(name: str, ours: float | None, independent: float | None, how: str, limit: float = 1.01) -> str:
    """One table row: independent / ours and whether the yardstick holds."""
    if not ours or not independent:
        return f"{name:28s} {ours or float('nan'):9.1f} {independent or float('nan'):12.1f}   {'n/a':>6s}  -      {how}"
    ratio = independent / ours
    return f"{name:28s} {ours:9.1f} {independent:12.1f} {ratio:8.4f}  {'yes' if ratio <= limit else 'NO':5s}  {how}"


def vs_line(name: str, gbs: float | None, reference: float | None, label: str) -> str:
    if not gbs or not reference:
        return f"{name:44s} {gbs or float('nan'):9.1f}   n/a x {label}"
    return f"{name:44s} {gbs:9.1f} {gbs / reference:8.4f} x {label}"


# ---- the independent harness (CuPy) ---------------------------------------------


def independent_ms(cupy, run, repeats: int = 30, batch: int = 10) -> tuple[float, str]:
    """The faster median of: one call between two events, and ``batch``
    back-to-back calls between two events (per call)."""
    from cupyx.profiler import benchmark

    single = float(statistics.median(benchmark(run, n_repeat=repeats, n_warmup=3).gpu_times[0])) * 1e3
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    batches = []
    for _ in range(max(3, repeats // batch)):
        start.record()
        for _ in range(batch):
            run()
        end.record()
        end.synchronize()
        batches.append(cupy.cuda.get_elapsed_time(start, end) / batch)
    batched = float(statistics.median(batches))
    return (single, "one call") if single < batched else (batched, f"{batch} back to back")


def independent_cub(cupy, np, dtype: str) -> tuple[float, str]:
    rng = np.random.default_rng(2)
    host = rng.integers(-4, 4, size=N, dtype=np.int32) if dtype == "int32" else rng.random(N, dtype=np.float32)
    x = cupy.asarray(host)
    expected = host.sum(dtype=np.int64 if dtype == "int32" else np.float64)
    got = float(cupy.sum(x, dtype=x.dtype).get())
    assert abs(got - expected) <= 2e-5 * abs(expected), f"cupy.sum {got} != numpy {expected}"
    ms, how = independent_ms(cupy, lambda: cupy.sum(x, dtype=x.dtype))
    return N * host.itemsize / ms / 1e6, f"cupy.sum(dtype={dtype}), CUB, {how}"


def independent_copy(cupy, nbytes: int) -> tuple[float, str]:
    x = cupy.full(nbytes // 4, 7, dtype=cupy.int32)
    y = cupy.zeros_like(x)
    memcpy = cupy.cuda.runtime.memcpyAsync
    kind = cupy.cuda.runtime.memcpyDeviceToDevice
    candidates = {
        "memcpyAsync": lambda: memcpy(y.data.ptr, x.data.ptr, nbytes, kind, 0),
        "copyto": lambda: cupy.copyto(y, x),
    }
    best = None
    for name, run in candidates.items():
        y.fill(0)
        run()
        assert bool((y == 7).all()), f"{name} left bytes unwritten"
        ms, how = independent_ms(cupy, run)
        gbs = 2 * nbytes / ms / 1e6
        if best is None or gbs > best[0]:
            best = (gbs, f"cupy {name}, {how}")
    return best


def independent_read(cupy, nbytes: int, sm_count: int) -> tuple[float, str]:
    x = cupy.full(nbytes // 4, 3, dtype=cupy.int32)
    sink = cupy.zeros(1, dtype=cupy.uint32)
    n_vec = nbytes // 16
    best = None
    for unroll in (2, 4, 8):
        kernel = cupy.RawKernel(READ_SOURCE, "read_words", options=(f"-DUNROLL={unroll}",))
        for block in (256, 512, 1024):
            for grid in (sm_count * 2048 // block, sm_count * 4096 // block, -(-n_vec // (block * unroll))):
                args = (x, cupy.uint64(n_vec), sink)
                ms, how = independent_ms(cupy, lambda k=kernel, g=grid, b=block, a=args: k((g,), (b,), a), repeats=12, batch=6)
                gbs = nbytes / ms / 1e6
                if best is None or gbs > best[0]:
                    best = (gbs, f"read kernel block {block} unroll {unroll} grid {grid}, {how}")
    return best


def independent_add(cupy) -> tuple[float, str]:
    a, b = cupy.ones(N, dtype=cupy.float32), cupy.full(N, 2, dtype=cupy.float32)
    c = cupy.empty_like(a)
    ms, how = independent_ms(cupy, lambda: cupy.add(a, b, out=c))
    return 3 * N * 4 / ms / 1e6, f"cupy.add float32, {how}"


# ---- ours -------------------------------------------------------------------


def reduce_rows(bench, dtype: str) -> list[dict]:
    from tuner.families import REGISTRY, Problem

    family = REGISTRY["reduce"]
    session = bench.problem(family, Problem("reduce", dtype, N))
    defaults = {p.name: p.default for p in family.params}
    rows = []
    for block, unroll, width, per_sm, hint in SHAPES:
        for finish in FINISHES:
            cfg = defaults | {"variant": "shuffle", "block_size": block, "unroll": unroll, "vector_width": width,
                              "grid_blocks_per_sm": per_sm, "cache_hint": hint, "finish": finish}  # fmt: skip
            row = session.measure(cfg, "yardsticks")
            assert row["status"] == "ok", (cfg, row["error"])
            rows.append(row)
    return rows


def vector_add_rows(bench, dtype: str) -> list[dict]:
    from tuner.families import REGISTRY, Problem

    family = REGISTRY["vector_add"]
    session = bench.problem(family, Problem("vector_add", dtype, N))
    defaults = {p.name: p.default for p in family.params}
    rows = []
    for block, unroll, per_sm in VECTOR_ADD:
        cfg = defaults | {"vector_width": 4, "block_size": block, "unroll": unroll, "grid_blocks_per_sm": per_sm}
        row = session.measure(cfg, "yardsticks")
        assert row["status"] == "ok", (cfg, row["error"])
        rows.append(row)
    return rows


def shape_label(row: dict) -> str:
    return f"{row['block_size']}x{row['unroll']}x{row['vector_width']} g{row['grid_blocks_per_sm']} {row['cache_hint']}"


def bound_launch(bench, family_name: str, problem, cfg: dict):
    """A configuration compiled, bound and verified once: (launch, its session)."""
    from tuner.families import REGISTRY
    from tuner.measure.compile import compile_variant

    family = REGISTRY[family_name]
    session = bench.problem(family, problem)
    cfg = {p.name: p.default for p in family.params} | cfg
    compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
    launch = family.bind(
        cfg, problem, session.buffers, bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types), bench.gpu
    )
    launch.run()
    bench.gpu.synchronize()
    assert family.verify(launch.fetch(), session.expected, session.inputs).ok, cfg
    return launch, session


def diagnose(bench, cupy, lines: list[str]) -> None:
    """The same work timed with each L2 flush (a memset, as the pipeline flushed
    before; a read, ``Bench.flush``; none) and a short or long hold before the
    start event."""
    from cupy.cuda import cub

    from tuner.families import Problem
    from tuner.measure.timing import time_kernel

    gpu = bench.gpu
    x = cupy.asarray(cupy.arange(N, dtype=cupy.int32) % 7 - 3)
    out = cupy.zeros((), dtype=cupy.int32)
    shuffle = {"variant": "shuffle", "block_size": 1024, "unroll": 8, "vector_width": 4}
    host, _s1 = bound_launch(bench, "reduce", Problem("reduce", "int32", N), shuffle)
    last, _s2 = bound_launch(bench, "reduce", Problem("reduce", "int32", N), shuffle | {"finish": "last_block"})
    add, _s3 = bound_launch(bench, "vector_add", Problem("vector_add", "float32", N), {"vector_width": 4})
    src, dst = gpu.alloc(1 << 30), gpu.alloc(1 << 30)
    work = {  # name: (run, bytes)
        "CUB int32": (lambda: cub.cub_reduction(x, cub.CUPY_CUB_SUM, None, cupy.int32, out, False), N * 4),
        "ours host": (host.run, N * 4),
        "ours last_block": (last.run, N * 4),
        "copy": (lambda: gpu.copy(dst.ptr(), src.ptr(), 1 << 30), 2 << 30),
        "vector add": (add.run, 3 * N * 4),
    }
    memset_buffer = gpu.alloc(2 * gpu.l2_bytes)

    def memset() -> None:
        gpu.fill_bytes(memset_buffer.ptr(), 0, memset_buffer.nbytes)

    flushes = {"memset": memset, "read": bench.flush, "none": None}
    lines += ["", "diagnosis: GB/s under each timing (flush before each sample: memset = a write of 2x L2, read = Bench.flush, "
              "a read of 2x L2; hold: spin before the start event)",
              f"{'flush, hold':18s}" + "".join(f"{name:>17s}" for name in work)]  # fmt: skip
    timer = gpu.event_timer()
    for flush_name, flush in flushes.items():
        for hold_us in (20.0, 500.0):
            options = replace(bench.timing, flush_l2=flush is not None, hold_us=hold_us)
            cells = []
            for run, nbytes in work.values():
                timing = time_kernel(run, timer=timer, options=options, flush=flush, hold=bench.hold_for(hold_us),
                                     synchronize=gpu.synchronize, clocks=bench.clocks)  # fmt: skip
                cells.append(f"{nbytes / timing.median_ms / 1e6:17.1f}")
            lines.append(f"{flush_name + ', ' + str(int(hold_us)) + ' us':18s}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument("--diagnose", action="store_true", help="time CUB, a reduction and the copy under each timing setting")
    parser.add_argument("--cache", default=".cubin-cache", help="cubin cache folder")
    args = parser.parse_args()
    import cupy
    import numpy as np

    from tuner.device.describe import describe
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.peaks import measure_peaks

    gpu = require_gpu()
    device = describe(gpu)
    bench = Bench.open(gpu, device, args.cache)
    peaks, _ = measure_peaks(bench)
    lines = [f"{device['name']} ({device['slug']}), cupy {cupy.__version__}, n = 2^28, GB/s", ""]
    lines.append(f"{'yardstick':28s} {'ours':>9s} {'independent':>12s} {'ind/ours':>8s}  {'holds':5s}  independent harness")
    independent = {
        "copy": independent_copy(cupy, peaks["copy_bytes"]),
        "read": independent_read(cupy, peaks["copy_bytes"], gpu.sm_count),
        "cub int32": independent_cub(cupy, np, "int32"),
        "cub float32": independent_cub(cupy, np, "float32"),
    }
    ours = {"copy": peaks["copy_gbs"], "read": peaks["read_gbs"], "cub int32": peaks["cub_reduce_gbs"],
            "cub float32": peaks["cub_reduce_float32_gbs"]}  # fmt: skip
    for name, (gbs, how) in independent.items():
        lines.append(ratio_line(name, ours[name], gbs, how))
    cupy.get_default_memory_pool().free_all_blocks()
    cub_by_dtype = {"int32": ours["cub int32"], "float32": ours["cub float32"]}
    lines += ["", "reductions at 2^28 (complete: finished on the device and timed whole; host: partial pass only)"]
    for dtype in ("int32", "float32"):
        rows = reduce_rows(bench, dtype)
        for row in rows:
            kind = "partial, not compared" if row["finish"] == "host" else "complete"
            lines.append(
                vs_line(f"{dtype} {shape_label(row)} {row['finish']}", row["bandwidth_gbs"], cub_by_dtype[dtype], f"CUB ({kind})")
            )
        complete = max((r for r in rows if r["finish"] != "host"), key=lambda r: r["bandwidth_gbs"])
        partial = max((r for r in rows if r["finish"] == "host"), key=lambda r: r["bandwidth_gbs"])
        lines.append(vs_line(f"BEST {dtype} complete {shape_label(complete)} {complete['finish']}", complete["bandwidth_gbs"],
                             cub_by_dtype[dtype], "CUB"))  # fmt: skip
        lines.append(vs_line(f"best {dtype} partial {shape_label(partial)}", partial["bandwidth_gbs"], cub_by_dtype[dtype],
                             "CUB (partial: for reference)"))  # fmt: skip
    lines += ["", "vector add at 2^28 (vector width 4) against the device copy"]
    for dtype in ("float32", "int32"):
        rows = vector_add_rows(bench, dtype)
        for row in rows:
            lines.append(vs_line(f"{dtype} block {row['block_size']} unroll {row['unroll']} g{row['grid_blocks_per_sm']}",
                                 row["bandwidth_gbs"], peaks["copy_gbs"], "copy"))  # fmt: skip
        top = max(rows, key=lambda r: r["bandwidth_gbs"])
        lines.append(vs_line(f"BEST {dtype} vector add", top["bandwidth_gbs"], peaks["copy_gbs"], "copy (ours)"))
        lines.append(vs_line(f"BEST {dtype} vector add", top["bandwidth_gbs"], independent["copy"][0], "copy (independent)"))
    add_gbs, add_how = independent_add(cupy)
    lines.append(vs_line(f"independent: {add_how}", add_gbs, peaks["copy_gbs"], "copy (ours)"))
    if args.diagnose:
        diagnose(bench, cupy, lines)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        from tuner.data.results import write_text_atomic

        write_text_atomic(text, args.out)


if __name__ == "__main__":
    main()
