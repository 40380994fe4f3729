"""Searches that take turns on one study (tuner.search.samplers.portfolio)."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from tuner.data.results import config_key
from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.samplers.portfolio import AlternatingSampler
from tuner.search.samplers.registry import make_sampler
from tuner.search.study.run import StudyOptions, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

FAMILY = FakeFamily()


class Fixed(optuna.samplers.BaseSampler):
    """Proposes its configurations in turn, one per ask."""

    def __init__(self, configs: list[dict]):
        self.configs, self.asks = configs, 0

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        cfg = self.configs[min(self.asks, len(self.configs) - 1)]
        if param_name == list(cfg)[-1]:
            self.asks += 1
        return cfg[param_name]


def _study(sampler, budget: int, seed: int = 0) -> list[str]:
    outcome = run_study(StudyOptions(sampler=sampler, family=FAMILY, problem=PROBLEM, domains=None, storage=None, study_name="turns",
                                     measure=measure, budget_trials=budget, timeout_s=None, seed=seed))  # fmt: skip
    return [config_key(t.params) for t in sorted(outcome.study.trials, key=lambda t: t.number)]


def test_the_samplers_propose_the_trials_in_turn():
    space = FAMILY.space(PROBLEM)[:9]
    first, second, third = Fixed(space[:3]), Fixed(space[3:6]), Fixed(space[6:])
    keys = _study(AlternatingSampler([first, second, third]), budget=7)
    assert keys == [config_key(c) for c in (space[0], space[3], space[6], space[1], space[4], space[7], space[2])]


def test_the_duet_takes_turns_on_one_history_and_each_search_passes_over_the_others_measurements():
    duet = make_sampler("ordinal_duet", 3)
    assert isinstance(duet, AlternatingSampler) and all(isinstance(s, OrdinalSampler) for s in duet.samplers)
    climbs, parzen = duet.samplers
    assert climbs.global_phase == 0 and parzen.global_phase > 0  # ordinal's climbs beside ordinal_global
    keys = _study(duet, budget=24, seed=3)
    assert len(set(keys)) == 24
    assert set(climbs._asked) == set(range(0, 24, 2)) and set(parzen._asked) == set(range(1, 24, 2))
    # What a study compiles ahead is the likely proposal of the search whose turn is next.
    assert duet.upcoming() == climbs.upcoming()


def test_an_empty_portfolio_is_refused():
    with pytest.raises(ValueError, match="samplers must not be empty"):
        AlternatingSampler([])
