"""Energy in the stages, without a GPU: the config's ``energy`` setting, the
sweep's energy of each problem's fastest configuration, the bench's energy
columns on a simulated GPU and counter, and the rows' schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tuner.data import results
from tuner.families import REGISTRY, Problem
from tuner.families.base import Launch
from tuner.measure.bench import Bench, ProblemBench
from tuner.measure.energy import ENERGY_COLUMNS, EnergyOptions
from tuner.settings import ConfigError, Settings, parse
from tuner.stages.sweep_store import RowStore, run_sweep

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_energy import SimulatedGpu  # noqa: E402
from test_settings import base_config, changed  # noqa: E402
from test_sweep import FAMILY, PARAMS, PROBLEMS, FakeSession  # noqa: E402

# ---- settings ------------------------------------------------------------------


def test_energy_is_best_for_sweeps_and_off_for_studies_unless_asked(tmp_path):
    settings = parse(base_config(tmp_path))
    assert settings.sweeps["ladder"].energy == "best" and settings.studies["search"].energy is False
    for value, meant in ((True, "all"), (False, "off"), ("best", "best")):
        sweep = parse(changed(base_config(tmp_path), ("sweeps", "ladder", "energy"), value)).sweeps["ladder"]
        assert sweep.energy == meant
        assert Settings.from_stage_json(parse(changed(base_config(tmp_path), ("sweeps", "ladder", "energy"), value))
                                        .stage_json("sweep", "ladder")).sweeps["ladder"].energy == meant  # fmt: skip
    study = parse(changed(base_config(tmp_path), ("studies", "search", "energy"), True))
    assert Settings.from_stage_json(study.stage_json("study", "search")).studies["search"].energy is True


@pytest.mark.parametrize("path, value, message", [
    (("sweeps", "ladder", "energy"), "all", r"^sweeps\.ladder\.energy: must be true, false or best, got 'all'$"),
    (("sweeps", "ladder", "energy"), 1, r"^sweeps\.ladder\.energy: must be true, false or best, got 1$"),
    (("studies", "search", "energy"), "best", r"^studies\.search\.energy: must be true or false, got 'best'$"),
])  # fmt: skip
def test_a_bad_energy_setting_is_one_line(tmp_path, path, value, message):
    with pytest.raises(ConfigError, match=message):
        parse(changed(base_config(tmp_path), path, value))


def test_turning_energy_on_reruns_only_that_sweep(tmp_path):
    before = parse(base_config(tmp_path))
    after = parse(changed(base_config(tmp_path), ("sweeps", "ladder", "energy"), True))
    assert after.stage_json("sweep", "ladder") != before.stage_json("sweep", "ladder")
    assert after.stage_json("study", "search") == before.stage_json("study", "search")
    assert after.stage_json("compile") == before.stage_json("compile")


# ---- the sweep's energy of each problem's fastest --------------------------------


class EnergySession(FakeSession):
    """A fake session that also measures energy: joules proportional to the
    configuration's block size (a stand-in for work)."""

    measured: list = []

    def measure_energy(self, cfg):
        EnergySession.measured.append((self.problem.n, results.config_key(cfg)))
        return {"energy_j": cfg["block_size"] * 1e-3, "energy_j_err": 1e-5, "energy_windows": 3, "power_w_energy": 300.0,
                "energy_wall_s": 0.7}  # fmt: skip


def energy_sweep(store, **kwargs):
    return run_sweep("t", FAMILY, PROBLEMS, PARAMS, store=store, log=lambda m: None,
                     open_problem=lambda f, p: EnergySession(f, p, []), **kwargs)  # fmt: skip


def test_the_fastest_configuration_of_each_problem_gets_its_energy_once(tmp_path):
    EnergySession.measured = []
    frame = energy_sweep(tmp_path, energy_best=True)
    # FakeSession's bandwidth is block_size x unroll: the fastest has 1024 and 8
    assert sorted(n for n, _ in EnergySession.measured) == sorted(p.n for p in PROBLEMS)
    assert all(
        results.config_params(key).items() >= {"block_size": 1024, "unroll": 8}.items() for _, key in EnergySession.measured
    )
    with_energy = frame[frame.energy_j.notna()]
    assert len(frame) == 2 * 24 and len(with_energy) == len(PROBLEMS)  # one row per configuration still
    assert (with_energy.block_size == 1024).all() and list(with_energy.energy_j) == pytest.approx([1.024] * len(PROBLEMS))
    assert with_energy.status.eq("ok").all() and with_energy.bandwidth_gbs.eq(8192.0).all()  # the timed row, kept
    # a rerun measures nothing again: neither the rows nor the energy
    EnergySession.measured = []
    again = energy_sweep(tmp_path, energy_best=True)
    assert EnergySession.measured == [] and again.energy_j.notna().sum() == len(PROBLEMS)


