"""Every command refuses an unknown name or a missing record in one line on
stderr, with exit status 2, and writes nothing: each ``python -m tuner``
subcommand and each ``python -m tuner.<module>`` entry point, run here in
this process (their ``main``), each with the case it refuses. A command added
without a case here fails ``test_every_entry_point_has_a_case``."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "nvidia-h200" / "measurements.parquet"
PROBLEM = ["--family", "reduce", "--dtype", "int32", "--n", "268435456"]

# (entry point, what it refuses, its arguments, the start of its one line);
# {tmp} is the folder the command runs in, {config} a config there, {table} the shipped H200 rows.
CASES = [
    ("tuner describe", "a config file that is not there", ["describe", "--config", "{tmp}/none.yaml"],
     "config error: {tmp}/none.yaml: must be a readable YAML file"),
    ("tuner compile", "an architecture nvcc has no name for", ["compile", "--config", "{config}", "--arch", "sm_1"],
     "config error: --arch: must be auto or an nvcc architecture such as sm_90, got 'sm_1'"),
    ("tuner peaks", "a device.json that is not there", ["peaks", "--config", "{config}", "--device", "{tmp}/none.json"],
     "config error: --device: must name the device.json the describe stage wrote"),
    ("tuner sweep", "a sweep the config lacks", ["sweep", "nosuch", "--config", "{config}"],
     "config error: sweep name: must be one of ['ladder'], got 'nosuch'"),
    ("tuner tune", "a study the config lacks", ["tune", "nosuch", "--config", "{config}"],
     "config error: study name: must be one of ['search'], got 'nosuch'"),
    ("tuner profile", "a sweep the config lacks", ["profile", "nosuch", "--config", "{config}"],
     "config error: sweep name: must be one of ['ladder'], got 'nosuch'"),
    ("tuner collect", "an input that is not there", ["collect", "{tmp}/none.parquet", "--out", "{tmp}/m.parquet"],
     "config error: inputs: must be existing Parquet files"),
    ("tuner verify", "a family the registry lacks", ["verify", "--families", "nosuch"],
     "config error: --families: must be among"),
    ("tuner best", "a results folder that is not there", ["best", "--results", "{tmp}/none"],
     "config error: --results: must be a results folder with measurements.parquet and device.json"),
    ("tuner compare", "a run that is not there", ["compare", "{tmp}/none", "{table}"],
     "config error: A: must be a results folder with measurements.parquet or a Parquet file"),
    ("tuner t4", "a problem the rows lack", ["t4", "{table}", "--problem", "nosuch", "--out", "{tmp}/t4.json"],
     "config error: t4: --problem must be one of"),
    ("tuner space", "a plug-in file that is not there", ["space", "--family-path", "{tmp}/none.py"],
     "config error: --family-path: family_paths: must name Python files that define families"),
    ("tuner check-family", "a family file that is not there", ["check-family", "{tmp}/none.py"],
     "config error: path: must be the Python file declaring the family, got '{tmp}/none.py'"),
    ("tuner check-config", "a config file that is not there", ["check-config", "{tmp}/none.yaml"],
     "config error: {tmp}/none.yaml: must be a readable YAML file"),
    ("tuner init", "a kernel file that is not there", ["init", "{tmp}/folder", "--kernel", "{tmp}/none.cu"],
     "init: --kernel: must name an existing CUDA file, got '{tmp}/none.cu'"),
    ("tuner check-install", "an option it does not have", ["check-install", "--nosuch"],
     "tuner: error: unrecognized arguments: --nosuch"),
    ("tuner", "a stage that does not exist", ["nosuch"], "tuner: error: argument STAGE: invalid choice: 'nosuch'"),
    ("tuner.report", "a results folder that is not there", ["--results", "{tmp}/none"],
     "error: results folder not found: {tmp}/none"),
    ("tuner.search.tables.replay", "a family the registry lacks", ["{table}", "--family", "nosuch", "--dtype", "int32", "--n", "268435456"],
     "python -m tuner.search.tables.replay: error: --family must be one of"),
    ("tuner.search.tables.replay", "a sampler that does not exist", ["{table}", *PROBLEM, "--samplers", "nosuch"],
     "python -m tuner.search.tables.replay: error: sampler must be one of"),
    ("tuner.search.tables.replay", "a source the rows lack", ["{table}", *PROBLEM, "--source", "sweep:nosuch"],
     "python -m tuner.search.tables.replay: error: --source must be one of"),
    ("tuner.search.tables.replay_pareto", "a family the registry lacks", ["{table}", "--family", "nosuch", "--dtype", "int32", "--n", "1"],
     "python -m tuner.search.tables.replay_pareto: error: --family must be one of"),
    ("tuner.search.tables.replay_pareto", "a table that is not there", ["{tmp}/none.parquet", *PROBLEM],
     "python -m tuner.search.tables.replay_pareto: error: {tmp}/none.parquet: must be a Parquet file or a folder of them"),
    ("tuner.search.samplers.registry", "an option it does not have", ["--nosuch"],
     "python -m tuner.search.samplers.registry: error: unrecognized arguments: --nosuch"),
    ("tuner.search.tables.replay_study", "a family the registry lacks",
     ["worker", "{table}", "--family", "nosuch", "--dtype", "int32", "--n", "1", "--storage", "{tmp}/w.log", "--study", "s",
      "--budget", "4"],
     "python -m tuner.search.tables.replay_study: error: --family: must be one of"),
    ("tuner.search.tables.replay_study", "a sampler that does not exist",
     ["worker", "{table}", *PROBLEM, "--sampler", "nosuch", "--storage", "{tmp}/w.log", "--study", "s", "--budget", "4"],
     "python -m tuner.search.tables.replay_study: error: --sampler: must be one of"),
    ("tuner.search.tables.replay_study", "a study the storage does not hold",
     ["rows", "--storage", "{tmp}/study.log", "--study", "nosuch", "--budget", "4", "--out", "{tmp}/rows.parquet"],
     "python -m tuner.search.tables.replay_study: error: --study: must be a study of {tmp}/study.log [], got 'nosuch'"),
    ("tuner.search.tables.replay_study", "a storage that is not there",
     ["rows", "--storage", "{tmp}/results/none.log", "--study", "s", "--budget", "4"],
     "python -m tuner.search.tables.replay_study: error: --storage: must name an existing journal file"),
]  # fmt: skip

# Entry point -> the module whose main it runs.
MAINS = {"tuner": "tuner.cli", "tuner.report": "tuner.report.__main__"}


def run_main(entry: str, argv: list[str]) -> int:
    """``python -m ENTRY ARGV``, in this process: its exit status."""
    module = entry.split()[0]
    main = importlib.import_module(MAINS.get(module, module)).main
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's refusals, and a main that exits itself
        return stop.code if isinstance(stop.code, int) else 1


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize("entry, case, argv, line", CASES, ids=[f"{entry}: {case}" for entry, case, _, _ in CASES])
def test_an_unknown_name_or_missing_record_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capfd, entry, case, argv,
                                                                                  line):  # fmt: skip
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu",
              "sweeps": {"ladder": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20], "params": {"unroll": [1, 2]}}},
              "studies": {"search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 4,
                                     "storage": str(tmp_path / "study.log")}}}  # fmt: skip
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "study.log").write_text("")  # a study storage holding no study yet
    names = {"tmp": str(tmp_path), "config": str(tmp_path / "mine.yaml"), "table": str(REFERENCE)}
    monkeypatch.chdir(tmp_path)
    before = files_under(tmp_path)
    status = run_main(entry, [a.format(**names) for a in argv])
    err = capfd.readouterr().err.splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(line.format(**names)), err
    assert files_under(tmp_path) == before


def test_every_entry_point_has_a_case():
    """The ``python -m`` entry points under tuner/ (a ``__main__`` module or
    a main run ``if __name__ == "__main__"``) and every subcommand of
    ``python -m tuner``."""
    from tuner import cli

    modules = set()
    for path in (ROOT / "tuner").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__main__.py":
            modules.add(name.removesuffix(".__main__"))
        elif re.search(r'^if __name__ == "__main__":', path.read_text(), re.M):
            modules.add(name)
    modules.discard("tuner.cli")  # `python -m tuner.cli` is `python -m tuner`
    covered = {entry.split()[0] for entry, *_ in CASES}
    assert modules == covered, f"entry points without a case: {sorted(modules - covered)}; cases of none: {sorted(covered - modules)}"
    stages = set(cli.build_parser()._subparsers._group_actions[0].choices)  # argparse keeps them here
    cased = {entry.split()[1] for entry, *_ in CASES if entry.startswith("tuner ")}
    assert stages == cased, f"subcommands without a case: {sorted(stages - cased)}"


def test_tune_refuses_gpus_this_machine_lacks_before_a_worker_starts(tmp_path, monkeypatch, capfd):
    """``--gpus`` held to the rule of the config's ``study_gpus``: here two devices, GPU 3 named."""
    from tuner import cli
    from tuner.device import describe

    monkeypatch.setattr(describe, "probe_devices", lambda: describe.DeviceFacts(2, ("GPU A", "GPU A"), (1 << 34,) * 2, ("9.0",) * 2))
    monkeypatch.chdir(tmp_path)
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu",
              "studies": {"search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 4,
                                     "storage": str(tmp_path / "study.log")}}}  # fmt: skip
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    assert cli.main(["tune", "search", "--config", str(tmp_path / "mine.yaml"), "--gpus", "0,3"]) == 2
    assert capfd.readouterr().err.splitlines() == ["config error: --gpus: must be indices of this machine's 2 CUDA devices (0 to 1), got 0,3"]
    assert files_under(tmp_path) == {"mine.yaml"}
