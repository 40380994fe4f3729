"""The Snakemake workflow: lint-clean; the config it validates is the config its
stages get (``--configfile`` names the whole config, ``--config`` overrides a
key); bad input stops before any job with one line; no value reaches a shell
unquoted; on a machine without a GPU the run stops before measuring."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import snakemake_report_captions

ROOT = Path(__file__).resolve().parents[1]
STAGES = [
    "describe_device",
    "compile_variants",
    "peaks",
    "sweep_reduce_space",
    "tune_reduce_int32",
    "collect",
    "draw_report",
    "plot_report",
    "all",
]


def snakemake(*args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "snakemake", *args, *unlocked(args, cwd)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def unlocked(args, cwd) -> tuple[str, ...]:
    """``--nolock`` for a run (not a dry run) in the repository itself: the tests' runs there write to
    folders of their own, but Snakemake's locks are one folder under the working directory, which a run
    deletes when it ends, so a second worker's run starting meanwhile fails to write its lock."""
    return ("--nolock",) if Path(cwd) == ROOT and not {"-n", "--dry-run", "--lint"} & set(args) else ()


def small_config(tmp_path: Path) -> dict:
    return {
        "results_dir": str(tmp_path / "results"),
        "gpu": "test-gpu",
        "sweeps": {
            "one": {"family": "copy", "dtypes": ["float32"], "sizes": [1 << 20], "params": {"vector_width": [1, 4]}},
            "two": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20], "params": {"variant": ["shuffle"], "unroll": [1, 2]}},
        },
        "studies": {
            "search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 3, "storage": str(tmp_path / "s.log"),
                       "params": {"variant": ["shuffle"], "block_size": [128, 256]}},
        },
    }  # fmt: skip


