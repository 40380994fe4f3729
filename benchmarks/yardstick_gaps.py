"""Where do the two yardstick gaps come from? One factor at a time, in one
process on one GPU, each experiment a table of medians against a common
baseline.

``nvbench``: nvbench's batch measurement (``cuda-bench``) times CUB's sums,
launched through CuPy, at 0.944 to 0.947 of our hot time
(``benchmarks/results/vs-nvbench-h100.txt``), while it agrees with ours within
0.5 % on our own kernels. Works: CUB's sum of 2^28 int32 and float32 through
CuPy (``cupy.cuda.cub.cub_reduction``, as ``tuner/measure/peaks.py`` calls it)
and the device copy of the peaks as a control. The baseline is ours hot as
``vs-nvbench-h100.txt`` took it (``Bench.time``, no flush, a 20 us hold kernel
before the start event); the rows change the hold, the L2 state, single call or
batch, the launch path (a CUDA graph of the same CuPy call; CUB called from
C++), the timer (CuPy's own) and the tool (nvbench batch and cold).

``kernel-tuner``: Kernel Tuner's times for the vector add run 0.9 to 3.4 %
above ours hot (``benchmarks/results/vs-kernel-tuner-h100.txt``). Works: the
vector add of 2^28 float32 at vector width 4 and 1, block 1024 (the smallest
and the largest gap). The baseline is ours hot (our cubin, our buffers, a
prepared PyCUDA launch, the 20 us hold, the median); the rows change the L2
state, the hold, single launch or batch, the buffers, Kernel Tuner's
benchmark loop run on our cubin (and its mean of 7, and after the GPU idled
as it does during Kernel Tuner's host-side answer check), the code (our PTX
compiled by the driver; relocatable PTX linked by the driver as PyCUDA's
DynamicSourceModule does; Kernel Tuner's kernel string through our nvcc;
Kernel Tuner's own module), and the tool (``tune_kernel`` through PyCUDA, CuPy
and cuda-python, and as ``vs_kernel_tuner.py`` ran it, answer checked).

Each experiment writes ``<experiment>.txt`` and ``<experiment>.json`` to
``--out`` (the medians, each row over the baseline, the reference row over
each row, the SM clock, notes) and prints a short summary last. ``--dry-run``
prints the plan and touches no GPU.

    python benchmarks/yardstick_gaps.py nvbench --out /tmp/gaps
    python benchmarks/yardstick_gaps.py kernel-tuner --out /tmp/gaps
    python benchmarks/yardstick_gaps.py kernel-tuner --dry-run

Needs a GPU, nvcc, PyCUDA and CuPy; ``cuda-bench`` for the nvbench rows and
``kernel_tuner`` for Kernel Tuner's (``benchmarks/device-wheels.txt`` pins
them for an offline GPU machine). A row whose tool is missing or fails keeps
its error as its note; the others still run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("CUPY_ACCELERATORS", "cub")  # before CuPy is imported: its sums go through CUB

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]  # this checkout's package, and vs_nvbench beside this file

TOLERANCE = 0.01  # two medians within 1 % measure the same thing


# ---- the plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One row: its name and the factor it changes from the baseline."""

    name: str
    factor: str


@dataclass(frozen=True)
class Experiment:
    name: str
    question: str
    works: tuple[str, ...]
    rows: tuple[Variant, ...]
    baseline: str  # the row every ratio is taken against
    reference: str  # the other tool's figure: the gap is reference / baseline

    def __post_init__(self) -> None:
        names = [row.name for row in self.rows]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: row names must be unique, got {names}")
        for role in ("baseline", "reference"):
            if getattr(self, role) not in names:
                raise ValueError(f"{self.name}: the {role} must be one of the rows, got {getattr(self, role)!r}")


N = 1 << 28
KT_CONFIGS = ({"vector_width": 4, "block_size": 1024}, {"vector_width": 1, "block_size": 1024})
KT_REPEATS = 5  # Kernel Tuner's loop of 7, five times: 35 samples
KT_IDLE_S = 3.0  # about the GPU's idle time during Kernel Tuner's answer check of 2^28 floats (3.9 s per configuration)


def kt_label(cfg: dict) -> str:
    return f"width {cfg['vector_width']} block {cfg['block_size']}"


NVBENCH = Experiment(
    name="nvbench",
    question="why nvbench's batch time of CUB's sums (through CuPy) is 0.944 to 0.947 of ours hot",
    works=("CUB sum int32", "CUB sum float32", "device copy"),
    rows=(
        Variant("ours hot", "the baseline: Bench.time as vs-nvbench-h100.txt took ours hot (no flush, a 20 us hold "
                "kernel before the start event, one call between two events, the median)"),  # fmt: skip
        Variant("hold 0", "no hold kernel: the GPU idles while the host enqueues the call"),
        Variant("hold 500 us", "a 500 us hold kernel (CUB_HOLD_US of tuner/measure/peaks.py)"),
        Variant("hold until released", "a kernel spinning on a host flag that the host sets once the stop event is "
                "enqueued (nvbench's blocking kernel): no host time between the events, however long"),  # fmt: skip
        Variant("cold, read flush", "the L2 flushed before each sample by a read of twice its size (the pipeline's flush)"),
        Variant("cold, memset flush", "the L2 flushed before each sample by a memset of twice its size (nvbench's kind: "
                "dirty lines written back during the sample)"),  # fmt: skip
        Variant("batch of 10", "10 calls back to back between the two events, per call"),
        Variant("CUDA graph", "the CuPy call captured once in a CUDA graph; each sample launches the graph (no Python "
                "between the events)"),  # fmt: skip
        Variant("CUB from C++", "cub::DeviceReduce::Sum from a library nvcc builds here, through ctypes, its workspace "
                "allocated once (nvcc's CUB, not CuPy's build of it; no copy of the result into out)"),  # fmt: skip
        Variant("CuPy's timer", "cupyx.profiler.benchmark: events around one call, no hold, its median"),
        Variant("nvbench batch", "cuda.bench's batch measurement: its blocking kernel, then calls back to back between "
                "events, hot; its median"),  # fmt: skip
        Variant("nvbench cold", "cuda.bench's cold measurement: its memset flush and blocking kernel before every call"),
        Variant("ours hot again", "the baseline once more, last: how far the GPU drifted"),
    ),
    baseline="ours hot",
    reference="nvbench batch",
)

