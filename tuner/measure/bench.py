"""Measure one configuration: check it, compile it, verify it, time it, and
return one results row. A wrong result is recorded as such and has no time.

``Bench`` holds what a run shares (the GPU, clocks, compile cache, timing
options, peaks, the environment columns); ``Bench.problem(...)`` uploads one
problem's inputs once and measures any number of configurations on them.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuner.errors import FatalDeviceError
from tuner.families.base import Config, Family, Problem, amount_unfit, config_key
from tuner.families.limits import DeviceLimits, launch_violations, resource_violations
from tuner.measure.compile import CompileError, compile_variant, nvcc_version
from tuner.measure.energy import EnergyOptions, EnergyUnavailable, measure_energy
from tuner.measure.timing import ClockMonitor, NoClocks, TimingOptions, TimingResult, is_throttled, time_kernel
from tuner.progress import Phases
from tuner.resources import checkout_root


def git_commit(root: Path | None = None) -> str:
    """The checkout's commit, with ``-dirty`` where tracked files differ from it:
    a row measured with edited code (a kernel being tuned, a copied working tree
    whose HEAD lags) must not claim the commit's code measured it."""
    if os.environ.get("TUNER_GIT_COMMIT"):
        return os.environ["TUNER_GIT_COMMIT"]
    root = root or checkout_root()
    if root is None or not (root / ".git").exists():
        # Not a checkout of its own (an install inside another project's tree): git would
        # answer with that project's commit.
        return "unknown"
    # safe.directory: a checkout another user owns (a shared one) is still read, not refused as dubious.
    git = ["git", "-c", f"safe.directory={root}", "-C", str(root)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        edited = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if edited else head


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def environment_columns(device: dict, slug: str, run_id: str | None = None) -> dict[str, Any]:
    """The columns every row of a run shares."""
    return {
        "run_id": run_id or uuid.uuid4().hex[:12],
        "gpu": device["name"],
        "gpu_slug": slug,
        "pci_bus_id": device.get("pci_bus_id"),
        "compute_capability": device["compute_capability"],
        "driver_version": device.get("driver_version"),
        "cuda_version": device.get("cuda_version"),
        "nvcc_version": nvcc_version(),
        "pycuda_version": device.get("pycuda_version"),
        "git_commit": git_commit(),
    }


@dataclass
class Bench:
    gpu: Any  # tuner.device.gpu.Gpu
    environment: dict
    cache_dir: Path
    timing: TimingOptions = TimingOptions()
    peaks: dict = field(default_factory=dict)
    clocks: Any = None
    seed: int = 0
    # Compare outputs with the host reference on the device where the family
    # says where its output lies (tuner/measure/check.py); False: on the host.
    check_on_device: bool = True
    # Energy (tuner/measure/energy.py) of every verified, timed row; None: none
    # (``ProblemBench.measure_energy`` measures one configuration on request).
    energy: EnergyOptions | None = None

    @classmethod
    def open(cls, gpu: Any, device: dict, cache_dir: str | os.PathLike, *, slug: str | None = None, **options: Any) -> "Bench":
        """The one way a Bench is set up: on ``gpu``, whose facts (device.json's)
        ``device`` holds, with a cubin cache in ``cache_dir``.

        Args:
            slug: the GPU's name in the results folder (``gpu_slug`` of every
                row); the device's own slug by default.
            options: the other fields (``timing``, ``seed``, ``energy``, ``peaks``...).
        """
        environment = environment_columns(device, slug or device["slug"])
        return cls(gpu=gpu, environment=environment, cache_dir=Path(cache_dir), **options)

    def __post_init__(self) -> None:
        # Seconds spent per phase of measuring (inputs, compile, load, verify,
        # time): where a sweep's or a study's time goes (``phase_summary``).
        self.phases = Phases()
        if self.clocks is None:
            self.clocks = clock_monitor(self.gpu.pci_bus_id)
        self._timer = self.gpu.event_timer()
        self._holds: dict[float, Any] = {}
        self._flush = None
        self._checker = None
        self.limits = DeviceLimits.of_gpu(self.gpu)

    @property
    def checker(self):
        """The device comparison kernels, loaded at first use."""
        if self._checker is None:
            from tuner.measure.check import DeviceChecker

            self._checker = DeviceChecker(self.gpu, self.cache_dir)
        return self._checker

    def _timing_function(self, kernel: str, arg_types: str):
        from tuner.families.base import KERNELS_DIR
        from tuner.measure.compile import compile_source

        compiled = compile_source(KERNELS_DIR / "timing.cu", kernel, defines={}, arch=self.gpu.arch,
                                  cache_dir=self.cache_dir, prefix="timing")  # fmt: skip
        return self.gpu.function(compiled.cubin, compiled.kernel, arg_types)

    def hold_for(self, hold_us: float):
        """The spin launch of ``hold_us`` that precedes each sample's start event (None for 0)."""
        if hold_us <= 0:
            return None
        if hold_us not in self._holds:
            function = self._timing_function("hold_stream", "Q")
            self._holds[hold_us] = self.gpu.launcher(function, (1, 1, 1), (1, 1, 1), np.uint64(hold_us * 1000))
        return self._holds[hold_us]

    @property
    def flush(self):
        """The L2 flush before each sample: a read of a buffer twice the L2's
        size (kernels/timing.cu says why a read and not a memset)."""
        if self._flush is None:
            gpu = self.gpu
            buffer, sink = gpu.alloc(2 * gpu.l2_bytes), gpu.alloc(4)
            gpu.fill_bytes(buffer.ptr(), 0x5A, buffer.nbytes)
            self._flush = gpu.launcher(self._timing_function("flush_l2", "PQP"), (4 * gpu.sm_count, 1, 1), (512, 1, 1),
                                       buffer.ptr(), np.uint64(buffer.nbytes // 16), sink.ptr())  # fmt: skip
            self._flush_buffers = (buffer, sink)
            self._flush()  # once now: the memset's dirty lines go back to memory here, before any sample
        return self._flush

    def time(self, run, *, restore=None, options: TimingOptions | None = None):
        """``time_kernel`` with this bench's timer, flush, hold and clocks."""
        options = options or self.timing
        flush = self.flush if options.flush_l2 else None
        return time_kernel(run, timer=self._timer, options=options, restore=restore, flush=flush,
                           hold=self.hold_for(options.hold_us), synchronize=self.gpu.synchronize, clocks=self.clocks)  # fmt: skip

    @property
    def has_energy_counter(self) -> bool:
        """NVML answers with a total-energy counter for this GPU."""
        read = getattr(self.clocks, "energy_mj", None)
        return read is not None and read() is not None

    def joules(self, run, *, restore=None, options: EnergyOptions | None = None):
        """``measure_energy`` of ``run`` with this bench's GPU and NVML counter
        (raises ``EnergyUnavailable`` where there is none)."""
        counter = getattr(self.clocks, "energy_mj", None)
        if counter is None:
            raise EnergyUnavailable("no NVML on this machine")
        clocks, ratio = self.clocks, self.timing.throttle_ratio

        def settled() -> bool:
            # The clock timing keeps samples at: an idle GPU's first launches run slower, at another power.
            return not is_throttled(clocks.sm_clock_mhz(), clocks.max_sm_clock_mhz(), ratio)

        return measure_energy(run, synchronize=self.gpu.synchronize, counter=counter, options=options or self.energy or EnergyOptions(),
                              marker=getattr(self.gpu, "marker", None), restore=restore, settled=settled)  # fmt: skip

    def problem(self, family: Family, problem: Problem) -> "ProblemBench":
        return ProblemBench(self, family, problem)

    def phase(self, name: str):
        """``with bench.phase("verify"):`` adds its seconds to ``phases``."""
        return self.phases(name)

    def phase_summary(self) -> str:
        """One line: seconds per phase, largest first."""
        return f"phases: {self.phases}"


class ProblemBench:
    """One problem's inputs on the device, measured under many configurations."""

    def __init__(self, bench: Bench, family: Family, problem: Problem) -> None:
        self.bench, self.family, self.problem = bench, family, problem
        # Fresh random inputs per problem; the seed keeps reruns comparable.
        rng = np.random.default_rng([bench.seed, problem.n, sum(map(ord, problem.key))])
        with bench.phase("inputs"):
            self.inputs = family.make_inputs(problem, rng)
        with bench.phase("reference"):
            self.expected = family.reference(self.inputs, problem)
        with bench.phase("upload"):
            self.buffers = family.allocate(problem, self.inputs, bench.gpu)
        self._device_references: dict[str, Any] = {}  # layout -> DeviceReference, uploaded at first use

    def verdict(self, launch) -> Any:
        """The launch's output (already computed) against the host reference:
        on the device where the launch says where its output lies."""
        output = launch.output
        if output is None or not self.bench.check_on_device:
            return self.family.verify(launch.fetch(), self.expected, self.inputs)
        reference = self._device_references.get(output.layout)
        if reference is None:
            laid_out = self.family.device_reference(self.expected, output.layout)
            reference = self.bench.checker.upload(laid_out, output.dtype, exact=output.tolerance is None)
            self._device_references[output.layout] = reference
        return self.bench.checker.verdict(output, reference)

    def base_row(self, cfg: Config, source: str) -> dict:
        row = {**self.bench.environment, "timestamp": now_iso(), "source": source,
               "family": self.family.name, "dtype": self.problem.dtype, "n": self.problem.n,
               "config_key": config_key(cfg)}  # fmt: skip
        for name in self.family.param_names:
            row[name] = cfg[name]
        return row

    def measure(self, cfg: Config, source: str, *, flush_l2: bool | None = None, timed: bool = True, profile=None,
                energy: bool | None = None) -> dict:  # fmt: skip
        """One results row for ``cfg``; never raises for a bad configuration
        (a timing that gives no time, every sample throttled or a median of 0,
        is a ``launch_error`` row saying why).
        With ``timed=False`` it stops after verification (status ok, no times);
        with ``profile`` (``profile(run)``), one more untimed launch on restored
        inputs follows verification, handed to the profiler, and no timing.
        ``energy`` (default: whether the bench measures energy) adds the energy
        columns after timing (null where the GPU has no energy counter)."""
        bench, family, problem = self.bench, self.family, self.problem
        row = self.base_row(cfg, source)
        reasons = family.violations(cfg, problem)
        if reasons:
            return row | {"status": "infeasible", "error": "; ".join(reasons)}
        amounts = _amounts(family, cfg, problem)  # before any GPU work: a rate of NaN bytes ranks nothing
        if isinstance(amounts, str):
            return row | {"status": "launch_error", "error": amounts}
        bytes_moved, flops = amounts
        try:
            with bench.phase("compile"):
                compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
        except CompileError as error:
            if error.over_limit:  # ptxas refused a device limit: the configuration cannot run
                return row | {"status": "infeasible", "error": error.over_limit}
            return row | {"status": "compile_error", "error": str(error)[-2000:]}
        row |= {"registers": compiled.registers, "shared_bytes": compiled.shared_bytes,
                "spill_bytes": compiled.spill_bytes, "local_bytes": compiled.local_bytes}  # fmt: skip
        gpu = bench.gpu
        try:
            with bench.phase("load"):
                function = gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
                launch = family.bind(cfg, problem, self.buffers, function, gpu)
            row |= {"grid": ",".join(map(str, launch.grid)), "block": ",".join(map(str, launch.block))}
            over = over_limits(compiled, launch, bench.limits)
            if over:  # the launch would fail for what the device cannot give: infeasible, never launched
                return row | {"status": "infeasible", "error": "; ".join(over)}
            with bench.phase("verify"):
                launch.run()
                gpu.synchronize()
                verdict = self.verdict(launch)
        except Exception as error:  # pycuda.driver.Error and friends
            failed = row | {"status": "launch_error", "error": f"{type(error).__name__}: {error}"}
            self._check_context(error, failed)
            return failed
        if not verdict.ok:
            return row | {"status": "wrong_result", "error": verdict.detail}
        if profile is not None:
            if launch.restore:
                launch.restore()
            profile(launch.run)
            return row | {"status": "ok", "error": f"{verdict.error:.3g}"}
        if not timed:
            return row | {"status": "ok", "error": None, "verify_error": float(verdict.error)}
        options = bench.timing if flush_l2 is None else _with_flush(bench.timing, flush_l2)
        try:
            with bench.phase("time"):
                timing = bench.time(launch.run, restore=launch.restore, options=options)
        except Exception as error:
            failed = row | {"status": "launch_error", "error": f"while timing: {type(error).__name__}: {error}"}
            self._check_context(error, failed)
            return failed
        untrusted = _untrusted_time(timing, options)
        if untrusted:
            return row | {"status": "launch_error", "error": f"while timing: {untrusted}"}
        seconds = timing.median_ms / 1e3
        bandwidth = bytes_moved / seconds / 1e9
        row |= timing.as_row() | {
            "status": "ok",
            "error": None,
            "verify_error": float(verdict.error),
            "bytes_moved": bytes_moved,
            "bandwidth_gbs": bandwidth,
            "gflops": flops / seconds / 1e9 if flops else None,
        }
        row |= peak_fractions(bandwidth, bench.peaks)
        if energy if energy is not None else bench.energy is not None:
            try:
                row |= self._energy_columns(cfg, launch)
            except Exception as error:
                failed = row | {"status": "launch_error", "error": f"while measuring energy: {type(error).__name__}: {error}"}
                self._check_context(error, failed)
                return failed
        return row

    def _energy_columns(self, cfg: Config, launch) -> dict:
        """The energy columns of ``launch`` (none where there is no counter)."""
        try:
            with self.bench.phase("energy"):
                result = self.bench.joules(launch.run, restore=launch.restore)
        except EnergyUnavailable:
            return {}
        return result.as_row(self.family.bytes_moved(cfg, self.problem), self.family.flops(cfg, self.problem) or None)

    def measure_energy(self, cfg: Config) -> dict:
        """The energy columns of ``cfg``, measured alone (a configuration a
        sweep verified and timed already: its module is in the cache); empty
        where the GPU has no energy counter."""
        return self._energy_columns(cfg, self.launch(cfg))

    def launch(self, cfg: Config):
        """``cfg`` compiled (from the cache where it was before), loaded and
        bound to this problem's buffers, inputs restored: a ``Launch`` ready
        to run (no verification: for configurations verified already)."""
        bench, family, problem = self.bench, self.family, self.problem
        compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
        function = bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
        launch = family.bind(cfg, problem, self.buffers, function, bench.gpu)
        if launch.restore:
            launch.restore()
        return launch

    def _check_context(self, error: Exception, failed: dict) -> None:
        """A launch that failed may have poisoned the context (an illegal
        address does): then this process can measure nothing more."""
        try:
            self.bench.gpu.synchronize()
        except Exception:
            reason = f"the CUDA context failed after {type(error).__name__}: {error}"
            raise FatalDeviceError(reason, row=failed | {"error": f"{failed['error']} (context lost)"}) from error


def over_limits(compiled, launch, limits: DeviceLimits) -> list[str]:
    """Why ``launch`` of the kernel ``compiled`` exceeds the device's ``limits``
    (threads, dimensions, shared memory, registers); empty when it fits."""
    threads = math.prod(launch.block)
    return launch_violations(launch.grid, launch.block, limits) + resource_violations(
        threads=threads, registers=compiled.registers, static_shared=compiled.shared_bytes,
        dynamic_shared=int(getattr(launch, "shared_bytes", 0) or 0), limits=limits)  # fmt: skip


def _amounts(family: Family, cfg: Config, problem: Problem) -> tuple[float, float] | str:
    """(bytes moved, FLOPs) of ``cfg``, or why the family gives no usable
    ones: bytes must be a finite number above 0, FLOPs at least 0."""
    values = []
    for what, amount, zero in (("bytes_moved", family.bytes_moved, False), ("flops", family.flops, True)):
        try:
            value = amount(cfg, problem)
        except Exception as error:  # noqa: BLE001 - a family's own arithmetic: this configuration's failure
            return f"{what} raised {type(error).__name__}: {error}"
        why = amount_unfit(value, zero=zero)
        if why:
            return f"{what} {why}"
        values.append(value)
    return values[0], values[1]


def _untrusted_time(timing: TimingResult, options: TimingOptions) -> str | None:
    """Why the timing gives no time to rank by (None: it does): no sample was
    kept, or a median that is not a positive duration (no rate follows from it)."""
    if timing.count == 0:
        return (f"every sample was discarded as throttled (SM clock under {options.throttle_ratio:g} of its maximum): "
                f"0 kept of {timing.throttled}")  # fmt: skip
    if not (np.isfinite(timing.median_ms) and timing.median_ms > 0):
        return f"the median time must be > 0 ms, got {timing.median_ms!r} ms over {timing.count} samples"
    return None


def peak_fractions(bandwidth_gbs: float, peaks: dict) -> dict:
    copy, theoretical = peaks.get("copy_gbs"), peaks.get("theoretical_gbs")
    return {
        "fraction_of_copy_peak": bandwidth_gbs / copy if copy else None,
        "fraction_of_theoretical_peak": bandwidth_gbs / theoretical if theoretical else None,
    }


def _with_flush(options: TimingOptions, flush: bool) -> TimingOptions:
    from dataclasses import replace

    return replace(options, flush_l2=flush)


def clock_monitor(pci_bus_id: str) -> ClockMonitor:
    """NVML if it answers, else a monitor that reads nothing (and says so in rows:
    the clock columns stay empty)."""
    try:
        from tuner.device.clocks import NvmlClocks

        return NvmlClocks(pci_bus_id)
    except Exception:  # no pynvml, no driver library, or a device NVML cannot see
        return NoClocks()