def write(tmp_path: Path, config: dict, name="mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def jobs(out: str) -> dict[str, int]:
    """Rule -> count from the dry run's job table."""
    table = out[out.index("Job stats:") :].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def test_lint_is_clean():
    proc = snakemake("--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt_is_clean():
    proc = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rules_spell_no_results_file_name():
    """Every path under a results folder comes from tuner.data.paths (GpuFolder, ResultsFolder), spelled once
    (globs over its folders aside; the search benchmark's rule names the files its script writes)."""
    spelled = re.compile(r"""["'](?!\*)[^"'\n]*(\{RESULTS\}|\{\{gpu\}\}|\.(parquet|json|tsv|log|done|h)["'])""")
    rules = [p for p in sorted((ROOT / "workflow" / "rules").glob("*.smk")) if p.name != "search_bench.smk"]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [ROOT / "Snakefile", *rules]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, found


def test_dry_run_of_the_shipped_config_lists_every_stage(tmp_path):
    proc = snakemake("-n", "--config", f"results_dir={tmp_path}", "gpu=test-gpu")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    rules = STAGES + [f"sweep_{name}" for name in shipped["sweeps"]] + [f"tune_{name}" for name in shipped.get("studies", {})]
    for stage in rules:
        assert f"rule {stage}:" in out or f"localrule {stage}:" in out, f"{stage} missing from the dry run:\n{out[-3000:]}"


# The tests that read one dry run run in one pytest-xdist process (with --dist loadgroup), so it runs once.
SHARES_THE_DRY_RUN = pytest.mark.xdist_group("small_dry_run")


@pytest.fixture(scope="module")
def small_dry_run(tmp_path_factory) -> tuple[Path, str]:
    """(its folder, what it printed) of the dry run of ``small_config``, each
    job's command printed (-p) and one key overridden (--config seed=7)."""
    tmp_path = tmp_path_factory.mktemp("dry-run")
    proc = snakemake("-n", "-p", "--configfile", str(write(tmp_path, small_config(tmp_path))), "--config", "seed=7")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return tmp_path, out


@SHARES_THE_DRY_RUN
def test_configfile_names_the_whole_config(small_dry_run):
    """Nothing of config.yaml comes back under --configfile: exactly its sweeps and studies run."""
    tmp_path, out = small_dry_run
    assert jobs(out) == {"all": 1, "collect": 1, "compile_variants": 1, "describe_device": 1, "export_best": 1, "peaks": 1,
                         "draw_report": 1, "plot_report": 1, "sweep_one": 1, "sweep_two": 1, "tune_search": 1}  # fmt: skip
    assert f"{tmp_path}/results/test-gpu/sweeps/one.parquet" in out
    config = small_config(tmp_path)
    del config["studies"]  # a deleted key stays deleted
    out = snakemake("-n", "--configfile", str(write(tmp_path, config, name="without-studies.yaml"))).stdout
    assert "tune_search" not in jobs(out) and "sweep_one" in jobs(out)
    config = small_config(tmp_path)
    del config["sweeps"]  # a study of one's own kernel, no exhaustive sweep beside it
    config["studies"]["search"].pop("compare_with_sweep", None)
    out = snakemake("-n", "--configfile", str(write(tmp_path, config, name="without-sweeps.yaml"))).stdout
    assert "tune_search" in jobs(out) and not any(job.startswith("sweep_") for job in jobs(out))


@SHARES_THE_DRY_RUN
def test_the_stage_gets_exactly_the_validated_settings(small_dry_run):
    _, out = small_dry_run
    line = next(x for x in out.splitlines() if "-m tuner sweep one " in x)
    settings = json.loads(re.search(r"--settings '(\{.*?\})'", line).group(1))
    assert settings["sweep"]["params"] == {"vector_width": [1, 4]}
    assert settings["run"]["seed"] == 7  # --config overrides one key
    assert "config.yaml" not in line


def finished_run(tmp_path: Path, config: dict) -> Path:
    """A config whose every output exists and is recorded as made by it (--touch)."""
    path = write(tmp_path, config)
    dry = snakemake("-n", "--configfile", str(path)).stdout
    outputs = [p.strip() for line in dry.splitlines() if line.startswith("    output: ") for p in line[12:].split(",")]
    for output in outputs:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).touch()
    assert snakemake("--cores", "1", "--touch", "--forceall", "--configfile", str(path)).returncode == 0
    return path


def planned_after(tmp_path: Path, config: dict, python: str = sys.executable) -> dict[str, int]:
    proc = subprocess.run([python, "-m", "snakemake", "-n", "--configfile", str(write(tmp_path, config))], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {} if "Nothing to be done" in proc.stdout else jobs(proc.stdout)


DOWNSTREAM = {"collect": 1, "export_best": 1, "draw_report": 1, "plot_report": 1, "all": 1}


def test_a_finished_run_replans_only_what_an_edit_touched(tmp_path):
    """A finished run replans nothing for a newer but equal config file (no
    rule's input) run by another interpreter (no rule's param: another virtual
    environment); each sweep and study holds its own settings in params, so an
    edit replans only it, then collect, export and report."""
    config = small_config(tmp_path)
    config["studies"]["other"] = dict(config["studies"]["search"], budget_trials=4)
    path = finished_run(tmp_path, config)
    time.sleep(0.05)
    path.touch()
    venv = tmp_path / "other venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "this.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    python = str(venv / "bin" / "python")
    assert (
        subprocess.run(
            [python, "-c", "import sys, snakemake; print(sys.executable)"], capture_output=True, text=True
        ).stdout.strip()
        == python
    )
    assert planned_after(tmp_path, config, python=python) == {}

    sweep = copy.deepcopy(config)
    sweep["sweeps"]["one"]["timing"] = {"max_time_s": 0.5}
    assert planned_after(tmp_path, sweep) == {"sweep_one": 1} | DOWNSTREAM
    study = copy.deepcopy(config)
    study["studies"]["other"] |= {"sampler": "random", "seed": 3}
    assert planned_after(tmp_path, study) == {"tune_other": 1} | DOWNSTREAM
    # A study's budget decides whether the compile stage builds its space whole
    # (tuner.measure.compile.study_compiled_whole): the table is made again too.
    budget = copy.deepcopy(config)
    budget["studies"]["other"] |= {"budget_trials": 5}
    assert planned_after(tmp_path, budget) == {"compile_variants": 1, "tune_other": 1} | DOWNSTREAM
    # New values of a sweep's grid are new modules: the compile table is made again too.
    grid = copy.deepcopy(config)
    grid["sweeps"]["one"]["params"]["vector_width"] = [1, 2]
    assert planned_after(tmp_path, grid) == {"compile_variants": 1, "sweep_one": 1} | DOWNSTREAM


@SHARES_THE_DRY_RUN
def test_gpu_rules_ask_for_one_gpu_and_cpu_rules_for_none(small_dry_run):
    """What a cluster executor sees (the SLURM profile submits gpu=1 as --gpus=1)."""
    _, out = small_dry_run
    gpus = {}
    for job in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)*)", out, re.M):
        found = re.search(r"resources: .*\bgpu=(\d+)", job.group(2))
        gpus[job.group(1)] = int(found.group(1)) if found else 0
    assert gpus == {"describe_device": 1, "peaks": 1, "sweep_one": 1, "sweep_two": 1, "tune_search": 1,
                    "compile_variants": 0, "collect": 0, "export_best": 0, "draw_report": 0, "plot_report": 0,
                    "all": 0}  # fmt: skip
    profile = yaml.safe_load((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"


@SHARES_THE_DRY_RUN
def test_the_cpu_jobs_take_no_core_so_they_run_beside_the_gpu_jobs(small_dry_run):
    """Under --cores 1 the compile stage (threads: 0) runs beside the peaks, and collect, export and
    the report's figures beside the profile (which only the report's documents wait for); the sweeps
    and studies do not take the compile table as input (an edit that recompiles reruns no other
    sweep: the test above), they wait for the stage's lock instead."""
    tmp_path, out = small_dry_run
    threads, inputs = {}, {}
    for job in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)*)", out, re.M):
        found = re.search(r"^    threads: (\d+)$", job.group(2), re.M)
        threads[job.group(1)] = int(found.group(1)) if found else 1
        listed = re.search(r"^    input: (.*)$", job.group(2), re.M)
        inputs[job.group(1)] = listed.group(1).split(", ") if listed else []
    assert {job for job, n in threads.items() if n == 0} == {"compile_variants", "collect", "export_best", "draw_report"}
    compiled = f"{tmp_path}/results/test-gpu/compile.parquet"
    assert [job for job, names in inputs.items() if compiled in names] == ["all"]
    draft = f"{tmp_path}/results/test-gpu/store/report-draft.pickle"
    assert [job for job, names in inputs.items() if draft in names] == ["plot_report"]
    assert not any("/profiles/" in name for name in inputs["draw_report"])


