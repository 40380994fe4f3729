"""``SwitchSampler``: one search for a study's first measurements, another after.

A search that is best at a few dozen measurements is not always the one that
gets closest to the optimum by a few hundred: ``ordinal``'s climbs from the
grid's centre and corners get near fast kernels soonest on spaces unlike those
the default was shaped on, while ``ordinal_global``'s Parzen phases, restarts and
slice sweeps reach the optimum itself more often. ``ordinal_switch`` runs the
first up to ``SWITCH_AT`` measurements and the second from there, on the same
history: both read everything they need from the study's trials
(``tuner.search.samplers.ordinal``), so the second goes on from the first's best as if
its own start had found it.

The switch is by trial number, which every worker of a study shares, so several
workers switch together and a resumed study switches where it left off.

``ordinal_budget`` chooses between the two once, from the study's budget, before
its first trial: ``ordinal`` where the budget is a few dozen measurements in a
space many times larger, ``ordinal_global`` everywhere else (``BudgetSwitch``).
The default, ``ordinal_adaptive``, chooses the same way between ``ordinal_best``
and ``ordinal_global``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.search.samplers.feasible_draws import FeasibleDraws
from tuner.search.samplers.space_aware import Foreseeing, SpaceAware

# Trials of the early search before the late one takes over (strategy ordinal_switch).
SWITCH_AT = 100
# The budget switches' rule: the small search where the budget is at most SMALL_BUDGET trials and
# under SMALL_SHARE of the space; ordinal_global's climb from the centre, which reaches a second
# basin, pays with more trials, and on a small space, whose centre lies near everything (the
# transpose example's 96 configurations). The bound is chosen per budget on held-out tables
# (docs/search.md): with each table left out, the others choose ordinal_best for most tables up
# to 70 trials and ordinal_global from 80 on; it lies between.
SMALL_BUDGET = 75
SMALL_SHARE = 0.02


class SwitchSampler(optuna.samplers.BaseSampler):
    """``early`` proposes trials numbered below ``switch_at``, ``late`` the rest.

    Args:
        early: the sampler of the first ``switch_at`` trials.
        late: the sampler from trial ``switch_at`` on; it sees the early
            trials as part of the study's history.
        switch_at: the first trial number ``late`` proposes (>= 0).

    What ``DistinctSampler`` tells a space-aware sampler (``bind``, ``taken``)
    reaches both, so that either can propose at any trial.
    """

    def __init__(self, early: optuna.samplers.BaseSampler, late: optuna.samplers.BaseSampler, switch_at: int = SWITCH_AT) -> None:
        if switch_at < 0:
            raise ValueError(f"switch_at must be >= 0, got {switch_at}")
        self.early, self.late, self.switch_at = early, late, switch_at
        self._last: optuna.samplers.BaseSampler = early if switch_at > 0 else late

    def _for(self, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        self._last = self.early if trial.number < self.switch_at else self.late
        return self._last

    # What DistinctSampler tells a space-aware sampler (tuner.search.samplers.SpaceAware).

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Mapping[str, dict] | None, draws: FeasibleDraws | None = None) -> None:  # fmt: skip
        """The searched space, handed to each sampler that takes it."""
        for sampler in (self.early, self.late):
            if isinstance(sampler, SpaceAware):
                sampler.bind(dists, feasible, enumerated, draws)

    def taken(self, keys: set[str]) -> None:
        """The study's claimed configurations, handed to each sampler that takes them."""
        for sampler in (self.early, self.late):
            if isinstance(sampler, SpaceAware):
                sampler.taken(keys)

    def upcoming(self) -> list[dict]:
        """The likely next proposals of the sampler that proposed last ([] where it cannot tell)."""
        return self._last.upcoming() if isinstance(self._last, Foreseeing) else []

    # Optuna's sampler interface.

    def reseed_rng(self) -> None:
        self.early.reseed_rng()
        self.late.reseed_rng()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._for(trial).before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._for(trial).after_trial(study, trial, state, values)


def ordinal_switch(seed: int, prior: Sequence[tuple[Mapping, float]] = (), switch_at: int = SWITCH_AT) -> SwitchSampler:
    """``ordinal`` for the first ``switch_at`` trials, ``ordinal_global`` after
    (both seeded with ``seed``, both learning from a warm start's ``prior``)."""
    from tuner.search.samplers.registry import make_sampler

    return SwitchSampler(make_sampler("ordinal", seed, prior), make_sampler("ordinal_global", seed, prior), switch_at)


