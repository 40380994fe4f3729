"""benchmarks/energy.py without a GPU: it imports, its help and argument
checks work, its small spaces are valid and feasible, and it stops with one
line where there is no GPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.data import results
from tuner.families import REGISTRY, Problem

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "energy.py"
SPEC = importlib.util.spec_from_file_location("energy_benchmark", PATH)
energy = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(energy)


def test_help_names_the_three_parts():
    done = subprocess.run([sys.executable, str(PATH), "--help"], capture_output=True, text=True, check=True)
    assert "(a) repeatability" in done.stdout and "(b) known different work" in done.stdout and "optuna-dashboard" in done.stdout


@pytest.mark.parametrize("name", list(energy.SPACES))
def test_each_small_space_is_valid_and_feasible(name):
    dtype, n, searched = energy.SPACES[name]
    family = REGISTRY[name]
    for param, values in searched.items():
        assert all(family.param(param).accepts(v) for v in values), (param, values)
    domains = {p.name: list(searched.get(p.name, [p.default])) for p in family.params}
    space = family.space(Problem(name, dtype, n), domains)
    assert 8 <= len(space) <= 64  # small: minutes, not hours, with energy for each


def test_bad_arguments_and_no_gpu_are_one_line(capsys):
    with pytest.raises(SystemExit):
        energy.parse_args(["--repeats", "1"])
    assert "--repeats must be >= 2" in capsys.readouterr().err
    for bad, rule in (
        (["--batch-s", "0"], "--batch-s must be > 0, got 0.0"),
        (["--repeat-n", "0"], "--repeat-n must be >= 1, got 0"),
    ):
        with pytest.raises(SystemExit):
            energy.parse_args(bad)
        assert rule in capsys.readouterr().err
    try:
        import pycuda  # noqa: F401
    except ImportError:
        assert energy.main(["--parts", "a"]) == 2
        assert capsys.readouterr().out.startswith("error: PyCUDA is not installed")


class FakeBench:
    """Stands in for the GPU's Bench: rows whose time and energy grow with
    the problem's size and the vector width, energy from a simulated counter."""

    def __init__(self) -> None:
        sys.path.insert(0, str(Path(__file__).parent / "data"))
        from fake_energy import SimulatedGpu

        self.simulated = SimulatedGpu
        self.clocks = type("Clocks", (), {"sm_clock_mhz": staticmethod(lambda: 1980.0), "energy_mj": staticmethod(lambda: 0)})()

    def problem(self, family, problem):
        bench = self

        class Session:
            def measure(self, cfg, source, energy=None):
                ms = problem.n / 1e6 * (1 + 0.1 * cfg.get("vector_width", 1))
                joules = ms * 1e-3 * (300 - 20 * cfg.get("vector_width", 1))
                row = {"status": "ok", "config_key": results.config_key(cfg), "time_ms_median": ms, **cfg}
                if energy:
                    row |= {"energy_j": joules, "energy_j_err": joules * 0.01, "power_w_energy": joules / ms * 1e3,
                            "energy_j_per_byte": joules / family.bytes_moved(cfg, problem)}  # fmt: skip
                return row

            def launch(self, cfg):
                gpu = bench.simulated()
                bench.gpu = gpu
                return type("Launch", (), {"run": staticmethod(gpu.run), "restore": None})()

        return Session()

    def joules(self, run, restore=None):
        from tuner.measure.energy import measure_energy

        gpu = self.gpu
        return measure_energy(run, synchronize=gpu.synchronize, counter=gpu.counter, marker=gpu.marker, wall_clock=gpu.wall_clock)


def test_the_three_parts_run_on_a_stand_in_bench(tmp_path, capsys):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    argv = ["--repeats", "3", "--repeat-n", str(1 << 26), "--budget", "6", "--families", "vector_add"]
    args = energy.parse_args([*argv, "--storage", str(tmp_path / "e.log")])
    bench = FakeBench()
    a = energy.repeatability(bench, args)
    assert len(a["joules"]) == 3 and a["rel_spread"] < 0.05 and a["update_ms"] == pytest.approx(100, rel=0.05)
    assert f"n={1 << 26} " in a["case"] and len(a["stated_err_j"]) == 3 and a["sm_clock_mhz"] == [1980.0] * 3
    assert 0 <= a["counter_read_ms"] < 50
    b = energy.known_work(bench, args)
    assert [line["energy_ratio"] for line in b] == pytest.approx([2.0, 2.0])
    (c,) = energy.fronts(bench, args)
    assert c["measured"] <= 6 and c["front"] >= 2 and c["ratio_at_knee"] > 0  # wider vectors: slower and more frugal here
    out = capsys.readouterr().out
    assert "(a) repeatability" in out and "(b) known different work" in out and "at its knee" in out
