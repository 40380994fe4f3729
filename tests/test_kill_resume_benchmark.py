"""benchmarks/kill_resume.py without a GPU: one line, exit 2, and nothing
written (its work folder is not made)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import tuner.device.describe as describe

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "kill_resume.py"
SPEC = importlib.util.spec_from_file_location("kill_resume_benchmark", PATH)
kill_resume = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kill_resume)


def test_no_gpu_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(describe, "probe_devices", lambda: describe.DeviceFacts())  # what NVML gives without a driver
    work = tmp_path / "kill-test"
    monkeypatch.setattr(sys, "argv", ["kill_resume.py", "--work", str(work)])
    assert kill_resume.main() == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "error: kill_resume.py needs a CUDA GPU, and NVML sees none here"
    assert not work.exists()
