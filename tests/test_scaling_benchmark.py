"""The scaling benchmark's steady-state rate, on made-up trial times."""

from __future__ import annotations

import datetime as dt
import importlib.util
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
"""


def test_pipeline_timing_reads_jobs_and_phases_from_snakemakes_log():
    jobs, phases = pipeline_timing.parse(SNAKEMAKE_LOG)
    assert [(j["rule"], j["seconds"]) for j in jobs] == [
        ("sweep_reduce_space", 24.0), ("profile", 10.0), ("collect", 3.0)]  # fmt: skip
    assert phases == {
        "sweep_reduce_space": {"sweep (all)": 20.5, "time": 10.2, "verify": 3.0},
        "profile": {
            "verify": 0.1,
            "inputs": 2.0,
            "query metrics": 1.2,
            "harness under ncu": 5.5,
            "import report": 0.8,
        },
    }
    text = pipeline_timing.table(jobs, phases, 30.0)
    assert "time 10.2, verify 3.0" in text and "sum of jobs" in text
    assert "harness under ncu 5.5" in text
