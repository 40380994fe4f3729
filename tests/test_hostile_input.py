"""Hostile and mistaken input, refused at load before any work with one line
(the file or key, the rule, the value), writing nothing: YAML that attacks the
reader, results folders that would land elsewhere, study settings no run can
use, and misuse of the command line."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tuner.settings import ConfigError, load, parse, read_yaml

ROOT = Path(__file__).resolve().parents[1]


def config_of(tmp_path: Path) -> dict:
    """One sweep and one study of the reduce family, results under tmp_path."""
    return {
        "results_dir": str(tmp_path / "results"),
        "gpu": "test-gpu",
        "sweeps": {
            "ladder": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20],
                       "params": {"variant": ["shuffle"], "block_size": [256], "unroll": [1, 2]}},
        },
        "studies": {
            "search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 4,
                       "storage": str(tmp_path / "study.log"),
                       "params": {"variant": ["shuffle", "unrolled"], "block_size": [128, 256], "unroll": [1, 2, 4]}},
        },
    }  # fmt: skip


def with_value(config: dict, path: tuple, value) -> dict:
    config = copy.deepcopy(config)
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return config


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def refused(config: dict, **checks) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(config, **checks)
    text = str(caught.value)
    assert "\n" not in text
    return text


# ---- YAML ------------------------------------------------------------------------------


def test_merge_keys_are_accepted_and_the_mapping_s_own_keys_win(tmp_path):
    path = tmp_path / "c.yaml"
    text = (
        f"results_dir: {tmp_path / 'results'}\ngpu: test-gpu\n"
        "sweeps:\n"
        "  a: &a\n    family: reduce\n    dtypes: [int32]\n    sizes: [1048576]\n    params: {variant: [shuffle], unroll: [1]}\n"
        "  b:\n    <<: *a\n    sizes: [2097152]\n"
    )
    path.write_text(text)
    settings = load(path)
    assert settings.sweeps["b"].sizes == (2097152,) and settings.sweeps["b"].family == "reduce"
    assert settings.sweeps["b"].params == settings.sweeps["a"].params


def test_a_key_given_twice_beside_a_merge_is_still_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: &a {x: 1}\nb:\n  <<: *a\n  y: 1\n  y: 2\n")
    with pytest.raises(ConfigError, match=rf"^{path}:5:3: keys must be unique within a mapping, got 'y' again \(first at line 4\)$"):
        read_yaml(path)


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"must hold at most 200000 values with its aliases \(\*name\) expanded"):
        read_yaml(path)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("flow", [True, False], ids=["flow", "block"])
def test_deep_nesting_is_refused_in_one_line(tmp_path, flow):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n" if flow else "a:\n" + "".join(" " * i + "k:\n" for i in range(1, 200)))
    with pytest.raises(ConfigError, match=rf"^{path}:\d+:\d+: must nest at most 32 levels of mappings and lists, got deeper$"):
        read_yaml(path)


def test_a_config_too_large_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("a: [" + "1, " * 600_000 + "1]\n")
    with pytest.raises(ConfigError, match=rf"^{path}: must be a config of at most 1 MiB, got \d+ bytes$"):
        read_yaml(path)


def test_bytes_that_are_not_utf8_are_named_with_their_position(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("results_dir: results\ngpu: test-gpu\n# café\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        read_yaml(path)
    assert str(caught.value) == f"{path}:3:6: must be UTF-8 text, got the byte 0xe9 (byte offset 40), which is not UTF-8 there"


def test_a_control_character_is_named_with_its_position(tmp_path):
    path = tmp_path / "ctl.yaml"
    path.write_text("a: 1\nb: x\x07\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2:5: must be valid YAML, got the control character U\+0007"):
        read_yaml(path)


def test_the_cli_reports_a_config_that_is_not_utf8_in_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"results_dir: \xff\n")
    proc = cli("sweep", "ladder", "--config", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"config error: {path}:1:14: must be UTF-8 text, got the byte 0xff (byte offset 13), which is not UTF-8 there"]  # fmt: skip
    assert files_under(tmp_path) == {"bad.yaml"}


# ---- where results land -------------------------------------------------------------------


@pytest.mark.parametrize("written", ["{tmp}/results/", "{tmp}/./results", "{tmp}/results//"])
def test_results_dir_with_a_trailing_slash_or_dot_is_the_same_folder(tmp_path, written):
    settings = parse(with_value(config_of(tmp_path), ("results_dir",), written.format(tmp=tmp_path)))
    assert settings.run.results_dir == str(tmp_path / "results")
    assert settings.run.gpu_dir == tmp_path / "results" / "test-gpu"


def test_a_trailing_slash_in_results_dir_plans_the_same_jobs(tmp_path):
    config = with_value(config_of(tmp_path), ("results_dir",), f"{tmp_path}/results/")
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{tmp_path}/results/test-gpu/measurements.parquet" in proc.stdout
    assert files_under(tmp_path) == {"mine.yaml"}


@pytest.mark.parametrize("name", ["res{x}", "r/{gpu}", "res{{x}}", "res\nults", "a\x00b"])
def test_a_results_dir_with_braces_or_control_characters_is_refused_in_one_line(tmp_path, name):
    # Snakemake reads a brace in a rule's paths as a wildcard; a line break or NUL names no folder.
    text = refused(with_value(config_of(tmp_path), ("results_dir",), str(tmp_path / name)))
    assert text.startswith("results_dir: must be a path without braces or control characters, got ")


def test_a_study_storage_with_braces_reaches_its_stage_as_written(tmp_path):
    from snakemake.io import apply_wildcards

    from tuner.settings.model import Settings

    storage = str(tmp_path / "x{y}.log")
    settings = parse(with_value(config_of(tmp_path), ("studies", "search", "storage"), storage))
    text = settings.stage_json("study", "search")
    assert apply_wildcards(text, {}) == text  # what Snakemake does to a rule's params: nothing here
    assert Settings.from_stage_json(text).studies["search"].storage == storage
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(with_value(config_of(tmp_path), ("studies", "search", "storage"), storage)))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tune_search" in proc.stdout


@pytest.mark.parametrize(
    "results_dir, gpu_name",
    [
        (str(ROOT / "results" / "reference"), "test-gpu"),
        (str(ROOT / "results" / "reference" / "nvidia-h200"), "test-gpu"),
        (str(ROOT / "results"), "reference"),
        (str(ROOT / "results" / "reference" / "."), "nvidia-h200"),
    ],
)
def test_results_inside_the_reference_results_are_refused_unless_allowed(tmp_path, results_dir, gpu_name):
    before = files_under(ROOT / "results" / "reference")
    config = with_value(with_value(config_of(tmp_path), ("results_dir",), results_dir), ("gpu",), gpu_name)
    text = refused(config)
    assert text.startswith("results_dir: must lie outside the shipped reference results ")
    assert "unless allow_reference_results is true" in text and repr(results_dir) in text
    if Path(results_dir).resolve().parent == (ROOT / "results" / "reference").resolve():
        # a GPU folder of the reference used as a results folder holds files no run puts there: asked for apart
        text = refused({**config, "allow_reference_results": True})
        assert text.startswith("results_dir: must be a new or empty folder, or one this pipeline wrote")
        config = {**config, "allow_other_files_in_results_dir": True}
    allowed = parse({**config, "allow_reference_results": True})
    assert allowed.run.gpu_dir.resolve().is_relative_to((ROOT / "results" / "reference").resolve())
    assert files_under(ROOT / "results" / "reference") == before


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("sweeps",), {"s" * 65: {"family": "reduce", "dtypes": ["int32"], "sizes": [1024]}}, r"^sweeps: must be a name of at most 64 "),
        (("studies",), {"s" * 65: {"family": "reduce", "dtype": "int32", "n": 1024}}, r"^studies: must be a name of at most 64 "),
        (("gpu",), "g" * 65, r"^gpu: must be auto or a folder name of at most 64 "),
        (("results_dir",), "results/" + "r" * 300, r"^results_dir: must be a path whose folder names are at most 255 bytes"),
    ],
    ids=["sweep-name", "study-name", "gpu-name", "results_dir"],
)
def test_names_too_long_for_a_file_name_are_refused_at_load(tmp_path, path, value, message):
    import re

    assert re.search(message, refused(with_value(config_of(tmp_path), path, value)))
    assert not (tmp_path / "results").exists()


# ---- study settings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("studies", "search", "timeout_s"), float("nan"), "studies.search.timeout_s: must be a finite number, got nan"),
        (("studies", "search", "timeout_s"), float("inf"), "studies.search.timeout_s: must be a finite number, got inf"),
        (("timing",), {"max_time_s": float("inf")}, "timing.max_time_s: must be a finite number, got inf"),
        (("studies", "search", "seed"), 2**64, f"studies.search.seed: must be an integer from 0 to 2^32-1 (4294967295), got {2**64}"),
        (("seed",), 2**32, f"seed: must be an integer from 0 to 2^32-1 (4294967295), got {2**32}"),
        (("studies", "search", "storage"), "sqlite://", "studies.search.storage: must keep the study where the tune stage's worker"),
        (("studies", "search", "storage"), "sqlite:///:memory:", "studies.search.storage: must keep the study where"),
        (("studies", "search", "compare_with_sweep"), "nope", "studies.search.compare_with_sweep: must name a sweep of this config ['ladder', 'other'], got 'nope'"),
        (("studies", "search", "compare_with_sweep"), "other", "studies.search.compare_with_sweep: must name a sweep of the study's problem reduce-int32-n1048576, got 'other', which sweeps reduce-float32-n1048576"),
        (("studies", "search", "enqueue"), None, None),
    ],
    ids=["timeout-nan", "timeout-inf", "timing-inf", "seed-2^64", "seed-2^32", "sqlite-memory", "sqlite-memory-named",
         "compare-unknown", "compare-other-problem", "enqueue-complete"],
)  # fmt: skip
def test_study_settings_no_run_can_use_are_refused_at_load(tmp_path, path, value, message):
    config = config_of(tmp_path)
    config["sweeps"]["other"] = {"family": "reduce", "dtypes": ["float32"], "sizes": [1 << 20], "params": {"variant": ["shuffle"]}}
    if message is None:  # the enqueued point: complete and feasible is accepted
        point = feasible_and_infeasible(config)[0]
        assert dict(parse(with_value(config, path, [point])).studies["search"].enqueue[0]) == point
        return
    assert refused(with_value(config, path, value)).startswith(message)
    assert not (tmp_path / "results").exists() and not (tmp_path / "study.log").exists()


def feasible_and_infeasible(config: dict) -> tuple[dict, dict]:
    """A complete feasible and a complete infeasible point of the study's searched values."""
    from tuner.families import REGISTRY, Problem

    family, section = REGISTRY["reduce"], config["studies"]["search"]
    domains = {p.name: list(section["params"].get(p.name, p.values)) for p in family.params}
    problem = Problem("reduce", section["dtype"], section["n"])
    configs = list(family.configs(domains))
    return (next(c for c in configs if not family.violations(c, problem)),
            next(c for c in configs if family.violations(c, problem)))  # fmt: skip


