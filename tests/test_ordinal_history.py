"""The default sampler reads a study's history incrementally between asks
(the finished prefix, the climb, the model's sums): each read must equal
reading the whole history again, also when trials finish out of order, as
they do when several workers share a study."""

from __future__ import annotations

import json
import random

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tuner.data.results import config_key
from tuner.search.samplers.ordinal import PROGRESS, OrdinalSampler
from tuner.search.samplers.ordinal_grid import one_hot_sums
from tuner.search.samplers.ordinal_history import RunningRead, climb_read, sums_read

DISTS = {
    "a": CategoricalDistribution([1, 2, 4, 8]),
    "b": CategoricalDistribution([16, 32, 64]),
    "c": CategoricalDistribution(["x", "y"]),
}


def whole_history(study: optuna.Study, number: int) -> tuple[dict, set]:
    """What the sampler's history is: every trial but ``number`` read afresh."""
    measured, visited = {}, set()
    for trial in study.get_trials(deepcopy=False):
        if trial.number == number or not trial.params:
            continue
        cfg = dict(trial.params)
        visited.add(config_key(cfg))
        if trial.state == TrialState.COMPLETE and trial.value > 0:
            measured[config_key(cfg)] = (cfg, float(trial.value))
    return measured, visited


def whole_climb(measured: dict, patience: int) -> int:
    start, best, since = 0, 0.0, 0
    for i, (_, value) in enumerate(measured.values()):
        best, since = (value, 0) if value > best * (1 + PROGRESS) else (best, since + 1)
        if since >= patience:
            start, best, since = i + 1, 0.0, 0
    return start


def test_history_read_between_asks_equals_a_whole_read_with_trials_finishing_out_of_order():
    rng = random.Random(3)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
    sampler = OrdinalSampler(seed=0)
    sampler.bind(DISTS, lambda cfg: True, None)
    running = []
    for _ in range(40):
        # A few trials run at once (several workers); one of them, not always the oldest, finishes.
        running.append(study.ask(fixed_distributions=DISTS))
        if len(running) >= 3:
            done = running.pop(rng.randrange(len(running)))
            state = TrialState.FAIL if rng.random() < 0.15 else TrialState.COMPLETE
            study.tell(done, rng.uniform(10, 100) if state == TrialState.COMPLETE else None, state=state)
        asking = study.ask(fixed_distributions=DISTS)
        frozen = study._storage.get_trial(asking._trial_id)
        got = sampler._history(study, frozen)
        assert got == whole_history(study, asking.number)
        assert list(got[0]) == list(whole_history(study, asking.number)[0])  # in trial order
        study.tell(asking, state=TrialState.FAIL)
    assert sampler._base.length > 0  # the prefix was used, not only the whole read


@pytest.mark.parametrize("kept", [3, RunningRead.KEPT])  # 3: trials finish out of order beyond the kept states too
def test_climb_and_model_sums_folded_between_reads_equal_whole_reads_bit_for_bit(monkeypatch, kept):
    monkeypatch.setattr(RunningRead, "KEPT", kept)
    rng = random.Random(5)
    columns = {(name, value): i for i, (name, value) in enumerate((n, v) for n, d in DISTS.items() for v in d.choices)}

    def columns_of(key):
        cfg = json.loads(key)
        return np.array([columns[(name, cfg[name])] for name in DISTS])

    keys = [
        config_key({"a": a, "b": b, "c": c}) for a in DISTS["a"].choices for b in DISTS["b"].choices for c in DISTS["c"].choices
    ]
    climbs, sums = climb_read(4, PROGRESS), sums_read(len(columns), columns_of)
    history: list[tuple[str, float]] = []
    restarted = remeasured = 0
    for key in rng.sample(keys, len(keys)):
        value = rng.uniform(10, 100)
        if history and rng.random() < 0.2:
            history.insert(rng.randrange(len(history)), (key, value))  # a trial that finished out of order
            restarted += 1
        elif history and rng.random() < 0.1:
            history.append((rng.choice(history)[0], value))  # a configuration measured again: its first place, this value
            remeasured += 1
        else:
            history.append((key, value))
        measured = {k: ({}, v) for k, v in history}  # as the sampler's history holds them
        assert climbs.read(measured)["start"] == whole_climb(measured, 4)
        gram, moment, ones = sums.read(measured)
        rows = [(k, v) for k, (_, v) in measured.items()]
        want = one_hot_sums(np.array([columns_of(k) for k, _ in rows]), np.log([v for _, v in rows]), len(columns))
        for got, expected in zip((gram, moment, ones), want):
            assert np.array_equal(got, expected)
    assert restarted > 0 and remeasured > 0 and whole_climb({k: ({}, v) for k, v in history}, 4) > 0


def test_the_climb_read_tells_a_restart_that_follows_one_which_found_nothing():
    """A restart's climb that ends without beating the study's best at its start
    stalled; the first climb (from the study's start) is never judged so."""
    read = climb_read(patience=3, progress=PROGRESS, phase=2)
    values = [10.0, 11.0, 12.0, 11.0, 11.0, 11.0,  # the first climb: best 12, then 3 without progress
              5.0, 6.0, 7.0, 7.0, 7.0, 7.0,  # a restart (2 global-phase draws first): nothing above 12
              13.0, 9.0, 9.0, 9.0, 9.0,  # the next restart's beats 12
              12.9, 12.9, 12.9, 12.9, 12.9]  # the one after it finds nothing above 13 again  # fmt: skip
    measured, states = {}, []
    for i, value in enumerate(values):
        measured[f"k{i}"] = ({"i": i}, value)
        states.append(dict(read.read(measured)))
    starts = [(i + 1, s["stalled"], s["top_before"]) for i, s in enumerate(states) if s["start"] == i + 1]
    assert starts == [(6, False, 12.0), (12, True, 12.0), (17, False, 13.0), (22, True, 13.0)]
    assert states[-1]["top"] == 13.0


@pytest.mark.parametrize(("found", "stalled"), [(12.01, True), (12.03, False)])
def test_a_restart_gaining_less_than_the_noise_over_the_studys_best_found_nothing(found, stalled):
    read = climb_read(patience=3, progress=PROGRESS, phase=2)
    values = [10.0, 12.0, 11.0, 11.0, 11.0, 5.0, found, found, found, found, 1.0]  # restarts at 5 and at 10
    measured = {f"k{i}": ({"i": i}, value) for i, value in enumerate(values)}
    state = read.read(measured)
    assert state["start"] == 10 and state["stalled"] is stalled and state["top_before"] == found