KERNEL_TUNER = Experiment(
    name="kernel-tuner",
    question="why Kernel Tuner's times of the vector add run 0.9 to 3.4 % above ours hot",
    works=tuple(kt_label(c) for c in KT_CONFIGS),
    rows=(
        Variant("ours hot", "the baseline: our cubin (nvcc -cubin -O3, whole program), our padded buffers, a prepared "
                "PyCUDA launch on the legacy stream, no flush, a 20 us hold kernel, the median"),  # fmt: skip
        Variant("cold, read flush", "the L2 flushed before each sample by a read of twice its size (the sweep's number)"),
        Variant("hold 0", "no hold kernel: the host's launch latency lands between the events"),
        Variant("batch of 7", "7 launches back to back between the two events, per launch"),
        Variant("exact-size buffers", "a and b in their exact-size upload buffers and c freshly allocated at n "
                "elements, as Kernel Tuner allocates, not our padded work copies"),  # fmt: skip
        Variant("KT loop", f"Kernel Tuner 1.5's benchmark loop on our cubin: synchronize, start event on its own "
                f"stream, an unprepared PyCUDA call, stop event, poll, synchronize; median of {KT_REPEATS} x 7"),  # fmt: skip
        Variant("KT loop, mean of 7", "the same samples as KT loop, each 7's mean (the time Kernel Tuner reports), "
                "median over the repeats"),  # fmt: skip
        Variant(f"KT loop after {KT_IDLE_S:g} s idle", f"Kernel Tuner's loop, each 7 after the GPU idled {KT_IDLE_S:g} s "
                "(as during its host-side answer check)"),  # fmt: skip
        Variant("PTX, driver JIT", "our PTX (nvcc -ptx, our flags) compiled by the driver at load"),
        Variant("PTX rdc, driver link", "our source as relocatable PTX (-rdc=true) linked with cudadevrt by the driver "
                "(PyCUDA's DynamicSourceModule, with our flags)"),  # fmt: skip
        Variant("KT source, our nvcc", "Kernel Tuner's kernel string (its #define lines and #line 1) through our nvcc "
                "command"),  # fmt: skip
        Variant("KT module", "Kernel Tuner's own compile (PyCudaFunctions.compile: DynamicSourceModule, "
                "-Xcompiler=-Wall -e vector_add -arch compute_XX -code sm_XX) of its kernel string"),  # fmt: skip
        Variant("Kernel Tuner (PyCUDA)", "tune_kernel, lang CUDA, no answer check: the median of its 7 times"),
        Variant("Kernel Tuner (CuPy)", "tune_kernel, lang cupy (NVRTC, -std=c++17 for the kernel's if constexpr)"),
        Variant("Kernel Tuner (cuda-python)", "tune_kernel, lang nvcuda (NVRTC to PTX, -std=c++17)"),
        Variant("Kernel Tuner, answer checked", "tune_kernel as vs_kernel_tuner.py ran it: lang CUDA, the answer "
                "checked on the host (seconds of idle GPU) before its 7 launches"),  # fmt: skip
        Variant("ours hot again", "the baseline once more, last: how far the GPU drifted"),
    ),
    baseline="ours hot",
    reference="Kernel Tuner, answer checked",
)

EXPERIMENTS = {e.name: e for e in (NVBENCH, KERNEL_TUNER)}


# ---- the table ----------------------------------------------------------------------


@dataclass
class Cell:
    """One work's result in one row: its median (ms), or why there is none."""

    median_ms: float | None = None
    samples: int = 0
    sm_clock_mhz: float | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.median_ms is not None and math.isfinite(self.median_ms) and self.median_ms > 0


def cell_of(samples_ms, sm_clocks_mhz=(), note: str = "") -> Cell:
    """The median of ``samples_ms`` and of the finite SM clocks seen with them."""
    samples = [float(s) for s in samples_ms]
    clocks = [float(c) for c in sm_clocks_mhz if c is not None and math.isfinite(c)]
    return Cell(
        median_ms=statistics.median(samples) if samples else None,
        samples=len(samples),
        sm_clock_mhz=statistics.median(clocks) if clocks else None,
        note=note,
    )


def ratio(a: Cell | None, b: Cell | None) -> float | None:
    """a / b of two medians, or None where either has none."""
    return a.median_ms / b.median_ms if a is not None and b is not None and a.ok and b.ok else None


