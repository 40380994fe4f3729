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
"""

from __future__ import annotations

from typing import Mapping, Sequence

import optuna

from tuner.search.samplers.portfolio import Portfolio

# Trials of the early search before the late one takes over (strategy ordinal_switch).
SWITCH_AT = 100


class SwitchSampler(Portfolio):
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
        super().__init__([early, late])
        self.early, self.late, self.switch_at = early, late, switch_at

    def _proposer(self, number: int) -> optuna.samplers.BaseSampler:
        return self.early if number < self.switch_at else self.late


def ordinal_switch(seed: int, prior: Sequence[tuple[Mapping, float]] = (), switch_at: int = SWITCH_AT) -> SwitchSampler:
    """``ordinal`` for the first ``switch_at`` trials, ``ordinal_global`` after
    (both seeded with ``seed``, both learning from a warm start's ``prior``)."""
    from tuner.search.samplers.registry import make_sampler

    return SwitchSampler(make_sampler("ordinal", seed, prior), make_sampler("ordinal_global", seed, prior), switch_at)
