"""The switch between two searches at a trial number (tuner.search.samplers.switch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
import pytest

from tuner.data.results import config_key
from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.samplers.registry import make_sampler
from tuner.search.samplers.switch import SMALL_BUDGET, SMALL_SHARE, BudgetSwitch, SwitchSampler, is_small_budget
from tuner.search.study.run import StudyOptions, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

FAMILY = FakeFamily()


class Fixed(optuna.samplers.BaseSampler):
    """Proposes its configurations in turn, one per ask, and counts its asks."""

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


def _feasible(count: int) -> list[dict]:
    return FAMILY.space(PROBLEM)[:count]


def _study(sampler, budget: int, seed: int = 0) -> list[str]:
    # Strictly ask, measure, tell: a trial asked ahead in a thread would race the instant look-up it should
    # follow, and two studies of one seed could differ by the threads' timing.
    fields = dict(family=FAMILY, problem=PROBLEM, domains=None, storage=None, study_name="switch", measure=measure,
                  budget_trials=budget, timeout_s=None, seed=seed, ask_ahead=False)  # fmt: skip
    options = StudyOptions.for_strategy(sampler, **fields) if isinstance(sampler, str) else StudyOptions(sampler=sampler, **fields)
    outcome = run_study(options)
    return [config_key(t.params) for t in sorted(outcome.study.trials, key=lambda t: t.number)]


def test_the_early_sampler_proposes_the_trials_before_the_switch_and_the_late_one_the_rest():
    space = _feasible(10)
    early, late = Fixed(space[:5]), Fixed(space[5:])
    keys = _study(SwitchSampler(early, late, switch_at=3), budget=6)
    assert keys == [config_key(c) for c in space[:3] + space[5:8]]


def test_ordinal_switch_is_ordinal_until_the_switch_and_goes_on_from_its_history():
    switched = _study(SwitchSampler(make_sampler("ordinal", 4), make_sampler("ordinal_global", 4), switch_at=12), budget=30, seed=4)
    ordinal = _study(make_sampler("ordinal", 4), budget=30, seed=4)
    assert switched[:12] == ordinal[:12]
    assert len(set(switched)) == 30  # the late search passes over what the early one measured
    assert isinstance(make_sampler("ordinal_switch", 0), SwitchSampler)


def test_both_searches_learn_the_space_from_the_study():
    early, late = OrdinalSampler(seed=1), OrdinalSampler(seed=1)
    _study(SwitchSampler(early, late, switch_at=2), budget=4)
    assert early._dists is not None and late._dists is not None  # each was bound to the space


def test_a_negative_switch_is_refused():
    with pytest.raises(ValueError, match="switch_at must be >= 0, got -1"):
        SwitchSampler(OrdinalSampler(), OrdinalSampler(), switch_at=-1)


def test_the_relays_late_search_begins_its_start_phase_at_the_switch():
    from tuner.search.samplers.ordinal import START_PHASE

    relay = make_sampler("ordinal_relay", 2)
    assert isinstance(relay, SwitchSampler) and relay.late.phase_from == relay.switch_at > 0
    relay.switch_at = relay.late.phase_from = 12  # a short study reaches the switch
    keys = _study(relay, budget=20, seed=2)
    assert len(set(keys)) == 20
    before = sum(measure(json.loads(key))["status"] == "ok" for key in keys[:12])
    # Counted from the study's start, ordinal_global's start phase would already be over at the switch.
    assert relay.late._climbs.state["until"] == before + START_PHASE
    assert relay.early.landmarks[0] == "last" and relay.early.global_phase == 0


def test_a_negative_phase_start_is_refused():
    with pytest.raises(ValueError, match="phase_from must be >= 0, got -1"):
        OrdinalSampler(phase_from=-1)


@pytest.mark.parametrize(
    ("budget", "space", "small"),
    [(50, 5000, True), (75, 3751, True), (75, 3750, False), (76, 10**6, False), (100, 10**6, False), (50, None, True),
     (None, 10**6, False)],
)
def test_a_budget_is_small_at_most_75_trials_and_under_2_percent_of_the_space(budget, space, small):
    assert is_small_budget(budget, space) is small


@pytest.mark.parametrize(("strategy", "on_small"), [("ordinal_budget", "ordinal")])
def test_a_budget_switch_runs_its_small_search_on_a_small_budget_and_ordinal_global_otherwise(strategy, on_small):
    space = len(FAMILY.space(PROBLEM))
    small = max(1, int(SMALL_SHARE * space) - 1)  # under 2 % of the fake space
    assert is_small_budget(small, space) and not is_small_budget(small + 30, space)
    assert _study(strategy, budget=small, seed=3) == _study(on_small, budget=small, seed=3)
    large = small + 30
    assert _study(strategy, budget=large, seed=3) == _study("ordinal_global", budget=large, seed=3)
    # The two differ on these budgets, or the test could not tell which ran.
    assert _study(on_small, budget=small, seed=3) != _study("ordinal_global", budget=small, seed=3)
    assert _study(on_small, budget=large, seed=3) != _study("ordinal_global", budget=large, seed=3)


def test_the_default_climbs_from_the_starts_best_on_a_small_budget_and_from_the_centre_otherwise():
    from tuner.search.samplers.registry import DEFAULT_STRATEGY, STRATEGIES

    assert DEFAULT_STRATEGY == "ordinal_adaptive" and STRATEGIES[DEFAULT_STRATEGY].sees_budget
    for budget, space, climb_from in ((50, 4362, "best"), (75, 6768, "best"), (100, 6768, "centre"), (180, 7200, "centre"),
                                      (154, 1536, "centre"), (None, 7200, "centre")):  # fmt: skip  (154: the shipped study's budget)
        sampler = make_sampler(DEFAULT_STRATEGY, 0)
        sampler.plan(budget, space)
        chosen = sampler._last  # the one sampler that proposes every trial of the study
        assert chosen is (sampler.early if climb_from == "best" else sampler.late) and chosen.climb_from == climb_from
        assert (chosen.start_phase, chosen.global_phase, chosen.landmarks) == (80, 30, ("last",))
    # The branch a large budget takes runs as ordinal_global does, trial for trial.
    space = len(FAMILY.space(PROBLEM))
    large = int(SMALL_SHARE * space) + 30
    assert _study(DEFAULT_STRATEGY, budget=large, seed=3) == _study("ordinal_global", budget=large, seed=3)


def test_unplanned_ordinal_budget_runs_ordinal_global():
    sampler = make_sampler("ordinal_budget", 0)
    assert isinstance(sampler, BudgetSwitch) and not sampler.chose_small
    sampler.plan(10, 10**4)
    assert sampler.chose_small and sampler._for(optuna.trial.create_trial(value=1.0)) is sampler.early


def test_only_the_sampler_ordinal_budget_chose_learns_the_space():
    # 40 trials are not small beside the fake space's 156 configurations (ordinal_global), 2 are (ordinal).
    for budget, learns, idle in ((40, "late", "early"), (2, "early", "late")):
        sampler = make_sampler("ordinal_budget", 0)
        _study(sampler, budget=budget)
        assert sampler.chose_small is (learns == "early")
        assert getattr(sampler, learns)._dists is not None and getattr(sampler, idle)._dists is None


def test_the_registry_says_the_budget_switches_bound():
    from tuner.search.samplers.registry import STRATEGIES

    for name in ("ordinal_adaptive", "ordinal_budget"):
        assert f"at most {SMALL_BUDGET} trials and under {SMALL_SHARE:.0%} of the space" in STRATEGIES[name].summary.replace(" %", "%")