@dataclass
class Table:
    """The rows of one experiment: ``cells[row][work]``."""

    experiment: Experiment
    works: list[str]
    cells: dict[str, dict[str, Cell]]
    context: dict = field(default_factory=dict)  # device, versions, host microseconds per call
    notes: list[str] = field(default_factory=list)

    def cell(self, row: str, work: str) -> Cell | None:
        return self.cells.get(row, {}).get(work)

    def over_baseline(self, row: str, work: str) -> float | None:
        return ratio(self.cell(row, work), self.cell(self.experiment.baseline, work))

    def reference_over(self, row: str, work: str) -> float | None:
        return ratio(self.cell(self.experiment.reference, work), self.cell(row, work))

    def verdict(self, row: str, tolerance: float = TOLERANCE) -> str:
        """Where a row lands within ``tolerance``: at the baseline (``base``),
        at the reference (``ref``), at neither (``other``), some works one way
        and some another (``mixed``), or ``n/a`` where it has no figure. A work
        whose baseline and reference agree (a control: no gap) says nothing
        about which of the two a row is at, unless every work is such."""
        seen = []
        for work in self.works:
            moved, to_reference = self.over_baseline(row, work), self.reference_over(row, work)
            if moved is None:
                continue
            near = {kind for kind, r in (("base", moved), ("ref", to_reference)) if r is not None and abs(r - 1) <= tolerance}
            seen.append(near or {"other"})
        if not seen:
            return "n/a"
        telling = [near for near in seen if near != {"base", "ref"}] or seen
        common = set.intersection(*telling)
        if common:
            return "base" if "base" in common else common.pop()
        return "other" if all(near == {"other"} for near in telling) else "mixed"

    def as_json(self) -> dict:
        e = self.experiment
        rows = []
        for variant in e.rows:
            cells = {}
            for work in self.works:
                c = self.cell(variant.name, work) or Cell(note="not measured")
                cells[work] = {"median_ms": c.median_ms, "samples": c.samples, "sm_clock_mhz": c.sm_clock_mhz,
                               "note": c.note, "over_baseline": self.over_baseline(variant.name, work),
                               "reference_over_row": self.reference_over(variant.name, work)}  # fmt: skip
            rows.append({"name": variant.name, "factor": variant.factor, "verdict": self.verdict(variant.name), "cells": cells})
        return {"experiment": e.name, "question": e.question, "baseline": e.baseline, "reference": e.reference,
                "tolerance": TOLERANCE, "works": self.works, "context": self.context, "rows": rows,
                "notes": self.notes, "summary": self.summary()}  # fmt: skip

    def text(self) -> str:
        e = self.experiment
        width = 28
        header = f"{'row':30s}" + "".join(f" | {w[:width]:>{width}s}" for w in self.works) + " |  SM MHz  verdict"
        units = f"{'':30s}" + "".join(f" | {'ms':>10s} {'x base':>8s} {'ref/row':>8s}" for _ in self.works) + " |"
        lines = [f"yardstick gap, {e.name}: {e.question}"]
        lines += [f"{k}: {v}" for k, v in self.context.items()]
        lines += ["", f"medians in ms; x base: the row over '{e.baseline}'; ref/row: '{e.reference}' over the row "
                  f"(1: the two agree); verdict: where the row lands within {TOLERANCE:.0%} (base, ref, other, mixed)", "",
                  header, units]  # fmt: skip
        for variant in e.rows:
            cells = []
            clocks = []
            for work in self.works:
                c = self.cell(variant.name, work)
                clocks += [c.sm_clock_mhz] if c is not None and c.sm_clock_mhz else []
                cells.append(f" | {_num(c.median_ms if c is not None and c.ok else None, 10, 5)} "
                             f"{_num(self.over_baseline(variant.name, work), 8, 4)} "
                             f"{_num(self.reference_over(variant.name, work), 8, 4)}")  # fmt: skip
            clock = f"{statistics.median(clocks):8.0f}" if clocks else f"{'':>8s}"
            lines.append(f"{variant.name[:30]:30s}{''.join(cells)} | {clock}  {self.verdict(variant.name)}")
        lines += ["", "rows:"] + [f"  {v.name}: {v.factor}" for v in e.rows]
        noted = [(v.name, w, self.cell(v.name, w).note) for v in e.rows for w in self.works
                 if self.cell(v.name, w) is not None and self.cell(v.name, w).note]  # fmt: skip
        if noted or self.notes:
            lines += ["", "notes:"] + [f"  {row} / {work}: {note}" for row, work, note in noted] + [f"  {n}" for n in self.notes]
        lines += ["", "summary:"] + [f"  {line}" for line in self.summary()]
        return "\n".join(lines) + "\n"

    def summary(self, tolerance: float = TOLERANCE) -> list[str]:
        """The gap as measured here, the rows that reach the reference, the
        rows that move off the baseline, and the drift."""
        e = self.experiment
        gaps = {w: self.reference_over(e.baseline, w) for w in self.works}
        lines = [f"the gap here ({e.reference} / {e.baseline}): " + _ratios(gaps)]
        if all(g is None or abs(g - 1) <= tolerance for g in gaps.values()):
            lines.append(f"the gap did not show within {tolerance:.0%}: no row can tell its cause")
        last = e.rows[-1].name
        drift = last if last != e.baseline and last.startswith(e.baseline) else None
        others = [v.name for v in e.rows if v.name not in (e.baseline, e.reference, drift)]
        verdicts = {name: self.verdict(name, tolerance) for name in others}
        reach = [n for n, v in verdicts.items() if v == "ref"]
        stay = [n for n, v in verdicts.items() if v == "base"]
        elsewhere = [f"{n} ({v}: " + _ratios({w: self.over_baseline(n, w) for w in self.works}) + " of the baseline)"
                     for n, v in verdicts.items() if v in ("other", "mixed")]  # fmt: skip
        lines.append(f"at the reference within {tolerance:.0%}: " + (", ".join(reach) or "no row"))
        lines.append(f"at the baseline within {tolerance:.0%}: " + (", ".join(stay) or "no row"))
        if elsewhere:
            lines.append("elsewhere: " + "; ".join(elsewhere))
        missing = [n for n, v in verdicts.items() if v == "n/a"]
        if missing:
            lines.append("no figure: " + ", ".join(missing))
        if drift:
            lines.append(f"drift ({drift} / {e.baseline}): " + _ratios({w: self.over_baseline(drift, w) for w in self.works}))
        return lines


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'n/a':>{width}s}"


def _ratios(by_work: dict[str, float | None]) -> str:
    return ", ".join(f"{w} {r:.4f}" if r is not None else f"{w} n/a" for w, r in by_work.items())


def write_table(table: Table, out: Path) -> list[Path]:
    """``<experiment>.txt`` and ``<experiment>.json`` in ``out``, each written whole."""
    from tuner.data.results import write_json_atomic, write_text_atomic

    name = table.experiment.name
    return [write_text_atomic(table.text(), out / f"{name}.txt"), write_json_atomic(table.as_json(), out / f"{name}.json")]


