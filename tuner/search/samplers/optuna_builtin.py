"""Optuna's own samplers as strategies of the registry
(``tuner.search.samplers.registry``): one factory per strategy and number of
objectives, configured for this project's categorical spaces."""

from __future__ import annotations

import optuna

from tuner.search.samplers.registry import Prior


def tpe(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    # multivariate: parameters interact (unroll x vector_width);
    # constant_liar: concurrent workers do not all propose the same point.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


def gp(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    return optuna.samplers.GPSampler(seed=seed)


def random(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def cmaes(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    # Every parameter is categorical, which CMA-ES does not support: it
    # samples such spaces with its independent (random) sampler.
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def qmc(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    # Scrambled, so that seeds differ (unscrambled Sobol starts at the
    # centre of every domain whatever the seed).
    return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)


# Two objectives (the time-energy study, ``tuner.search.study.pareto``): (seed, budget in trials, 0 where unknown).


def nsga2_pareto(seed: int, trials: int) -> optuna.samplers.BaseSampler:
    # A population of a fifth of the budget (at least 4): on a budget of tens
    # of trials, a few generations evolve instead of one random one.
    size = max(4, min(50, trials // 5)) if trials else 50
    return optuna.samplers.NSGAIISampler(population_size=size, seed=seed)


def tpe_pareto(seed: int, trials: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(4, min(10, trials // 4)))


def random_pareto(seed: int, trials: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)
