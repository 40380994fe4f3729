"""Searches that share one study: each trial is proposed by one of several
samplers, all of which read the same history (``Portfolio``), chosen by the
trial's number: in turn (``AlternatingSampler``, the ``ordinal_duet``
strategy) or before and after a switch (``tuner.search.samplers.switch``).

``ordinal`` and ``ordinal_global`` are each best on different spaces and at
different budgets: ``ordinal``'s climbs get near the fast kernels within a
few dozen measurements on smooth spaces (the reduction tables, dedispersion),
``ordinal_global``'s Parzen phases, value-pair model and slice sweeps find a
lone peak among interacting switches (the convolution tables) and the
optimum itself by a few hundred. Taking turns, each goes on from what the
other measured as if it had measured it: the climbs step from the Parzen
draws' finds, the Parzen model learns from the climbs. Neither needs the
budget, so a study that is stopped early or resumed keeps what it has.

The choice is by trial number, which every worker of a study shares, so
several workers (and a resumed study) agree on whose turn a trial is.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.search.samplers.feasible_draws import FeasibleDraws
from tuner.search.samplers.space_aware import Foreseeing, SpaceAware


class Portfolio(optuna.samplers.BaseSampler):
    """One of ``samplers`` proposes each trial (``_for``, by its number).

    What ``DistinctSampler`` tells a space-aware sampler (``bind``, ``taken``)
    reaches every one of them, so that each can propose at any trial.
    """

    def __init__(self, samplers: Sequence[optuna.samplers.BaseSampler]) -> None:
        if not samplers:
            raise ValueError("samplers must not be empty, got none")
        self.samplers = tuple(samplers)
        self._last_number = -1  # the last trial asked for

    def _proposer(self, number: int) -> optuna.samplers.BaseSampler:
        """The sampler that proposes trial ``number``."""
        raise NotImplementedError

    def _for(self, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        self._last_number = max(self._last_number, trial.number)
        return self._proposer(trial.number)

    # What DistinctSampler tells a space-aware sampler (tuner.search.samplers.SpaceAware).

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Mapping[str, dict] | None, draws: FeasibleDraws | None = None) -> None:  # fmt: skip
        """The searched space, handed to each sampler that takes it."""
        for sampler in self.samplers:
            if isinstance(sampler, SpaceAware):
                sampler.bind(dists, feasible, enumerated, draws)

    def taken(self, keys: set[str]) -> None:
        """The study's claimed configurations, handed to each sampler that takes them."""
        for sampler in self.samplers:
            if isinstance(sampler, SpaceAware):
                sampler.taken(keys)

    def upcoming(self) -> list[dict]:
        """The likely proposals of the sampler whose turn the next trial is ([] where it cannot tell)."""
        following = self._proposer(self._last_number + 1)
        return following.upcoming() if isinstance(following, Foreseeing) else []

    # Optuna's sampler interface.

    def reseed_rng(self) -> None:
        for sampler in self.samplers:
            sampler.reseed_rng()

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


class AlternatingSampler(Portfolio):
    """``samplers`` propose the trials in turn: trial ``n`` is
    ``samplers[n % len(samplers)]``'s."""

    def _proposer(self, number: int) -> optuna.samplers.BaseSampler:
        return self.samplers[number % len(self.samplers)]


def ordinal_duet(seed: int, prior: Sequence[tuple[Mapping, float]] = ()) -> AlternatingSampler:
    """``ordinal`` (from the far corner, as ``ordinal_global`` starts) and
    ``ordinal_global`` in turn, both seeded with ``seed`` and learning from a
    warm start's ``prior`` (``registry.Strategy.make``)."""
    from tuner.search.samplers.ordinal import OrdinalSampler, make_global

    # The first trial is the climbing search's: the grid's far corner. ``ordinal``'s own first points,
    # the centre and the near corner, are slow more often than not on large spaces (a failed centre and
    # a slow corner first cost the A6000's convolution table most of its anytime score).
    climbs = OrdinalSampler(seed=seed, prior=prior, landmarks=("last",), landmarks_first=True)
    return AlternatingSampler([climbs, make_global(seed, prior)])