def plan(experiment: Experiment, out: Path | None) -> str:
    """What a run would measure and write (``--dry-run``)."""
    lines = [f"experiment {experiment.name}: {experiment.question}",
             f"works: {', '.join(experiment.works)}",
             f"baseline: {experiment.baseline}; reference: {experiment.reference}", "rows:"]  # fmt: skip
    lines += [f"  {i:2d}. {v.name}: {v.factor}" for i, v in enumerate(experiment.rows, 1)]
    where = [str(out / f"{experiment.name}.{ext}") for ext in ("txt", "json")] if out else ["(no --out: stdout only)"]
    lines.append("would write: " + ", ".join(where))
    return "\n".join(lines) + "\n"


# ---- measuring (GPU) ----------------------------------------------------------------

RowFunction = Callable[[], dict[str, Cell]]


def measure_rows(experiment: Experiment, works: list[str], functions: dict[str, RowFunction], log=print) -> dict:
    """Each row's cells in the plan's order; a row that raises keeps the error
    as every work's note and the others still run."""
    cells: dict[str, dict[str, Cell]] = {}
    for i, variant in enumerate(experiment.rows, 1):
        started = time.perf_counter()
        try:
            got = functions[variant.name]()
        except Exception as error:  # a missing tool, a capture the driver refused: the row says so
            got = {w: Cell(note=f"error: {one_line(error)}") for w in works}
        cells[variant.name] = {w: got.get(w, Cell(note="n/a for this work")) for w in works}
        shown = ", ".join(f"{c.median_ms:.5f}" if c.ok else "-" for c in cells[variant.name].values())
        log(f"[{i}/{len(experiment.rows)}] {variant.name}: {shown} ms ({time.perf_counter() - started:.1f} s)")
    return cells


def one_line(error: BaseException) -> str:
    """The error's type and the first line of its message, at most 300 characters."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


def timed(bench, run, *, hold=None, timer=None, flush=None, per_call: int = 1) -> Cell:
    """``time_kernel`` of ``run`` with this bench's options (flush on where
    ``flush`` is given), the hold and timer given; per call of a batch."""
    from dataclasses import replace

    from tuner.measure.timing import time_kernel

    gpu = bench.gpu
    result = time_kernel(run, timer=timer or gpu.event_timer(), options=replace(bench.timing, flush_l2=flush is not None),
                         flush=flush, hold=hold, synchronize=gpu.synchronize, clocks=bench.clocks)  # fmt: skip
    return cell_of(result.samples_ms / per_call, result.sm_clocks_mhz)


def batch_of(run, count: int):
    def batched() -> None:
        for _ in range(count):
            run()

    return batched


def host_us_per_call(run, synchronize, calls: int = 50, repeats: int = 5) -> float:
    """The host's microseconds to enqueue one call (the median of ``repeats``
    rounds of ``calls``): what a hold before the start event must cover."""
    rounds = []
    for _ in range(repeats):
        synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            run()
        rounds.append((time.perf_counter() - started) / calls * 1e6)
        synchronize()
    return statistics.median(rounds)


HOLD_UNTIL_RELEASED = r"""
// Spins until the host sets *flag (nvbench's blocking kernel), or a timeout passes.
extern "C" __global__ void hold_until_released(volatile int* flag, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (*flag == 0 && now - start < timeout_ns);
}
"""


class ReleasedHold:
    """A hold kernel that spins until the host releases it, and the timer that
    releases it once the stop event is enqueued: whatever the host spends on the
    call, the GPU sits in the hold, never between the events."""

    def __init__(self, bench, source_dir: Path) -> None:
        import numpy as np

        from tuner.measure.compile import compile_source

        gpu = bench.gpu
        source_dir.mkdir(parents=True, exist_ok=True)
        source = source_dir / "hold_until_released.cu"
        source.write_text(HOLD_UNTIL_RELEASED)
        compiled = compile_source(source, "hold_until_released", defines={}, arch=gpu.arch, cache_dir=bench.cache_dir,
                                  prefix="gaps")  # fmt: skip
        cuda = gpu.cuda
        self.flag = cuda.pagelocked_zeros((1,), np.int32, mem_flags=cuda.host_alloc_flags.DEVICEMAP)
        pointer = np.uintp(self.flag.base.get_device_pointer())
        function = gpu.function(compiled.cubin, compiled.kernel, "PQ")
        self._spin = gpu.launcher(function, (1, 1, 1), (1, 1, 1), pointer, np.uint64(1_000_000_000))  # 1 s at most
        self.start, self.end = cuda.Event(), cuda.Event()

    def hold(self) -> None:
        self.flag[0] = 0
        self._spin()

    def timer(self, run) -> float:
        self.start.record()
        run()
        self.end.record()
        self.flag[0] = 1
        self.end.synchronize()
        return self.end.time_since(self.start)


CUB_SUM_SOURCE = r"""
// CUB's device-wide sum from C++: both of its kernels enqueued by one call.
#include <cub/device/device_reduce.cuh>

template <typename T>
static int sum(const void* in, void* out, unsigned long long n, void* temp, size_t* temp_bytes, cudaStream_t stream) {
    return static_cast<int>(cub::DeviceReduce::Sum(temp, *temp_bytes, static_cast<const T*>(in), static_cast<T*>(out),
                                                   static_cast<int>(n), stream));
}