def test_an_infeasible_enqueued_point_is_refused_at_load(tmp_path):
    config = config_of(tmp_path)
    infeasible = feasible_and_infeasible(config)[1]
    text = refused(with_value(config, ("studies", "search", "enqueue"), [infeasible]))
    assert text.startswith("studies.search.enqueue[0]: must be a feasible configuration of reduce-int32-n1048576, got {")


def test_a_partial_enqueued_point_whose_completions_are_all_infeasible_is_refused(tmp_path):
    # Among the study's searched values, every unrolled configuration breaks a rule of the family.
    config = config_of(tmp_path)
    text = refused(with_value(config, ("studies", "search", "enqueue"), [{"variant": "unrolled", "block_size": 128}]))
    assert text == ("studies.search.enqueue[0]: must complete to a feasible configuration of reduce-int32-n1048576 within "
                    "the searched values, got {'variant': 'unrolled', 'block_size': 128}, whose every completion is infeasible")
    shuffle = with_value(config, ("studies", "search", "enqueue"), [{"variant": "shuffle", "block_size": 128}])
    assert parse(shuffle).studies["search"].enqueue[0]["variant"] == "shuffle"


# ---- the command line -------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config_of(tmp_path)))
    return path


def main_here(args: list[str], cwd: Path, monkeypatch) -> int:
    """``python -m tuner ARGS`` run in this process (its ``main``): its exit status."""
    from tuner.cli import main

    monkeypatch.chdir(cwd)
    try:
        return main(args)
    except SystemExit as stop:  # argparse's refusals
        return stop.code if isinstance(stop.code, int) else 1


