"""The seconds of each stage at the end of a run: read from the jobs'
Snakemake benchmark files and the rows' energy seconds, this run's only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from tuner.data.paths import GpuFolder
from tuner.data.stage_seconds import print_run_seconds, seconds_table, stage_seconds

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_job(folder: Path, job: str, seconds: float, ended: float) -> None:
    path = GpuFolder(folder).seconds(job)  # where the rules' benchmark: files lie
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:{int(seconds):02d}\t1\t1\t1\t1\t0\t0\t0\t0\n")
    os.utime(path, (ended, ended))


def table_lines(table: str) -> dict[str, str]:
    """Each row of a seconds table by its label."""
    return {line.split("  ")[1].strip(): line for line in table.splitlines()[1:]}


def test_this_runs_jobs_in_the_order_they_ended_with_sweeps_and_studies_named(tmp_path):
    started = time.time() - 100
    write_job(tmp_path, "peaks", 4.0, started + 10)
    write_job(tmp_path, "describe_device", 2.0, started + 2)
    write_job(tmp_path, "sweep-copy_widths", 30.5, started + 50)
    write_job(tmp_path, "tune-reduce_int32", 20.0, started + 80)
    write_job(tmp_path, "compile", 9.0, started - 500)  # an earlier run's: its outputs were current

    stages = stage_seconds(tmp_path, started)

    assert [(s.stage, s.seconds) for s in stages] == [
        ("describe", 2.0),
        ("peaks", 4.0),
        ("sweep copy_widths", 30.5),
        ("study reduce_int32", 20.0),
    ]


def test_the_reports_two_jobs_are_named_for_what_they_do(tmp_path):
    """draw_report (the figures, beside the profile) and plot_report (whose seconds file is the report's)."""
    started = time.time() - 100
    write_job(tmp_path, "draw_report", 9.0, started + 60)
    write_job(tmp_path, "report", 2.0, started + 90)
    assert [(s.stage, s.seconds) for s in stage_seconds(tmp_path, started)] == [("report figures", 9.0), ("report", 2.0)]


def test_the_table_shows_energy_within_the_stages_and_what_no_job_accounts_for(tmp_path):
    started = time.time() - 100
    write_job(tmp_path, "sweep-copy_widths", 60.0, started + 60)
    stamp = pd.Timestamp(started, unit="s", tz="UTC")
    pd.DataFrame(
        {
            "timestamp": [stamp + pd.Timedelta(seconds=30), stamp + pd.Timedelta(seconds=40), stamp - pd.Timedelta(seconds=900)],
            "energy_wall_s": [1.5, None, 7.0],  # the last row is an earlier run's
        }
    ).to_parquet(tmp_path / "measurements.parquet")

    table = seconds_table(tmp_path, started, wall=80.0)

    lines = table_lines(table)
    assert "60.0 s" in lines["sweep copy_widths"] and "75.0%" in lines["sweep copy_widths"]
    assert "1.5 s" in lines["(energy, within the above)"]
    assert "20.0 s" in lines["outside the jobs"]
    assert "80.0 s" in lines["wall"]


def test_jobs_that_ran_beside_each_other_are_shown_and_not_taken_from_what_no_job_accounts_for(tmp_path):
    """The compile stage beside the peaks: 10 s of compile, 12 s of peaks, 8 s of them together."""
    started = time.time() - 100
    write_job(tmp_path, "describe_device", 2.0, started + 2)
    write_job(tmp_path, "compile", 10.0, started + 12)
    write_job(tmp_path, "peaks", 12.0, started + 16)
    write_job(tmp_path, "sweep-copy_widths", 4.0, started + 21)

    table = seconds_table(tmp_path, started, wall=25.0)

    lines = table_lines(table)
    assert "8.0 s" in lines["(jobs beside each other)"]
    assert "5.0 s" in lines["outside the jobs"]  # 25 s of wall, 20 s with a job running
    write_job(tmp_path / "one-after-another", "compile", 10.0, started + 12)
    write_job(tmp_path / "one-after-another", "peaks", 12.0, started + 24.5)
    sequential = seconds_table(tmp_path / "one-after-another", started, wall=25.0)
    assert "(jobs beside each other)" not in table_lines(sequential) and "3.0 s" in table_lines(sequential)["outside the jobs"]


def test_nothing_is_printed_for_a_folder_whose_jobs_all_ran_before(tmp_path, capsys):
    write_job(tmp_path / "nvidia-h100", "peaks", 4.0, time.time() - 1000)

    print_run_seconds(tmp_path, since=time.time() - 10)

    assert capsys.readouterr().out == ""


def test_a_snakemake_run_prints_the_seconds_of_its_jobs_at_the_end(tmp_path):
    """Snakemake's own benchmark files, written by a real (GPU-free) run of rules shaped like the pipeline's."""
    (tmp_path / "Snakefile").write_text(f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
STARTED = time.time()

onsuccess:
    from tuner.data.stage_seconds import print_run_seconds
    print_run_seconds("results", STARTED)

rule all:
    input: "results/gpu/collect.txt"

rule sweep:
    output: "results/{{gpu}}/sweeps/a.txt"
    benchmark: "results/{{gpu}}/logs/seconds/sweep-a.tsv"
    shell: "sleep 0.2; touch {{output}}"

rule collect:
    input: "results/{{gpu}}/sweeps/a.txt"
    output: "results/{{gpu}}/collect.txt"
    benchmark: "results/{{gpu}}/logs/seconds/collect.tsv"
    shell: "touch {{output}}"
""")
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--quiet", "rules"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout + run.stderr
    assert "Seconds per stage (results/gpu):" in out
    sweep_line = next(line for line in out.splitlines() if line.strip().startswith("sweep a"))
    assert float(sweep_line.split()[2]) >= 0.2
    assert any(line.strip().startswith("collect") for line in out.splitlines())
