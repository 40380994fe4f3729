"""What a sampler may implement so that the study's ``DistinctSampler``
(``tuner.search.study.distinct``) hands it the searched space and the claimed
configurations (``SpaceAware``), tells it the study's budget
(``BudgetAware``), and asks it what it would propose next (``Foreseeing``)."""

from __future__ import annotations

from typing import Callable, Mapping, Protocol, runtime_checkable

from optuna.distributions import CategoricalDistribution

from tuner.search.samplers.feasible_draws import FeasibleDraws


@runtime_checkable
class SpaceAware(Protocol):
    """What a sampler implements to search the space as ``DistinctSampler``
    enumerates it and to pass over claimed configurations itself
    (``OrdinalSampler`` does). ``DistinctSampler`` calls ``bind`` once, as it
    wraps the sampler, and ``taken`` before each of its proposals."""

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Mapping[str, dict] | None, draws: FeasibleDraws | None = None) -> None:  # fmt: skip
        """The searched space: its distributions, a feasibility test and,
        where the space is small enough (``MAX_ENUMERATED``), every feasible
        configuration by its ``config_key`` (worked out once: on a space of
        10^6 points the keys are most of a study's setup); None where it is
        not enumerated, and then ``draws`` of its feasible configurations
        (which find those of a sparse product)."""

    def taken(self, keys: set[str]) -> None:
        """The ``config_key`` of every configuration claimed in the study
        (by any worker) now: not to be proposed."""


@runtime_checkable
class Foreseeing(Protocol):
    """What a sampler implements to say what it would likely propose next
    (``OrdinalSampler`` does): a study compiles those modules ahead while it
    measures. ``DistinctSampler`` asks it after each of its proposals is claimed."""

    def upcoming(self) -> list[dict]:
        """Whole configurations this sampler would likely propose next, best
        first (its last proposal's runners-up); [] where it cannot tell."""


@runtime_checkable
class BudgetAware(Protocol):
    """What a sampler implements to plan its search for the study's budget
    (``ordinal_budget`` does). ``DistinctSampler`` calls ``plan`` once, as it
    wraps the sampler and before ``bind``. Such a sampler's first trials depend
    on the budget, so a replay runs it once per budget instead of cutting one
    long run (``Strategy.sees_budget``)."""

    def plan(self, budget: int | None, space: int | None) -> None:
        """``budget``: the distinct configurations the study will measure
        (None: no limit); ``space``: its feasible configurations (None: too
        many to enumerate, ``MAX_ENUMERATED``)."""