# (arguments, exit status, the start of the one line, whether it runs as `python -m tuner` itself). Two cases
# run as a process, argparse's refusal and a config error's: what a process adds (the exit status
# `python -m tuner` hands back, nothing printed at import) is the same for the rest, which run here.
@pytest.mark.parametrize(
    "args, code, line, process",
    [
        (["space", "--n", "0"], 2, "tuner space: error: argument --n: must be an integer >= 1, got 0 (see tuner space --help)", True),
        (["space", "--n", "lots"], 2, "tuner space: error: argument --n: must be an integer >= 1, got 'lots' (see tuner space --help)", False),
        (["tune", "search", "--gpus", "0,0"], 2, "tuner tune: error: argument --gpus: must name each CUDA device once", False),
        (["tune", "search", "--gpus", "0,x"], 2, "tuner tune: error: argument --gpus: must be CUDA device indices", False),
        (["nosuchstage"], 2, "tuner: error: argument STAGE: invalid choice: 'nosuchstage'", False),
        (["sweep"], 2, "tuner sweep: error: the following arguments are required: name", False),
        (["sweep", "ladder", "--settings", "{not json"], 2, "config error: --settings: must be a stage's settings as JSON", False),
        (["sweep", "ladder", "--settings", "[]"], 2, "config error: --settings: must be a stage's settings as JSON", False),
        (["sweep", "nosuch", "--config", "{config}"], 2, "config error: sweep name: must be one of ['ladder'], got 'nosuch'", True),
        (["tune", "nosuch", "--config", "{config}"], 2, "config error: study name: must be one of ['search'], got 'nosuch'", False),
        (["collect", "{tmp}/none.parquet", "--out", "{tmp}/m.parquet"], 2, "config error: inputs: must be existing Parquet files", False),
        (["verify", "--families", "nosuch"], 2, "config error: --families: must be among", False),
    ],
    ids=["n-0", "n-word", "gpus-twice", "gpus-word", "stage", "no-name", "settings-json", "settings-list", "sweep-name",
         "study-name", "collect-missing", "verify-family"],
)  # fmt: skip
def test_cli_misuse_is_one_line_and_exit_2_and_writes_nothing(tmp_path, monkeypatch, capfd, args, code, line, process):
    config = write_config(tmp_path)
    args = [a.replace("{config}", str(config)).replace("{tmp}", str(tmp_path)) for a in args]
    if process:
        proc = cli(*args, cwd=tmp_path)
        status, err = proc.returncode, proc.stderr
    else:
        status, err = main_here(args, tmp_path, monkeypatch), capfd.readouterr().err
    assert status == code, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), err
    assert files_under(tmp_path) == {"mine.yaml"}


