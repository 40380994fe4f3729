"""Energy per launch (tuner.measure.energy) on a simulated GPU whose energy
counter advances every 100 ms: the windows' alignment to the counter, the
per-launch arithmetic, and the uncertainty against the true error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tuner.measure.energy import EnergyOptions, EnergyUnavailable, measure_energy

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_energy import SimulatedGpu  # noqa: E402


def measured(gpu: SimulatedGpu, options=EnergyOptions(), pipelined=True, settled=None):
    return measure_energy(gpu.run, synchronize=gpu.synchronize, counter=gpu.counter, options=options,
                          marker=gpu.marker if pipelined else None, restore=gpu.restore, wall_clock=gpu.wall_clock,
                          settled=settled)  # fmt: skip


def test_windows_start_and_end_at_the_counters_updates():
    gpu = SimulatedGpu(launch_s=1e-4, period_s=0.1, phase_s=0.037)
    options = EnergyOptions(windows=3, updates=2, warmup_s=0.02)
    result = measured(gpu, options)
    updates = gpu.update_times(gpu.host)
    batch_s = result.batch * gpu.launch_s
    assert len(result.boundaries) == 1 + 3 * 2
    # each boundary lies within a batch of a real update of the counter, none missed in between
    nearest = [min(updates, key=lambda u: abs(u - b.at_s)) for b in result.boundaries]
    assert all(abs(b.at_s - u) <= 1.5 * batch_s for b, u in zip(result.boundaries, nearest))
    assert np.allclose(np.diff(nearest), 0.1)
    # the first is the first update after the warm-up, not one during it
    assert nearest[0] == min(u for u in updates if u >= 0.02)
    # and the launches counted at each boundary are those the device had run by that update
    # (counted from the aligned start: each end is off by at most half a batch)
    run_by = [int(np.searchsorted(gpu.ends, u)) for u in nearest]
    counted = [b.launches - result.boundaries[0].launches for b in result.boundaries]
    assert all(abs(c - (r - run_by[0])) <= result.batch + 1 for c, r in zip(counted, run_by))
    assert result.update_s == pytest.approx(0.1, rel=0.05)
    assert gpu.restored == 1


def test_joules_per_launch_is_energy_over_launches():
    gpu = SimulatedGpu(launch_s=1e-4, busy_w=400.0)
    result = measured(gpu)
    truth = 400.0 * 1e-4  # 40 mJ: the device never idles between launches
    assert result.joules == pytest.approx(truth, rel=0.002)
    assert abs(result.joules - truth) <= 3 * result.err + 1e-12
    assert result.power_w == pytest.approx(400.0, rel=0.01)
    assert result.launch_ms == pytest.approx(0.1, rel=0.01)
    assert result.windows == 3 and result.launches == pytest.approx(0.6 / 1e-4, rel=0.02)
    # cost: warm-up, alignment (up to one period) and 6 periods
    assert 0.6 <= result.wall_s <= 0.6 + 0.1 + 0.02 + 0.02
    row = result.as_row(bytes_moved=4 << 20, flops=None)
    assert row["energy_j_per_byte"] == pytest.approx(truth / (4 << 20), rel=0.002)
    assert row["energy_j_per_flop"] is None and row["energy_windows"] == 3


def test_waiting_for_each_batch_lets_idle_energy_in():
    """Without a marker the device idles while the host reads the counter:
    the estimate is higher than the pipelined one, which matches the truth."""
    truth = 400.0 * 1e-4
    pipelined = measured(SimulatedGpu(read_s=1e-3), pipelined=True)  # a slow NVML read: 1 ms
    waiting = measured(SimulatedGpu(read_s=1e-3), pipelined=False)
    assert pipelined.joules == pytest.approx(truth, rel=0.01)
    assert abs(pipelined.joules - truth) <= 3 * pipelined.err
    # the idle 1 ms of each read, per batch (at least 4 reads long: READ_MARGIN)
    batch_s = waiting.batch * 1e-4
    assert batch_s >= 4e-3 and waiting.joules == pytest.approx(truth * (1 + 80.0 * 1e-3 / (400.0 * batch_s)), rel=0.01)
    assert waiting.joules > truth * 1.02


def test_a_counter_read_slower_than_a_batch_still_leaves_the_gpu_no_gap():
    """A read of the counter that takes longer than ``batch_s`` (5 ms against 2 ms) would leave the
    device idle after each batch, its idle power counted per launch: batches last longer instead."""
    gpu = SimulatedGpu(launch_s=1e-3, read_s=5e-3)
    result = measured(gpu)
    truth = 400.0 * 1e-3
    assert result.launch_ms == pytest.approx(1.0, rel=0.01)  # back to back, as the device runs them
    assert result.joules == pytest.approx(truth, rel=0.01)
    assert abs(result.joules - truth) <= 3 * result.err
    assert result.batch * gpu.launch_s >= 4 * gpu.read_s
    fast = measured(SimulatedGpu(launch_s=1e-3))  # a quick read keeps batch_s: boundaries as sharp as before
    assert fast.batch == 2


def test_twice_the_work_costs_twice_the_energy():
    one = measured(SimulatedGpu(launch_s=1e-4))
    two = measured(SimulatedGpu(launch_s=2e-4))
    ratio = two.joules / one.joules
    ratio_err = ratio * np.hypot(one.err / one.joules, two.err / two.joules)
    assert ratio == pytest.approx(2.0, rel=0.01)
    assert abs(ratio - 2.0) <= 3 * ratio_err + 1e-9


def test_uncertainty_covers_the_error_of_a_noisy_counter():
    """A sensor off by 1 J (Gaussian) at each update: over many runs the
    estimate lies within two of its standard errors of the truth nearly
    always, and the stated error is of the size of the real one."""
    truth = 400.0 * 1e-4
    errors, stated = [], []
    for seed in range(60):
        result = measured(SimulatedGpu(noise_mj=1000.0, seed=seed, phase_s=0.013 * seed % 0.1))
        errors.append(result.joules - truth)
        stated.append(result.err)
    errors, stated = np.array(errors), np.array(stated)
    assert np.mean(np.abs(errors) <= 2 * stated) >= 0.9
    rms = np.sqrt(np.mean(errors**2))
    assert rms > 0 and 0.5 <= np.median(stated) / rms <= 4.0  # conservative: see the module on back-to-back windows
    assert np.median([r for r in stated]) > 1e-4 * truth  # noise shows, not just the counting error


def test_without_counter_or_with_a_frozen_one_there_is_no_energy():
    with pytest.raises(EnergyUnavailable, match="no energy counter"):
        measured(SimulatedGpu(counter=False))
    frozen = SimulatedGpu(period_s=100.0, phase_s=0.0)
    with pytest.raises(EnergyUnavailable, match=r"changed 0 times .* 7 were needed"):
        measured(frozen, EnergyOptions(max_time_s=0.5))
    assert frozen.restored == 1  # the inputs are put back all the same


@pytest.mark.parametrize("name, value, rule", [("windows", 1, ">= 2"), ("updates", 0, ">= 1"), ("batch_s", 0, "> 0")])
def test_options_are_checked_with_one_line(name, value, rule):
    with pytest.raises(ValueError, match=rf"^energy\.{name} must be {rule}"):
        EnergyOptions(**{name: value})


def test_a_counter_that_goes_back_gives_no_energy():
    gpu = SimulatedGpu()
    real = gpu.counter
    reads = []

    def resetting():
        value = real()
        reads.append(value)
        return value if len(reads) < 100 else value - 10**6  # the driver reloaded: the count starts again lower

    with pytest.raises(EnergyUnavailable, match=r"went back from \d+ to -?\d+ mJ"):
        measure_energy(gpu.run, synchronize=gpu.synchronize, counter=resetting, marker=gpu.marker, wall_clock=gpu.wall_clock)


def test_the_report_assumes_the_default_window_count_for_rows_without_one():
    """Rows without ``energy_windows`` are compared in the report at the
    degrees of freedom of the default windows, which it may not import."""
    from tuner.report.energy import DEFAULT_WINDOWS

    assert DEFAULT_WINDOWS == EnergyOptions().windows


def test_the_windows_wait_for_an_idle_gpus_clock_to_settle():
    # The first 0.35 s of launches run at a third of the clock: three times as long at the same power.
    truth = 400.0 * 1e-4
    hasty = measured(SimulatedGpu(launch_s=1e-4, busy_w=400.0, cold_s=0.35, cold_launch_s=3e-4))
    assert hasty.joules > 1.2 * truth  # windows over the slow launches cost more per launch
    gpu = SimulatedGpu(launch_s=1e-4, busy_w=400.0, cold_s=0.35, cold_launch_s=3e-4)
    result = measured(gpu, settled=gpu.settled)
    assert result.joules == pytest.approx(truth, rel=0.005)
    assert result.boundaries[0].at_s >= 0.35


def test_a_clock_that_never_settles_gives_no_energy_in_one_line():
    gpu = SimulatedGpu(launch_s=1e-4)
    with pytest.raises(EnergyUnavailable, match=r"^the GPU's clock did not settle within 1 s of launches$"):
        measured(gpu, EnergyOptions(max_time_s=1.0), settled=lambda: False)
