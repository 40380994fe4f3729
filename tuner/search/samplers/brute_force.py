"""The ``brute_force`` strategy: every feasible configuration, in order."""

from __future__ import annotations

import optuna

from tuner.search.samplers.registry import Prior


class BruteForceWithoutStop(optuna.samplers.BruteForceSampler):
    """BruteForceSampler that does not call ``study.stop()``.

    The stock sampler stops the study from ``after_trial`` once the grid is
    exhausted, which raises outside ``study.optimize``; the ask/tell loop
    detects exhaustion itself (of the feasible space, which is what matters).
    """

    def after_trial(self, study, trial, state, values) -> None:
        pass


def make(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    """The strategy's sampler (``registry.Strategy.make``)."""
    return BruteForceWithoutStop(seed=seed)
