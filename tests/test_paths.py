"""Where each file of a results folder lies is said once (tuner.data.paths):
the settings, the stages and the Python API ask it."""

from __future__ import annotations

from pathlib import Path

from tuner.data.paths import GPU_FOLDER_NAMES, RESULTS_FOLDER_NAMES, GpuFolder, ResultsFolder, cubin_cache
from tuner.settings.model import RunSettings
from tuner.stages.sweep_store import store_dir


def test_a_run_finds_its_files_in_its_gpu_folder(tmp_path):
    run = RunSettings(results_dir=str(tmp_path), gpu="h100")
    folder = run.folder
    assert folder.path == run.gpu_dir == tmp_path / "h100"
    assert run.cubin_cache == cubin_cache(tmp_path) == tmp_path / ".cubin-cache"
    assert folder.study("s") == tmp_path / "h100" / "studies" / "s.parquet"
    assert folder.sweep("w") == tmp_path / "h100" / "sweeps" / "w.parquet"
    assert folder.profile("w") == tmp_path / "h100" / "profiles" / "w.parquet"


def test_every_file_of_a_gpu_folder_is_among_the_names_a_results_folder_may_hold(tmp_path):
    folder = GpuFolder(tmp_path)
    files = [folder.device_json, folder.peaks_json, folder.peaks_parquet, folder.compile_parquet, folder.measurements,
             folder.best_json, folder.best_header, folder.sweeps, folder.studies, folder.profiles, folder.report, folder.store,
             folder.optuna_journal, folder.log("collect"), folder.seconds("collect"), folder.report_figure("overview")]  # fmt: skip
    assert {f.relative_to(folder.path).parts[0] for f in files} <= GPU_FOLDER_NAMES
    results = ResultsFolder(tmp_path)
    held = [results.cubin_cache, results.references, results.reference_report_stamp("g"), results.finished_report_stamp("g"),
            results.search_benchmark]  # fmt: skip
    assert {f.relative_to(tmp_path).parts[0] for f in held} <= RESULTS_FOLDER_NAMES


def test_a_folder_named_by_a_wildcard_gives_the_rules_their_patterns():
    """The workflow's rules take every file name from here, with Snakemake's {gpu} wildcard as the folder."""
    gpu = ResultsFolder("results").gpu("{gpu}")
    assert str(gpu.sweep("s")) == "results/{gpu}/sweeps/s.parquet"
    assert str(gpu.seconds("sweep-s")) == "results/{gpu}/logs/seconds/sweep-s.tsv"
    assert str(gpu.log("collect")) == "results/{gpu}/logs/collect.log"
    assert str(gpu.report_figure("overview")) == "results/{gpu}/report/overview.png"
    assert ResultsFolder("results").reference("h200").path == Path("results/reference/h200")


def test_the_sweep_row_store_lies_where_the_folder_says():
    assert store_dir(Path("r/h100"), "w") == GpuFolder("r/h100").sweep_store("w")
