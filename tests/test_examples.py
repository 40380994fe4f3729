"""The saxpy example, a kernel family that lives outside the package, goes
through every GPU-free stage: its config is checked, its variants compile, a
study searches a replayed table of its space, and the dataset is collected and
reported, with no change under tuner/."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tuner import cli
from tuner.data import results
from tuner.families import REGISTRY
from tuner.search.replay import table_measure
from tuner.search.study import run_study, study_rows
from tuner.settings import load

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "saxpy" / "config.yaml"


@pytest.fixture
def saxpy(monkeypatch):
    monkeypatch.chdir(ROOT)  # family_paths are relative to where snakemake runs
    before = dict(REGISTRY.families)
    yield load(CONFIG)
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def synthetic_bandwidth(cfg: dict) -> float:
    """A made-up landscape with one optimum: block 256, vector 4, one pass, streaming loads."""
    return (
        3000.0
        - 80 * abs(math.log2(cfg["block_size"] / 256))
        - 120 * abs(math.log2(cfg["vector_width"] / 4))
        - 15 * (cfg["grid_blocks_per_sm"] != 0)
        - 10 * (cfg["cache_hint"] != "stream")
    )


def test_the_example_runs_end_to_end_through_replay(saxpy, tmp_path, capsys):
    family = REGISTRY["saxpy"]
    sweep, study = saxpy.sweeps["saxpy_space"], saxpy.studies["saxpy_search"]
    (problem,) = sweep.problems()
    space = family.space(problem, sweep.domains())
    assert len(space) == 225
    rows = [
        {"family": "saxpy", "dtype": problem.dtype, "n": problem.n, "source": "sweep:saxpy_space", "config_key": results.config_key(c),
         "status": "ok", "bandwidth_gbs": synthetic_bandwidth(c), "bytes_moved": family.bytes_moved(c, problem), **c}
        for c in space
    ]  # fmt: skip
    table = results.to_frame(rows)
    gpu_dir = tmp_path / "results" / "cpu-replay"
    results.write_atomic(table, gpu_dir / "sweeps" / "saxpy_space.parquet")

    outcome = run_study(family=family, problem=problem, domains=study.domains(), storage=str(tmp_path / "study.log"),
                        study_name=study.storage_name("cpu-replay"), measure=table_measure(table, family),
                        budget_trials=study.budget_trials, timeout_s=None, sampler=study.sampler, seed=study.seed)  # fmt: skip
    found = study_rows(outcome.study)
    assert len(found) == len({r["config_key"] for r in found}) == study.budget_trials == 25
    assert outcome.best["bandwidth_gbs"] >= 0.98 * table.bandwidth_gbs.max()
    results.write_atomic(
        results.to_frame([r | {"source": "study:saxpy_search"} for r in found]), gpu_dir / "studies" / "saxpy_search.parquet"
    )

    inputs = [str(gpu_dir / "sweeps" / "saxpy_space.parquet"), str(gpu_dir / "studies" / "saxpy_search.parquet")]
    assert cli.main(["collect", *inputs, "--out", str(gpu_dir / "measurements.parquet")]) == 0
    dataset = pd.read_parquet(gpu_dir / "measurements.parquet")
    assert len(dataset) == 250 and set(dataset.family) == {"saxpy"}
    assert {"block_size", "vector_width", "grid_blocks_per_sm", "cache_hint"} <= set(dataset.columns)

    reference = ROOT / "results" / "reference" / "nvidia-h200"
    shutil.copy(reference / "device.json", gpu_dir / "device.json")
    (gpu_dir / "peaks.json").write_text(json.dumps(json.loads((reference / "peaks.json").read_text())))
    from tuner.report.__main__ import main as report_main

    assert report_main(["--results", str(gpu_dir), "--out", str(gpu_dir / "report")]) == 0
    html = (gpu_dir / "report" / "report.html").read_text()
    assert "saxpy" in html


def test_the_example_compiles_with_nvcc(saxpy, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    from tuner.measure.compile import compile_all

    family = REGISTRY["saxpy"]
    (problem,) = saxpy.sweeps["saxpy_space"].problems()
    configs = family.covering_configs(problem)
    compiled = compile_all(family, configs, problem, arch="sm_90", cache_dir=tmp_path, jobs=os.cpu_count())
    failures = {key: str(c) for key, c in compiled.items() if isinstance(c, Exception)}
    assert not failures and all(c.spill_bytes == 0 for c in compiled.values())