extern "C" int cub_sum(int is_float, const void* in, void* out, unsigned long long n, void* temp, size_t* temp_bytes,
                       cudaStream_t stream) {
    return is_float ? sum<float>(in, out, n, temp, temp_bytes, stream) : sum<int>(in, out, n, temp, temp_bytes, stream);
}
"""


def cub_library(arch: str, cache_dir: Path) -> Path:
    """The shared library of ``CUB_SUM_SOURCE`` for ``arch``, built once per source and arch."""
    import hashlib
    import subprocess
    import tempfile

    from tuner.measure.compile import nvcc_version

    key = hashlib.sha256(f"{CUB_SUM_SOURCE}{arch}{nvcc_version()}".encode()).hexdigest()[:16]
    library = cache_dir / f"gaps-cub-sum-{key}.so"
    if library.exists():
        return library
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        source = Path(tmp) / "cub_sum.cu"
        source.write_text(CUB_SUM_SOURCE)
        built = Path(tmp) / library.name
        proc = subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", f"-arch={arch}", "-o",
                               str(built), str(source)], capture_output=True, text=True)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc could not build the CUB library: {(proc.stdout + proc.stderr).strip()[-500:]}")
        os.replace(built, library)
    return library


def refuse(reason: str) -> None:
    """One line on stderr, exit status 2: nothing measured, nothing written."""
    print(f"error: {reason}", file=sys.stderr)
    raise SystemExit(2)


def device_setup(args):
    """(gpu, device description, Bench) for ``args.device``, or exits with one line."""
    from tuner.device.describe import describe
    from tuner.device.gpu import GpuUnavailable, require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.timing import TimingOptions

    try:
        gpu = require_gpu(args.device)
    except GpuUnavailable as error:
        refuse(str(error))
    device = describe(gpu)
    options = TimingOptions(min_samples=args.min_samples)
    bench = Bench.open(gpu, device, args.cache, timing=options)
    return gpu, device, bench


def version_of(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "missing"


def nvbench_table(args, log) -> Table:
    """The nvbench experiment on this GPU."""
    import ctypes

    import numpy as np
    from vs_nvbench import Work, time_nvbench

    from tuner.measure.peaks import peak_buffer_bytes

    gpu, device, bench = device_setup(args)
    try:
        import cupy
        from cupy.cuda import cub
    except ImportError as error:
        refuse(f"the nvbench experiment times CUB's sums through CuPy, which is missing ({error})")
    n = args.n
    size = f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"n={n}"
    names = {dtype: f"CUB sum {dtype} {size}" for dtype in ("int32", "float32")}
    copy_bytes = peak_buffer_bytes(gpu.l2_bytes)
    copy_name = f"device copy {copy_bytes >> 20} MiB"
    works = [names["int32"], names["float32"], copy_name]

    sums = {}  # dtype: (x, out, run)
    for dtype in ("int32", "float32"):
        x = cupy.ones(n, dtype=dtype)
        out = cupy.zeros((), dtype=dtype)

        def run(x=x, out=out, dtype=dtype) -> None:
            cub.cub_reduction(x, cub.CUPY_CUB_SUM, None, getattr(cupy, dtype), out, False)

        run()
        # float32 partial sums past 2^24 may round: within a part per million, not exact.
        if abs(float(out.get()) - n) > 1e-6 * n:
            raise SystemExit(f"error: CUB's sum of {n} ones gave {out.get()}")
        sums[dtype] = (x, out, run)
    src, dst = gpu.alloc(copy_bytes), gpu.alloc(copy_bytes)
    gpu.fill_bytes(src.ptr(), 0x3C, copy_bytes)

    def copy() -> None:
        gpu.copy(dst.ptr(), src.ptr(), copy_bytes)

    runs = {names["int32"]: sums["int32"][2], names["float32"]: sums["float32"][2], copy_name: copy}
    gpu.synchronize()
    host = {w: host_us_per_call(run, gpu.synchronize) for w, run in runs.items()}

    def each(make_cell) -> dict[str, Cell]:
        return {w: make_cell(run) for w, run in runs.items()}

    def cupy_only(make_cell) -> dict[str, Cell]:
        cells = {w: make_cell(dtype) for dtype, w in ((d, names[d]) for d in ("int32", "float32"))}
        return cells | {copy_name: Cell(note="n/a: the CuPy call only")}

    released = ReleasedHold(bench, Path(args.cache) / "gaps-sources")
    memset_buffer = gpu.alloc(2 * gpu.l2_bytes)

    def memset_flush() -> None:
        gpu.fill_bytes(memset_buffer.ptr(), 0, memset_buffer.nbytes)

    def graph_cell(dtype: str) -> Cell:
        x, out, run = sums[dtype]
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            run()  # the workspace and result blocks come from this stream's pool now, not during the capture
            stream.synchronize()
            stream.begin_capture()  # relaxed: CUB's own queries of the device do not end the capture
            try:
                run()
            finally:
                graph = stream.end_capture()
        out.fill(0)

        def launch() -> None:
            graph.launch(cupy.cuda.Stream.null)

        launch()
        gpu.synchronize()
        if abs(float(out.get()) - n) > 1e-6 * n:
            raise RuntimeError(f"the graph's sum gave {out.get()}")
        cell = timed(bench, launch, hold=bench.hold_for(20.0))
        cell.note = f"host {host_us_per_call(launch, gpu.synchronize):.1f} us per launch"
        return cell

    library = {}

    def cpp_cell(dtype: str) -> Cell:
        if "lib" not in library:
            library["lib"] = ctypes.CDLL(str(cub_library(gpu.arch, Path(args.cache))))
            library["lib"].cub_sum.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong,
                                               ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]  # fmt: skip
        lib = library["lib"]
        x, _, _ = sums[dtype]
        out = cupy.zeros((), dtype=dtype)
        size = ctypes.c_size_t(0)
        is_float = int(dtype == "float32")
        if lib.cub_sum(is_float, x.data.ptr, out.data.ptr, n, None, ctypes.byref(size), None) != 0:
            raise RuntimeError("CUB's workspace query failed")
        temp = cupy.empty(max(size.value, 1), dtype=cupy.uint8)

        def call() -> None:
            lib.cub_sum(is_float, x.data.ptr, out.data.ptr, n, temp.data.ptr, ctypes.byref(size), None)

        if lib.cub_sum(is_float, x.data.ptr, out.data.ptr, n, temp.data.ptr, ctypes.byref(size), None) != 0:
            raise RuntimeError("CUB's sum failed")
        gpu.synchronize()
        if abs(float(out.get()) - n) > 1e-6 * n:
            raise RuntimeError(f"CUB from C++ gave {out.get()}")
        cell = timed(bench, call, hold=bench.hold_for(20.0))
        cell.note = f"host {host_us_per_call(call, gpu.synchronize):.1f} us per call"
        return cell

    def cupy_timer(run) -> Cell:
        from cupyx.profiler import benchmark

        result = benchmark(run, n_repeat=max(args.min_samples, 30), n_warmup=3)
        return cell_of(np.asarray(result.gpu_times[0]) * 1e3)

    nvbench: dict[str, dict[str, Cell]] = {}
    table_notes: list[str] = []

    def nvbench_row(mode: str) -> dict[str, Cell]:
        if not nvbench:
            items = [Work(w, run, 2 * copy_bytes if w == copy_name else n * 4) for w, run in runs.items()]
            times, notes = time_nvbench(items, args.device, args.nvbench_args.split())
            table_notes.extend(notes)
            for key in ("nvb batch", "nvb cold"):
                nvbench[key] = {w: Cell(median_ms=times.get(w, {}).get(key), note="" if times.get(w, {}).get(key)
                                        else "nvbench gave no figure") for w in works}  # fmt: skip
        return nvbench[mode]

    hold20 = bench.hold_for(20.0)
    functions: dict[str, RowFunction] = {
        "ours hot": lambda: each(lambda run: timed(bench, run, hold=hold20)),
        "hold 0": lambda: each(lambda run: timed(bench, run)),
        "hold 500 us": lambda: each(lambda run: timed(bench, run, hold=bench.hold_for(500.0))),
        "hold until released": lambda: each(lambda run: timed(bench, run, hold=released.hold, timer=released.timer)),
        "cold, read flush": lambda: each(lambda run: timed(bench, run, hold=hold20, flush=bench.flush)),
        "cold, memset flush": lambda: each(lambda run: timed(bench, run, hold=hold20, flush=memset_flush)),
        "batch of 10": lambda: each(lambda run: timed(bench, batch_of(run, 10), hold=hold20, per_call=10)),
        "CUDA graph": lambda: cupy_only(graph_cell),
        "CUB from C++": lambda: cupy_only(cpp_cell),
        "CuPy's timer": lambda: each(cupy_timer),
        "nvbench batch": lambda: nvbench_row("nvb batch"),
        "nvbench cold": lambda: nvbench_row("nvb cold"),
        "ours hot again": lambda: each(lambda run: timed(bench, run, hold=hold20)),
    }
    cells = measure_rows(NVBENCH, works, functions, log)
    context = {"device": f"{device['name']} ({device['slug']}), driver {device.get('driver_version')}",
               "versions": f"cupy {cupy.__version__}, cuda-bench {version_of('cuda-bench')}, nvcc {bench.environment['nvcc_version']}",
               "host us to enqueue one call": ", ".join(f"{w} {us:.1f}" for w, us in host.items())}  # fmt: skip
    notes = ["a hold shorter than the host's time to enqueue a call leaves the GPU idle between the start event "
             "and the work, and the events time that idle too"] + table_notes  # fmt: skip
    return Table(NVBENCH, works, cells, context, notes)


def kernel_tuner_table(args, log) -> Table:
    """The Kernel Tuner experiment on this GPU."""
    import subprocess
    from types import SimpleNamespace

    import numpy as np

    from tuner.families import REGISTRY, Problem
    from tuner.families.base import KERNELS_DIR, DeviceOutput
    from tuner.families.vector_add import TOLERANCES
    from tuner.measure.compile import compile_source, compile_variant, nvcc_command

    gpu, device, bench = device_setup(args)
    cuda = gpu.cuda
    family, problem = REGISTRY["vector_add"], Problem("vector_add", "float32", args.n)
    session = bench.problem(family, problem)
    defaults = {p.name: p.default for p in family.params}
    configs = {kt_label(c): defaults | c | {"unroll": 1, "grid_blocks_per_sm": 0, "offset": 0} for c in KT_CONFIGS}
    works = list(configs)
    source = KERNELS_DIR / family.source
    major, minor = gpu.compute_capability.split(".")
    scratch = Path(args.cache) / "gaps-sources"
    scratch.mkdir(parents=True, exist_ok=True)
    modules: list = []  # modules and buffers kept alive while their launches may still run

    def verified(cfg: dict, function):
        """``function`` bound to our buffers, run once and checked on the device."""
        launch = family.bind(cfg, problem, session.buffers, function, gpu)
        launch.run()
        gpu.synchronize()
        verdict = session.verdict(launch)
        if not verdict.ok:
            raise RuntimeError(f"{kt_label(cfg)}: wrong result ({verdict.detail})")
        return launch

    ours = {}  # work: (function, launch, registers)
    for work, cfg in configs.items():
        compiled = compile_variant(family, cfg, problem, arch=gpu.arch, cache_dir=bench.cache_dir)
        function = gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
        ours[work] = (function, verified(cfg, function), compiled.registers)

    def each(make_cell) -> dict[str, Cell]:
        return {w: make_cell(w) for w in works}

    hold20 = bench.hold_for(20.0)

    def hot(work: str) -> Cell:
        return timed(bench, ours[work][1].run, hold=hold20)

    def code_row(make_function) -> dict[str, Cell]:
        cells = {}
        for work, cfg in configs.items():
            function, note = make_function(work, cfg)
            cell = timed(bench, verified(cfg, function).run, hold=hold20)
            cell.note = f"{note}; ours: {ours[work][2]} registers"
            cells[work] = cell
        return cells

    def ptx_jit(work: str, cfg: dict):
        out = scratch / f"{work.replace(' ', '-')}.ptx"
        command = nvcc_command(source, family.defines(cfg, problem), tuple(family.compile_flags(cfg)), gpu.arch, out)
        command[command.index("-cubin")] = "-ptx"
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc -ptx: {(proc.stdout + proc.stderr).strip()[-300:]}")
        module = cuda.module_from_buffer(out.read_bytes())
        function = module.get_function(family.kernel_name(cfg))
        function.prepare(family.arg_types)
        modules.append(module)
        return function, f"{function.num_regs} registers"

    def rdc_link(work: str, cfg: dict):
        from pycuda.compiler import DynamicSourceModule

        options = [f"-I{KERNELS_DIR}", "-O3", "-std=c++17", *(f"-D{k}={v}" for k, v in sorted(family.defines(cfg, problem).items()))]
        module = DynamicSourceModule(f'#include "{source}"\n', options=options, arch=f"compute_{major}{minor}",
                                     code=f"sm_{major}{minor}", cache_dir=False, no_extern_c=True)  # fmt: skip
        function = module.get_function(family.kernel_name(cfg))
        function.prepare(family.arg_types)
        modules.append(module)
        return function, f"{function.num_regs} registers"

    def kt_string(cfg: dict) -> str:
        from kernel_tuner import util

        params = {"BLOCK": cfg["block_size"], "VEC": cfg["vector_width"], "UNROLL": cfg["unroll"]}
        grid = (family.grid_size(cfg, problem, gpu.sm_count), 1, 1)
        names = ["BLOCK"]
        util.append_default_block_size_names(names)
        return util.prepare_kernel_string("vector_add", source.read_text(), params, grid, (cfg["block_size"], 1, 1), names,
                                          "CUDA", None)[1]  # fmt: skip

    def kt_source_our_nvcc(work: str, cfg: dict):
        path = scratch / f"kt-{work.replace(' ', '-')}.cu"
        path.write_text(kt_string(cfg))
        compiled = compile_source(path, "vector_add", defines={"ELEM": "float"}, arch=gpu.arch, cache_dir=bench.cache_dir,
                                  prefix="gaps-kt-source")  # fmt: skip
        return gpu.function(compiled.cubin, compiled.kernel, family.arg_types), f"{compiled.registers} registers"

    kt_backend = {}

    def kt_module(work: str, cfg: dict):
        from kernel_tuner.backends.pycuda import PyCudaFunctions

        if "dev" not in kt_backend:
            kt_backend["dev"] = PyCudaFunctions(device=args.device, iterations=7,
                                                compiler_options=[f"-I{KERNELS_DIR}", "-DELEM=float"])  # fmt: skip
        function = kt_backend["dev"].compile(SimpleNamespace(kernel_string=kt_string(cfg), name="vector_add"))
        function.prepare(family.arg_types)
        modules.append(kt_backend["dev"].current_module)  # the next compile replaces Kernel Tuner's reference to it
        return function, f"{function.num_regs} registers"

    def exact_buffers(work: str) -> Cell:
        function = ours[work][0]
        cfg = configs[work]
        c = gpu.alloc(args.n * 4)
        inputs = session.buffers.inputs
        run = gpu.launcher(function, (family.grid_size(cfg, problem, gpu.sm_count), 1, 1), (cfg["block_size"], 1, 1),
                           inputs.pristine["a"].ptr(), inputs.pristine["b"].ptr(), c.ptr(), np.uint64(args.n))  # fmt: skip
        run()
        gpu.synchronize()
        output = DeviceOutput(int(c.ptr()), args.n, np.dtype(np.float32), TOLERANCES["float32"])
        verdict = session.verdict(SimpleNamespace(output=output))
        if not verdict.ok:
            raise RuntimeError(f"{work}: wrong result in exact-size buffers ({verdict.detail})")
        cell = timed(bench, run, hold=hold20)
        modules.append(c)  # the buffer outlives its row: the device may still read it at the next sync
        return cell

    loops: dict[str, dict[str, Cell]] = {}

    def kt_loop(idle_s: float, repeats: int) -> tuple[dict[str, list[list[float]]], dict[str, list[float]]]:
        """Kernel Tuner 1.5's benchmark_default on our cubin and buffers: per
        repeat, 7 times (ms) each after a synchronize, on a stream of its own;
        and the SM clock read after each."""
        stream, start, end = cuda.Stream(), cuda.Event(), cuda.Event()
        inputs = session.buffers.inputs
        args_of = (inputs.ptr("a", 0), inputs.ptr("b", 0), session.buffers.c.ptr(), np.uint64(args.n))
        found: dict[str, list[list[float]]] = {}
        clocks: dict[str, list[float]] = {}
        for work, cfg in configs.items():
            function = ours[work][0]
            grid, block = (family.grid_size(cfg, problem, gpu.sm_count), 1, 1), (cfg["block_size"], 1, 1)
            found[work], clocks[work] = [], []
            for _ in range(repeats):
                if idle_s:
                    cuda.Context.synchronize()
                    time.sleep(idle_s)
                cuda.Context.synchronize()
                times = []
                for _ in range(7):
                    cuda.Context.synchronize()
                    start.record(stream)
                    function(*args_of, block=block, grid=grid, stream=stream, shared=0, texrefs=[])
                    end.record(stream)
                    while not end.query():
                        time.sleep(1e-6)
                    cuda.Context.synchronize()
                    times.append(end.time_since(start))
                    clocks[work].append(bench.clocks.sm_clock_mhz())
                found[work].append(times)
        return found, clocks

    def kt_loop_rows() -> None:
        found, clocks = kt_loop(0.0, KT_REPEATS)
        loops["KT loop"] = {w: cell_of([t for r in rs for t in r], clocks[w]) for w, rs in found.items()}
        loops["KT loop, mean of 7"] = {w: cell_of([statistics.mean(r) for r in rs], clocks[w]) for w, rs in found.items()}

    def loop_row(name: str) -> dict[str, Cell]:
        if name not in loops:
            kt_loop_rows()
        return loops[name]

    def idle_row() -> dict[str, Cell]:
        found, clocks = kt_loop(KT_IDLE_S, 3)
        cells = {w: cell_of([t for r in rs for t in r], clocks[w]) for w, rs in found.items()}
        for w, rs in found.items():
            first, rest = statistics.median(r[0] for r in rs), statistics.median(t for r in rs for t in r[1:])
            cells[w].note = f"first launch of each 7: {first:.5f} ms, the others {rest:.5f} ms"
        return cells

    host_inputs = {}

    def kernel_tuner_row(lang: str, answer: bool) -> dict[str, Cell]:
        import kernel_tuner

        if "a" not in host_inputs:
            rng = np.random.default_rng(0)
            host_inputs["a"], host_inputs["b"] = (rng.uniform(-1, 1, args.n).astype(np.float32) for _ in range(2))
        a, b = host_inputs["a"], host_inputs["b"]
        options = [f"-I{KERNELS_DIR}", "-DELEM=float"] + ([] if lang == "CUDA" else ["-std=c++17"])
        params = {"BLOCK": sorted({c["block_size"] for c in KT_CONFIGS}), "VEC": sorted({c["vector_width"] for c in KT_CONFIGS}),
                  "UNROLL": [1]}  # fmt: skip
        results, _ = kernel_tuner.tune_kernel(
            "vector_add", str(source), args.n, [a, b, np.zeros_like(a), np.uint64(args.n)], params,
            grid_div_x=["BLOCK", "VEC", "UNROLL"], block_size_names=["BLOCK"], restrictions=["VEC*4<=16"],
            answer=[None, None, a + b, None] if answer else None, atol=1e-6, compiler_options=options, lang=lang,
            strategy="brute_force", quiet=True, device=args.device,
        )  # fmt: skip
        cells = {}
        for r in results:
            work = kt_label({"vector_width": int(r["VEC"]), "block_size": int(r["BLOCK"])})
            times = r.get("times")
            if work in configs:
                cells[work] = cell_of(times) if isinstance(times, list) and times else Cell(note=f"no times: {r.get('time')}")
        return cells

    functions: dict[str, RowFunction] = {
        "ours hot": lambda: each(hot),
        "cold, read flush": lambda: each(lambda w: timed(bench, ours[w][1].run, hold=hold20, flush=bench.flush)),
        "hold 0": lambda: each(lambda w: timed(bench, ours[w][1].run)),
        "batch of 7": lambda: each(lambda w: timed(bench, batch_of(ours[w][1].run, 7), hold=hold20, per_call=7)),
        "exact-size buffers": lambda: each(exact_buffers),
        "KT loop": lambda: loop_row("KT loop"),
        "KT loop, mean of 7": lambda: loop_row("KT loop, mean of 7"),
        f"KT loop after {KT_IDLE_S:g} s idle": idle_row,
        "PTX, driver JIT": lambda: code_row(ptx_jit),
        "PTX rdc, driver link": lambda: code_row(rdc_link),
        "KT source, our nvcc": lambda: code_row(kt_source_our_nvcc),
        "KT module": lambda: code_row(kt_module),
        "Kernel Tuner (PyCUDA)": lambda: kernel_tuner_row("CUDA", answer=False),
        "Kernel Tuner (CuPy)": lambda: kernel_tuner_row("cupy", answer=False),
        "Kernel Tuner (cuda-python)": lambda: kernel_tuner_row("nvcuda", answer=False),
        "Kernel Tuner, answer checked": lambda: kernel_tuner_row("CUDA", answer=True),
        "ours hot again": lambda: each(hot),
    }
    cells = measure_rows(KERNEL_TUNER, works, functions, log)
    context = {"device": f"{device['name']} ({device['slug']}), driver {device.get('driver_version')}",
               "problem": f"vector_add float32, n = {args.n}",
               "versions": f"kernel_tuner {version_of('kernel_tuner')}, pycuda {version_of('pycuda')}, "
                           f"cuda-bindings {version_of('cuda-bindings')}, nvcc {bench.environment['nvcc_version']}"}  # fmt: skip
    return Table(KERNEL_TUNER, works, cells, context)


# ---- command line -------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS), help="which gap to take apart")
    parser.add_argument("--out", type=Path, help="folder for <experiment>.txt and <experiment>.json")
    parser.add_argument("--dry-run", action="store_true", help="print the rows and the files, touch no GPU")
    parser.add_argument("--n", type=int, default=N, help="elements of each work (default 2^28, as the yardsticks)")
    parser.add_argument("--min-samples", type=int, default=30, help="samples at least per row and work (default 30)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    parser.add_argument("--cache", default=".cubin-cache", help="cubin cache folder (also the CUB library's)")
    parser.add_argument("--nvbench-args", default="", help="more arguments for nvbench, e.g. '--min-samples 50'")
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One line for bad input, before any GPU work."""
    if args.n < 1 << 10:
        parser.error(f"--n: must be at least 1024, got {args.n}")
    if args.n > 0x7FFFFFFF:
        parser.error(f"--n: must fit CUB's int count (at most {0x7FFFFFFF}), got {args.n}")
    if args.min_samples < 2:
        parser.error(f"--min-samples: must be at least 2, got {args.min_samples}")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        parser.error(f"--out: must be a folder (or none yet), got the file {str(args.out)!r}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    experiment = EXPERIMENTS[args.experiment]
    if args.dry_run:
        sys.stdout.write(plan(experiment, args.out))
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    table = (nvbench_table if experiment is NVBENCH else kernel_tuner_table)(args, log)
    table.context["wall"] = f"{time.perf_counter() - started:.0f} s"
    text = table.text()
    if args.out is not None:
        for path in write_table(table, args.out):
            log(f"wrote {path}")
    sys.stdout.write(text)  # its summary last
    return 0


if __name__ == "__main__":
    sys.exit(main())