def test_an_output_under_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    source = tmp_path / "m.parquet"
    import shutil

    shutil.copy(ROOT / "results" / "reference" / "nvidia-h200" / "measurements.parquet", source)
    proc = cli("collect", str(source), "--out", str(tmp_path / "file" / "out.parquet"), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'file'}: File exists"] or (
        len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(f"error: {tmp_path / 'file'}")
    ), proc.stderr
    assert files_under(tmp_path) == {"file", "m.parquet"}


# ---- warm starts ------------------------------------------------------------------------------


def study_rows(config: dict, **changes) -> list[dict]:
    """A measured-looking row for every feasible configuration of the study's space."""
    from tuner.data.results import config_key
    from tuner.families import REGISTRY, Problem

    family, section = REGISTRY["reduce"], config["studies"]["search"]
    domains = {p.name: list(section["params"].get(p.name, p.values)) for p in family.params}
    space = family.space(Problem("reduce", section["dtype"], section["n"]), domains)
    return [cfg | {"family": "reduce", "dtype": section["dtype"], "n": section["n"], "status": "ok",
                   "bandwidth_gbs": 100.0 + i, "config_key": config_key(cfg)} | changes for i, cfg in enumerate(space)]  # fmt: skip


def write_table(path: Path, rows: list[dict], schema: bool = True) -> Path:
    import pandas as pd

    from tuner.data.results import to_frame, write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    if schema:
        write_atomic(to_frame(rows, keep_unknown=True), path)
    else:
        pd.DataFrame(rows).to_parquet(path)
    return path


def valid_parquet_bytes(tmp_path: Path, config: dict) -> bytes:
    scratch = write_table(tmp_path / "scratch" / "t.parquet", study_rows(config))
    data = scratch.read_bytes()
    scratch.unlink()
    scratch.parent.rmdir()
    return data


