"""Our timer held against nvbench's own (NVIDIA's ``cuda-bench`` package), in
one process on one GPU, on the same launches.

The work: the yardsticks (the device-to-device copy of the peaks, CUB's sum
through CuPy for int32 and float32 where CuPy is installed) and, from a
results folder, the configuration ``best_configs.h`` exports for each family,
dtype and largest size (``tuner.data.export``; ``--all-sizes`` for every size).
Each is compiled, bound and verified once, then timed six ways, all of them
events around the same launch on the legacy default stream:

  ours cold     ``Bench.time`` as the pipeline times: the L2 flushed before every
                sample by a read of twice its size (clean lines), a 20 us hold
                kernel while the launch is enqueued (500 us for CUB through CuPy,
                as the peaks hold it: CuPy's host work per call outlasts 20 us),
                the median of the samples
  ours memset   the same, the L2 flushed by a memset of twice its size, as
                nvbench flushes (dirty lines, written back during the next sample)
  ours hot      no flush
  nvb cold      nvbench's cold measurement: its L2 flush (a memset) and its
                blocking kernel before every sample, until its noise criterion
  nvb batch     nvbench's batch measurement: back-to-back launches, hot
  ours cold 2   ours cold again, after nvbench: how far the GPU drifted

and prints the ratios nvb cold / ours memset and nvb batch / ours hot (the same
state each, so any gap is the timers'; on an H100 they agree within 1.3 % but
for CUB's sums, 2 % cold and 5 % in nvbench's batch mode: vs-nvbench-h100.txt,
taken when CUB had the 20 us hold too; ``yardstick_gaps.py nvbench`` takes that
apart) and nvb cold / ours cold (not
the same state: the difference is the write-back of the lines nvbench's
memset leaves dirty, which lands in its next sample and never in ours).

    python benchmarks/vs_nvbench.py --results results/reference/nvidia-h100-80gb-hbm3 [--out vs-nvbench.txt]

Needs a GPU, nvcc, PyCUDA and ``cuda-bench`` (``pip install 'cuda-bench[cu12]'``,
or ``[cu13]`` to match the driver's CUDA); CuPy (``cupy-cuda12x``) for the CUB rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

os.environ.setdefault("CUPY_ACCELERATORS", "cub")  # before CuPy is imported: its sums go through CUB

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: this copy of the package

MODES = ("ours cold", "ours memset", "ours hot", "nvb cold", "nvb batch", "ours cold 2")


@dataclass
class Work:
    name: str
    run: Callable[[], None]  # enqueues one launch on the legacy default stream
    nbytes: int  # bytes the work must move, for GB/s
    restore: Callable[[], None] | None = None  # resets inputs the launch overwrites (ours: untimed, before every sample)
    keep: object = None  # what the launch needs alive: its buffers
    hold_us: float | None = None  # ours: the hold before each start event (None: the bench's)


def choose(entries: list[dict], all_sizes: bool) -> list[dict]:
    """The exported members to time: per family and dtype, the largest size (or every size)."""
    if all_sizes:
        return entries
    largest: dict[tuple[str, str], dict] = {}
    for entry in entries:
        key = (entry["family"], entry["dtype"])
        if key not in largest or entry["n"] > largest[key]["n"]:
            largest[key] = entry
    return sorted(largest.values(), key=lambda e: (e["family"], e["dtype"]))


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:8.4f}" if a and b else f"{'n/a':>8s}"


def table(times: dict[str, dict[str, float]], works: list[Work]) -> list[str]:
    """The medians (ms) of every mode and the three ratios, one line per work."""
    lines = [f"{'work':44s}" + "".join(f"{m:>12s}" for m in MODES)
             + f"{'nvb cold/':>10s}{'nvb batch/':>11s}{'nvb cold/':>10s}{'drift':>8s}",
             f"{'':44s}" + " " * 12 * len(MODES) + f"{'memset':>10s}{'hot':>11s}{'ours cold':>10s}{'':>8s}"]  # fmt: skip
    for work in works:
        t = times.get(work.name, {})
        cells = "".join(f"{t[m]:12.5f}" if t.get(m) else f"{'n/a':>12s}" for m in MODES)
        cold = (
            (t.get("ours cold", 0) + t.get("ours cold 2", 0)) / 2
            if t.get("ours cold") and t.get("ours cold 2")
            else t.get("ours cold")
        )
        lines.append(f"{work.name[:44]:44s}{cells}{ratio(t.get('nvb cold'), t.get('ours memset')):>10s}"
                     f"{ratio(t.get('nvb batch'), t.get('ours hot')):>11s}{ratio(t.get('nvb cold'), cold):>10s}"
                     f"{ratio(t.get('ours cold 2'), t.get('ours cold')):>8s}")  # fmt: skip
    return lines


# ---- the GPU parts ------------------------------------------------------------------


def best_works(bench, results: Path, all_sizes: bool) -> list[Work]:
    """The header's configuration of each chosen problem, compiled, bound and verified."""
    from tuner.data.export import best_entries
    from tuner.data.results import read
    from tuner.families import REGISTRY, Problem
    from tuner.measure.compile import compile_variant

    works = []
    for entry in choose(best_entries(read(results / "measurements.parquet")), all_sizes):
        family = REGISTRY.families.get(entry["family"])
        if family is None:
            continue
        problem = Problem(entry["family"], entry["dtype"], entry["n"])
        cfg = {p.name: p.default for p in family.params} | entry["exported"]["params"]
        session = bench.problem(family, problem)
        compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
        launch = family.bind(
            cfg, problem, session.buffers, bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types), bench.gpu
        )
        if launch.restore:
            launch.restore()
        launch.run()
        bench.gpu.synchronize()
        if not session.verdict(launch).ok:
            raise SystemExit(f"error: {entry['family']} {entry['dtype']} n={entry['n']} {cfg} failed verification")
        name = f"{entry['family']} {entry['dtype']} n={entry['n']} {entry['exported']['params'].get('variant', '')}"
        works.append(Work(name, launch.run, family.bytes_moved(cfg, problem), launch.restore, keep=session))
    return works


