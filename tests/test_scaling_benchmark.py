"""The scaling benchmark's steady-state rate, on made-up trial times."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

SPEC = importlib.util.spec_from_file_location("scaling", Path(__file__).resolve().parents[1] / "benchmarks" / "scaling.py")
scaling = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(scaling)
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def trial(worker: str, seconds: float | None, measured: bool = True):
    done = None if seconds is None else T0 + dt.timedelta(seconds=seconds)
    attrs = {"worker": worker, **({"status": "ok"} if measured else {})}
    return SimpleNamespace(datetime_complete=done, user_attrs=attrs)


def test_one_worker_rate_is_trials_between_its_first_and_last():
    trials = [trial("a", 10 + 0.5 * i) for i in range(11)]  # 2 per second
    rate, inside, window = scaling.steady_rate(trials)
    assert (inside, window) == (10, 5.0)
    assert rate == pytest.approx(2.0)


def test_the_window_is_where_every_worker_searches():
    # b starts 3 s late and a stops 2 s early: only [13, 18] counts.
    a = [trial("a", 10 + 0.25 * i) for i in range(33)]  # 10 .. 18
    b = [trial("b", 13 + 0.25 * i) for i in range(29)]  # 13 .. 20
    unmeasured = [trial("a", 15, measured=False), trial("b", None)]
    rate, inside, window = scaling.steady_rate(a + b + unmeasured)
    assert window == pytest.approx(5.0)
    assert inside == 20 + 20  # (13, 18] holds 20 of each
    assert rate == pytest.approx(8.0)


PIPELINE = importlib.util.spec_from_file_location(
    "pipeline_timing", Path(__file__).resolve().parents[1] / "benchmarks" / "pipeline_timing.py"
)
pipeline_timing = importlib.util.module_from_spec(PIPELINE)
PIPELINE.loader.exec_module(pipeline_timing)

SNAKEMAKE_LOG = """\
[Sun Nov 22 06:15:16 2026]
rule sweep_reduce_space:
    output: results/x/sweeps/reduce_space.parquet
    jobid: 2
sweep reduce_space phases: sweep (all) 20.5 s, time 10.2 s, verify 3.0 s; compile ahead: 12 modules
[Sun Nov 22 06:15:40 2026]
Finished jobid: 2 (Rule: sweep_reduce_space)
[Sun Nov 22 06:15:40 2026]
rule profile:
    jobid: 3
profiled harness phases: verify 0.1 s, inputs 2.0 s
profile steps: query metrics 1.2 s, harness under ncu 5.5 s, import report 0.8 s
[Sun Nov 22 06:15:50 2026]
Finished jobid: 3 (Rule: profile)
[Sun Nov 22 06:15:40 2026]
localrule collect:
    jobid: 1
[Sun Nov 22 06:15:43 2026]
Finished jobid: 1 (Rule: collect)
[Sun Nov 22 06:15:43 2026]
localrule draw_report:
    jobid: 5
report draft steps: wait for drawings 6.1 s, blog tables and studies 1.2 s
[Sun Nov 22 06:15:50 2026]
Finished jobid: 5 (Rule: draw_report)
[Sun Nov 22 06:15:50 2026]
localrule plot_report:
    jobid: 4
report steps: counters 1.2 s, documents 0.3 s
[Sun Nov 22 06:15:52 2026]
Finished jobid: 4 (Rule: plot_report)
"""


def test_pipeline_timing_reads_jobs_and_phases_from_snakemakes_log():
    jobs, phases = pipeline_timing.parse(SNAKEMAKE_LOG)
    assert [(j["rule"], j["seconds"]) for j in jobs] == [
        ("sweep_reduce_space", 24.0), ("profile", 10.0), ("collect", 3.0), ("draw_report", 7.0),
        ("plot_report", 2.0)]  # fmt: skip
    assert phases == {
        "sweep_reduce_space": {"sweep (all)": 20.5, "time": 10.2, "verify": 3.0},
        "profile": {
            "verify": 0.1,
            "inputs": 2.0,
            "query metrics": 1.2,
            "harness under ncu": 5.5,
            "import report": 0.8,
        },
        "draw_report": {"wait for drawings": 6.1, "blog tables and studies": 1.2},
        "plot_report": {"counters": 1.2, "documents": 0.3},
    }
    text = pipeline_timing.table(jobs, phases, 30.0)
    assert "time 10.2, verify 3.0" in text and "sum of jobs" in text
    assert "harness under ncu 5.5" in text
    assert "wait for drawings 6.1, blog tables and studies 1.2" in text and "counters 1.2, documents 0.3" in text


FAKE_SNAKEMAKE = """#!/bin/sh
# Refuses a results folder holding anything, as the pipeline refuses one holding files it did not write; records
# where it ran and what it was given, then prints a log of two jobs (the second absent from the older tree).
for arg in "$@"; do case "$arg" in results_dir=*) results="${arg#results_dir=}";; esac; done
if [ -n "$(ls -A "$results")" ]; then echo "config error: results_dir: must be a new or empty folder"; exit 2; fi
printf '%s\\n%s\\n%s\\n' "$PWD" "${TUNER_GIT_COMMIT:-none}" "$CUPY_CACHE_DIR" > "$results/seen.txt"
echo "[Sun Nov 22 06:15:16 2026]"
echo "rule compile_variants:"
echo "    jobid: 1"
echo "[Sun Nov 22 06:15:20 2026]"
echo "Finished jobid: 1 (Rule: compile_variants)"
if [ -f "$PWD/NEW_STAGE" ]; then
  echo "rule peaks:"
  echo "    jobid: 2"
  echo "[Sun Nov 22 06:15:27 2026]"
  echo "Finished jobid: 2 (Rule: peaks)"
