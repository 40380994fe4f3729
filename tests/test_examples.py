"""The examples, kernels of one's own declared as ``KernelSpec``s outside the
package, go through every GPU-free stage: the config is checked, the variants
compile, a study searches a replayed table of the space, and the dataset is
collected, exported and reported, every parameter of the family reaching
``best.json``, the header and the report, with no change under tuner/."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tuner import cli
from tuner.data import results
from tuner.families import REGISTRY
from tuner.search.study.run import StudyOptions, run_study, study_rows
from tuner.search.tables.replay import table_measure
from tuner.settings import load

ROOT = Path(__file__).resolve().parents[1]
# example -> (its family's parameters, none of them a built-in parameter name, the size of its configured space)
EXAMPLES = {
    "saxpy": (("block_size_x", "VEC", "CACHE_HINT", "blocks_per_sm"), 225),
    "transpose": (("TILE", "block_size_y", "PAD"), 32),
    "fir": (("block_size_x", "ITEMS"), 20),
}


@pytest.fixture(params=sorted(EXAMPLES))
def example(request, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # family_paths are relative to the config file, not to where the command runs
    before = dict(REGISTRY.families)
    yield request.param, load(ROOT / "examples" / request.param / "config.yaml")
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def synthetic_bandwidth(family, cfg: dict) -> float:
    """A made-up landscape with one optimum: each parameter best at its middle value."""
    penalty = 0.0
    for weight, param in enumerate(family.params, 1):
        values = list(param.values)
        penalty += 40 * weight * abs(values.index(cfg[param.name]) - len(values) // 2)
    return 3000.0 - penalty


def test_each_example_runs_end_to_end_and_every_parameter_reaches_the_answer(example, tmp_path):
    name, settings = example
    names, size = EXAMPLES[name]
    family = REGISTRY[name]
    assert family.param_names == names
    (sweep,) = settings.sweeps.values()
    (study,) = settings.studies.values()
    (problem,) = sweep.problems()
    space = family.space(problem, sweep.domains())
    assert len(space) == size
    rows = [
        {"family": name, "dtype": problem.dtype, "n": problem.n, "source": f"sweep:{sweep.name}", "config_key": results.config_key(c),
         "status": "ok", "bandwidth_gbs": synthetic_bandwidth(family, c), "bytes_moved": family.bytes_moved(c, problem),
         "time_ms_median": family.bytes_moved(c, problem) / synthetic_bandwidth(family, c) / 1e6,
         "fraction_of_copy_peak": synthetic_bandwidth(family, c) / 3300, "grid": "1,1,1", "block": "1,1,1", **c}
        for c in space
    ]  # fmt: skip
    table = results.to_frame(rows)
    gpu_dir = tmp_path / "results" / "cpu-replay"
    results.write_atomic(table, gpu_dir / "sweeps" / f"{sweep.name}.parquet")

    outcome = run_study(StudyOptions.for_strategy(study.sampler, family=family, problem=problem, domains=study.domains(),
                                                  storage=str(tmp_path / "study.log"),
                                                  study_name=study.storage_name("cpu-replay"),
                                                  measure=table_measure(table, family), budget_trials=study.budget_trials,
                                                  timeout_s=None, seed=study.seed))  # fmt: skip
    found = study_rows(outcome.storage, outcome.study.study_name)
    assert len(found) == len({r["config_key"] for r in found}) == study.budget_trials
    results.write_atomic(
        results.to_frame([r | {"source": f"study:{study.name}"} for r in found]), gpu_dir / "studies" / f"{study.name}.parquet"
    )
    inputs = [str(gpu_dir / "sweeps" / f"{sweep.name}.parquet"), str(gpu_dir / "studies" / f"{study.name}.parquet")]
    assert cli.main(["collect", *inputs, "--out", str(gpu_dir / "measurements.parquet")]) == 0
    dataset = pd.read_parquet(gpu_dir / "measurements.parquet")
    assert len(dataset) == size + study.budget_trials and set(names) <= set(dataset.columns)

    reference = ROOT / "results" / "reference" / "nvidia-h200"
    shutil.copy(reference / "device.json", gpu_dir / "device.json")
    shutil.copy(reference / "peaks.json", gpu_dir / "peaks.json")
    REGISTRY.families.pop(name)  # export and report read the dataset alone, as a process that never loaded the family
    assert cli.main(["best", "--results", str(gpu_dir)]) == 0
    (entry,) = json.loads((gpu_dir / "best.json").read_text())["problems"]
    optimum = {p.name: list(p.values)[len(p.values) // 2] for p in family.params}
    assert entry["params"] == {k: optimum[k] for k in names}
    header = (gpu_dir / "best_configs.h").read_text()
    for key in names:
        assert f"static constexpr int {key} = {optimum[key]};" in header

    from tuner.report.__main__ import main as report_main

    # One process: on a report of one family, starting a pool of drawing processes costs more than it saves.
    assert report_main(["--results", str(gpu_dir), "--out", str(gpu_dir / "report"), "--processes", "1"]) == 0
    markdown = (gpu_dir / "report" / "report.md").read_text()
    for key in names:
        assert f"{key}={optimum[key]}" in markdown, key


def test_each_example_compiles_with_nvcc(example, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    from tuner.measure.compile import compile_all

    name, settings = example
    family = REGISTRY[name]
    (problem,) = next(iter(settings.sweeps.values())).problems()
    configs = family.covering_configs(problem)
    compiled = compile_all(family, configs, problem, arch="sm_90", cache_dir=tmp_path, jobs=os.cpu_count())
    failures = {key: str(c) for key, c in compiled.items() if isinstance(c, Exception)}
    assert not failures and all(c.spill_bytes == 0 for c in compiled.values())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_shipped_report_is_the_one_its_results_draw(name, tmp_path):
    """The shipped example report is what the report command draws from the
    shipped results today (a stale one told another tie set than best.json)."""
    from tuner.report.__main__ import main as report_main

    folder = ROOT / "examples" / name / "reference" / "nvidia-h100-80gb-hbm3"
    assert report_main(["--results", str(folder), "--out", str(tmp_path / "report"), "--processes", "1"]) == 0
    assert (tmp_path / "report" / "report.md").read_text() == (folder / "report" / "report.md").read_text()