def yardstick_works(bench) -> list[Work]:
    """The device copy of the peaks, and CUB's sum through CuPy where it is installed."""
    from tuner.measure.peaks import CUB_HOLD_US, peak_buffer_bytes

    gpu = bench.gpu
    nbytes = peak_buffer_bytes(gpu.l2_bytes)
    src, dst = gpu.alloc(nbytes), gpu.alloc(nbytes)
    gpu.fill_bytes(src.ptr(), 0x3C, nbytes)
    works = [
        Work(
            f"yardstick: device copy {nbytes >> 20} MiB",
            lambda: gpu.copy(dst.ptr(), src.ptr(), nbytes),
            2 * nbytes,
            keep=(src, dst),
        )
    ]
    try:
        import cupy
        from cupy.cuda import cub
    except ImportError:
        return works
    n = 1 << 28
    for dtype in ("int32", "float32"):
        x = cupy.ones(n, dtype=dtype)
        out = cupy.zeros((), dtype=dtype)

        def run(x=x, out=out, dtype=dtype) -> None:
            cub.cub_reduction(x, cub.CUPY_CUB_SUM, None, getattr(cupy, dtype), out, False)

        run()
        # float32 partial sums past 2^24 may round: within a part per million, not exact.
        assert abs(float(out.get()) - n) <= 1e-6 * n, f"CUB sum of {n} ones gave {out.get()}"
        works.append(Work(f"yardstick: CUB sum {dtype} 2^28", run, n * 4, keep=(x, out), hold_us=CUB_HOLD_US))
    return works


def memset_flush(bench) -> Callable[[], None]:
    """An L2 flush as nvbench's: a memset of twice the L2's size (dirty lines), its buffer made once per bench."""
    gpu = bench.gpu
    buffer = getattr(bench, "_memset_flush_buffer", None)
    if buffer is None:
        buffer = bench._memset_flush_buffer = gpu.alloc(2 * gpu.l2_bytes)
    return lambda: gpu.fill_bytes(buffer.ptr(), 0, buffer.nbytes)


def time_ours(bench, work: Work, mode: str) -> float:
    """The median (ms) of ``Bench.time`` in one of our modes."""
    from tuner.measure.timing import time_kernel

    hold_us = bench.timing.hold_us if work.hold_us is None else work.hold_us
    if mode == "ours memset":
        gpu = bench.gpu
        options = replace(bench.timing, flush_l2=True, hold_us=hold_us)
        result = time_kernel(work.run, timer=gpu.event_timer(), options=options, restore=work.restore, flush=memset_flush(bench),
                             hold=bench.hold_for(options.hold_us), synchronize=gpu.synchronize, clocks=bench.clocks)  # fmt: skip
    else:
        options = replace(bench.timing, flush_l2=mode != "ours hot", hold_us=hold_us)
        result = bench.time(work.run, restore=work.restore, options=options)
    return result.median_ms


