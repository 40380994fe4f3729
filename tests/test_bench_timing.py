"""Without a GPU: what Bench.time enqueues around each sample, on a fake GPU
that logs its calls: the L2 flush is a read of a buffer twice the L2 (made
clean once before any sample), and the hold is the one the options ask for."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.measure.bench import Bench
from tuner.measure.timing import NoClocks, TimingOptions


class FakeBuffer:
    def __init__(self, base: int, nbytes: int) -> None:
        self.base, self.nbytes = base, nbytes

    def ptr(self, byte_offset: int = 0) -> int:
        return self.base + byte_offset


class FakeGpu:
    arch, pci_bus_id, sm_count, l2_bytes = "sm_90", "0000:00:00.0", 4, 1 << 20

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.next_base = 0

    def event_timer(self):
        def timer(run) -> float:
            self.log.append(("start",))
            run()
            self.log.append(("end",))
            return 1.0

        return timer

    def alloc(self, nbytes: int) -> FakeBuffer:
        self.next_base += 1 << 32
        return FakeBuffer(self.next_base, nbytes)

    def fill_bytes(self, dst, value: int, nbytes: int) -> None:
        self.log.append(("fill", nbytes))

    def launcher(self, function, grid, block, *args):
        return lambda: self.log.append(("launch", function, tuple(int(a) for a in args)))

    def synchronize(self) -> None:
        pass


def fake_bench(monkeypatch) -> tuple[Bench, FakeGpu]:
    gpu = FakeGpu()
    bench = Bench(gpu=gpu, environment={}, cache_dir="unused", clocks=NoClocks())
    monkeypatch.setattr(Bench, "_timing_function", lambda self, kernel, arg_types: kernel)
    return bench, gpu


def test_each_sample_is_flushed_by_a_read_then_held_then_timed(monkeypatch):
    bench, gpu = fake_bench(monkeypatch)
    options = TimingOptions(warmup=1, min_samples=3, max_samples=3, min_time_s=0.0, hold_us=20.0)
    result = bench.time(lambda: gpu.log.append(("run",)), options=options)
    assert result.count == 3 and result.flushed
    flush_words = 2 * gpu.l2_bytes // 16
    read = ("launch", "flush_l2", (gpu.log[1][2][0], flush_words, gpu.log[1][2][2]))
    hold = ("launch", "hold_stream", (20_000,))
    sample = [read, hold, ("start",), ("run",), ("end",)]
    # The flush buffer is written once, then read once before anything is timed: its
    # dirty lines are written back there, not inside a sample.
    assert gpu.log == [("fill", 2 * gpu.l2_bytes), read, ("run",)] + sample * 3


def test_the_hold_follows_the_options_and_no_flush_when_off(monkeypatch):
    bench, gpu = fake_bench(monkeypatch)
    options = TimingOptions(warmup=0, min_samples=2, max_samples=2, min_time_s=0.0, hold_us=500.0, flush_l2=False)
    bench.time(lambda: gpu.log.append(("run",)), options=options)
    assert gpu.log == [("launch", "hold_stream", (500_000,)), ("start",), ("run",), ("end",)] * 2
    assert bench.hold_for(0) is None
    assert bench.hold_for(500.0) is bench.hold_for(500.0)  # built once
    assert np.uint64(bench.timing.hold_us * 1000) == 20_000  # the bench's own default is untouched


class LoadingGpu(FakeGpu):
    """The fake GPU, loading a kernel from any cubin."""

    def function(self, cubin, kernel, arg_types):
        return kernel


class ZeroTimerGpu(LoadingGpu):
    """Every sample times 0 ms (an event pair that saw nothing)."""

    def event_timer(self):
        return lambda run: (run(), 0.0)[1]


class ThrottledClocks(NoClocks):
    """The SM clock at half its maximum: every sample is discarded."""

    def sm_clock_mhz(self) -> float:
        return 990.0

    def max_sm_clock_mhz(self) -> float:
        return 1980.0


class OneLaunchFamily:
    """A family whose one configuration binds to a launch that does nothing
    and verifies as right."""

    name, arg_types, param_names = "stub", "", ("block_size",)

    def violations(self, cfg, problem):
        return []

    def bind(self, cfg, problem, buffers, function, gpu):
        from tuner.families.base import Launch

        return Launch(run=lambda: None, grid=(1, 1, 1), block=(cfg["block_size"], 1, 1), fetch=lambda: None)

    def verify(self, output, expected, inputs):
        from types import SimpleNamespace

        return SimpleNamespace(ok=True, error=0.0, detail="")

    def bytes_moved(self, cfg, problem):
        return 4 << 20

    def flops(self, cfg, problem):
        return 0


def measured_row(monkeypatch, gpu: FakeGpu, clocks) -> dict:
    """``ProblemBench.measure`` of one configuration on ``gpu``, nvcc left out."""
    from types import SimpleNamespace

    from tuner.families.base import Problem
    from tuner.measure.bench import ProblemBench

    compiled = SimpleNamespace(registers=16, shared_bytes=0, spill_bytes=0, local_bytes=0, cubin=b"", kernel="stub")
    monkeypatch.setattr("tuner.measure.bench.compile_variant", lambda *args, **kwargs: compiled)
    monkeypatch.setattr(Bench, "_timing_function", lambda self, kernel, arg_types: kernel)
    timing = TimingOptions(warmup=0, min_samples=2, max_samples=4, min_time_s=0.0)
    bench = Bench(gpu=gpu, environment={}, cache_dir="unused", clocks=clocks, timing=timing)
    session = ProblemBench.__new__(ProblemBench)  # no inputs: the launch does nothing
    session.bench, session.family, session.problem = bench, OneLaunchFamily(), Problem("stub", "float32", 1 << 20)
    session.inputs = session.expected = session.buffers = None
    return session.measure({"block_size": 256}, "test")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the stopping rule's spread of zeros
def test_a_median_time_of_zero_is_a_timing_error_not_a_traceback(monkeypatch):
    """It raised ZeroDivisionError at bytes over seconds, though ``measure``
    never raises for a bad configuration."""
    row = measured_row(monkeypatch, ZeroTimerGpu(), NoClocks())
    assert row["status"] == "launch_error" and "bandwidth_gbs" not in row
    assert row["error"] == "while timing: the median time must be > 0 ms, got 0.0 ms over 4 samples"


def test_every_sample_throttled_is_a_timing_error_not_an_ok_row_without_a_time(monkeypatch):
    """It was an ok row with a NaN time, ranked with the rest."""
    row = measured_row(monkeypatch, ZeroTimerGpu(), ThrottledClocks())
    assert row["status"] == "launch_error" and "time_ms_median" not in row
    assert (
        row["error"] == "while timing: every sample was discarded as throttled (SM clock under 0.75 of its maximum): 0 kept of 4"
    )
    healthy = measured_row(monkeypatch, LoadingGpu(), NoClocks())  # 1 ms a sample, none discarded
    assert healthy["status"] == "ok" and healthy["time_ms_median"] == 1.0 and healthy["bandwidth_gbs"] > 0
