"""The Optuna search loop (tuner.search.study.run) on a GPU-free fake family."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.data.results import COLUMNS, config_key
from tuner.errors import FatalDeviceError
from tuner.search.study.claims import DONE
from tuner.search.study.run import (
    SAMPLERS,
    StudyOptions,
    StudyOutcome,
    make_sampler,
    open_storage,
    run_study,
    study_rows,
)
from tuner.search.study.storage import open_claims
from tuner.search.study.storage_spec import storage_problem

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily, is_wrong, measure  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

FAMILY = FakeFamily()
# 2 x 3 x 3 x 1 = 18 combinations; unroll * vector_width > 16 rules out
# (4, 8), (8, 4), (8, 8), leaving 12 feasible, the optimum among them.
SMALL = {"block_size": [128, 256], "unroll": [2, 4, 8], "vector_width": [2, 4, 8], "cache_hint": ["cg"]}
SMALL_FEASIBLE = 12
DISTS = {p.name: optuna.distributions.CategoricalDistribution(p.values) for p in FAMILY.params}


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
    """Proposes configuration ``trial.number`` of the given ones (cycling),
    however often it is asked within the trial: a sampler that repeats."""

    def __init__(self, configs: list[dict]):
        self.configs = configs

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.configs[trial.number % len(self.configs)][param_name]


class Proposals(optuna.samplers.BaseSampler):
    """Proposes the given configurations one after the other, each once
    (then the last one forever), whichever trial asks."""

    def __init__(self, configs: list[dict]):
        self.configs = configs
        self.proposed = 0

    def infer_relative_search_space(self, study, trial):
        return dict(DISTS)

    def sample_relative(self, study, trial, search_space):
        cfg = self.configs[min(self.proposed, len(self.configs) - 1)]
        self.proposed += 1
        return dict(cfg)

    def sample_independent(self, study, trial, param_name, param_distribution):
        raise AssertionError("every parameter is sampled relatively")


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
    sampler = args.pop("sampler")
    # A strategy's name: its sampler made once, as the settings' studies are; else the sampler given.
    options = StudyOptions.for_strategy(sampler, **args) if isinstance(sampler, str) else StudyOptions(sampler=sampler, **args)
    return run_study(options)


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
        ({"domains": {"unroll": [2, 3]}}, r"domain of unroll must hold values that are one of \[1, 2, 4, 8\], got \[3\]"),
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


def test_infeasible_configurations_never_reach_measure_nor_become_trials():
    recorder = Recorder()
    outcome = study(recorder, budget_trials=40, sampler="random", seed=1)
    assert outcome.stop_reason == "budget"
    assert all(FAMILY.violations(c, PROBLEM) == [] for c in recorder.calls)
    assert outcome.infeasible > 0  # random over 192 combinations proposes some
    # Passed over inside the sampler: no PRUNED trials, every trial measured.
    trials = outcome.study.trials
    assert len(trials) == outcome.measured == len(recorder.calls) == 40
    assert all("status" in t.user_attrs and t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)


def test_infeasible_proposals_do_not_use_the_budget():
    bad, worse, good = cfg(unroll=8, vector_width=4), cfg(unroll=8, vector_width=8), cfg()
    recorder = Recorder()
    outcome = study(recorder, budget_trials=1, sampler=Proposals([bad, worse, good]))
    assert [t.state for t in outcome.study.trials] == [TrialState.COMPLETE]
    assert recorder.calls == [good]
    assert (outcome.measured, outcome.infeasible, outcome.duplicate, outcome.rescued) == (1, 2, 0, 0)


def test_every_trial_has_every_parameter_and_slim_attributes_and_its_row_is_in_the_study():
    outcome = study(measure, budget_trials=15, sampler="tpe")
    for trial in outcome.study.trials:
        assert set(trial.params) == set(FAMILY.param_names)
        assert trial.user_attrs["config_key"] == config_key(trial.params)
        # Slim: the dashboard's columns, not the results row.
        assert set(trial.user_attrs) <= {"config_key", "trial", "worker", "status", "rescue", "reason"}
        assert len(json.dumps(trial.user_attrs)) < 200
    measured = trials_with(outcome, "status")
    assert len(measured) == 15
    rows = {row["trial"]: row for row in study_rows(outcome.storage, outcome.study.study_name)}
    assert sorted(rows) == [t.number for t in measured]
    for trial in measured:
        row = rows[trial.number]
        assert set(row) <= set(COLUMNS)
        assert trial.user_attrs["status"] == row["status"]
        assert row["config_key"] == trial.user_attrs["config_key"]
        if trial.state == TrialState.COMPLETE:
            assert trial.value == row["bandwidth_gbs"]
        assert row["source"] == "study:test"
        assert (row["family"], row["dtype"], row["n"]) == (PROBLEM.family, PROBLEM.dtype, PROBLEM.n)
        assert {k: row[k] for k in FAMILY.param_names} == trial.params
    # The study alone rebuilds the rows measured now.
    assert study_rows(outcome.storage, outcome.study.study_name) == outcome.rows


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
    crashed = [t for t in outcome.study.trials if t.params["block_size"] == 64 and "status" in t.user_attrs]
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
def test_a_row_that_breaks_the_contract_is_a_bug_not_a_failure(tmp_path, returned, message):
    storage = str(tmp_path / "study.jsonl")
    with pytest.raises(ValueError, match=message):
        study(lambda c: returned, storage=storage, budget_trials=3, sampler=Scripted([cfg()]))
    # Nothing was measured: the claims are released (the one measured, and the
    # one asked ahead meanwhile, which is left to others); the dashboard shows nothing.
    loaded = optuna.load_study(study_name="test", storage=open_storage(storage))
    assert open_claims(storage, "test").snapshot() == {}
    assert loaded.trials == []


def test_ok_without_a_bandwidth_is_a_failure():
    outcome = study(lambda c: {"status": "ok", "bandwidth_gbs": float("nan")}, budget_trials=1, sampler=Scripted([cfg()]))
    (trial,) = outcome.study.trials
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["reason"] == "launch_error: status ok needs a finite bandwidth_gbs, got nan"
    assert outcome.best is None and outcome.failed == 1


def test_repeated_proposals_are_passed_over_and_never_become_trials():
    wrong, good, other = cfg(unroll=1, cache_hint="cs"), cfg(), cfg(block_size=128)
    recorder = Recorder()
    outcome = study(recorder, budget_trials=3, sampler=Proposals([wrong, good, wrong, good, other]))
    assert recorder.calls == [wrong, good, other]
    trials = outcome.study.trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    assert [t.user_attrs["config_key"] for t in trials] == [config_key(c) for c in (wrong, good, other)]
    assert (outcome.measured, outcome.duplicate, outcome.failed, outcome.rescued) == (3, 2, 1, 0)
    assert [r["trial"] for r in study_rows(outcome.storage, outcome.study.study_name)] == [0, 1, 2]


def test_a_repeating_sampler_makes_no_copies_of_trials():
    # TPE's density must see each measurement once: no COMPLETE copies.
    recorder = Recorder()
    outcome = study(recorder, budget_trials=30, sampler=Scripted([cfg(), cfg(block_size=128)]))
    assert outcome.stop_reason == "budget"
    trials = outcome.study.trials
    assert len(trials) == len(recorder.calls) == 30
    assert len({t.user_attrs["config_key"] for t in trials}) == 30
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == sum(t.user_attrs["status"] == "ok" for t in trials)
    assert outcome.duplicate == 28 and outcome.rescued == 28


def test_a_sampler_stuck_on_measured_configurations_is_rescued():
    recorder = Recorder()
    outcome = study(recorder, budget_trials=5, sampler=Scripted([cfg()]))
    assert outcome.stop_reason == "budget"
    assert recorder.calls[0] == cfg()
    assert len(set(recorder.keys)) == len(recorder.calls) == 5
    assert all(FAMILY.violations(c, PROBLEM) == [] for c in recorder.calls)
    # Proposed again, the measured configuration is passed over; proposed a
    # second time in the same trial, the sampler is stuck: a random rescue.
    assert (outcome.rescued, outcome.duplicate) == (4, 4)
    rescued = trials_with(outcome, "rescue")
    assert [t.number for t in rescued] == [1, 2, 3, 4]
    assert all("status" in t.user_attrs for t in rescued)
    assert len(outcome.study.trials) == 5


def test_a_sampler_stuck_on_infeasible_configurations_is_rescued():
    # What Optuna's GP sampler does: it ignores failed trials, so it repeats them.
    recorder = Recorder()
    outcome = study(recorder, budget_trials=5, sampler=Scripted([cfg(unroll=8, vector_width=8)]))
    assert outcome.stop_reason == "budget"
    assert len(set(recorder.keys)) == 5
    assert (outcome.rescued, outcome.infeasible) == (5, 5)
    assert len(outcome.study.trials) == 5


def test_a_space_without_feasible_configurations_ends_at_once():
    recorder = Recorder()
    outcome = study(recorder, domains={"unroll": [8], "vector_width": [4, 8]}, budget_trials=5)
    assert outcome.stop_reason == "exhausted"
    assert outcome.study.trials == [] and recorder.calls == []
    assert outcome.best is None


def test_patience_ends_a_stuck_search_of_a_space_too_large_to_enumerate(monkeypatch):
    # Not enumerated, and no check allowed to the walk of its product, the
    # space's exhaustion is unknown; random rescues only find the one
    # configuration again, so each trial fails unmeasured.
    monkeypatch.setattr("tuner.families.base.MAX_ENUMERATED", 0)
    monkeypatch.setattr("tuner.search.samplers.feasible_draws.CHECKS_PER_ASK", 0)
    recorder = Recorder()
    one = {name: [value] for name, value in cfg().items()}
    outcome = study(recorder, domains=one, budget_trials=5, sampler=Scripted([cfg()]), patience=30)
    assert outcome.stop_reason == "stalled"
    assert recorder.calls == [cfg()]
    assert outcome.lost == 30
    # The asks that claimed nothing leave no trial on the dashboard.
    assert [t.user_attrs["config_key"] for t in outcome.study.trials] == [config_key(cfg())]


def test_a_space_too_large_to_enumerate_ends_exhausted_once_its_walk_has_passed_it_all(monkeypatch):
    # The walk of the product (tuner.search.samplers.feasible_draws) passes its one
    # configuration in the first ask: the feasible space is then known.
    monkeypatch.setattr("tuner.families.base.MAX_ENUMERATED", 0)
    recorder = Recorder()
    one = {name: [value] for name, value in cfg().items()}
    outcome = study(recorder, domains=one, budget_trials=5, sampler=Scripted([cfg()]), patience=30)
    assert outcome.stop_reason == "exhausted"
    assert recorder.calls == [cfg()] and outcome.lost <= 1


def test_ask_limit_bounds_the_loop(monkeypatch):
    # Only infeasible proposals, rescues included: the ask limit (50 x budget)
    # ends it before the (larger) patience does. (No check allowed to the walk
    # of the product, which would find the space empty at once.)
    monkeypatch.setattr("tuner.families.base.MAX_ENUMERATED", 0)
    monkeypatch.setattr("tuner.search.samplers.feasible_draws.CHECKS_PER_ASK", 0)
    recorder = Recorder()
    domains = {"unroll": [8], "vector_width": [4, 8]}
    outcome = study(recorder, domains=domains, budget_trials=1, sampler="random", patience=10_000)
    assert outcome.stop_reason == "ask_limit"
    assert recorder.calls == []
    assert outcome.lost == 50 and outcome.study.trials == []
    assert outcome.infeasible >= 50


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
    outcome = study(recorder, budget_trials=5, sampler="random", enqueue=[first, second])
    assert recorder.calls[:2] == [first, second]
    assert len(recorder.calls) == len(outcome.study.trials) == 5
    # Chosen by the sampler wrapper, not queued as WAITING trials.
    assert all("fixed_params" not in t.system_attrs for t in outcome.study.trials)


def test_partial_and_infeasible_enqueued_configurations():
    partial, infeasible = {"block_size": 64, "cache_hint": "cs"}, cfg(unroll=8, vector_width=8)
    recorder = Recorder()
    sampler = Proposals([cfg(), cfg(), cfg(block_size=128)])
    outcome = study(recorder, budget_trials=3, sampler=sampler, enqueue=[infeasible, partial, partial])
    # The infeasible one is passed over; the partial one is completed by the
    # sampler's proposal, once: its repeat matches the claimed configuration.
    assert recorder.calls == [cfg(block_size=64, cache_hint="cs"), cfg(), cfg(block_size=128)]
    assert outcome.infeasible == 1


def test_brute_force_finds_the_exact_optimum_and_stops_when_exhausted():
    recorder = Recorder()
    outcome = study(recorder, domains=SMALL, budget_trials=100, sampler="brute_force")
    assert outcome.stop_reason == "exhausted"
    assert len(recorder.calls) == outcome.measured == outcome.total_measured == SMALL_FEASIBLE
    # The feasible configurations in order, one trial each.
    assert recorder.calls == FAMILY.space(PROBLEM, SMALL)
    assert len(outcome.study.trials) == SMALL_FEASIBLE
    assert outcome.infeasible == 0
    assert {k: outcome.best[k] for k in FAMILY.param_names} == OPTIMUM_CFG
    assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS


def test_random_sampler_exhausts_a_small_space_without_measuring_twice():
    recorder = Recorder()
    outcome = study(recorder, domains=SMALL, budget_trials=None, sampler="random", seed=5)
    assert outcome.stop_reason == "exhausted"
    assert sorted(recorder.keys) == sorted(set(recorder.keys))
    assert len(recorder.calls) == len(outcome.study.trials) == SMALL_FEASIBLE
    assert outcome.duplicate > 0  # proposed again, passed over


# ---- resume and shared storage ---------------------------------------------------


@pytest.mark.parametrize("sampler", ["tpe", "ordinal_adaptive"])  # the default chooses its search from the budget
@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_resume_continues_to_the_budget_without_redoing_trials(tmp_path, kind, sampler):
    storage = f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else str(tmp_path / "study.jsonl")
    first = Recorder()
    a = study(first, storage=storage, study_name="resume", budget_trials=6, sampler=sampler, seed=0)
    assert (a.measured, a.total_measured, len(first.calls)) == (6, 6, 6)

    second = Recorder()
    b = study(second, storage=storage, study_name="resume", budget_trials=15, sampler=sampler, seed=0)
    assert len(second.calls) == 15 - 6
    assert b.measured == 9
    assert b.total_measured == 15
    assert len(set(first.keys + second.keys)) == 15  # nothing measured twice
    rows = study_rows(storage, "resume")
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


def test_a_rerun_at_a_larger_budget_in_one_process_uses_the_claims(tmp_path):
    storage = str(tmp_path / "study.jsonl")
    a = study(Recorder(), storage=storage, study_name="grow", budget_trials=3, sampler="random")
    b = study(Recorder(), storage=storage, study_name="grow", budget_trials=5, sampler="random", seed=1)
    assert (a.measured, b.measured, b.total_measured) == (3, 2, 5)
    claims = open_claims(b.storage, "grow").snapshot()
    assert {c.state for c in claims.values()} == {DONE}
    assert sorted(claims) == sorted(r["config_key"] for r in study_rows(b.storage, b.study.study_name))


# ---- device faults and interruptions -------------------------------------------


class Faulting(Recorder):
    """Raises FatalDeviceError on its ``at``-th call, with or without the row."""

    def __init__(self, at: int, with_row: bool):
        super().__init__()
        self.at, self.with_row = at, with_row

    def __call__(self, cfg):
        self.calls.append(dict(cfg))
        if len(self.calls) == self.at:
            row = {"status": "launch_error", "error": "an illegal memory access was encountered"} if self.with_row else None
            raise FatalDeviceError("CUDA context is lost", row=row)
        return measure(cfg)


@pytest.mark.parametrize("with_row", [True, False])
def test_a_device_fault_ends_the_worker_and_a_rerun_goes_on(tmp_path, with_row):
    storage = str(tmp_path / "study.jsonl")
    faulting = Faulting(at=3, with_row=with_row)
    with pytest.raises(FatalDeviceError, match="CUDA context is lost"):
        study(faulting, storage=storage, study_name="fault", budget_trials=6, sampler="brute_force")
    assert len(faulting.calls) == 3  # nothing measured after the fault
    faulty = faulting.calls[-1]
    shown = {t.user_attrs["config_key"]: t for t in optuna.load_study(study_name="fault", storage=open_storage(storage)).trials}
    claims = open_claims(storage, "fault").snapshot()
    if with_row:
        # The configuration that poisoned the context is measured: a launch error.
        trial = shown[config_key(faulty)]
        assert trial.state == TrialState.FAIL
        assert trial.user_attrs["reason"] == "launch_error: an illegal memory access was encountered"
        assert trial.user_attrs["status"] == "launch_error"
        assert len(claims) == len(shown) == 3 and config_key(faulty) in claims
    else:
        # No culprit: nothing is recorded, the configuration is free again.
        assert len(claims) == len(shown) == 2 and config_key(faulty) not in claims | shown
    assert {c.state for c in claims.values()} == {DONE}

    rerun = Recorder()
    outcome = study(rerun, storage=storage, study_name="fault", budget_trials=6, sampler="brute_force")
    assert outcome.stop_reason == "budget" and outcome.total_measured == 6
    assert (rerun.calls[0] == faulty) is not with_row  # retried first (brute force order) only without a row
    rows = study_rows(outcome.storage, outcome.study.study_name)
    assert len(rows) == len({r["config_key"] for r in rows}) == 6
    assert [r["status"] for r in rows].count("launch_error") == with_row
    assert sorted(t.user_attrs["config_key"] for t in outcome.study.trials) == sorted(r["config_key"] for r in rows)


def test_an_interrupted_measurement_is_released_and_measured_again(tmp_path):
    storage = str(tmp_path / "study.jsonl")
    seen = []

    def interrupt(c):
        seen.append(config_key(c))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        study(interrupt, storage=storage, study_name="stop", budget_trials=2, sampler="brute_force")
    # Both claims (the one measured and the one asked ahead) are released; the dashboard shows nothing.
    assert open_claims(storage, "stop").snapshot() == {}
    assert optuna.load_study(study_name="stop", storage=open_storage(storage)).trials == []
    rerun = Recorder()
    study(rerun, storage=storage, study_name="stop", budget_trials=2, sampler="brute_force")
    assert rerun.keys[0] == seen[0]


def test_the_dashboard_shows_finished_trials_only_while_the_study_runs(tmp_path):
    storage = str(tmp_path / "study.jsonl")
    seen = []

    def measure_watching(c):
        # What optuna-dashboard reads now, from another connection.
        trials = optuna.load_study(study_name="live", storage=open_storage(storage)).get_trials(deepcopy=False)
        seen.append(([t.state for t in trials], [t.user_attrs["config_key"] for t in trials]))
        return measure(c)

    recorder = Recorder(inner=measure_watching)
    study(recorder, storage=storage, study_name="live", budget_trials=6, sampler="random")
    for number, (states, keys) in enumerate(seen):
        assert set(states) <= {TrialState.COMPLETE, TrialState.FAIL}
        assert keys == recorder.keys[:number]  # those measured before, each once; not the one being measured


def test_a_resumed_study_reseeds_its_sampler_past_its_claims(tmp_path, monkeypatch):
    import tuner.search.study.run as study_module

    seeds, real = [], study_module.make_sampler
    monkeypatch.setattr(study_module, "make_sampler", lambda name, seed, *a: seeds.append(seed) or real(name, seed, *a))
    storage = str(tmp_path / "study.jsonl")
    study(measure, storage=storage, study_name="seeded", budget_trials=3, sampler="random", seed=10)
    study(measure, storage=storage, study_name="seeded", budget_trials=5, sampler="random", seed=10)
    assert seeds == [10, 13]  # one sampler a run: seeded past 0, then past 3 claims


def dead_worker_left(storage: str, name: str, shown: bool) -> tuple[dict, dict, dict]:
    """A worker of this host, now gone, that left one configuration claimed
    and one measured (its trial on the dashboard where ``shown``), not done."""
    store = open_storage(storage)
    dashboard = optuna.create_study(storage=store, study_name=name, direction="maximize")
    claims = open_claims(store, name)
    ghost = this_host_dead_owner()
    claimed, measured = cfg(block_size=64), cfg(block_size=128)
    for number, c in enumerate((claimed, measured)):
        assert claims.claim(config_key(c), None, ghost, "ghost", None) == "ok"
        assert claims.numbered(config_key(c)) == number
    row = dict(measure(measured), config_key=config_key(measured), trial=1, **measured)
    assert claims.record(config_key(measured), ghost, json.dumps(row), {"rescue": "random"})
    if shown:
        dashboard.add_trial(optuna.trial.create_trial(params=measured, distributions=DISTS, value=row["bandwidth_gbs"],
                                                      user_attrs={"config_key": config_key(measured)}))  # fmt: skip
    return claimed, measured, row


@pytest.mark.parametrize("shown", [False, True])
def test_claims_left_by_a_dead_worker_are_settled_and_shown_once(tmp_path, shown):
    # The claimed configuration is freed; the measured one is not measured
    # again, and its trial is on the dashboard once, whether or not the dead
    # worker got to add it there.
    storage = str(tmp_path / "study.jsonl")
    claimed, measured, row = dead_worker_left(storage, "dead", shown)
    recorder = Recorder()
    outcome = study(recorder, storage=storage, study_name="dead", budget_trials=4, sampler="random")
    assert outcome.recovered == 2 and outcome.measured == 3 and outcome.total_measured == 4
    assert measured not in recorder.calls
    trials = [t for t in outcome.study.trials if t.user_attrs["config_key"] == config_key(measured)]
    assert len(trials) == 1 and len(outcome.study.trials) == 4
    (trial,) = trials
    assert trial.state == TrialState.COMPLETE and trial.value == row["bandwidth_gbs"]
    if not shown:  # written from the claim: its number, the row's status, the measuring worker, its marks
        assert trial.user_attrs == {"config_key": config_key(measured), "trial": 1, "status": row["status"], "worker": "ghost",
                                    "rescue": "random"}  # fmt: skip
    rows = study_rows(outcome.storage, outcome.study.study_name)
    assert len(rows) == 4 and [r for r in rows if r["trial"] == 1] == [row]
    assert all(t.state.is_finished() for t in outcome.study.trials)


def this_host_dead_owner() -> str:
    import subprocess

    from tuner.search.study.owners import this_owner

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    host = this_owner().rsplit(":", 2)[0]
    return f"{host}:{process.pid}:1"


# ---- storage problems ------------------------------------------------------------


def test_storage_problem_accepts_what_works(tmp_path):
    assert storage_problem(str(tmp_path / "new" / "study.jsonl"), 4) is None
    assert storage_problem(str(tmp_path / "study.log"), 1) is None
    assert storage_problem(f"sqlite:///{tmp_path / 'new' / 'study.db'}", 4) is None
    assert storage_problem("sqlite:///:memory:", 1) is None
    assert storage_problem(None, 1) is None
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize(
    "spec, workers, message",
    [
        ("study.txt", 1, r"storage must be an Optuna URL .* got 'study.txt'"),
        ("nosuchdb://host/db", 1, r"names the database 'nosuchdb', which SQLAlchemy does not know"),
        ("postgresql://user:secret@host:notaport/db", 1, r"malformed"),
        ("sqlite:///:memory:", 2, r"in-memory SQLite database, which 2 worker processes cannot share"),
        (None, 2, r"in-memory storage cannot be shared by 2 worker processes"),
        ("FILE/study.jsonl", 1, r"folder of journal file '.*FILE/study.jsonl' cannot be created: '.*FILE' is a file"),
        ("sqlite:///FILE/sub/study.db", 2, r"cannot be created: '.*FILE' is a file"),
        ("DIR.jsonl", 1, r"journal file '.*DIR.jsonl' is a folder"),
        ("sqlite:///DIR.db", 1, r"SQLite database '.*DIR.db' is a folder"),
    ],
)
def test_storage_problem_explains_what_cannot_work(tmp_path, spec, workers, message):
    (tmp_path / "FILE").write_text("")
    (tmp_path / "DIR.jsonl").mkdir()
    (tmp_path / "DIR.db").mkdir()
    if spec is not None:
        spec = spec.replace("FILE", str(tmp_path / "FILE")).replace("DIR", str(tmp_path / "DIR"))
    problem = storage_problem(spec, workers)
    assert problem is not None and "\n" not in problem
    assert re.search(message, problem), problem
    assert "secret" not in problem


def test_storage_problem_names_a_missing_driver(monkeypatch):
    import sqlalchemy.dialects.postgresql.psycopg2 as pg

    def missing():
        raise ModuleNotFoundError("No module named 'psycopg2'", name="psycopg2")

    monkeypatch.setattr(pg.PGDialect_psycopg2, "import_dbapi", classmethod(lambda cls: missing()))
    problem = storage_problem("postgresql://tuner:secret@db.example/tuning", 4)
    assert problem == (
        "storage URL postgresql://tuner:***@db.example/tuning needs the database driver 'psycopg2', "
        "which is not installed (pip install psycopg2-binary)"
    )


@pytest.mark.parametrize("ask_ahead", [True, False])
def test_the_outcome_says_what_the_asks_cost_and_how_long_measuring_waited(ask_ahead):
    def slow(cfg):
        time.sleep(0.002)
        return measure(cfg)

    outcome = run_study(StudyOptions.for_strategy("ordinal", family=FAMILY, problem=PROBLEM, domains=None, storage=None,
                                                  study_name="s", measure=slow, budget_trials=12, timeout_s=None, seed=0,
                                                  ask_ahead=ask_ahead))  # fmt: skip
    assert outcome.asks == len(outcome.rows) == 12  # every ask measured one configuration
    assert 0 < outcome.asks_cpu_s <= outcome.asks_s + 1e-3  # a thread's CPU time within its wall time
    assert outcome.ask_waits_s >= 0 if ask_ahead else outcome.ask_waits_s == 0  # only an ask made ahead is waited for
    line = outcome.ask_summary()
    assert line.startswith("asks: 12, ") and "ms CPU" in line and "waited" in line


def test_the_schema_and_the_readme_name_the_registered_strategies():
    """The registry is the one list of strategies: the schema's enum is filled from it as the
    schema is read, and the README names the default and the command that lists the rest."""
    import re
    from pathlib import Path

    import yaml

    from tuner.settings.parse import config_schema

    root = Path(__file__).resolve().parent.parent
    shipped = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    schema = config_schema()

    def samplers(node):
        if isinstance(node, dict):
            if isinstance(node.get("sampler"), dict):
                yield node["sampler"]
            for value in node.values():
                yield from samplers(value)
        elif isinstance(node, list):
            for value in node:
                yield from samplers(value)

    # The file holds no list to keep in step; the schema as read holds the registry's.
    assert [s for s in samplers(shipped) if "enum" in s] == []
    read = list(samplers(schema))
    assert read and all(s["enum"] == list(SAMPLERS) for s in read)
    # One default: the schema says it, and the settings, the library call and the study options take it.
    import inspect

    from tuner import api
    from tuner.search.samplers.registry import DEFAULT_STRATEGY, STRATEGIES, listing

    assert all(f"default: {DEFAULT_STRATEGY}" in s.get("description", "") for s in read), read
    assert inspect.signature(api.tune).parameters["sampler"].default == DEFAULT_STRATEGY
    assert inspect.signature(StudyOptions.for_strategy).parameters["strategy"].default == DEFAULT_STRATEGY
    readme = " ".join((root / "README.md").read_text().split())
    sentence = re.search(r"`studies` are Optuna searches \(sampler (.*?), a seed", readme)
    assert sentence, "README.md must say where the study samplers are listed where it describes studies"
    named = re.findall(r"`(\w+)`", sentence.group(1))
    assert named == [DEFAULT_STRATEGY] and "`python -m tuner.search.samplers.registry`" in sentence.group(1)
    # The listing it points to: every strategy, one line each.
    assert [line.split()[0] for line in listing()] == list(STRATEGIES)


def test_the_search_loop_chooses_with_one_blas_thread_and_gives_the_setting_back():
    # On a 64-core host, numpy's default of one BLAS thread per core made each ask of the
    # project's sampler six times slower (its small fits woke 64 threads every time).
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    if not blas_threads():
        pytest.skip("numpy loaded no BLAS that threadpoolctl can see")
    seen_in_asks: list[set[int]] = []

    class Watching(Proposals):
        def sample_relative(self, study, trial, search_space):
            seen_in_asks.append(blas_threads())
            return super().sample_relative(study, trial, search_space)

    with threadpool_limits(limits=3, user_api="blas"):  # as a host of several cores would have
        configs = [cfg(), cfg(unroll=2), cfg(block_size=128), cfg(vector_width=2)]
        outcome = study(measure, budget_trials=4, sampler=Watching(configs))
        assert blas_threads() == {3}  # given back after the study
    assert outcome.measured == 4
    assert len(seen_in_asks) >= 4 and all(seen == {1} for seen in seen_in_asks)  # the ask thread's asks too
