"""The device's limits as infeasibility: the arithmetic of each limit, the
limits a device.json or a GPU brings, a measurement over a limit recorded as
infeasible with its reason (never launched), and a study that meets such rows
going on to an ok winner."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuner.families.base import Launch, Problem
from tuner.families.limits import DeviceLimits, launch_violations, resource_violations
from tuner.measure.bench import Bench, ProblemBench
from tuner.measure.compile import CompileError, over_limit_reason
from tuner.measure.timing import NoClocks, TimingOptions


def test_threads_and_dimensions_of_a_launch():
    assert launch_violations((1, 1, 1), (32, 32, 1)) == []
    assert launch_violations((1, 1, 1), (256, 32, 1)) == [
        "threads per block must be at most 1024 (CUDA's limit), got 8192 (block 256x32x1)"
    ]
    assert launch_violations((1, 1, 1), (1, 1, 128)) == ["block z must be at most 64 (CUDA's limit), got 128"]
    assert launch_violations((1, 70000, 1), (32, 1, 1)) == ["grid y must be at most 65535 (CUDA's limit), got 70000"]
    assert launch_violations(None, (32, 1, 1)) == []


@pytest.mark.parametrize(
    "registers, threads, fits",
    [(64, 1024, True), (65, 1024, False), (65, 896, True), (255, 256, True), (255, 257, False), (0, 1024, True)],
)
def test_registers_are_counted_as_the_device_allocates_them(registers, threads, fits):
    """Per warp, in units of 256: 65 registers a thread take 2,304 a warp, so 28 warps (896 threads) fit 65,536."""
    reasons = resource_violations(threads=threads, registers=registers, static_shared=0, dynamic_shared=0)
    assert (reasons == []) is fits
    if not fits:
        assert reasons[0].startswith("registers per block must be at most 65536 (CUDA's register file), got ")


def test_static_and_dynamic_shared_memory_count_together():
    assert resource_violations(threads=128, registers=16, static_shared=16384, dynamic_shared=32768) == []
    assert resource_violations(threads=128, registers=16, static_shared=16384, dynamic_shared=32769) == [
        "shared memory per block must be at most 49152 bytes (CUDA's limit without opt-in), got 49153 (static 16384 + dynamic 32769)"
    ]


def test_a_device_brings_its_own_limits():
    device = {"name": "Tiny", "max_threads_per_block": 256, "max_block_dim": [256, 256, 16], "max_shared_memory_per_block": 16384,
              "max_registers_per_block": 32768}  # fmt: skip
    limits = DeviceLimits.of_device(device)
    assert (limits.max_threads_per_block, limits.max_block_dim, limits.max_shared_bytes_per_block) == (256, (256, 256, 16), 16384)
    assert launch_violations(None, (512, 1, 1), limits)[0] == "threads per block must be at most 256 (the Tiny's limit), got 512 (block 512x1x1)"
    assert DeviceLimits.of_device({"name": "old device.json"}) == DeviceLimits()
    gpu = SimpleNamespace(name="Fake", max_threads_per_block=512, max_registers_per_block=65536)
    assert DeviceLimits.of_gpu(gpu).max_threads_per_block == 512
    assert DeviceLimits.of_gpu(SimpleNamespace()) == DeviceLimits()  # a stand-in without the attributes


def test_ptxas_refusing_a_limit_is_read_as_one_line():
    log = "ptxas error   : Entry function '_Z4tilePf' uses too much shared data (0x10400 bytes, 0xc000 max)\n"
    assert over_limit_reason(log) == "static shared memory per block must be at most 49152 bytes (ptxas), got 66560"
    assert over_limit_reason("error: identifier \"x\" is undefined") is None


class LaunchingGpu:
    """A GPU that logs launches and loads any kernel."""

    arch, pci_bus_id, sm_count, l2_bytes = "sm_90", "0000:00:00.0", 4, 1 << 20

    def __init__(self) -> None:
        self.launched = 0

    def event_timer(self):
        return lambda run: (run(), 1.0)[1]

    def function(self, cubin, kernel, arg_types):
        return kernel

    def synchronize(self) -> None:
        pass


class BlockFamily:
    """One configuration: a block of ``block_size`` threads asking for ``shared`` dynamic bytes."""

    name, arg_types, param_names = "stub", "", ("block_size", "shared")

    def violations(self, cfg, problem):
        return []

    def bind(self, cfg, problem, buffers, function, gpu):
        def run() -> None:
            gpu.launched += 1

        return Launch(run=run, grid=(1, 1, 1), block=(cfg["block_size"], 1, 1), fetch=lambda: None, shared_bytes=cfg["shared"])

    def verify(self, output, expected, inputs):
        return SimpleNamespace(ok=True, error=0.0, detail="")

    def bytes_moved(self, cfg, problem):
        return 4 << 20

    def flops(self, cfg, problem):
        return 0


def measure(monkeypatch, cfg: dict, compiled) -> tuple[dict, LaunchingGpu]:
    def compile_variant(*args, **kwargs):
        if isinstance(compiled, Exception):
            raise compiled
        return compiled

    monkeypatch.setattr("tuner.measure.bench.compile_variant", compile_variant)
    monkeypatch.setattr(Bench, "_timing_function", lambda self, kernel, arg_types: kernel)
    gpu = LaunchingGpu()
    bench = Bench(gpu=gpu, environment={}, cache_dir="unused", clocks=NoClocks(),
                  timing=TimingOptions(warmup=0, min_samples=2, max_samples=2, min_time_s=0.0, flush_l2=False, hold_us=0.0))  # fmt: skip
    session = ProblemBench.__new__(ProblemBench)
    session.bench, session.family, session.problem = bench, BlockFamily(), Problem("stub", "float32", 1 << 20)
    session.inputs = session.expected = session.buffers = None
    return session.measure(cfg, "test", energy=False), gpu


@pytest.mark.parametrize(
    "cfg, registers, reason",
    [({"block_size": 1024, "shared": 0}, 128, "registers per block must be at most 65536 (CUDA's register file), got 131072 "
      "(128 per thread x 1024 threads, allocated per warp)"),
     ({"block_size": 128, "shared": 40000}, 16, "shared memory per block must be at most 49152 bytes (CUDA's limit without opt-in), "
      "got 50000 (static 10000 + dynamic 40000)")],
    ids=["registers", "shared-memory"],
)  # fmt: skip
def test_a_measurement_over_a_limit_is_infeasible_and_never_launched(monkeypatch, cfg, registers, reason):
    compiled = SimpleNamespace(registers=registers, shared_bytes=10000, spill_bytes=0, local_bytes=0, cubin="", kernel="stub")
    row, gpu = measure(monkeypatch, cfg, compiled)
    assert row["status"] == "infeasible" and row["error"] == reason
    assert gpu.launched == 0
    fitting, gpu = measure(monkeypatch, {"block_size": 128, "shared": 0}, compiled)
    assert fitting["status"] == "ok" and gpu.launched > 0


def test_a_kernel_ptxas_refuses_for_a_limit_is_infeasible_not_a_compile_error(monkeypatch):
    refused = CompileError("nvcc failed for k.cu:\nptxas error ...", over_limit="static shared memory per block must be at most 49152 bytes (ptxas), got 66560")
    row, _ = measure(monkeypatch, {"block_size": 128, "shared": 0}, refused)
    assert row["status"] == "infeasible" and row["error"].startswith("static shared memory per block")
    broken, _ = measure(monkeypatch, {"block_size": 128, "shared": 0}, CompileError("nvcc failed for k.cu:\nerror: expected a ;"))
    assert broken["status"] == "compile_error"


def test_a_study_whose_measurements_meet_limits_goes_on_to_an_ok_winner():
    """``infeasible`` rows from the measuring process are failed trials: they neither crash the study nor win."""
    from tuner.families import REGISTRY
    from tuner.search.study.run import StudyOptions, run_study, study_rows

    family = REGISTRY["vector_add"]
    problem = Problem("vector_add", family.dtypes[0], 1 << 20)

    def measured(cfg: dict) -> dict:
        if cfg["block_size"] >= 512:
            return {"status": "infeasible", "error": "registers per block must be at most 65536 (CUDA's register file), got 131072"}
        return {"status": "ok", "bandwidth_gbs": 100.0 + cfg["block_size"], "bytes_moved": 1 << 22}

    domains = {p.name: [p.default] for p in family.params} | {"block_size": [128, 256, 512, 1024]}
    outcome = run_study(StudyOptions.for_strategy(family=family, problem=problem, domains=domains, storage=None,
                                                  study_name="limits", measure=measured, budget_trials=4, timeout_s=None,
                                                  seed=0))  # fmt: skip
    rows = study_rows(outcome.storage, outcome.study.study_name)
    assert sorted(r["status"] for r in rows) == ["infeasible", "infeasible", "ok", "ok"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert max(ok, key=lambda r: r["bandwidth_gbs"])["block_size"] == 256
