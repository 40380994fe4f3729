"""Without a GPU: what Bench.time enqueues around each sample, on a fake GPU
that logs its calls: the L2 flush is a read of a buffer twice the L2 (made
clean once before any sample), and the hold is the one the options ask for."""

from __future__ import annotations

import numpy as np

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
