"""The stopping rule, throttle filtering and statistics, with a fake timer,
fake clocks and a fake wall clock: exact behaviour, no GPU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tuner.measure.timing import (
    TimingOptions,
    is_throttled,
    median_half_width,
    relative_spread,
    should_stop,
    time_kernel,
)


class FakeWall:
    """Advances by `step` seconds every time it is read."""

    def __init__(self, step: float = 0.0):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


class FakeClocks:
    def __init__(self, readings, maximum=2000.0):
        self.readings, self.maximum = itertools.cycle(readings), maximum

    def sm_clock_mhz(self):
        return next(self.readings)

    def max_sm_clock_mhz(self):
        return self.maximum

    def snapshot(self):
        return {"temperature_c": 50.0, "power_w": 300.0, "mem_clock_mhz": 3201.0}


def timer_from(samples):
    it = iter(samples)
    return lambda run: (run(), next(it))[1]


def test_constant_samples_stop_at_min_samples_converged():
    calls = []
    opts = TimingOptions(warmup=3, min_samples=10, min_time_s=0.0)
    result = time_kernel(lambda: calls.append(1), timer=timer_from([1.0] * 100), options=opts, wall_clock=FakeWall())
    assert result.count == 10 and result.converged
    assert len(calls) == 3 + 10  # warm-up launches are made but never timed
    assert result.median_ms == 1.0 and result.rel_spread == 0.0


def test_min_time_keeps_sampling_short_kernels():
    opts = TimingOptions(min_samples=10, min_time_s=0.05)  # 50 ms of kernel time at 1 ms each
    result = time_kernel(lambda: None, timer=timer_from([1.0] * 100), options=opts, wall_clock=FakeWall())
    assert result.count == 50 and result.converged


def test_noisy_samples_stop_at_sample_cap_unconverged():
    rng = np.random.default_rng(0)
    noisy = list(1.0 + rng.uniform(-0.5, 0.5, size=1000))
    opts = TimingOptions(min_samples=10, max_samples=40, min_time_s=0.0, target_rel_spread=0.001)
    result = time_kernel(lambda: None, timer=timer_from(noisy), options=opts, wall_clock=FakeWall())
    assert result.count == 40 and not result.converged


def test_wall_time_cap():
    opts = TimingOptions(min_samples=10, max_samples=10_000, max_time_s=1.0, min_time_s=0.0, target_rel_spread=1e-9)
    rng = np.random.default_rng(1)
    wall = FakeWall(step=0.01)  # read once per sample plus at start
    result = time_kernel(lambda: None, timer=timer_from(list(1 + rng.random(10_000))), options=opts, wall_clock=wall)
    assert not result.converged
    assert 90 <= result.count <= 100


def test_throttled_samples_are_discarded_and_counted():
    # Every third sample taken at 1000 MHz of a 2000 MHz maximum: under 75 %.
    clocks = FakeClocks([1980.0, 1980.0, 1000.0])
    samples = [1.0, 1.0, 9.0] * 20  # the throttled ones are slow
    opts = TimingOptions(min_samples=10, min_time_s=0.0)
    result = time_kernel(lambda: None, timer=timer_from(samples), options=opts, clocks=clocks, wall_clock=FakeWall())
    assert result.count == 10 and result.throttled == 4  # 14 taken: 10 kept, 4 discarded
    assert result.stat("max") == 1.0
    assert result.as_row()["sm_clock_mhz"] == 1980.0
    assert result.as_row()["temperature_c"] == 50.0


def test_restore_flush_and_hold_run_before_every_sample_untimed():
    events = []
    opts = TimingOptions(warmup=1, min_samples=3, min_time_s=0.0)

    def timer(run):
        events.append("start")
        run()
        events.append("end")
        return 1.0

    time_kernel(
        lambda: events.append("run"),
        timer=timer,
        options=opts,
        restore=lambda: events.append("restore"),
        flush=lambda: events.append("flush"),
        hold=lambda: events.append("hold"),
        wall_clock=FakeWall(),
    )
    assert events[:2] == ["restore", "run"]  # warm-up: restored, not flushed, not timed
    assert events[2:] == ["restore", "flush", "hold", "start", "run", "end"] * 3


def test_outliers_do_not_prevent_convergence():
    samples = [1.0, 1.001, 0.999] * 40
    samples[5] = 80.0  # a sample the OS preempted
    opts = TimingOptions(min_samples=10, min_time_s=0.0, max_samples=1000)
    result = time_kernel(lambda: None, timer=timer_from(samples), options=opts, wall_clock=FakeWall())
    assert result.converged and result.count < 40 and result.median_ms == pytest.approx(1.0, abs=1e-3)


def test_hot_mode_skips_flush():
    flushes = []
    opts = TimingOptions(min_samples=5, min_time_s=0.0, flush_l2=False)
    result = time_kernel(
        lambda: None, timer=timer_from([1.0] * 10), options=opts, flush=lambda: flushes.append(1), wall_clock=FakeWall()
    )
    assert flushes == [] and result.flushed is False


def test_statistics():
    s = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    assert relative_spread(s) == pytest.approx(np.std(s, ddof=1) / np.mean(s))
    # n = 5: ranks floor(2.5 - 2.19) = 0 and ceil(2.5 + 2.19) = 5 -> clamped to 4.
    assert median_half_width(s) == pytest.approx((10.0 - 1.0) / 2 / 3.0)
    many = np.array([1.0] * 90 + [1.01] * 9 + [50.0])  # one preempted sample
    assert median_half_width(many) == 0.0 and relative_spread(many) > 3
    assert np.isnan(relative_spread(np.array([1.0])))


def test_median_half_width_lets_jittery_short_kernels_converge():
    # 2 % jitter never meets a 0.5 % spread target, but the median is pinned after enough samples.
    rng = np.random.default_rng(2)
    jitter = list(0.025 * (1 + 0.02 * rng.standard_normal(5000)))
    opts = TimingOptions(min_samples=10, min_time_s=0.0, max_samples=5000)
    result = time_kernel(lambda: None, timer=timer_from(jitter), options=opts, wall_clock=FakeWall())
    assert result.converged and 50 < result.count < 400


def test_should_stop_rules():
    opts = TimingOptions(min_samples=3, max_samples=5, min_time_s=0.0)
    assert should_stop([1.0, 1.0], 2, 0.0, opts) == (False, False)
    assert should_stop([1.0, 1.0, 1.0], 3, 0.0, opts) == (True, True)
    assert should_stop([1.0, 2.0, 3.0, 1.0, 2.0], 5, 0.0, opts) == (True, False)


def test_is_throttled():
    assert is_throttled(1400.0, 2000.0, 0.75)
    assert not is_throttled(1500.0, 2000.0, 0.75)
    assert not is_throttled(float("nan"), 2000.0, 0.75)


@pytest.mark.parametrize("field,value", [("min_samples", 1), ("max_time_s", 0), ("throttle_ratio", 1.0), ("max_samples", 5)])
def test_bad_options_name_the_setting(field, value):
    with pytest.raises(ValueError, match=f"timing.{field}"):
        TimingOptions(**{field: value})
