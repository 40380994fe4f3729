"""Energy per launch on the GPU (NVML's total-energy counter, no root): a
verified, timed row gets its energy columns with a small uncertainty; the
same configuration measured again agrees; twice the elements cost about twice
the energy; a sweep stores the energy of each problem's fastest; and nothing
changes the GPU's clocks or power limit. Skipped where NVML gives no counter."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.data import results
from tuner.families import REGISTRY, Problem
from tuner.measure.energy import ENERGY_COLUMNS
from tuner.stages.sweep_store import run_sweep

pytestmark = pytest.mark.gpu

VECTOR_ADD = REGISTRY["vector_add"]


def config(family, **overrides) -> dict:
    return {p.name: p.default for p in family.params} | overrides


@pytest.fixture(scope="module")
def counted(bench):
    if not bench.has_energy_counter:
        pytest.skip("NVML gives no total-energy counter on this GPU (nvmlDeviceGetTotalEnergyConsumption)")
    return bench


def test_a_timed_row_gets_joules_per_launch_with_a_small_uncertainty(counted):
    session = counted.problem(VECTOR_ADD, Problem("vector_add", "float32", 1 << 26))
    row = session.measure(config(VECTOR_ADD, vector_width=4), "test:energy", energy=True)
    assert row["status"] == "ok", row.get("error")
    assert all(row.get(c) is not None for c in ENERGY_COLUMNS if c != "energy_j_per_flop")
    assert row["energy_j_per_flop"] is None  # a vector add counts no floating-point work
    assert 0 < row["energy_j_err"] < 0.1 * row["energy_j"]
    assert 20 < row["power_w_energy"] < 1500
    assert 1e-12 < row["energy_j_per_byte"] < 2e-9  # H100: about 0.1 nJ per byte of HBM traffic
    assert row["energy_windows"] == 3 and row["energy_wall_s"] < 3.0
    assert results.to_frame([row]).energy_j.iloc[0] == pytest.approx(row["energy_j"])


def test_matmul_energy_is_also_per_flop(counted):
    matmul = REGISTRY["matmul"]
    session = counted.problem(matmul, Problem("matmul", "float32", 1024))
    row = session.measure(config(matmul), "test:energy", energy=True)
    assert row["status"] == "ok", row.get("error")
    assert row["energy_j_per_flop"] == pytest.approx(
        row["energy_j"] / matmul.flops(config(matmul), Problem("matmul", "float32", 1024))
    )


def test_the_same_configuration_measured_again_agrees(counted):
    session = counted.problem(VECTOR_ADD, Problem("vector_add", "float32", 1 << 26))
    launch = session.launch(config(VECTOR_ADD, vector_width=4))
    measured = [counted.joules(launch.run, restore=launch.restore) for _ in range(5)]
    joules = np.array([m.joules for m in measured])
    # Where they disagree, whether the GPU ran the launches back to back (launch_ms near the kernel's
    # time) or idled or was shared meanwhile (longer), at what power and with what batches.
    seen = [(round(m.joules, 4), round(m.err, 4), round(m.launch_ms, 3), round(m.power_w), m.batch) for m in measured]
    assert joules.std(ddof=1) / joules.mean() < 0.10, seen
    assert all(0.01 < m.update_s < 0.5 for m in measured)  # the counter's period (about 0.1 s on an H100)
    assert all(m.wall_s < 3.0 for m in measured)


def test_twice_the_elements_cost_about_twice_the_energy(counted):
    cfg = config(VECTOR_ADD, vector_width=4)
    rows = [counted.problem(VECTOR_ADD, Problem("vector_add", "float32", n)).measure(cfg, "test:energy", energy=True)
            for n in (1 << 26, 1 << 27)]  # fmt: skip
    assert all(r["status"] == "ok" for r in rows)
    # Per byte moved the two agree within a third, not exactly: the board's power differs
    # between the launches (clocks, temperature), so the larger may cost well over twice.
    ratio = rows[1]["energy_j"] / rows[0]["energy_j"]
    assert 2 * 0.75 < ratio < 2 / 0.75, [(r["energy_j"], r["energy_j_err"], r["power_w_energy"], r["energy_launch_ms"],
                                          r["time_ms_median"]) for r in rows]  # fmt: skip


def test_a_sweep_stores_the_energy_of_its_fastest(counted, tmp_path):
    problem = Problem("vector_add", "float32", 1 << 24)
    domains = {p.name: [p.default] for p in VECTOR_ADD.params} | {"vector_width": [1, 4], "block_size": [256, 1024]}
    frame = run_sweep("energy", VECTOR_ADD, [problem], domains, store=tmp_path, open_problem=counted.problem, energy_best=True)
    assert len(frame) == 4 and frame.energy_j.notna().sum() == 1
    assert frame.loc[frame.energy_j.notna(), "bandwidth_gbs"].iloc[0] == frame.bandwidth_gbs.max()


def test_energy_leaves_clocks_and_power_limit_as_they_were(counted):
    nvml, handle = counted.clocks.nvml, counted.clocks.handle

    def read(query, *args):
        try:
            return query(handle, *args)
        except nvml.NVMLError as error:  # not supported on this board: the same answer before and after
            return str(error)

    def settings():
        return (read(nvml.nvmlDeviceGetPowerManagementLimit), read(nvml.nvmlDeviceGetApplicationsClock, nvml.NVML_CLOCK_SM),
                read(nvml.nvmlDeviceGetApplicationsClock, nvml.NVML_CLOCK_MEM))  # fmt: skip

    before = settings()
    session = counted.problem(VECTOR_ADD, Problem("vector_add", "float32", 1 << 24))
    launch = session.launch(config(VECTOR_ADD))
    counted.joules(launch.run, restore=launch.restore)
    assert settings() == before