def test_bad_config_fails_before_any_job_in_one_line(tmp_path):
    config = small_config(tmp_path)
    config["sweeps"]["one"]["params"]["vector_width"] = [4.0]
    proc = snakemake("--cores", "1", "--configfile", str(write(tmp_path, config)))
    assert proc.returncode == 2
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()]
    assert errors == ["config error: sweeps.one.params.vector_width[0]: must be one of [1, 2, 4], got 4.0"], proc.stderr
    assert not (tmp_path / "results").exists()


def test_duplicate_keys_in_the_default_config_are_refused(tmp_path):
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow")
    shutil.copy(ROOT / "Snakefile", tmp_path / "Snakefile")
    text = yaml.safe_dump(small_config(tmp_path), sort_keys=False)
    text = text.replace("sweeps:\n", "sweeps:\n  one:\n    family: copy\n    dtypes: [float32]\n    sizes: [64]\n", 1)
    (tmp_path / "config.yaml").write_text(text)
    proc = snakemake("-n", cwd=tmp_path)
    assert proc.returncode == 2
    assert re.search(r"config error: config\.yaml:\d+:3: keys must be unique within a mapping, got 'one' again", proc.stderr), (
        proc.stderr
    )


def test_no_folder_name_reaches_a_shell_unquoted(tmp_path):
    """A results folder whose name holds $(...) is a name, not a command (results_dir itself
    may not hold one: the cubin cache beneath it goes on nvcc's command line, tests/test_settings.py)."""
    reference = ROOT / "results" / "reference" / "nvidia-h200"
    results_dir = tmp_path / "res (touch PWNED); x"
    folder = results_dir / "gpu-$(touch PWNED2)"
    folder.mkdir(parents=True)
    for name in ("device.json", "peaks.json"):
        shutil.copy(reference / name, folder / name)
    # The layout rows only: the report is drawn (placeholders for the rest) without the minute a whole one takes.
    from tuner.data import results

    rows = results.read(reference / "measurements.parquet")
    results.write_atomic(rows[rows.family == "layout"], folder / "measurements.parquet")
    config = small_config(tmp_path) | {"results_dir": str(results_dir)}
    proc = snakemake("report", "--cores", "1", "--configfile", str(write(tmp_path, config)), cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (folder / "report" / "report.html").exists()
    assert not list(Path(ROOT).glob("PWNED*")) and not list(tmp_path.rglob("PWNED*"))


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU driver")
def test_run_without_gpu_stops_with_one_line(tmp_path):
    proc = snakemake("--cores", "1", "--configfile", str(write(tmp_path, small_config(tmp_path))))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and ("PyCUDA is not installed" in lines[0] or "no usable CUDA device" in lines[0]), out[-3000:]
    assert not list(Path(tmp_path).rglob("*.parquet"))  # nothing measured, nothing half-written


def test_snakemake_report_bundles_a_results_folders_figures_captioned_from_the_figure_list(tmp_path):
    """Each figure's caption is its entry's in workflow/report/figures.yaml, written as the workflow is read
    (to the working directory's .snakemake/, not beside the rules, which an install may hold read-only)."""
    folder = tmp_path / "results" / "nvidia-h200"
    shutil.copytree(ROOT / "results" / "reference" / "nvidia-h200", folder)
    config = write(tmp_path, small_config(tmp_path))
    proc = snakemake("--cores", "1", "--configfile", str(config), "--report", str(tmp_path / "report.html"), "report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "report.html").stat().st_size > 100_000
    captions = snakemake_report_captions((tmp_path / "report.html").read_text())
    listed = yaml.safe_load((ROOT / "workflow" / "report" / "figures.yaml").read_text())
    assert sorted(captions) == sorted(figure["stem"] for figure in listed)
    for figure in listed:
        assert captions[figure["stem"]].startswith(figure["caption"] + "\n"), figure["stem"]
    assert [p.name for p in (ROOT / "workflow" / "report").iterdir()] == ["figures.yaml"]


def test_the_reference_reports_are_rebuilt_until_their_stamp_is_newer_than_their_inputs(tmp_path):
    """Tracked reports have clone-order modification times: a stamp outside the
    tracked tree decides. No stamp (a fresh clone): rebuilt; a fresh stamp: not."""
    reference = tmp_path / "results" / "reference" / "some-gpu"
    reference.mkdir(parents=True)
    for name in ("measurements.parquet", "device.json", "peaks.json"):
        shutil.copy(ROOT / "results" / "reference" / "nvidia-h200" / name, reference / name)
    (reference / "report").mkdir()
    (reference / "report" / "report.md").write_text("newer than its inputs, as a clone may leave it")
    config = write(tmp_path, small_config(tmp_path))
    proc = snakemake("-n", "report", "--configfile", str(config))
    assert proc.returncode == 0 and jobs(proc.stdout) == {"report_reference": 1, "report": 1}, proc.stdout + proc.stderr
    stamp = tmp_path / "results" / ".reference-reports" / "some-gpu.done"
    stamp.parent.mkdir()
    stamp.touch()
    proc = snakemake("-n", "report", "--configfile", str(config))
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout, proc.stdout + proc.stderr


def test_a_results_folder_named_with_braces_is_left_out_of_the_report_said_so(tmp_path):
    """Snakemake reads braces in a path as a wildcard: such a folder once stopped every folder's report."""
    odd = tmp_path / "results" / "run{1}"
    odd.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "reference" / "nvidia-h200" / "measurements.parquet", odd / "measurements.parquet")
    proc = snakemake("-n", "report", "--configfile", str(write(tmp_path, small_config(tmp_path))))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"report: {odd}: left out, a folder name must hold no braces (Snakemake reads them as a wildcard)" in proc.stderr


def test_a_results_folder_without_what_the_report_reads_is_left_out_said_so(tmp_path):
    """A folder holding a dataset but no device.json or peaks.json (a run whose describe or peaks job
    failed): the report of every other folder is still planned, and the one line says why this one is not."""
    broken = tmp_path / "results" / "broken"
    broken.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "reference" / "nvidia-h200" / "measurements.parquet", broken / "measurements.parquet")
    proc = snakemake("-n", "report", "--configfile", str(write(tmp_path, small_config(tmp_path))))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "report_finished" not in jobs(proc.stdout), proc.stdout
    assert (f"report: {broken}: left out, a finished run's folder must hold measurements.parquet, device.json and "
            "peaks.json, lacks ['device.json', 'peaks.json']") in proc.stderr