WARM_DAMAGES = {
    "zero-bytes": (lambda t, c: (t / "w.parquet").write_bytes(b""), "w.parquet",
                   r"must name readable Parquet results, got '{path}', which is not a readable Parquet file \("),
    "truncated": (lambda t, c: (t / "w.parquet").write_bytes(valid_parquet_bytes(t, c)[:-100]), "w.parquet",
                  r"must name readable Parquet results, got '{path}', which is not a readable Parquet file \("),
    "csv-named-parquet": (lambda t, c: (t / "w.parquet").write_text("block_size,bandwidth_gbs\n256,100\n"), "w.parquet",
                          r"must name readable Parquet results, got '{path}', which is not a readable Parquet file \("),
    "csv-file": (lambda t, c: (t / "w.csv").write_text("block_size,bandwidth_gbs\n256,100\n"), "w.csv",
                 r"must name a \.parquet file or a results folder, got '{path}'$"),
    "missing": (lambda t, c: None, "gone.parquet", r"must name a results folder or Parquet file that exists, got '{path}'$"),
    "other-family": (lambda t, c: write_table(t / "w.parquet", study_rows(c, family="matmul")), "w.parquet",
                     r"must hold rows of the study's family reduce, got '{path}', which holds \['matmul'\]$"),
    "no-bandwidth": (lambda t, c: write_table(t / "w.parquet", [{"block_size": 256, "speed": 1.0}], schema=False), "w.parquet",
                     r"must name results tables \(with a bandwidth_gbs column\), got '{path}', whose columns are \['block_size', 'speed'\]$"),
    "no-reduce-params": (lambda t, c: write_table(t / "w.parquet", [{"tile": 16, "bandwidth_gbs": 1.0}], schema=False), "w.parquet",
                         r"must hold reduce results \(its parameter columns \[.*\]\), got '{path}', which has none of them$"),
    "outside-the-space": (lambda t, c: write_table(t / "w.parquet", study_rows(c, block_size=1024)), "w.parquet",
                          r"must hold ok reduce rows within the study's space, got '{path}', none of whose \d+ such rows lies "
                          r"within it \(the first has block_size 1024, not among \[128, 256\]\)$"),
    "only-failures": (lambda t, c: write_table(t / "w.parquet", study_rows(c, status="compile_error")), "w.parquet",
                      r"must hold ok reduce rows within the study's space, got '{path}', which holds no ok reduce row with a bandwidth$"),
    "wrong-column-kind": (lambda t, c: write_table(t / "w.parquet", [{"block_size": "big", "bandwidth_gbs": 1.0}], schema=False), "w.parquet",
                          r"must name results tables, got '{path}', whose columns are not results columns \("),
    "past-int64": (lambda t, c: write_table(t / "w.parquet", [{"block_size": 2**64 - 1, "bandwidth_gbs": 1.0}], schema=False), "w.parquet",
                   r"must name results tables, got '{path}', whose columns are not results columns \(OverflowError: "),
    "empty-folder": (lambda t, c: (t / "w").mkdir(), "w", r"must name a Parquet file or a results folder \(holding .*\), got '{path}', which holds none$"),
    "folder-of-other-files": (lambda t, c: [(t / "w").mkdir(), (t / "w" / "notes.txt").write_text("x")], "w",
                              r"must name a Parquet file or a results folder \(holding .*\), got '{path}', which holds none$"),
    "parquet-deeper-than-looked": (lambda t, c: write_table(t / "w" / "a" / "b" / "c.parquet", study_rows(c)), "w",
                                   r"must name a Parquet file or a results folder \(holding .*; no deeper folder is searched\), got '{path}', which holds none$"),
}  # fmt: skip


@pytest.mark.parametrize("damage", list(WARM_DAMAGES), ids=list(WARM_DAMAGES))
def test_a_warm_start_no_study_can_use_is_refused_at_load_in_one_line(tmp_path, damage):
    import re

    config = config_of(tmp_path)
    make, name, pattern = WARM_DAMAGES[damage]
    (tmp_path / "in").mkdir()
    make(tmp_path / "in", config)
    path = tmp_path / "in" / name
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "in").rglob("*")}
    text = refused(with_value(config, ("studies", "search", "warm_start"), str(path)))
    assert re.search("^studies\\.search\\.warm_start: " + pattern.format(path=re.escape(str(path))), text), text
    assert files_under(tmp_path) == {str(p.relative_to(tmp_path)) for p in before} | {"in"}
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "in").rglob("*")} == before


@pytest.mark.parametrize("layout", ["file", "measurements", "sweeps", "gpu-folders", "tables"])
def test_a_warm_start_of_a_results_folder_is_read_where_results_lie(tmp_path, layout):
    config = config_of(tmp_path)
    where = {"file": "w/t.parquet", "measurements": "w/measurements.parquet", "sweeps": "w/sweeps/a.parquet",
             "gpu-folders": "w/h100/measurements.parquet", "tables": "w/t.parquet"}[layout]  # fmt: skip
    write_table(tmp_path / where, study_rows(config))
    named = tmp_path / (where if layout == "file" else "w")
    study = parse(with_value(config, ("studies", "search", "warm_start"), str(named))).studies["search"]
    assert study.warm_start == str(named)


