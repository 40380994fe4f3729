"""tuner.search.study.run with worker processes: several sharing one storage, and one
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
from tuner.search.study.claims import CLAIMED, DONE
from tuner.search.study.run import StudyOptions, open_storage, run_study, study_rows
from tuner.search.study.storage import open_claims

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
    the budget is met exactly, and the dashboard's storage holds one finished
    trial per measurement and nothing else."""
    keys = measured_keys(calls)
    duplicated = [k for k, n in Counter(keys).items() if n > 1]
    assert duplicated == [], f"measured more than once: {duplicated}"
    assert len(keys) == budget, f"{len(keys)} measurements for a budget of {budget}"
    rows = study_rows(storage, name)
    assert sorted(r["config_key"] for r in rows) == sorted(keys), "rows lost or invented"
    numbers = [r["trial"] for r in rows]
    assert numbers == sorted(set(numbers)), "trial numbers repeated or out of order"
    assert claim_states(storage, name) == Counter({DONE: budget})
    trials = load(storage, name).get_trials(deepcopy=False)
    assert [t.number for t in trials if t.state not in (TrialState.COMPLETE, TrialState.FAIL)] == []
    assert sorted(t.user_attrs["config_key"] for t in trials) == sorted(keys)
    by_key = {r["config_key"]: r for r in rows}
    for trial in trials:
        row = by_key[trial.user_attrs["config_key"]]
        assert trial.user_attrs["status"] == row["status"]
        assert trial.user_attrs["trial"] == row["trial"]  # the dashboard numbers trials as they finish
        assert trial.value == (row["bandwidth_gbs"] if row["status"] == "ok" else None)
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

    check_study(storage, name, calls, budget)
    # Asks that claimed nothing: only lost races for the last of the budget,
    # at most two per worker (its ask and its ask ahead).
    assert sum(r["lost"] for r in reports) <= 2 * workers


# ---- a worker killed, then rerun -----------------------------------------------------

# The points of the loop in the order a measurement passes them (run_study's
# ``at``), and "measure" (inside measure). Killed before "recorded", the
# measurement is lost and its claim is stale; from "recorded" on, it is kept,
# and its trial is on the dashboard once whether or not it was "added".
POINTS = ["claimed", "measure", "recorded", "added", "done"]
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
    first = measured_keys(calls)
    shown = [t.user_attrs["config_key"] for t in load(storage, name).get_trials(deepcopy=False)]
    # The dashboard holds the finished trials only: the killed one from "added" on.
    assert shown == first[: KILLED_TRIAL + (point in ("added", "done"))]
    ahead = int(ask_ahead)
    # A worker asking ahead had claimed the next configuration too.
    assert claim_states(storage, name)[CLAIMED] == (point in ("claimed", "measure")) + ahead

    # The rerun (this process: the killed one is gone) settles the dead
    # worker's claims and measures the rest of the budget.
    def measure_and_log(cfg):
        with calls.open("a") as f:
            f.write(config_key(cfg) + "\n")
        return measure(cfg)

    outcome = run_study(
        StudyOptions.for_strategy("random", family=FAMILY, problem=PROBLEM, domains=None, storage=storage, study_name=name,
                                  measure=measure_and_log, budget_trials=KILL_BUDGET, timeout_s=None, seed=1),
    )  # fmt: skip
    assert outcome.stop_reason == "budget"
    assert outcome.total_measured == KILL_BUDGET
    assert outcome.measured == KILL_BUDGET - len(first)
    trials = check_study(storage, name, calls, KILL_BUDGET)
    assert len(trials) == KILL_BUDGET
    rows = {r["trial"]: r for r in study_rows(outcome.storage, outcome.study.study_name)}
    if point in ("claimed", "measure"):
        # Its claim (and the one asked ahead) released, its configuration free again.
        assert len(first) == KILLED_TRIAL
        assert outcome.recovered == 1 + ahead
    else:
        # Recorded before the kill: kept, on the dashboard once, not measured again.
        assert len(first) == KILLED_TRIAL + 1
        assert rows[KILLED_TRIAL]["config_key"] == first[-1]
        assert [t.user_attrs["worker"] for t in trials if t.user_attrs["config_key"] == first[-1]] == ["worker-0"]
        assert outcome.recovered == (point != "done") + ahead
    assert sorted(rows) == list(range(KILL_BUDGET))  # numbers of released claims are taken again


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_each_worker_asks_its_sampler_knowing_every_row_measured_before(tmp_path, kind):
    # Measurements of 0.1 s: long enough that a worker slowed by a loaded host still asks while the other records rows.
    storage, budget, calls = storage_for(kind, tmp_path), 16, tmp_path / "calls.txt"
    name, go = study_name(tmp_path, "seen"), tmp_path / "go"
    seen = [tmp_path / f"seen{i}.jsonl" for i in range(2)]
    processes = [
        subprocess.Popen(
            worker_command(storage, name, budget, i, calls, "--sampler", "random", "--sleep", "0.1", "--seen", str(seen[i]),
                           "--ready", str(tmp_path / f"ready{i}"), "--go", str(go)),  # fmt: skip
            env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    outputs = run_released(processes, [tmp_path / f"ready{i}" for i in range(2)], go, TIMEOUT_S)
    for p, (_, err) in zip(processes, outputs):
        assert p.returncode == 0, err
    check_study(storage, name, calls, budget)
    for path in seen:
        asks = [json.loads(line) for line in path.read_text().splitlines()]
        assert asks, f"{path.name}: the sampler was never asked"
        # Every row another worker had recorded as the ask began is a finished
        # trial of this worker's study when its sampler chooses.
        assert all(a["held"] == a["expected"] for a in asks)
        assert any(a["others"] > 0 for a in asks), f"{path.name}: never saw another worker's row"
