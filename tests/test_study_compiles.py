"""The benchmark of what a study compiles (benchmarks/study_compiles.py), briefly."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import study_compiles  # noqa: E402


def test_a_study_builds_modules_by_its_trials_on_kernel_tuners_convolution_space(capsys):
    assert study_compiles.main(["--trials", "8", "--nvcc-s", "0.01", "--measure-s", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["convolution", "convolution narrowed"]
    assert "3,145,728 points (not listed)" in lines[0] and "36,864 points (27,648 modules)" in lines[1]
    for line in lines:
        built = int(re.search(r"8 trials built (\d+) modules", line).group(1))
        assert 8 <= built <= 8 * 5  # each trial's module, and at most its sampler's 4 runners-up a trial


def test_it_refuses_what_it_cannot_run(capsys):
    with pytest.raises(SystemExit):
        study_compiles.main(["--trials", "0"])
    assert "--trials must be >= 1 and the seconds >= 0, got 0, 0.3 and 0.005" in capsys.readouterr().err
