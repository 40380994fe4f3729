"""benchmarks/energy.py without a GPU: it imports, its help and argument
checks work, its small spaces are valid and feasible, and it stops with one
line where there is no GPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

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
    try:
        import pycuda  # noqa: F401
    except ImportError:
        assert energy.main(["--parts", "a"]) == 2
        assert capsys.readouterr().out.startswith("error: PyCUDA is not installed")
