"""Spaces are counted without being listed: a family of 6.5 x 10^11
combinations is counted by ``python -m tuner space`` in a fraction of a
second of CPU, a list of it is refused in one line naming the count, and
neither a sweep's check nor the compile stage's walk of a study lists it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tuner import cli
from tuner.families import REGISTRY, Problem, load_family_paths
from tuner.families.base import MAX_ENUMERATED, Family, SpaceTooLarge
from tuner.measure.compile import study_compiled_whole
from tuner.settings import ConfigError, parse

COMBINATIONS = 65 * 10**10

KERNEL = 'extern "C" __global__ void wide(const float* x, float* y, unsigned long long n) {}\n'
SPEC = """from tuner.families import In, KernelSpec, Out, Scalar

wide = KernelSpec(
    name="wide",
    source="wide.cu",
    kernel="wide",
    args=[In("x"), Out("y"), Scalar("n", "n", "uint64")],
    tune_params={"block_size_x": [32 * (i + 1) for i in range(65)], **{f"P{i}": list(range(10)) for i in range(10)}},
    restrictions=["P0 <= P1"],
    reference=lambda x: x,
)
"""


@pytest.fixture
def wide(tmp_path, monkeypatch) -> Path:
    """The spec file of a family of 6.5 x 10^11 combinations, whose
    configurations may not be walked: the test fails where anything lists them."""
    (tmp_path / "wide.cu").write_text(KERNEL)
    (tmp_path / "wide.py").write_text(SPEC)

    def listed(self, domains=None):
        raise AssertionError(f"{self.name}: its combinations were listed")

    monkeypatch.setattr(Family, "configs", listed)
    monkeypatch.setattr(REGISTRY, "families", dict(REGISTRY.families))  # registered for this test only
    return tmp_path / "wide.py"


def test_the_space_command_counts_a_space_of_10_to_the_11_at_once(wide, capsys):
    started = time.process_time()
    assert cli.main(["space", "--family-path", str(wide)]) == 0
    seconds = time.process_time() - started  # CPU time of this process: the same under load
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split()[:3] == ["wide", "float32", f"{COMBINATIONS:,}"] and f"at most {MAX_ENUMERATED:,}" in line, line
    assert seconds < 1.0, seconds


def test_a_list_of_a_space_too_large_is_refused_in_one_line_naming_its_count(wide):
    family = REGISTRY[load_family_paths([wide])[0]]
    problem = Problem("wide", "float32", 1 << 20)
    assert family.combinations() == COMBINATIONS
    assert family.combinations({"P0": [0, 1], "P1": [1]}) == 2  # the others at their default
    assert family.listed_space(problem, {p.name: list(p.values) for p in family.params}) is None
    with pytest.raises(SpaceTooLarge) as refused:
        family.space(problem)
    assert refused.value.line() == (f"error: family 'wide': a space of {COMBINATIONS:,} combinations for wide-float32-n1048576 is "
                                    f"too large to list (at most {MAX_ENUMERATED:,}); it is counted and searched without a list of it")  # fmt: skip
    assert refused.value.exit_status == 2


def test_a_sweep_grid_too_large_is_a_config_error_naming_its_count(wide, tmp_path):
    sweep = {"family": "wide", "dtypes": ["float32"], "sizes": [1 << 20], "params": {f"P{i}": list(range(10)) for i in range(7)}}
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "family_paths": [str(wide)], "sweeps": {"huge": sweep}}
    with pytest.raises(ConfigError, match=r"^sweeps\.huge\.params: the grid must hold at most 1,000,000 combinations, got 10,000,000$"):
        parse(config)


def test_the_compile_stage_leaves_a_study_of_a_space_too_large_to_its_search_without_listing_it(wide, tmp_path):
    study = {"family": "wide", "dtype": "float32", "n": 1 << 20, "budget_trials": 20, "storage": str(tmp_path / "study.log")}
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "family_paths": [str(wide)],
                      "studies": {"search": study}})  # fmt: skip
    started = time.process_time()
    assert list(settings.variants()) == []  # a study's space is compiled as it is searched, never listed here
    family = REGISTRY["wide"]
    study_settings = settings.studies["search"]
    assert study_compiled_whole(family, study_settings.problem, study_settings.domains(), study_settings.budget_trials) is None
    assert time.process_time() - started < 1.0
