"""Without a GPU: the side-by-side benchmarks against nvbench and Kernel
Tuner import, give their help, and their arithmetic (the shared space, the
tie sets, the ratio table) holds."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name, words", [("vs_nvbench", ("--results", "memset")), ("vs_kernel_tuner", ("--dtype", "brute_force"))]
)
def test_help_runs_without_a_gpu(name, words):
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert all(word in out for word in words)


def test_both_tuners_get_the_same_space_of_widths_that_fit_a_load():
    kt = load("vs_kernel_tuner")
    float32, int8 = kt.space("float32"), kt.space("int8")
    assert len(float32) == 6 and {c["vector_width"] for c in float32} == {1, 2, 4} and len(int8) == 8
    assert kt.kt_params(float32) == {"BLOCK": [512, 1024], "VEC": [1, 2, 4], "UNROLL": [1]}
    assert kt.ours_of({"BLOCK": 512, "VEC": 4, "UNROLL": 1, "time": 1.0}) == float32[4]


def test_winners_and_tie_sets_follow_the_projects_rule():
    kt = load("vs_kernel_tuner")
    table = {"a": (1.00, 0.99, 1.01), "b": (1.005, 1.0, 1.02), "c": (1.05, 1.02, 1.06)}
    assert kt.tie_keys(table) == ("a", {"a", "b"})
    median, low, high = kt.interval([1.0, 1.2, 1.1, 1.05, 1.3, 0.9, 1.15])
    assert (median, low, high) == (1.1, 0.9, 1.3)  # 7 times: the 95 % interval is the whole sample


def test_nvbench_table_takes_the_ratios_of_like_states():
    nv = load("vs_nvbench")
    entries = [{"family": "reduce", "dtype": "int32", "n": n} for n in (1 << 24, 1 << 28)]
    assert [e["n"] for e in nv.choose(entries, all_sizes=False)] == [1 << 28]
    assert len(nv.choose(entries, all_sizes=True)) == 2
    work = nv.Work("w", lambda: None, 1)
    times = {
        "w": {"ours cold": 1.0, "ours memset": 1.02, "ours hot": 0.9, "nvb cold": 1.03, "nvb batch": 0.909, "ours cold 2": 1.0}
    }
    line = nv.table(times, [work])[-1]
    assert line.split()[-4:] == ["1.0098", "1.0100", "1.0300", "1.0000"]
    assert "n/a" in nv.table({"w": {"ours cold": 1.0}}, [work])[-1]
