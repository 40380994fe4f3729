"""Every process a stage starts reports a refusal (a damaged file, no GPU)
through the stage as its one line and exit status, never a traceback: the
stage reads device.json and peaks.json before it starts any process, the
study workers hand theirs to the stage, which says it once, and the profiled
harness under ncu leaves its own for the profile stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.settings import parse

ROOT = Path(__file__).resolve().parents[1]
PARAMS = {"variant": ["shuffle"], "block_size": [128, 256], "unroll": [1, 2]}


def settings_of(tmp_path: Path, **sweep_more):
    sweep = {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20], "params": PARAMS, **sweep_more}
    study = {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 2, "params": PARAMS,
             "storage": str(tmp_path / "store" / "study.log")}  # fmt: skip
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {"ladder": sweep},
                      "studies": {"search": study}})  # fmt: skip
    settings.run.gpu_dir.mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text(json.dumps({"name": "GPU A"}))
    return settings


def tuner(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    # No CUDA device is visible: the same refusal on a machine with a GPU as without.
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "TUNER_PROGRESS": "off", **env}
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=180)  # fmt: skip


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize("damage", ['{"name": "GPU', "\xff"])  # cut short; not UTF-8 (tests/test_damaged_state.py has the rest)
def test_a_device_json_that_is_not_json_is_the_sweeps_one_line_before_any_process(tmp_path, damage):
    settings = settings_of(tmp_path)
    device = tmp_path / "device.json"
    device.write_bytes(damage.encode("latin-1"))
    before = files_under(tmp_path)
    proc = tuner("sweep", "ladder", "--settings", settings.stage_json("sweep", "ladder"), "--device", str(device), cwd=tmp_path)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {device}: ") and lines[0].endswith("`python -m tuner describe`"), lines
    assert files_under(tmp_path) == before  # no store, no rows


@pytest.mark.parametrize("stage", ["sweep", "tune"])
def test_a_truncated_peaks_json_is_the_stages_one_line_before_any_process(tmp_path, stage):
    settings = settings_of(tmp_path)
    peaks = settings.run.gpu_dir / "peaks.json"
    peaks.write_text('{"copy_gbs": 3010.5, "read_g')
    name, section = ("ladder", "sweep") if stage == "sweep" else ("search", "study")
    before = files_under(tmp_path)
    proc = tuner(stage, name, "--settings", settings.stage_json(section, name), cwd=tmp_path)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {peaks}: not readable JSON") and "`python -m tuner peaks`" in lines[0], lines
    assert files_under(tmp_path) == before


def test_study_workers_that_refuse_are_one_line_and_their_exit_status(tmp_path):
    """Two workers, no GPU for either: their measuring processes refuse, each
    worker hands the refusal to the stage, which says it once with its status."""
    settings = settings_of(tmp_path)
    proc = tuner("tune", "search", "--settings", settings.stage_json("study", "search"), "--gpus", "0,1", cwd=tmp_path)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "CUDA" in lines[0] and "Traceback" not in proc.stderr, lines
    assert not (tmp_path / "store").exists()  # the study's storage is never touched without a GPU


# An ncu that runs the program it is given (after --force-overwrite), as ncu does, and answers --query-metrics.
PASSING_NCU = """#!{python}
import subprocess, sys
args = sys.argv[1:]
if "--query-metrics" in args:
    print('"Metric Name","Metric Type"')
    print('"dram__bytes_read","Counter"')
    sys.exit(0)
sys.exit(subprocess.run(args[args.index("--force-overwrite") + 1:]).returncode)
"""


def test_the_profiled_harness_that_refuses_is_the_profile_stages_one_line_and_exit_status(tmp_path):
    from tuner.data import results

    settings = settings_of(tmp_path, profile="all")
    data = ROOT / "tests" / "data" / "ncu" / "reduce_ladder.sweep.parquet"
    rows = results.read(data)
    results.write_atomic(rows, settings.run.gpu_dir / "sweeps" / "ladder.parquet")
    tool = tmp_path / "ncu"
    tool.write_text(PASSING_NCU.format(python=sys.executable))
    tool.chmod(0o755)
    proc = tuner("profile", "ladder", "--settings", settings.stage_json("profile", "ladder"), cwd=tmp_path, NCU=str(tool))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "CUDA" in lines[0], lines
    assert not (settings.run.gpu_dir / "profiles").exists()  # no profile written
