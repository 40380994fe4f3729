"""tuner.search.study with worker processes: several sharing one storage, and one
killed at every step of a measurement and then rerun.

The workers are real processes (tests/data/study_worker.py) on the GPU-free
fake family, on a journal file and on SQLite: what the GPU workers share.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.data.results import config_key
from tuner.search.claims import DONE
from tuner.search.storage import open_claims
from tuner.search.study import open_storage, run_study, study_rows

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent
WORKER = DATA / "study_worker.py"
sys.path.insert(0, str(DATA))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402
from released import run_released  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

FAMILY = FakeFamily()
TIMEOUT_S = 120


# A PostgreSQL URL (e.g. postgresql://tuner@127.0.0.1/tuning) runs these tests
# on PostgreSQL too; each test uses studies of its own names there.
POSTGRES = os.environ.get("TUNER_TEST_POSTGRES_URL")
KINDS = [
    "journal",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.skipif(not POSTGRES, reason="TUNER_TEST_POSTGRES_URL is not set")),
]


def storage_for(kind: str, tmp_path: Path) -> str:
    if kind == "postgresql":
        return POSTGRES
    return f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else str(tmp_path / "study.jsonl")


def study_name(tmp_path: Path, name: str) -> str:
    return f"{name}-{tmp_path.name}-{os.getpid()}"


def worker_command(storage: str, study: str, budget: int, seed: int, calls: Path, *extra: str) -> list[str]:
    return [sys.executable, str(WORKER), storage, study, str(budget), str(seed), "--calls", str(calls), *extra]


def worker_env() -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def measured_keys(calls: Path) -> list[str]:
    """config_key of every measurement that finished, in any process."""
    return calls.read_text().splitlines() if calls.exists() else []


def load(storage: str, study: str) -> optuna.Study:
    return optuna.load_study(study_name=study, storage=open_storage(storage))


def claim_states(storage: str, name: str) -> Counter:
    claims = open_claims(storage, name, create=False)
    return Counter(c.state for c in claims.snapshot().values())


def check_study(storage: str, name: str, calls: Path, budget: int) -> list[optuna.trial.FrozenTrial]:
    """What must hold of a study once its workers have finished: every
    finished measurement is in the study once, nothing was measured twice,
    the budget is met exactly, and no trial is left RUNNING or is a copy."""
    keys = measured_keys(calls)
    duplicated = [k for k, n in Counter(keys).items() if n > 1]
    assert duplicated == [], f"measured more than once: {duplicated}"
    assert len(keys) == budget, f"{len(keys)} measurements for a budget of {budget}"
    rows = study_rows(storage, name)
    assert sorted(r["config_key"] for r in rows) == sorted(keys), "rows lost or invented"
    assert claim_states(storage, name) == Counter({DONE: budget})
    trials = load(storage, name).get_trials(deepcopy=False)
    assert [t.number for t in trials if not t.state.is_finished()] == []
    measured = [t for t in trials if "status" in t.user_attrs]
    assert sorted(t.user_attrs["config_key"] for t in measured) == sorted(keys)
    assert sorted(r["trial"] for r in rows) == sorted(t.number for t in measured)
    # No COMPLETE copies: a trial completes only with its own measurement.
    assert all("status" in t.user_attrs for t in trials if t.state == TrialState.COMPLETE)
    assert all(t.state == TrialState.FAIL and t.user_attrs.get("reason") for t in trials if "status" not in t.user_attrs)
    return trials


# ---- concurrent workers ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("workers", [2, 4])
def test_workers_share_one_budget_and_never_measure_twice(tmp_path, kind, workers):
    storage, budget, calls = storage_for(kind, tmp_path), 20, tmp_path / "calls.txt"
    name, go = study_name(tmp_path, "shared"), tmp_path / "go"
    # One seed for all: the workers propose the same configurations in the
    # same order, so every claim is contested, and a pause between choosing a
    # configuration and claiming it lets the others choose it too. Nothing is
    # created beforehand: the workers race to create the storage and study.
    processes = [
        subprocess.Popen(
            worker_command(
                storage,
                name,
                budget,
                0,
                calls,
                "--sleep",
                "0.02",
                "--pause",
                "claiming:0.02",
                "--ready",
                str(tmp_path / f"ready{i}"),
                "--go",
                str(go),
            ),
            env=worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    outputs = run_released(processes, [tmp_path / f"ready{i}" for i in range(workers)], go, TIMEOUT_S)
    for p, (_, err) in zip(processes, outputs):
        assert p.returncode == 0, err
    reports = [json.loads(out.splitlines()[-1]) for out, _ in outputs]
    assert all(r["stop_reason"] == "budget" for r in reports)
    assert sum(r["measured"] for r in reports) == budget

    trials = check_study(storage, name, calls, budget)
    # Trials without a measurement: only lost races for the last of the
    # budget, at most two per worker (its ask and its ask ahead).
    assert budget <= len(trials) <= budget + 2 * workers
    assert sum(r["lost"] for r in reports) == len(trials) - budget


# ---- a worker killed, then rerun -----------------------------------------------------

# The hook points of tuner.search.study in the order a measurement passes them, and
# "measure" (inside measure). Killed before "recorded", the measurement is
# lost and its trial is stale; from "recorded" on, it is kept.
POINTS = ["claimed", "measure", "recorded", "attrs", "told", "done"]
KILL_BUDGET = 5
KILLED_TRIAL = 2  # killed the 3rd time the point is reached


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "point, ask_ahead",
    [(point, True) for point in POINTS] + [("claimed", False), ("recorded", False)],
)
def test_a_killed_worker_loses_no_measurement_and_a_rerun_redoes_none(tmp_path, kind, point, ask_ahead):
    storage, calls, name = storage_for(kind, tmp_path), tmp_path / "calls.txt", study_name(tmp_path, "killed")
    kill = ["--kill", f"{point}:{KILLED_TRIAL + 1}"] + ([] if ask_ahead else ["--no-ask-ahead"])
    command = worker_command(storage, name, KILL_BUDGET, 0, calls, "--sampler", "random", *kill)
    done = subprocess.run(command, env=worker_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == -signal.SIGKILL, done.stderr
    before = load(storage, name).get_trials(deepcopy=False)
    assert before[KILLED_TRIAL].state == (TrialState.RUNNING if point not in ("told", "done") else before[KILLED_TRIAL].state)
    first = measured_keys(calls)

    # The rerun (this process: the killed one is gone) settles the dead
    # worker's trial and measures the rest of the budget.
    def measure_and_log(cfg):
        with calls.open("a") as f:
            f.write(config_key(cfg) + "\n")
        return measure(cfg)

    outcome = run_study(
        family=FAMILY, problem=PROBLEM, domains=None, storage=storage, study_name=name, measure=measure_and_log,
        budget_trials=KILL_BUDGET, timeout_s=None, sampler="random", seed=1,
    )  # fmt: skip
    assert outcome.stop_reason == "budget"
    assert outcome.total_measured == KILL_BUDGET
    assert outcome.measured == KILL_BUDGET - len(first)
    trials = check_study(storage, name, calls, KILL_BUDGET)

    killed = trials[KILLED_TRIAL]
    # A worker asking ahead had claimed the next trial's configuration too:
    # that claim is stale after the kill, released, its trial failed.
    ahead = int(ask_ahead)
    if ask_ahead:
        following = trials[KILLED_TRIAL + 1]
        assert following.state == TrialState.FAIL and following.user_attrs["reason"] == "stale: worker gone"
    if point in ("claimed", "measure"):
        assert len(first) == KILLED_TRIAL
        assert killed.state == TrialState.FAIL
        assert killed.user_attrs["reason"] == "stale: worker gone"
        assert "status" not in killed.user_attrs
        assert outcome.recovered == 1 + ahead
        assert len(trials) == KILL_BUDGET + 1 + ahead
    else:
        # Recorded before the kill: kept, told once, not measured again.
        assert len(first) == KILLED_TRIAL + 1
        assert killed.user_attrs["config_key"] == first[-1]
        assert killed.state in (TrialState.COMPLETE, TrialState.FAIL)
        assert {r["trial"]: r for r in study_rows(outcome.storage, outcome.study.study_name)}[KILLED_TRIAL]["config_key"] == first[-1]
        assert outcome.recovered == (point != "done") + ahead
        assert len(trials) == KILL_BUDGET + ahead