def test_a_finished_sweep_gets_the_energy_of_its_fastest_on_a_rerun(tmp_path):
    energy_sweep(tmp_path)  # an older sweep: no energy
    EnergySession.measured = []
    frame = energy_sweep(tmp_path, energy_best=True)
    assert len(EnergySession.measured) == len(PROBLEMS) and frame.energy_j.notna().sum() == len(PROBLEMS)
    lines = RowStore(tmp_path).path.read_text().splitlines()
    assert len(lines) == 2 * 24 + len(PROBLEMS)  # each energy is one more line: the row again, with its energy
    assert all("energy_j" in json.loads(line) for line in lines[-len(PROBLEMS) :])


def test_without_energy_best_nothing_is_measured(tmp_path):
    EnergySession.measured = []
    frame = energy_sweep(tmp_path)
    assert EnergySession.measured == [] and frame.energy_j.isna().all()


# ---- the bench on a simulated GPU ---------------------------------------------------


class SimulatedClocks:
    """NVML as the bench asks it: the energy counter, and an SM clock at a third
    of its maximum until the simulated GPU has settled."""

    MAX_MHZ = 1980.0

    def __init__(self, gpu: SimulatedGpu) -> None:
        self.gpu = gpu

    def energy_mj(self):
        return self.gpu.counter()

    def sm_clock_mhz(self) -> float:
        return self.MAX_MHZ if self.gpu.settled() else self.MAX_MHZ / 3

    def max_sm_clock_mhz(self) -> float:
        return self.MAX_MHZ

    def snapshot(self) -> dict[str, float]:
        return {}


class BenchGpu(SimulatedGpu):
    arch, pci_bus_id, sm_count, l2_bytes = "sm_90", "0000:00:00.0", 4, 1 << 20

    def event_timer(self):
        return None


def simulated_problem_bench(monkeypatch, gpu: SimulatedGpu) -> ProblemBench:
    monkeypatch.setattr("tuner.measure.energy.HOST_CLOCK", gpu.wall_clock)  # the simulated clock
    bench = Bench(gpu=gpu, environment={}, cache_dir="unused", clocks=SimulatedClocks(gpu), energy=EnergyOptions())
    session = ProblemBench.__new__(ProblemBench)  # its inputs are not needed: the launch is simulated
    session.bench, session.family, session.problem = bench, REGISTRY["vector_add"], Problem("vector_add", "float32", 1 << 20)
    return session


def test_the_bench_adds_energy_columns_that_fit_the_schema(monkeypatch):
    gpu = BenchGpu(launch_s=1e-4, busy_w=400.0)
    session = simulated_problem_bench(monkeypatch, gpu)
    assert session.bench.has_energy_counter
    cfg = {p.name: p.default for p in session.family.params}
    columns = session._energy_columns(cfg, Launch(run=gpu.run, grid=(1, 1, 1), block=(1, 1, 1), fetch=None, restore=gpu.restore))
    assert set(columns) == set(ENERGY_COLUMNS) <= set(results.COLUMNS)
    assert columns["energy_j"] == pytest.approx(0.04, rel=0.01)
    assert columns["energy_j_per_byte"] == pytest.approx(0.04 / session.family.bytes_moved(cfg, session.problem), rel=0.01)
    assert columns["energy_j_per_flop"] is None and gpu.restored == 1
    assert "energy" in str(session.bench.phases)  # its seconds counted apart
    frame = results.to_frame([{"family": "vector_add", "status": "ok", **columns}])
    assert frame.energy_windows.dtype == "Int64" and frame.energy_j.iloc[0] == pytest.approx(columns["energy_j"])


