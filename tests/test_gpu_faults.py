"""On the GPU: a kernel that poisons the CUDA context (an illegal address) ends
as launch_error for its own configuration, and a fresh measuring process
measures every configuration after it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tuner.data import results

ROOT = Path(__file__).resolve().parents[1]
FAULTY = Path(__file__).parent / "data" / "faulty_family" / "faulty.py"


@pytest.mark.gpu
def test_a_context_poisoning_kernel_is_contained_and_the_sweep_goes_on(gpu, tmp_path):
    config = {
        "results_dir": str(tmp_path / "results"),
        "gpu": "fault-test",
        "family_paths": [str(FAULTY)],
        "timing": {"max_time_s": 0.05},
        "sweeps": {"faults": {"family": "faulty", "dtypes": ["float32"], "sizes": [1 << 20],
                              "params": {"block_size": [128, 256, 512], "reach": [0, 1]}}},
    }  # fmt: skip
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(config))

    def tuner(*args):
        return subprocess.run(
            [sys.executable, "-m", "tuner", *args, "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    assert tuner("describe").returncode == 0
    proc = tuner("sweep", "faults")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    frame = results.read(tmp_path / "results" / "fault-test" / "sweeps" / "faults.parquet")
    assert len(frame) == 6 and frame.config_key.is_unique
    faulted, fine = frame[frame.reach == 1], frame[frame.reach == 0]
    assert set(faulted.status) == {"launch_error"} and faulted.error.str.contains("context lost").all()
    assert set(fine.status) == {"ok"} and (fine.bandwidth_gbs > 0).all()
    assert proc.stderr.count("starting a fresh process") == 3


@pytest.mark.gpu
def test_a_study_measures_in_its_own_process_and_a_fresh_one_carries_on_after_a_fault(gpu, tmp_path):
    """The tune command's measuring process on the real GPU: every configuration
    of the space measured once, the faulting ones recorded as launch_error
    where they faulted, a fresh worker (and measuring process) after each."""
    config = {
        "results_dir": str(tmp_path / "results"),
        "gpu": "fault-test",
        "family_paths": [str(FAULTY)],
        "timing": {"max_time_s": 0.05},
        "sweeps": {},
        "studies": {"faults": {"family": "faulty", "dtype": "float32", "n": 1 << 20, "budget_trials": 6, "sampler": "random",
                               "params": {"block_size": [128, 256, 512], "reach": [0, 1]}}},
    }  # fmt: skip
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(config))

    def tuner(*args):
        return subprocess.run(
            [sys.executable, "-m", "tuner", *args, "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    assert tuner("describe").returncode == 0
    proc = tuner("tune", "faults")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    frame = results.read(tmp_path / "results" / "fault-test" / "studies" / "faults.parquet")
    assert len(frame) == 6 and frame.config_key.is_unique
    faulted, fine = frame[frame.reach == 1], frame[frame.reach == 0]
    assert set(faulted.status) == {"launch_error"} and faulted.error.str.contains("context lost").all()
    assert set(fine.status) == {"ok"} and (fine.bandwidth_gbs > 0).all()
    assert proc.stderr.count("starting a fresh process") == 3
    # the last worker's line, with what its measuring process sent back at its close
    assert "study faults phases: study (all)" in proc.stdout and "; compile ahead: " in proc.stdout