def test_the_report_of_a_folder_from_another_run_plans_no_stage_that_makes_its_inputs(tmp_path):
    """A finished folder copied from another run (another config's sweeps, no peaks.parquet): the
    report target draws it from its files and plans nothing else; through the rules that make its
    inputs it had planned the GPU stages, and a failed peaks job's peaks.json was deleted."""
    folder = tmp_path / "results" / "sx"
    shutil.copytree(ROOT / "examples" / "saxpy" / "reference" / "nvidia-h100-80gb-hbm3", folder)
    (folder / "peaks.parquet").unlink(missing_ok=True)
    config = write(tmp_path, small_config(tmp_path))
    proc = snakemake("-n", "report", "--configfile", str(config))
    assert proc.returncode == 0 and jobs(proc.stdout) == {"report_finished": 1, "report": 1}, proc.stdout + proc.stderr
    proc = snakemake("report", "--cores", "1", "--configfile", str(config), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (folder / "report" / "report.html").exists() and (folder / "peaks.json").exists()
    assert "Nothing to be done" in snakemake("-n", "report", "--configfile", str(config)).stdout  # drawn: done
    (folder / "device.json").write_text((folder / "device.json").read_text() + "\n")  # an edit of an input
    assert jobs(snakemake("-n", "report", "--configfile", str(config)).stdout) == {"report_finished": 1, "report": 1}