def test_warm_start_at_the_root_of_the_disk_is_refused_without_walking_it(tmp_path):
    start = time.monotonic()
    text = refused(with_value(config_of(tmp_path), ("studies", "search", "warm_start"), "/"))
    assert text.startswith("studies.search.warm_start: must name a Parquet file or a results folder (holding ")
    assert text.endswith("no deeper folder is searched), got '/', which holds none")
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("bound", ["MAX_TABLE_ROWS", "MAX_TABLE_BYTES", "MAX_TABLE_FILES", "MAX_FOLDER_ENTRIES"])
def test_a_warm_start_past_its_bounds_is_refused_before_its_rows_are_read(tmp_path, monkeypatch, bound):
    import pandas as pd

    from tuner.search.study import warm

    config = config_of(tmp_path)
    for gpu in ("a", "b", "c"):
        write_table(tmp_path / "w" / gpu / "measurements.parquet", study_rows(config))
    monkeypatch.setattr(warm, bound, {"MAX_TABLE_ROWS": 5, "MAX_TABLE_BYTES": 1000, "MAX_TABLE_FILES": 2, "MAX_FOLDER_ENTRIES": 2}[bound])
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: pytest.fail("rows read past a bound"))
    text = refused(with_value(config, ("studies", "search", "warm_start"), str(tmp_path / "w")))
    expected = {"MAX_TABLE_ROWS": "must hold at most 5 rows (name one GPU's folder or table), got ",
                "MAX_TABLE_BYTES": "must be at most 0 MiB of Parquet (name one GPU's folder or table), got ",
                "MAX_TABLE_FILES": "must name at most 2 Parquet files, got ",
                "MAX_FOLDER_ENTRIES": "must name a results folder of at most 2 entries (name the GPU folder itself), got "}[bound]  # fmt: skip
    assert text.startswith(f"studies.search.warm_start: {expected}{str(tmp_path / 'w')!r}"), text


# ---- storage servers -----------------------------------------------------------------------------


