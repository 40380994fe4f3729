"""Without a GPU: the yardstick benchmark's verdict line (independent over
ours, holding within 1 %) and its help text."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "yardsticks.py"


def load():
    spec = importlib.util.spec_from_file_location("yardsticks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_yardstick_holds_only_within_one_percent_of_the_independent_harness():
    yardsticks = load()
    held = yardsticks.ratio_line("cub int32", 3000.0, 3029.0, "cupy.sum")
    assert " 1.0097 " in held and " yes " in held
    beaten = yardsticks.ratio_line("cub int32", 2881.0, 2999.0, "cupy.sum")
    assert " 1.0410 " in beaten and " NO " in beaten
    assert " yes " in yardsticks.ratio_line("copy", 3000.0, 2900.0, "memcpy")  # ours faster: holds
    assert "n/a" in yardsticks.ratio_line("cub float32", None, 2999.0, "cupy.sum")
    assert "1.0200 x copy" in yardsticks.vs_line("vector add", 3060.0, 3000.0, "copy")


def test_help_runs_without_a_gpu_or_cupy():
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True)
    assert "--diagnose" in result.stdout and "independent" in result.stdout