def ordinal_relay(seed: int, prior: Sequence[tuple[Mapping, float]] = (), switch_at: int = SWITCH_AT) -> SwitchSampler:
    """``ordinal`` starting from the grid's far corner for the first
    ``switch_at`` trials, then ``ordinal_global`` with its start phase begun at
    the switch (``OrdinalSampler``'s ``phase_from``): its Parzen draws and
    centre climb then run over the early search's history instead of never
    (its start phase counts from the study's first measurement, and ends
    before ``switch_at``). Both seeded with ``seed`` and learning from a warm
    start's ``prior``."""
    from tuner.search.samplers.ordinal import OrdinalSampler, make_global

    # The far corner first, then the centre and the near corner among the far-apart candidates: a failed or
    # slow centre as the first measurement (the A6000's convolution table) costs an anytime score most.
    early = OrdinalSampler(seed=seed, prior=prior, landmarks=("last", "centre", "first"))
    return SwitchSampler(early, make_global(seed, prior, phase_from=switch_at), switch_at)


class BudgetSwitch(SwitchSampler):
    """``small`` for the whole study where its budget is small beside its space
    (``is_small_budget``), ``large`` otherwise, chosen once in ``plan``
    (``tuner.search.samplers.space_aware.BudgetAware``), which the study's
    ``DistinctSampler`` calls before the first trial. Unplanned (no study told
    it a budget), it runs ``large``. Every worker of a study, and a resumed
    study, is told the same budget and space, so all choose alike."""

    def __init__(self, small: optuna.samplers.BaseSampler, large: optuna.samplers.BaseSampler) -> None:
        super().__init__(small, large, switch_at=0)
        self.chose_small = False

    def plan(self, budget: int | None, space: int | None) -> None:
        self.chose_small = is_small_budget(budget, space)
        # By trial number, as SwitchSampler switches: never, or from the first trial.
        self.switch_at = sys.maxsize if self.chose_small else 0
        self._last = self.early if self.chose_small else self.late

    # Only the chosen sampler proposes, so only it learns the space (a million-point space's keys are
    # most of a study's setup) and the claims.

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Mapping[str, dict] | None, draws: FeasibleDraws | None = None) -> None:  # fmt: skip
        if isinstance(self._last, SpaceAware):
            self._last.bind(dists, feasible, enumerated, draws)

    def taken(self, keys: set[str]) -> None:
        if isinstance(self._last, SpaceAware):
            self._last.taken(keys)


def is_small_budget(budget: int | None, space: int | None) -> bool:
    """Whether ``budget`` trials are few for a space of ``space`` feasible
    configurations (None: more than can be enumerated): at most
    ``SMALL_BUDGET`` and under ``SMALL_SHARE`` of the space. No budget (a
    study bounded by time alone) is not small."""
    if budget is None:
        return False
    return budget <= SMALL_BUDGET and (space is None or budget < SMALL_SHARE * space)


def ordinal_budget(seed: int, prior: Sequence[tuple[Mapping, float]] = ()) -> BudgetSwitch:
    """``ordinal`` for a study whose budget is small beside its space, else
    ``ordinal_global`` (``BudgetSwitch``); both seeded with ``seed`` and
    learning from a warm start's ``prior``."""
    return _budget_switch("ordinal", seed, prior)


def ordinal_adaptive(seed: int, prior: Sequence[tuple[Mapping, float]] = ()) -> BudgetSwitch:
    """``ordinal_best`` for a study whose budget is small beside its space, else
    ``ordinal_global`` (``BudgetSwitch``); both seeded with ``seed`` and
    learning from a warm start's ``prior``. With a few dozen trials the start
    climb pays soonest from the start's best; with more, from the centre it
    also reaches a second basin (``docs/search.md``)."""
    return _budget_switch("ordinal_best", seed, prior)


def _budget_switch(small: str, seed: int, prior: Sequence[tuple[Mapping, float]]) -> BudgetSwitch:
    """The strategy ``small`` on a small budget, ``ordinal_global`` otherwise, made alike."""
    from tuner.search.samplers.registry import make_sampler

    return BudgetSwitch(make_sampler(small, seed, prior), make_sampler("ordinal_global", seed, prior))