@contextlib.contextmanager
def tcp_server(reply: bytes | None, speaks_first: bool = False):
    """A local server on a free port that accepts every connection and then
    sends ``reply`` (at once, or once it hears from the client), or never
    says a word (None)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    held, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            held.append(conn)
            if reply is not None:
                with contextlib.suppress(OSError):
                    conn.settimeout(2)
                    if not speaks_first:
                        conn.recv(8)
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()
        for conn in held:
            conn.close()


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVERS = {
    "silent": (None, r"accepted the connection but did not answer within 3 s; is it a postgresql server\?$"),
    "not-postgres": (b"HTTP/1.1 400 Bad Request\r\n\r\n", r"answered, but not as a postgresql server \(got b'H'\)$"),
    "refused": ("refused", r"refused the connection \(Connection refused\); check the host, the port and that the server runs$"),
    "unresolvable": ("unresolvable", r"cannot be reached: the host name 'nosuchhost\.invalid' (does not resolve|did not resolve within 3 s)"),
}  # fmt: skip


@pytest.mark.parametrize("server", list(SERVERS), ids=list(SERVERS))
def test_a_storage_server_that_cannot_serve_is_refused_at_load_in_seconds_naming_its_host(tmp_path, server):
    from tuner.search.study.storage_spec import storage_problem

    reply, pattern = SERVERS[server]
    with contextlib.ExitStack() as stack:
        if reply == "refused":
            host, port = "127.0.0.1", refused_port()
        elif reply == "unresolvable":
            host, port = "nosuchhost.invalid", 5432
        else:
            host, port = "127.0.0.1", stack.enter_context(tcp_server(reply))
        url = f"postgresql+psycopg2://tuner:s3cret-pw@{host}:{port}/tuning"
        start = time.monotonic()
        text = refused(with_value(config_of(tmp_path), ("studies", "search", "storage"), url), storage_check=storage_problem)
        took = time.monotonic() - start
    prefix = f"studies.search.storage: storage URL postgresql+psycopg2://tuner:***@{host}:{port}/tuning: "
    assert text.startswith(prefix), text
    assert re.search(re.escape(f"the postgresql server at {host}:{port} ") + pattern, text), text
    assert "s3cret" not in text
    assert took < 10
    assert not (tmp_path / "results").exists()


def test_a_server_that_answers_as_postgresql_or_mysql_passes_the_check():
    from tuner.search.study.storage_server import server_problem

    with tcp_server(b"N") as port:
        assert server_problem(f"postgresql://tuner:pw@127.0.0.1:{port}/tuning") is None
    greeting = b"\x4a\x00\x00\x00\x0a8.0.36\x00"  # a packet header, then protocol version 10
    with tcp_server(greeting, speaks_first=True) as port:
        assert server_problem(f"mysql+pymysql://tuner:pw@127.0.0.1:{port}/tuning", timeout_s=1) is None
    with tcp_server(None) as port:
        text = server_problem(f"mysql+pymysql://tuner:s3cret@127.0.0.1:{port}/tuning", timeout_s=1)
        assert text.endswith("accepted the connection but did not answer within 1 s; is it a mysql server?")
        assert "s3cret" not in text


def test_the_tune_stage_s_own_connection_to_a_silent_server_gives_up(monkeypatch):
    from tuner.search.study import storage_server
    from tuner.search.study.storage import open_storage

    monkeypatch.setattr(storage_server, "CONNECT_TIMEOUT_S", 2)
    with tcp_server(None) as port:
        start = time.monotonic()
        with pytest.raises(Exception) as caught:
            open_storage(f"postgresql+psycopg2://tuner:s3cret@127.0.0.1:{port}/tuning")
        assert time.monotonic() - start < 8  # one connect timeout, not one per retry (5 x 2 s)
    assert "s3cret" not in str(caught.value) and "timeout" in str(caught.value).lower()


def test_a_password_reaches_the_stage_through_the_environment_not_its_command_line(tmp_path, monkeypatch):
    from tuner.search.study.storage_server import PASSWORDS_ENV, export_passwords, public, with_password
    from tuner.settings import Settings

    monkeypatch.delenv(PASSWORDS_ENV, raising=False)
    url = "postgresql+psycopg2://tuner:s3cret@db.example:5433/tuning"
    settings = parse(with_value(config_of(tmp_path), ("studies", "search", "storage"), url), storage_check=None)
    stage = settings.stage_json("study", "search")
    assert "s3cret" not in stage and "s3cret" not in repr(settings.studies["search"])
    shown = Settings.from_stage_json(stage).studies["search"].storage
    assert shown == public(url) == "postgresql+psycopg2://tuner:***@db.example:5433/tuning"
    with pytest.raises(ValueError, match=rf"^storage URL {re.escape(shown)}: its password is handed to stages in the "
                                         rf"environment variable {PASSWORDS_ENV}, which this process lacks"):  # fmt: skip
        with_password(shown)
    export_passwords([url, str(tmp_path / "study.log")])
    assert with_password(shown) == url
    assert with_password(str(tmp_path / "study.log")) == str(tmp_path / "study.log")


def test_snakemake_prints_no_storage_password_even_for_a_failed_tune_job(tmp_path):
    import shutil

    config = config_of(tmp_path)
    gpu_dir = tmp_path / "results" / "test-gpu"
    gpu_dir.mkdir(parents=True)
    for name in ("device.json", "peaks.json"):  # the tune job's inputs, so it alone runs (and fails: no GPU here)
        shutil.copy(ROOT / "results" / "reference" / "nvidia-h200" / name, gpu_dir / name)
        time.sleep(0.01)
    started = time.time()
    with tcp_server(b"N") as port:
        config["studies"]["search"]["storage"] = f"postgresql+psycopg2://tuner:s3cret-pw@127.0.0.1:{port}/tuning"
        path = tmp_path / "mine.yaml"
        path.write_text(yaml.safe_dump(config))
        # --nolock: in the repository, as tests/test_workflow.py's unlocked() says why.
        proc = subprocess.run([sys.executable, "-m", "snakemake", str(gpu_dir / "studies" / "search.parquet"), "--cores", "1",
                               "--configfile", str(path), "--nolock"], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""})  # fmt: skip
    printed = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Error in rule tune_search" in printed, printed[-3000:]
    assert f"tuner:***@127.0.0.1:{port}/tuning" in printed  # the failed job's command, as Snakemake reports it
    logs = [p for p in (ROOT / ".snakemake" / "log").glob("*.log") if p.stat().st_mtime >= started - 1]
    assert logs and all("s3cret" not in p.read_text(errors="replace") for p in logs)
    assert "s3cret" not in printed
    assert "s3cret" not in (gpu_dir / "logs" / "tune-search.log").read_text()
    assert not (gpu_dir / "studies" / "search.parquet").exists()


# ---- nested --config overrides ----------------------------------------------------------------


def dry_run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config_of(tmp_path)))
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--configfile", str(path), "--config", *overrides],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip


def test_nested_config_overrides_are_typed_from_the_schema_in_a_dry_run(tmp_path):
    import json

    proc = dry_run(tmp_path, "timing={max_time_s: 0.5, flush_l2: false}", "study_gpus=[0]",
                   "studies={search: {budget_trials: 3, enqueue: [{variant: shuffle, block_size: 128}]}}")  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    sweep = json.loads(re.search(r"--settings '(\{.*?\})'", next(x for x in out.splitlines() if "-m tuner sweep ladder " in x)).group(1))
    assert sweep["sweep"]["timing"]["max_time_s"] == 0.5 and sweep["sweep"]["timing"]["flush_l2"] is False
    study = json.loads(re.search(r"--settings '(\{.*?\})'", next(x for x in out.splitlines() if "-m tuner tune search " in x)).group(1))
    assert study["study"]["budget_trials"] == 3 and study["study"]["enqueue"] == [{"variant": "shuffle", "block_size": 128}]
    assert study["run"]["study_gpus"] == [0]
    assert files_under(tmp_path) == {"mine.yaml"}


@pytest.mark.parametrize(
    "override, line",
    [
        ("timing={max_time_s: [1", "config error: timing: must be a mapping, given with --config as YAML, got '{max_time_s: [1', "
                                    "which does not parse as YAML ("),
        ("timing={max_time_s: lots}", "config error: timing.max_time_s: must be a number > 0, got 'lots'"),
        ("studies={search: {timeout_s: -1}}", "config error: studies.search.timeout_s: must be > 0, got -1"),
    ],
    ids=["does-not-parse", "not-a-number", "out-of-range"],
)  # fmt: skip
def test_a_nested_config_override_that_is_wrong_is_one_line_naming_the_key(tmp_path, override, line):
    proc = dry_run(tmp_path, override)
    assert proc.returncode != 0
    errors = [x for x in proc.stderr.splitlines() if x.startswith("config error:")]
    assert len(errors) == 1 and errors[0].startswith(line), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert files_under(tmp_path) == {"mine.yaml"}


# ---- a results folder holding other files ------------------------------------------------------

OTHER_FOLDERS = {
    "a-file": ({"notes.txt": "mine"}, "'notes.txt'"),
    "a-source-tree": ({"src/main.py": "print(1)"}, "'src'"),
    "a-home-folder": ({"Documents/letter.txt": "dear", "Pictures/a.jpg": ""}, None),
    "beside-a-gpu-folder": ({"h100/device.json": "{}", "thesis.tex": ""}, "'thesis.tex'"),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(OTHER_FOLDERS), ids=list(OTHER_FOLDERS))
def test_a_results_folder_holding_other_files_is_refused_unless_allowed(tmp_path, kind):
    files, named = OTHER_FOLDERS[kind]
    folder = tmp_path / "mine"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    before = files_under(tmp_path)
    config = with_value(config_of(tmp_path), ("results_dir",), str(folder))
    text = refused(config)
    assert text.startswith(f"results_dir: must be a new or empty folder, or one this pipeline wrote (a folder per GPU), unless "
                           f"allow_other_files_in_results_dir is true, got {str(folder)!r}, which holds ")  # fmt: skip
    assert named is None or text.endswith(f"which holds {named}")
    assert parse({**config, "allow_other_files_in_results_dir": True}).run.results_dir == str(folder)
    assert files_under(tmp_path) == before


def test_the_repository_itself_is_no_results_folder():
    text = refused(with_value(config_of(ROOT), ("results_dir",), str(ROOT)))
    assert text.startswith("results_dir: must be a new or empty folder, or one this pipeline wrote")


@pytest.mark.parametrize(
    "files",
    [{}, {"h100/device.json": "{}", "h200/logs/describe.log": "", ".gitkeep": "", "reference/x": "", "empty/": ""},
     # what a run killed mid-sweep leaves: the compiled-kernel cache beside the GPU folder
     {".cubin-cache/copy-abc.cubin": "", "h100/store/sweeps/s/rows.jsonl": "", "h100/device.json": "{}"},
     {".reference-reports/h100.done": "", "README.md": "how these runs were made"}],
    ids=["empty", "earlier-runs", "killed-mid-sweep", "rebuilt-reports"],
)
def test_a_results_folder_of_earlier_runs_or_empty_is_accepted(tmp_path, files):
    folder = tmp_path / "mine"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if not name.endswith("/"):
            (folder / name).write_text(text)
    assert parse(with_value(config_of(tmp_path), ("results_dir",), str(folder))).run.results_dir == str(folder)
    assert parse(with_value(config_of(tmp_path), ("results_dir",), str(ROOT / "results"))).run.results_dir == str(ROOT / "results")


def test_a_results_folder_of_too_many_entries_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["tuner.settings.parse"], "MAX_RESULTS_ENTRIES", 3)  # the module, not parse()
    for gpu in "abcd":
        (tmp_path / "mine" / gpu).mkdir(parents=True)
        (tmp_path / "mine" / gpu / "device.json").write_text("{}")
    text = refused(with_value(config_of(tmp_path), ("results_dir",), str(tmp_path / "mine")))
    assert text.endswith(f"got {str(tmp_path / 'mine')!r}, which holds more than 3 entries")
