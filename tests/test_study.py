"""The Optuna search loop (tuner.study) on a GPU-free fake family."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.results import COLUMNS, config_key
from tuner.study import (
    SAMPLERS,
    StudyOutcome,
    make_sampler,
    open_storage,
    run_study,
    study_rows,
)

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily, is_wrong, measure  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

FAMILY = FakeFamily()
# 2 x 3 x 3 x 1 = 18 combinations; unroll * vector_width > 16 rules out
# (4, 8), (8, 4), (8, 8), leaving 12 feasible, the optimum among them.
SMALL = {"block_size": [128, 256], "unroll": [2, 4, 8], "vector_width": [2, 4, 8], "cache_hint": ["cg"]}
SMALL_FEASIBLE = 12


class Recorder:
    """A measure that records every configuration it is given."""

    def __init__(self, inner=measure, fail_on=None):
        self.inner = inner
        self.fail_on = fail_on
        self.calls: list[dict] = []

    def __call__(self, cfg: dict) -> dict:
        self.calls.append(dict(cfg))
        if self.fail_on is not None and self.fail_on(cfg):
            raise RuntimeError("device lost")
        return self.inner(cfg)

    @property
    def keys(self) -> list[str]:
        return [config_key(c) for c in self.calls]


class Scripted(optuna.samplers.BaseSampler):
    """Proposes the given configurations in order, cycling."""

    def __init__(self, configs: list[dict]):
        self.configs = configs

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.configs[trial.number % len(self.configs)][param_name]


def cfg(block_size=256, unroll=4, vector_width=4, cache_hint="cg") -> dict:
    return {"block_size": block_size, "unroll": unroll, "vector_width": vector_width, "cache_hint": cache_hint}


def study(measure_fn, **kwargs) -> StudyOutcome:
    args = dict(
        family=FAMILY,
        problem=PROBLEM,
        domains=None,
        storage=None,
        study_name="test",
        measure=measure_fn,
        budget_trials=20,
        timeout_s=None,
        sampler="tpe",
        seed=0,
    )
    args.update(kwargs)
    return run_study(**args)


def trials_with(outcome: StudyOutcome, attr: str) -> list:
    return [t for t in outcome.study.trials if attr in t.user_attrs]


# ---- samplers and storages -------------------------------------------------


@pytest.mark.parametrize("name", SAMPLERS)
def test_make_sampler_builds_every_named_sampler(name):
    if name == "gp":
        pytest.importorskip("torch", reason="GPSampler needs torch")
    if name in ("gp", "qmc"):
        pytest.importorskip("scipy", reason=f"{name} sampler needs scipy")
    assert isinstance(make_sampler(name, 3), optuna.samplers.BaseSampler)


def test_make_sampler_rejects_unknown_name():
    with pytest.raises(ValueError, match=r"sampler must be one of .*'tpe'.*got 'bayes'"):
        make_sampler("bayes", 0)


def test_open_storage_kinds(tmp_path):
    assert isinstance(open_storage(None), optuna.storages.InMemoryStorage)
    journal = open_storage(tmp_path / "sub" / "study.jsonl")
    assert isinstance(journal, optuna.storages.JournalStorage)
    assert isinstance(open_storage(str(tmp_path / "study.log")), optuna.storages.JournalStorage)
    rdb = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    assert isinstance(rdb, optuna.storages.BaseStorage)
    assert open_storage(journal) is journal
    with pytest.raises(ValueError, match=r"storage must be an Optuna URL .*got '.*study\.txt'"):
        open_storage(str(tmp_path / "study.txt"))


# ---- argument checks -------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"budget_trials": 0}, r"budget_trials must be >= 1, got 0"),
        ({"timeout_s": 0}, r"timeout_s must be > 0, got 0"),
        ({"sampler": "annealing"}, r"sampler must be one of .* got 'annealing'"),
        ({"domains": {"unroll": [2, 3]}}, r"domain of unroll must be within \[1, 2, 4, 8\], got \[3\]"),
        ({"domains": {"tile": [8]}}, r"domains must name parameters of family 'fake' .* got \['tile'\]"),
        ({"domains": {"unroll": []}}, r"domain of unroll must not be empty"),
        ({"enqueue": [{"unroll": 16}]}, r"enqueued unroll must be one of \[1, 2, 4, 8\], got 16"),
        ({"problem": PROBLEM.__class__("other", "int32", 8)}, r"problem.family must be 'fake', got 'other'"),
    ],
)
def test_bad_arguments_fail_before_anything_runs(kwargs, message):
    recorder = Recorder()
    with pytest.raises(ValueError, match=message):
        study(recorder, **kwargs)
    assert recorder.calls == []


# ---- the loop ----------------------------------------------------------------


def test_infeasible_configurations_never_reach_measure():
    recorder = Recorder()
    outcome = study(recorder, budget_trials=40, sampler="random", seed=1)
    assert outcome.stop_reason == "budget"
    assert all(FAMILY.violations(c, PROBLEM) == [] for c in recorder.calls)
    pruned = [t for t in outcome.study.trials if t.state == TrialState.PRUNED]
    assert len(pruned) == outcome.infeasible > 0  # random over 192 combinations hits some
    for trial in pruned:
        assert trial.user_attrs["infeasible"] == "; ".join(FAMILY.violations(trial.params, PROBLEM))
        assert "row" not in trial.user_attrs
    # Infeasible trials do not count: the budget is measured configurations.
    assert outcome.measured == len(recorder.calls) == 40


def test_infeasible_proposals_do_not_use_the_budget():
    bad, good = cfg(unroll=8, vector_width=8), cfg()
    recorder = Recorder()
    outcome = study(recorder, budget_trials=1, sampler=Scripted([bad, bad, good]))
    assert [t.state for t in outcome.study.trials] == [TrialState.PRUNED, TrialState.PRUNED, TrialState.COMPLETE]
    assert recorder.calls == [good]
    assert (outcome.measured, outcome.infeasible, outcome.duplicate) == (1, 2, 0)


def test_every_trial_has_every_parameter_and_measured_ones_carry_the_row():
    outcome = study(measure, budget_trials=15, sampler="tpe")
    for trial in outcome.study.trials:
        assert set(trial.params) == set(FAMILY.param_names)
        assert trial.user_attrs["config_key"] == config_key(trial.params)
    measured = trials_with(outcome, "row")
    assert len(measured) == 15
    for trial in measured:
        row = json.loads(trial.user_attrs["row"])
        assert set(row) <= set(COLUMNS)
        for name in ("bandwidth_gbs", "time_ms_median", "registers", "spill_bytes", "status"):
            assert trial.user_attrs[name] == row[name]
        assert row["trial"] == trial.number
        assert row["source"] == "study:test"
        assert (row["family"], row["dtype"], row["n"]) == (PROBLEM.family, PROBLEM.dtype, PROBLEM.n)
        assert {k: row[k] for k in FAMILY.param_names} == trial.params
    # The study alone rebuilds the rows measured now.
    assert study_rows(outcome.study) == outcome.rows


def test_wrong_results_fail_and_never_become_best():
    recorder = Recorder()
    # Brute force over the whole space measures every wrong configuration too.
    outcome = study(recorder, budget_trials=500, sampler="brute_force")
    assert outcome.stop_reason == "exhausted"
    wrong = [c for c in recorder.calls if is_wrong(c)]
    assert len(wrong) == 16
    assert outcome.failed == 16
    failed = [t for t in outcome.study.trials if t.state == TrialState.FAIL]
    assert len(failed) == 16
    assert all(t.user_attrs["reason"] == "wrong_result: relative error 0.5 > 1e-05" for t in failed)
    assert all(t.user_attrs["status"] == "wrong_result" for t in failed)
    assert outcome.best["status"] == "ok"
    assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS
    assert {k: outcome.best[k] for k in FAMILY.param_names} == OPTIMUM_CFG
    assert outcome.study.best_value == OPTIMUM_GBS


def test_exceptions_in_measure_are_failures_and_the_study_goes_on():
    recorder = Recorder(fail_on=lambda c: c["block_size"] == 64)
    outcome = study(recorder, budget_trials=30, sampler="random", seed=2)
    raised = [c for c in recorder.calls if c["block_size"] == 64]
    assert raised, "seed 2 should propose block_size=64"
    assert outcome.stop_reason == "budget"
    assert outcome.measured == 30
    crashed = [t for t in outcome.study.trials if t.params["block_size"] == 64 and "row" in t.user_attrs]
    assert len(crashed) == len(raised)
    for trial in crashed:
        assert trial.state == TrialState.FAIL
        assert trial.user_attrs["reason"] == "launch_error: measure raised RuntimeError: device lost"
    assert outcome.best["block_size"] != 64


@pytest.mark.parametrize(
    "returned, message",
    [
        (None, r"measure must return a mapping, got NoneType"),
        ({"bandwidth_gbs": 1.0}, r"measure's row status must be one of .* got None"),
        ({"status": "ok", "colour": "red"}, r"measure's row must only have results columns, got extra \['colour'\]"),
    ],
)
def test_a_row_that_breaks_the_contract_is_a_bug_not_a_failure(returned, message):
    with pytest.raises(ValueError, match=message):
        study(lambda c: returned, budget_trials=3, sampler=Scripted([cfg()]))


def test_ok_without_a_bandwidth_is_a_failure():
    outcome = study(lambda c: {"status": "ok", "bandwidth_gbs": float("nan")}, budget_trials=1, sampler=Scripted([cfg()]))
    (trial,) = outcome.study.trials
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["reason"] == "launch_error: status ok needs a finite bandwidth_gbs, got nan"
    assert outcome.best is None and outcome.failed == 1


def test_duplicates_reuse_the_stored_result_and_are_free():
    wrong, good, other = cfg(unroll=1, cache_hint="cs"), cfg(), cfg(block_size=128)
    recorder = Recorder()
    outcome = study(recorder, budget_trials=3, sampler=Scripted([wrong, good, wrong, good, other]))
    assert recorder.calls == [wrong, good, other]
    states = [t.state for t in outcome.study.trials]
    assert states == [TrialState.FAIL, TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    trials = outcome.study.trials
    assert trials[2].user_attrs["duplicate_of"] == 0
    assert trials[2].user_attrs["reason"] == "duplicate of failed trial 0"
    assert trials[3].user_attrs["duplicate_of"] == 1
    assert trials[3].value == trials[1].value == OPTIMUM_GBS
    assert (outcome.measured, outcome.duplicate, outcome.failed) == (3, 2, 1)
    assert [r["trial"] for r in study_rows(outcome.study)] == [0, 1, 4]


def test_a_sampler_stuck_on_measured_configurations_is_rescued():
    recorder = Recorder()
    outcome = study(recorder, budget_trials=5, sampler=Scripted([cfg()]))
    assert outcome.stop_reason == "budget"
    assert recorder.calls[0] == cfg()
    assert len(set(recorder.keys)) == len(recorder.calls) == 5
    assert all(FAMILY.violations(c, PROBLEM) == [] for c in recorder.calls)
    # Every RESCUE_AFTER (3) idle asks, one random unmeasured configuration.
    assert (outcome.rescued, outcome.duplicate) == (4, 12)
    rescued = trials_with(outcome, "rescue")
    assert [t.number for t in rescued] == [4, 8, 12, 16]
    assert all("row" in t.user_attrs for t in rescued)


def test_a_sampler_stuck_on_infeasible_configurations_is_rescued():
    # What Optuna's GPSampler does: it ignores PRUNED trials, so it repeats them.
    recorder = Recorder()
    outcome = study(recorder, budget_trials=5, sampler=Scripted([cfg(unroll=8, vector_width=8)]))
    assert outcome.stop_reason == "budget"
    assert len(set(recorder.keys)) == 5
    assert (outcome.rescued, outcome.infeasible) == (5, 15)


def test_a_space_without_feasible_configurations_ends_at_once():
    recorder = Recorder()
    outcome = study(recorder, domains={"unroll": [8], "vector_width": [4, 8]}, budget_trials=5)
    assert outcome.stop_reason == "exhausted"
    assert outcome.study.trials == [] and recorder.calls == []
    assert outcome.best is None


def test_patience_ends_a_stuck_search_of_a_space_too_large_to_enumerate(monkeypatch):
    # Not enumerated, the space's exhaustion is unknown; random rescues only
    # find the one configuration again.
    monkeypatch.setattr("tuner.study.MAX_ENUMERATED", 0)
    recorder = Recorder()
    one = {name: [value] for name, value in cfg().items()}
    outcome = study(recorder, domains=one, budget_trials=5, sampler=Scripted([cfg()]), patience=30)
    assert outcome.stop_reason == "stalled"
    assert recorder.calls == [cfg()]
    assert outcome.duplicate == 30


def test_ask_limit_bounds_the_loop(monkeypatch):
    # Only infeasible proposals, rescues included: the ask limit (50 x budget)
    # ends it before the (larger) patience does.
    monkeypatch.setattr("tuner.study.MAX_ENUMERATED", 0)
    recorder = Recorder()
    domains = {"unroll": [8], "vector_width": [4, 8]}
    outcome = study(recorder, domains=domains, budget_trials=1, sampler="random", patience=10_000)
    assert outcome.stop_reason == "ask_limit"
    assert recorder.calls == []
    assert outcome.infeasible == 50


def test_timeout_stops_asking():
    def slow(c):
        time.sleep(0.05)
        return measure(c)

    start = time.monotonic()
    outcome = study(slow, budget_trials=1000, timeout_s=0.3, sampler="random")
    assert outcome.stop_reason == "timeout"
    assert 1 <= outcome.measured < 20
    assert time.monotonic() - start < 2


def test_enqueued_configurations_come_first():
    first, second = cfg(block_size=64, unroll=1), cfg(block_size=512, vector_width=1)
    recorder = Recorder()
    study(recorder, budget_trials=5, sampler="random", enqueue=[first, second])
    assert recorder.calls[:2] == [first, second]
    assert len(recorder.calls) == 5


def test_brute_force_finds_the_exact_optimum_and_stops_when_exhausted():
    recorder = Recorder()
    outcome = study(recorder, domains=SMALL, budget_trials=100, sampler="brute_force")
    assert outcome.stop_reason == "exhausted"
    assert len(recorder.calls) == outcome.measured == outcome.total_measured == SMALL_FEASIBLE
    assert len(set(recorder.keys)) == SMALL_FEASIBLE
    assert outcome.infeasible == 6  # 2 block sizes x 3 ruled-out pairs, each asked once
    assert {k: outcome.best[k] for k in FAMILY.param_names} == OPTIMUM_CFG
    assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS


def test_random_sampler_exhausts_a_small_space_without_measuring_twice():
    recorder = Recorder()
    outcome = study(recorder, domains=SMALL, budget_trials=None, sampler="random", seed=5)
    assert outcome.stop_reason == "exhausted"
    assert sorted(recorder.keys) == sorted(set(recorder.keys))
    assert len(recorder.calls) == SMALL_FEASIBLE
    assert outcome.duplicate == len(trials_with(outcome, "duplicate_of")) > 0


# ---- resume and shared storage ---------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_resume_continues_to_the_budget_without_redoing_trials(tmp_path, kind):
    storage = f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else str(tmp_path / "study.jsonl")
    first = Recorder()
    a = study(first, storage=storage, study_name="resume", budget_trials=6, sampler="tpe", seed=0)
    assert (a.measured, a.total_measured, len(first.calls)) == (6, 6, 6)

    second = Recorder()
    b = study(second, storage=storage, study_name="resume", budget_trials=15, sampler="tpe", seed=0)
    assert len(second.calls) == 15 - 6
    assert b.measured == 9
    assert b.total_measured == 15
    assert len(set(first.keys + second.keys)) == 15  # nothing measured twice
    rows = study_rows(optuna.load_study(study_name="resume", storage=open_storage(storage)))
    assert len(rows) == 15
    assert b.rows == rows[6:]

    # Rerun at the same budget: nothing to do.
    third = Recorder()
    c = study(third, storage=storage, study_name="resume", budget_trials=15)
    assert third.calls == [] and c.stop_reason == "budget" and c.best == b.best


def test_enqueued_configurations_are_not_redone_on_resume(tmp_path):
    storage = str(tmp_path / "study.jsonl")
    first = cfg(block_size=64, unroll=1)
    a = Recorder()
    study(a, storage=storage, study_name="enq", budget_trials=2, sampler="random", enqueue=[first])
    b = Recorder()
    study(b, storage=storage, study_name="enq", budget_trials=4, sampler="random", enqueue=[first])
    assert a.calls[0] == first and first not in b.calls
    assert len(b.calls) == 2


def test_workers_sharing_a_storage_share_one_budget(tmp_path):
    storage = str(tmp_path / "shared.jsonl")
    open_storage(storage)  # create the file before the threads race for it
    recorders = [Recorder(inner=lambda c: (time.sleep(0.01), measure(c))[1]) for _ in range(2)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            study(recorders[i], storage=storage, study_name="shared", budget_trials=12, sampler="random", seed=i)
        except BaseException as exc:  # surfaced below; a thread cannot fail the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    total = len(recorders[0].calls) + len(recorders[1].calls)
    # Each worker checks the shared count before each ask; at most one
    # measurement per extra worker can be in flight past the budget.
    assert 12 <= total <= 13
    shared = optuna.load_study(study_name="shared", storage=open_storage(storage))
    assert len({r["config_key"] for r in study_rows(shared)}) >= 12