def test_the_bench_meters_an_idle_gpu_once_its_clock_is_up(monkeypatch):
    # Launches started in the first 0.35 s run at a third of the clock, three times as long at the same power.
    gpu = BenchGpu(launch_s=1e-4, busy_w=400.0, cold_s=0.35, cold_launch_s=3e-4)
    session = simulated_problem_bench(monkeypatch, gpu)
    cfg = {p.name: p.default for p in session.family.params}
    columns = session._energy_columns(cfg, Launch(run=gpu.run, grid=(1, 1, 1), block=(1, 1, 1), fetch=None, restore=gpu.restore))
    assert columns["energy_j"] == pytest.approx(0.04, rel=0.01)


def test_no_counter_no_energy_columns(monkeypatch):
    gpu = BenchGpu(counter=False)
    session = simulated_problem_bench(monkeypatch, gpu)
    assert not session.bench.has_energy_counter
    cfg = {p.name: p.default for p in session.family.params}
    assert session._energy_columns(cfg, Launch(run=gpu.run, grid=(1, 1, 1), block=(1, 1, 1), fetch=None)) == {}


def test_rows_without_energy_keep_it_null():
    frame = results.to_frame([{"family": "reduce", "status": "ok", "bandwidth_gbs": 1.0}])
    assert frame[list(ENERGY_COLUMNS)].isna().all().all()


# ---- best.json ------------------------------------------------------------------------


def test_best_json_carries_the_energy_optimal_configuration_beside_the_fastest():
    from tuner.data.export import best_entries

    def row(block, gbs, joules):
        cfg = {"variant": "shuffle", "block_size": block}
        return {"status": "ok", "source": "sweep:x", "family": "reduce", "dtype": "int32", "n": 1024, **cfg, "bandwidth_gbs": gbs,
                "time_ms_median": 1000.0 / gbs, "grid": "8,1,1", "block": f"{block},1,1", "run_id": "r",
                "config_key": results.config_key(cfg), "energy_j": joules, "energy_j_err": 0.01}  # fmt: skip

    frame = results.to_frame([row(256, 3000.0, 2.0), row(128, 2900.0, 1.5), row(64, 2000.0, None)])
    (entry,) = best_entries(frame)
    assert entry["params"]["block_size"] == 256
    frugal = entry["energy_optimal"]
    assert frugal["params"]["block_size"] == 128 and frugal["energy_j"] == 1.5 and frugal["fastest_energy_j"] == 2.0
    assert frugal["time_ms_median"] == pytest.approx(1000.0 / 2900.0)
    (without,) = best_entries(results.to_frame([row(256, 3000.0, None)]))
    assert without["energy_optimal"] is None
    # A negative or infinite energy places no point: it is never the energy-optimal configuration.
    (odd,) = best_entries(results.to_frame([row(256, 3000.0, 2.0), row(128, 2900.0, -1.0), row(64, 2000.0, float("inf"))]))
    assert odd["energy_optimal"]["params"]["block_size"] == 256

    from tuner.data.export import header_text

    header = header_text([entry], {"name": "GPU", "compute_capability": "9.0"})
    nested = header[header.index("struct energy_optimal {"):]
    assert "1500.0 mJ per launch" in nested and "static constexpr int block_size = 128;" in nested.split("};")[0]
    assert "energy_optimal" not in header_text([without], {"name": "GPU", "compute_capability": "9.0"})


def test_t4_output_carries_energy_as_a_second_objective():
    from tuner.data.t4 import to_t4

    def row(block, ms, joules):
        cfg = {"variant": "shuffle", "block_size": block}
        return {"status": "ok", "family": "reduce", "dtype": "int32", "n": 1024, **cfg, "config_key": results.config_key(cfg),
                "time_ms_median": ms, "bandwidth_gbs": 4.096e-3 / ms, "energy_j": joules, "energy_j_err": None if joules is None else 0.01}  # fmt: skip

    document = to_t4(results.to_frame([row(256, 1.0, 2.0), row(128, 1.1, None)]), ["variant", "block_size"])
    assert document["metadata"]["tuner"]["objectives"]["energy"] == "min"
    first, second = document["results"]
    assert "energy" in first["objectives"]
    assert {"name": "energy", "value": 2.0, "unit": "J"} in first["measurements"]
    assert not any(m["name"].startswith("energy") for m in second["measurements"])  # not measured: absent, not zero
    plain = to_t4(results.to_frame([row(256, 1.0, None)]), ["variant", "block_size"])
    assert "energy" not in plain["metadata"]["tuner"]["objectives"]
