"""The search strategies a study can name (``STRATEGIES``: name to factory and
needs), the default one, and ``make_sampler``.

The registry imports no sampler code: each factory imports its sampler when a
study makes it, so that reading a config (every Snakemake start does, to
check a study's ``sampler``) does not import Optuna. The config schema's
sampler names and the docs are checked against ``STRATEGIES``
(tests/test_study.py).
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

if TYPE_CHECKING:
    import optuna

Prior = Sequence[tuple[Mapping, float]]


@dataclass(frozen=True)
class Strategy:
    """How a study makes one search strategy (an entry of ``STRATEGIES``).

    Attributes:
        make: (seed, prior) -> the Optuna sampler; ``prior`` holds a warm
            start's (configuration, GB/s) rows, used where ``uses_prior``.
        summary: what it does, in a few words (for help texts and docs).
        modules: optional packages it imports, checked before the search starts.
        uses_prior: whether it learns from a warm start's prior rows (every
            strategy measures a warm start's configurations first).

    A strategy that searches the space the study enumerates, or passes over
    claimed configurations itself, says so by implementing
    ``tuner.search.samplers.SpaceAware``.
    """

    make: Callable[[int, Prior], optuna.samplers.BaseSampler]
    summary: str
    modules: tuple[str, ...] = ()
    uses_prior: bool = False


def _optuna_samplers():
    import optuna

    return optuna.samplers


def _brute_force(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    from tuner.search.samplers import BruteForceWithoutStop

    return BruteForceWithoutStop(seed=seed)


def _ordinal(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    from tuner.search.ordinal import OrdinalSampler

    return OrdinalSampler(seed=seed, prior=prior)


def _ordinal_global(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    from tuner.search.ordinal import BOUND_EVERY, CENTRE_CLIMB, GLOBAL_PHASE, SLICE_AFTER, START_PHASE, OrdinalSampler

    # Only the far corner as a landmark: the centre and the near corner of a
    # large space are slow more often than not, and a first measurement many
    # times slower than a random one is what an anytime score punishes most.
    return OrdinalSampler(seed=seed, prior=prior, global_phase=GLOBAL_PHASE, start_phase=START_PHASE, landmarks=("last",),
                          landmarks_first=True, slice_after=SLICE_AFTER, pairs=True, wide_restarts=True,
                          bound_every=BOUND_EVERY, centre_climb=CENTRE_CLIMB)  # fmt: skip


def _ordinal_switch(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    from tuner.search.switch import ordinal_switch

    return ordinal_switch(seed, prior)


def _interactions(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    from tuner.search.interactions import InteractionSampler

    return InteractionSampler(seed=seed, prior=prior)


STRATEGIES: dict[str, Strategy] = {
    "tpe": Strategy(
        # multivariate: parameters interact (unroll x vector_width);
        # constant_liar: concurrent workers do not all propose the same point.
        lambda seed, prior: _optuna_samplers().TPESampler(seed=seed, multivariate=True, constant_liar=True),
        "Optuna's TPE, multivariate, with a constant liar for concurrent workers",
    ),
    "gp": Strategy(lambda seed, prior: _optuna_samplers().GPSampler(seed=seed), "Optuna's Gaussian process",
                   modules=("torch", "scipy")),  # fmt: skip
    "random": Strategy(lambda seed, prior: _optuna_samplers().RandomSampler(seed=seed), "uniform draws"),
    "cmaes": Strategy(
        # Every parameter is categorical, which CMA-ES does not support: it
        # samples such spaces with its independent (random) sampler.
        lambda seed, prior: _optuna_samplers().CmaEsSampler(seed=seed, warn_independent_sampling=False),
        "Optuna's CMA-ES (random on categorical spaces)",
    ),
    "qmc": Strategy(
        # Scrambled, so that seeds differ (unscrambled Sobol starts at the
        # centre of every domain whatever the seed).
        lambda seed, prior: _optuna_samplers().QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False),
        "scrambled Sobol points", modules=("scipy",),
    ),  # fmt: skip
    "brute_force": Strategy(_brute_force, "every feasible configuration, in order"),
    "ordinal": Strategy(_ordinal, "space-filling, then model-ranked steps (the default until ordinal_global)", uses_prior=True),
    "ordinal_global": Strategy(_ordinal_global, "the project's own: a Parzen (TPE-like) phase first (a climb from the centre alongside, alone on a plateau) and after each restart, "
                               "steps ranked by a model of values and value pairs between, a slice sweep on a lone peak",
                               uses_prior=True),  # fmt: skip
    "ordinal_switch": Strategy(_ordinal_switch, "ordinal for the first 100 trials, ordinal_global from there", uses_prior=True),  # fmt: skip
    "interactions": Strategy(_interactions, "ordinal steps alternated with Thompson draws from a model of parameter pairs",
                             uses_prior=True),  # fmt: skip
}
SAMPLERS = tuple(STRATEGIES)
# The strategy a study uses unless told otherwise (the settings' default too).
DEFAULT_STRATEGY = "ordinal_global"


def missing_modules(name: str) -> list[str]:
    """The optional packages of strategy ``name`` that do not import here."""
    return [m for m in STRATEGIES[name].modules if importlib.util.find_spec(m) is None]


def make_sampler(name: str, seed: int, prior: Prior = ()) -> optuna.samplers.BaseSampler:
    """The sampler of strategy ``name`` (``STRATEGIES``), seeded with ``seed``;
    ``prior`` (configuration, bandwidth) pairs of a warm start inform the
    strategies that use them.

    Raises:
        ValueError: ``name`` is not one of ``SAMPLERS``.
        ImportError: the strategy's optional packages are missing.
    """
    import optuna

    strategy = STRATEGIES.get(name)
    if strategy is None:
        raise ValueError(f"sampler must be one of {list(SAMPLERS)}, got {name!r}")
    # Fail at construction, not at the eleventh ask when the GP is first fitted.
    missing = missing_modules(name)
    if missing:
        raise ImportError(
            f"sampler {name!r} needs the packages {list(strategy.modules)}; "
            f"missing: {missing} (pip install {' '.join(missing)})"
        )
    # Some samplers (QMC, multivariate TPE) are flagged experimental; the flag
    # is Optuna's API promise, not a problem with the run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return strategy.make(seed, prior)
