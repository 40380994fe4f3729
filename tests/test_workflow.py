"""The Snakemake workflow: lint-clean, a dry run lists every stage's jobs, and on
a machine without a GPU the run stops before measuring, with one clear line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["describe_device", "compile_variants", "peaks", "sweep", "tune", "collect", "plot_report", "all"]


def snakemake(*args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_lint_is_clean():
    proc = snakemake("--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dry_run_lists_every_stage(tmp_path):
    proc = snakemake("-n", "--config", f"results_dir={tmp_path}", "gpu=test-gpu")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for stage in STAGES:
        assert f"rule {stage}:" in out or f"localrule {stage}:" in out, f"{stage} missing from the dry run:\n{out[-3000:]}"
    assert f"{tmp_path}/test-gpu/measurements.parquet" in out


def test_bad_config_fails_before_any_job(tmp_path):
    proc = snakemake("-n", "--config", f"results_dir={tmp_path}", "gpu=test-gpu", "seed=-1")
    assert proc.returncode != 0
    assert "seed" in proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU driver")
def test_run_without_gpu_stops_with_one_line(tmp_path):
    proc = snakemake("--cores", "1", "--config", f"results_dir={tmp_path}")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and ("PyCUDA is not installed" in lines[0] or "no usable CUDA device" in lines[0]), out[-3000:]
    assert "pip install -e '.[cuda]'" in lines[0] or "NVIDIA GPU" in lines[0]
    assert not list(Path(tmp_path).rglob("*.parquet"))  # nothing measured, nothing half-written


def test_snakemake_report_bundles_the_reference_figures(tmp_path):
    proc = snakemake("--cores", "1", "--report", str(tmp_path / "report.html"), "report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "report.html").stat().st_size > 100_000


def test_study_workers_get_one_gpu_each(monkeypatch, tmp_path):
    """`tuner tune --gpus 0,1` starts one worker per GPU, each seeing only its own."""
    import subprocess as sp
    from types import SimpleNamespace

    from tuner import cli

    started = []

    class FakeProcess:
        def __init__(self, command, env):
            started.append((command, env["CUDA_VISIBLE_DEVICES"]))

        def wait(self):
            return 0

    monkeypatch.setattr(sp, "Popen", FakeProcess)
    args = SimpleNamespace(
        name="reduce_int32",
        config="config.yaml",
        device="d.json",
        out=str(tmp_path / "s.parquet"),
        peaks="p.json",
        gpus=["0", "1"],
    )
    cli._run_workers(args)
    assert [gpu for _, gpu in started] == ["0", "1"]
    for worker, (command, _gpu) in enumerate(started):
        assert command[command.index("--worker") + 1] == str(worker) and "--worker-only" in command