fi
"""


@pytest.fixture
def fake_snakemake(tmp_path, monkeypatch):
    """``FAKE_SNAKEMAKE`` first on PATH."""
    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text(FAKE_SNAKEMAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return fake


def test_against_runs_the_other_commits_tree_first_then_this_one_each_cold(tmp_path, monkeypatch, capsys, fake_snakemake):
    monkeypatch.delenv("TUNER_GIT_COMMIT", raising=False)
    head = pipeline_timing.resolve("HEAD")
    if head is None:
        pytest.skip("not a git checkout")
    # This tree stands in for itself with a stage the older tree lacks.
    monkeypatch.setattr(pipeline_timing, "ROOT", tmp_path / "this-tree")
    (tmp_path / "this-tree").mkdir()
    (tmp_path / "this-tree" / "NEW_STAGE").write_text("")
    monkeypatch.setattr(pipeline_timing, "resolve", lambda rev: head if rev == "older" else None)
    monkeypatch.setattr(pipeline_timing, "checkout", lambda commit, dest: dest.mkdir(parents=True))
    results = tmp_path / "cold"
    assert pipeline_timing.main(["--results", str(results), "--against", "older"]) == 0
    out = capsys.readouterr().out
    assert out.index(f"{head}: exit 0") < out.index("this: exit 0")  # the other commit first
    older = (results / head / "results" / "seen.txt").read_text().splitlines()
    this = (results / "this" / "results" / "seen.txt").read_text().splitlines()
    assert older == [str(results / f"tree-{head}"), head, str(results / head / "cupy-cache")]
    assert this == [str(tmp_path / "this-tree"), "none", str(results / "this" / "cupy-cache")]
    assert "Finished jobid: 1" in (results / head / "snakemake.log").read_text()  # beside the results folder
    rows = {line.split()[0]: line.split()[1:] for line in (results / "pipeline-compare.txt").read_text().splitlines()[1:3]}
    assert rows == {"compile_variants": ["4", "4"], "peaks": ["-", "7"]}
    assert json.loads((results / "pipeline-compare.json").read_text())[head]["jobs"][0]["rule"] == "compile_variants"


def test_against_refuses_a_name_that_is_no_commit_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        pipeline_timing.main(["--results", str(tmp_path / "cold"), "--against", "no-such-commit-here"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1
    assert "--against: must name a commit of this checkout" in err and "or a folder holding a tree with its Snakefile" in err
    assert "'no-such-commit-here'" in err
    assert not (tmp_path / "cold").exists()


def test_checkout_writes_a_commits_tree(tmp_path):
    head = pipeline_timing.resolve("HEAD")
    if head is None:
        pytest.skip("not a git checkout")
    pipeline_timing.checkout(head, tmp_path / "tree")
    assert (tmp_path / "tree" / "Snakefile").is_file() and (tmp_path / "tree" / "tuner" / "__init__.py").is_file()


def test_against_takes_a_folder_holding_another_tree_where_there_is_no_history(tmp_path, monkeypatch, capsys, fake_snakemake):
    monkeypatch.setattr(pipeline_timing, "resolve", lambda rev: pytest.fail("a folder needs no history"))
    older = tmp_path / "c716673"
    older.mkdir()
    (older / "Snakefile").write_text("")
    results = tmp_path / "cold"
    assert pipeline_timing.main(["--results", str(results), "--against", str(older)]) == 0
    seen = (results / "c716673" / "results" / "seen.txt").read_text().splitlines()
    assert seen[:2] == [str(older), "c716673"]  # run in the folder, its rows named by the folder's commit
    assert "c716673: exit 0" in capsys.readouterr().out


def test_a_plain_run_keeps_its_log_and_tables_beside_the_results_folder_it_gives_the_pipeline(tmp_path, monkeypatch, capsys, fake_snakemake):
    monkeypatch.setattr(pipeline_timing, "ROOT", tmp_path / "tree")
    (tmp_path / "tree").mkdir()
    work = tmp_path / "cold"
    (work / "results").mkdir(parents=True)
    (work / "results" / "left-from-before.txt").write_text("")  # emptied first: the run is cold
    assert pipeline_timing.main(["--results", str(work)]) == 0
    assert sorted(p.name for p in (work / "results").iterdir()) == ["seen.txt"]
    assert "Finished jobid: 1" in (work / "snakemake.log").read_text()
    assert json.loads((work / "pipeline-timing.json").read_text())["jobs"][0]["rule"] == "compile_variants"
    assert "compile_variants" in (work / "pipeline-timing.txt").read_text() and "compile_variants" in capsys.readouterr().out