class LegacyStream:
    """The legacy default stream, as nvbench takes a stream (``__cuda_stream__``):
    our launches go there, so its events and flush order around them."""

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0)


def time_nvbench(works: list[Work], device_index: int, extra: list[str]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """nvbench's cold median and batch mean (ms) of each work, and notes."""
    import cuda.bench as nvbench
    from cuda.bench.results import BenchmarkResult

    notes: list[str] = []

    def register(work: Work) -> None:
        def benchmark(state) -> None:
            try:
                state.set_stream(LegacyStream())
            except Exception as error:  # its own stream: blocking, so the legacy stream still orders our launch
                if not notes:
                    notes.append(f"nvbench kept its own stream ({type(error).__name__}: {error})")
            state.add_global_memory_reads(work.nbytes)
            state.exec(lambda launch: work.run())

        nvbench.register(benchmark).set_name(work.name)

    for work in works:
        register(work)
    with tempfile.TemporaryDirectory(prefix="vs-nvbench-") as tmp:
        path = Path(tmp) / "nvbench.json"
        nvbench.run_all_benchmarks([sys.argv[0], "--devices", str(device_index), "--json", str(path), *extra])
        result = BenchmarkResult.from_json(path)

    def value(state, *tags: str) -> float | None:
        """The first of ``tags`` the state has, in ms (nvbench's summaries are in seconds)."""
        for tag in tags:
            summary = state.summaries.get(tag)
            if summary is not None and summary.value is not None:
                return float(summary.value) * 1e3
        return None

    times: dict[str, dict[str, float]] = {}
    for name, sub in result.items():
        state = sub.states[0]
        times[name] = {"nvb cold": value(state, "nv/cold/time/gpu/median", "nv/cold/time/gpu/mean"),
                       "nvb batch": value(state, "nv/batch/time/gpu/median", "nv/batch/time/gpu/mean")}  # fmt: skip
        if value(state, "nv/cold/time/gpu/median") is None:
            notes.append(f"{name}: nvbench gave no cold median; its mean stands in")
    return times, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, help="results folder whose exported configurations are timed (default: "
                        "results/reference/<this GPU's slug>)")  # fmt: skip
    parser.add_argument("--all-sizes", action="store_true", help="every size of each family and dtype, not the largest only")
    parser.add_argument("--no-yardsticks", action="store_true", help="skip the device copy and CUB")
    parser.add_argument("--cache", default=".cubin-cache", help="cubin cache folder")
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    parser.add_argument("--nvbench-args", default="", help="more arguments for nvbench, e.g. '--min-samples 50'")
    parser.add_argument("--out", help="also write the lines to this file")
    args = parser.parse_args(argv)

    from tuner.device.describe import describe
    from tuner.device.gpu import GpuUnavailable, require_gpu
    from tuner.measure.bench import Bench

    try:
        gpu = require_gpu(args.device)
    except GpuUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    device = describe(gpu)
    results = args.results or ROOT / "results" / "reference" / device["slug"]
    if not (results / "measurements.parquet").is_file():
        parser.error(f"--results: must be a results folder with measurements.parquet, got {str(results)!r}")
    bench = Bench.open(gpu, device, args.cache)
    works = ([] if args.no_yardsticks else yardstick_works(bench)) + best_works(bench, results, args.all_sizes)
    times: dict[str, dict[str, float]] = {w.name: {} for w in works}
    for work in works:
        for mode in ("ours cold", "ours memset", "ours hot"):
            times[work.name][mode] = time_ours(bench, work, mode)
    nvb, notes = time_nvbench(works, args.device, args.nvbench_args.split())
    for work in works:
        times[work.name].update(nvb.get(work.name, {}))
        times[work.name]["ours cold 2"] = time_ours(bench, work, "ours cold")
    lines = [f"{device['name']} ({device['slug']}), cuda-bench {_version()}, configurations from {results}; medians in ms", ""]
    lines += table(times, works)
    lines += ["", "nvb cold/memset and nvb batch/hot: the same state, two timers; nvb cold/ours cold: nvbench's memset flush "
              "leaves dirty lines whose write-back lands in its next sample, our read flush leaves clean ones; "
              "drift: ours cold after nvbench over before"] + notes  # fmt: skip
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        from tuner.data.results import write_text_atomic

        write_text_atomic(text, args.out)
    return 0


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("cuda-bench")
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
