"""The search strategies a study can name: ``STRATEGIES``, the one registry
(name to factory, summary and needs), the default ones, and the factories
``make_sampler`` (one objective: a study of bandwidth) and
``make_pareto_sampler`` (two: the time-energy study).

A strategy lives in a module of ``tuner.search.samplers`` and is named here by
its factory, ``"module:function"``, imported when a study makes it: reading a
config (every Snakemake start does, to check a study's ``sampler``) does not
import Optuna. Everything else that lists strategies reads this registry: the
config schema's ``sampler`` enum is filled from ``SAMPLERS`` as the schema is
read (``tuner.settings.parse.config_schema``), and the command lines' choices
come from here. Adding a strategy is its module and its line below.
"""

from __future__ import annotations

import importlib
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
        summary: what it does, in a few words (for help texts and docs).
        make: ``"module:function"`` of ``tuner.search.samplers``, the factory
            (seed, prior) -> the Optuna sampler of a study of one objective;
            ``prior`` holds a warm start's (configuration, GB/s) rows, used
            where ``uses_prior``. None: no study of one objective.
        make_pareto: ``"module:function"``, the factory (seed, budget in
            trials, 0 where unknown) -> the sampler of the time-energy study's
            two objectives. None: not for two objectives.
        modules: optional packages it imports, checked before the search starts.
        uses_prior: whether it learns from a warm start's prior rows (every
            strategy measures a warm start's configurations first).
        sees_budget: whether its search depends on the study's budget
            (``tuner.search.samplers.space_aware.BudgetAware``): a replay runs
            it once per budget, where the others run once and are cut.

    A strategy that searches the space the study enumerates, or passes over
    claimed configurations itself, says so by implementing
    ``tuner.search.samplers.space_aware.SpaceAware``.
    """

    summary: str
    make: str | None = None
    make_pareto: str | None = None
    modules: tuple[str, ...] = ()
    uses_prior: bool = False
    sees_budget: bool = False


STRATEGIES: dict[str, Strategy] = {
    "nsga2": Strategy("Optuna's NSGA-II, a population of a fifth of the budget (two objectives only)",
                      make_pareto="optuna_builtin:nsga2_pareto"),  # fmt: skip
    "tpe": Strategy("Optuna's TPE, multivariate, with a constant liar for concurrent workers",
                    make="optuna_builtin:tpe", make_pareto="optuna_builtin:tpe_pareto"),  # fmt: skip
    "gp": Strategy("Optuna's Gaussian process", make="optuna_builtin:gp", modules=("torch", "scipy")),
    "random": Strategy("uniform draws", make="optuna_builtin:random", make_pareto="optuna_builtin:random_pareto"),
    "cmaes": Strategy("Optuna's CMA-ES (random on categorical spaces)", make="optuna_builtin:cmaes"),
    "qmc": Strategy("scrambled Sobol points", make="optuna_builtin:qmc", modules=("scipy",)),
    "brute_force": Strategy("every feasible configuration, in order", make="brute_force:make"),
    "ordinal": Strategy("space-filling, then model-ranked steps (the default until ordinal_global)",
                        make="ordinal:make", uses_prior=True),  # fmt: skip
    "ordinal_global": Strategy("the project's own: a Parzen (TPE-like) phase first (a climb from the centre alongside, alone on a "
                               "plateau) and after each restart, steps ranked by a model of values and value pairs between, a "
                               "slice sweep on a lone peak", make="ordinal:make_global", uses_prior=True),  # fmt: skip
    "ordinal_best": Strategy("ordinal_global with the climb beside its Parzen phase from the start's best, not the grid's "
                             "centre", make="ordinal:make_best", uses_prior=True),  # fmt: skip
    "interactions": Strategy("ordinal steps alternated with Thompson draws from a model of parameter pairs",
                             make="interactions:make", uses_prior=True),  # fmt: skip
    "ordinal_switch": Strategy("ordinal for the first 100 trials, ordinal_global from there", make="switch:ordinal_switch", uses_prior=True),
    "ordinal_relay": Strategy("ordinal (the far corner first) for the first 100 trials, ordinal_global with its start phase "
                              "from there", make="switch:ordinal_relay", uses_prior=True),  # fmt: skip
    "ordinal_adaptive": Strategy("ordinal_best where the budget is at most 75 trials and under 2 % of the space, "
                                 "ordinal_global otherwise", make="switch:ordinal_adaptive", uses_prior=True,
                                 sees_budget=True),  # fmt: skip
    "ordinal_budget": Strategy("ordinal where the budget is at most 75 trials and under 2 % of the space, ordinal_global "
                               "otherwise", make="switch:ordinal_budget", uses_prior=True, sees_budget=True),  # fmt: skip
}
# The strategies of a study of one objective (a config's ``sampler``), and of the time-energy study.
SAMPLERS = tuple(name for name, strategy in STRATEGIES.items() if strategy.make)
PARETO_SAMPLERS = tuple(name for name, strategy in STRATEGIES.items() if strategy.make_pareto)
# The strategy a study uses unless told otherwise (the settings' default too), and the time-energy study's.
DEFAULT_STRATEGY = "ordinal_adaptive"
DEFAULT_PARETO_STRATEGY = "nsga2"


def missing_modules(name: str) -> list[str]:
    """The optional packages of strategy ``name`` that do not import here."""
    return [m for m in STRATEGIES[name].modules if importlib.util.find_spec(m) is None]


def make_sampler(name: str, seed: int, prior: Prior = ()) -> optuna.samplers.BaseSampler:
    """The sampler of strategy ``name`` (``SAMPLERS``), seeded with ``seed``;
    ``prior`` (configuration, bandwidth) pairs of a warm start inform the
    strategies that use them.

    Raises:
        ValueError: ``name`` is not one of ``SAMPLERS``.
        ImportError: the strategy's optional packages are missing.
    """
    checked_strategy(name)
    return _made(name, STRATEGIES[name].make, seed, prior)


def checked_strategy(name: str) -> Strategy:
    """Strategy ``name`` of a study of one objective, its optional packages there.

    Raises:
        ValueError: ``name`` is not one of ``SAMPLERS``.
        ImportError: the strategy's optional packages are missing.
    """
    if name not in SAMPLERS:
        raise ValueError(f"sampler must be one of {list(SAMPLERS)}, got {name!r}")
    _check_modules(name)
    return STRATEGIES[name]


def make_pareto_sampler(name: str, seed: int, trials: int = 0) -> optuna.samplers.BaseSampler:
    """The sampler of strategy ``name`` (``PARETO_SAMPLERS``) for two
    objectives, seeded with ``seed``, sized for a budget of ``trials`` (0:
    unknown); it reads a trial's constraints from ``Trial.set_constraint``.

    Raises:
        ValueError: ``name`` is not one of ``PARETO_SAMPLERS``.
    """
    if name not in PARETO_SAMPLERS:
        raise ValueError(f"sampler must be one of {list(PARETO_SAMPLERS)}, got {name!r}")
    return _made(name, STRATEGIES[name].make_pareto, seed, trials)


def factory(reference: str) -> Callable:
    """The function a registry entry names (``"module:function"`` of ``tuner.search.samplers``)."""
    module, function = reference.split(":")
    return getattr(importlib.import_module(f"tuner.search.samplers.{module}"), function)


def _made(name: str, reference: str, *args) -> optuna.samplers.BaseSampler:
    import optuna

    _check_modules(name)
    make = factory(reference)
    # Some samplers (QMC, multivariate TPE) are flagged experimental; the flag
    # is Optuna's API promise, not a problem with the run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return make(*args)


def _check_modules(name: str) -> None:
    # Fail at construction, not at the eleventh ask when the GP is first fitted.
    missing = missing_modules(name)
    if missing:
        raise ImportError(
            f"sampler {name!r} needs the packages {list(STRATEGIES[name].modules)}; "
            f"missing: {missing} (pip install {' '.join(missing)})"
        )


def listing() -> list[str]:
    """One line per strategy: its name, the studies it serves, its optional packages and what it does."""
    lines = []
    for name, strategy in STRATEGIES.items():
        serves = [kind for kind, made in (("one objective", strategy.make), ("time-energy", strategy.make_pareto)) if made]
        default = [f"default of {kind}" for kind, chosen in (("studies", DEFAULT_STRATEGY), ("time-energy", DEFAULT_PARETO_STRATEGY))
                   if chosen == name]  # fmt: skip
        needs = [f"needs {', '.join(strategy.modules)}"] if strategy.modules else []
        lines.append(f"{name:15} {' and '.join(serves)}{''.join(f'; {x}' for x in default + needs)}: {strategy.summary}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tuner.search.samplers.registry``: the strategies a config's
    ``sampler`` may name (and the time-energy study's), a line each."""
    from tuner.host import OneLineParser

    OneLineParser(prog="python -m tuner.search.samplers.registry", description=main.__doc__).parse_args(argv)
    print("\n".join(listing()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
