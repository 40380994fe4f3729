"""The global phases of ``OrdinalSampler`` (``tuner.search.samplers.ordinal``):
the Parzen (TPE-like) draws of the start and after each restart (step 4 of the
ordinal module's docstring), the restart's draws apart from what is measured,
the climb beside the start (from the start's best or the grid's centre), and
the plateau that turns them off.

``GlobalPhases`` is a part of ``OrdinalSampler``, not a sampler of its own: it
reads the space the sampler binds and proposes through its choosing steps.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Iterable

import numpy as np

from tuner.data.results import config_key, plain_value
from tuner.search.samplers.ordinal_grid import LANDMARK_PICKS, one_hot_sums, parzen_kernels, parzen_log_density, weighted_choice
from tuner.search.samplers.ordinal_model import ridge_weights

PROGRESS = 0.002  # a gain below this fraction (measurement noise) is no progress
ELITE = 0.1  # the Parzen model's good share of the measurements (at most ELITE_MAX of them)
ELITE_MAX = 25
PARZEN_CANDIDATES = 24  # draws from the good model per global-phase ask
PARZEN_NEIGHBOUR = 0.15  # of an ordered parameter's Parzen kernel, the share on the values nearest twice and half its own
CROWD_SHARE = 0.97  # a measurement this close to the best is one of its crowd (a plateau)
CROWD = 10  # a best with this many in its crowd has no restart drawn apart from it
CLIMB_EVERY = 2  # of the start phase's measurements, every this many is the start climb's (ordinal_best, ordinal_global)
CLIMB_PATIENCE = 10  # the start climb's own measurements without progress that end it
CLIMB_BEHIND = 0.9  # a start climb whose best is below this share of the study's best ends (once it has CLIMB_GRACE)
CLIMB_GRACE = 5  # the start climb's own measurements before it can be found behind


def crowded(values: Iterable[float], top: float) -> bool:
    """Whether ``CROWD`` of ``values`` lie within ``CROWD_SHARE`` of ``top``: a
    plateau, where many configurations are nearly as fast as the best."""
    return sum(value >= CROWD_SHARE * top for value in values) >= CROWD



class GlobalPhases:
    """The Parzen phases, the draws apart and the start climb of ``OrdinalSampler`` (a mixin of it)."""

    def _parzen(self, measured: dict[str, tuple[dict, float]], visited: set[str], rng: random.Random) -> dict | None:
        """The global phase's proposal (a tree-structured Parzen estimator,
        as TPE, over every measurement): of ``PARZEN_CANDIDATES`` unvisited
        feasible draws near the best measured configurations, the one whose
        density under the good model over that under the rest is highest.
        Each density is a mixture of one kernel per configuration (and a
        uniform one) that keeps each value with a weight that narrows as the
        configurations grow in number; of an ordered parameter it moves a
        share ``PARZEN_NEIGHBOUR`` to the values nearest twice and half the
        kernel's own (``parzen_kernels``): a fast block of 256 says more about
        128 and 512 than about 960."""
        if not measured:
            return None  # nothing to model
        ranked = sorted(measured, key=lambda key: -measured[key][1])
        good_count = max(1, min(int(np.ceil(ELITE * len(ranked))), ELITE_MAX))
        positions = self._kernel_positions(ranked)
        good, rest = positions[:good_count], positions[good_count:]
        orders = [self._order[name] for name in self._dists]
        good_kernels = parzen_kernels(orders, good_count, PARZEN_NEIGHBOUR, self._kernel_neighbours)
        candidates: dict[str, dict] = {}
        for _ in range(8 * PARZEN_CANDIDATES):
            if len(candidates) >= PARZEN_CANDIDATES:
                break
            pick = rng.randrange(good_count + 1)  # the last: the uniform kernel
            cfg = {}
            for j, (name, dist) in enumerate(self._dists.items()):
                if pick < good_count:
                    cfg[name] = self._kernel_value(name, weighted_choice(good_kernels[j].row(good[pick, j]), rng))
                else:
                    cfg[name] = plain_value(rng.choice(dist.choices))
            key = config_key(cfg)
            if key not in visited and key not in candidates and self._feasible(cfg):
                candidates[key] = cfg
        if not candidates:
            return None
        keys = list(candidates)
        drawn = self._kernel_positions(keys)
        rest_kernels = parzen_kernels(orders, max(1, len(rest)), PARZEN_NEIGHBOUR, self._kernel_neighbours)
        score = parzen_log_density(drawn, good, good_kernels) - parzen_log_density(drawn, rest, rest_kernels)
        return self._choose(list(candidates.values()), score)

    def _kernel_positions(self, keys: list[str]) -> np.ndarray:
        """(len(keys), parameters) each value's position for the Parzen
        kernels (``_kernel_position`` of its column)."""
        return self._kernel_position[self._columns_of(keys)]

    def _kernel_value(self, name: str, position: int) -> Any:
        """The value of parameter ``name`` at a Parzen kernel's ``position``."""
        ordered, values = self._order[name]
        return values[position] if ordered else plain_value(self._dists[name].choices[position])

    def _restart_draw(self, measured: dict[str, tuple[dict, float]], visited: set[str],
                      rng: random.Random) -> dict | None:  # fmt: skip
        """A global-phase proposal. In a restart's phase (not the study's
        start), the proposal at every ``bound_every``-th measurement is the
        upper bound's (``_bound``), once (a failure leaves the count where it
        was), and it takes that measurement where it is also one drawn apart.
        After a restart that found nothing (and with ``wide_restarts``), every
        other measurement is drawn apart: the Parzen model then sees only this
        sampler's draws apart in the phase, and before ``n_startup`` of them
        are measured the draw is a far-apart point. Where every restart's
        proposals come from the model of every measurement, they recombine the
        best ones, and those can all lie on one local optimum far from the best
        region (a stalled study goes on restarting there). On a plateau (a
        crowd of measurements near the best) neither is taken: they cost the
        steps that refine it. The draws apart are this sampler's own record:
        with several workers each models its own, and a resumed study starts
        them again from far-apart points."""
        state = self._climbs.read(measured)
        start = state["start"]
        if self.start_climb and start == 0 and len(measured) >= self.n_startup:
            # On a plateau every measurement is the start climb's (``_start_climb_step``).
            plateau = self._start_climb_keys is not None and crowded((value for _, value in measured.values()), state["top"])
            if plateau or len(measured) % CLIMB_EVERY == 0:
                cfg = self._start_climb_step(measured, visited, rng, state["top"], plateau)
                if cfg is not None:
                    return cfg
        slot = (start, len(measured))
        if self.bound_every and start > 0 and (len(measured) - start) % self.bound_every == 0 and slot not in self._bounded:
            # Once a slot: a proposal that failed leaves the count of measurements where it was, and the bound,
            # which never sees a failure, would propose the same unmeasured region again.
            if not self._on_plateau(measured, state):
                self._bounded.add(slot)
                cfg = self._bound(measured, visited, rng)
                if cfg is not None:
                    return cfg
        if not (self.wide_restarts and state["stalled"] and (len(measured) - start) % 2 == 1):
            return self._parzen(measured, visited, rng)
        if self._on_plateau(measured, state):
            return self._parzen(measured, visited, rng)
        drawn = self._apart.setdefault(start, set())
        apart = {key: measured[key] for key in drawn if key in measured}
        cfg = self._spread(visited, rng, with_landmarks=False) if len(apart) < self.n_startup else self._parzen(apart, visited, rng)
        if cfg is not None:
            drawn.add(config_key(cfg))
        return cfg

    def _start_climb_step(self, measured: dict[str, tuple[dict, float]], visited: set[str], rng: random.Random,
                          top: float, plateau: bool = False) -> dict | None:  # fmt: skip
        """The start climb's next proposal: the step from the best of the
        climb's own measurements that a model of those measurements and the
        space-filling start ranks first (``_start_climb_favourite``; ``top``:
        the study's best, as the climbs' fold keeps it). Its first
        measurement is the fastest of the study's when it begins
        (``climb_from="best"``), or the grid's centre, proposed first
        (``"centre"``).

        The start phase's Parzen draws gather around the broadest good
        region, and a narrow peak elsewhere (the H200's 2^24 table: the best
        at block 512 with 32 blocks per SM, a broad 97-98 % region around
        block 320) is reached late, by a climb after the phase; a climb from
        the centre alongside them, as ``ordinal`` starts, takes a second
        basin early, and its measurements inform the Parzen model too. From
        the start's best it gains earlier where the start's best lies in the
        best basin, and misses that second basin (``docs/search.md``, held out).

        None once it has proposed ``start_climb`` configurations, gone
        ``CLIMB_PATIENCE`` of its measurements without progress, or, with
        ``CLIMB_GRACE`` of them, has its best under ``CLIMB_BEHIND`` of the
        study's: where its basin is poor (the convolution tables) the
        Parzen draws are better spent, and every measurement taken from them
        early lowers an anytime score. On a ``plateau`` (``crowded``: many
        configurations nearly as fast as the best, as on the reduction tables;
        the convolution tables' lone peaks do not crowd in the start phase)
        the Parzen draws only add to the crowd, so the climb is not capped and
        ends after ``patience`` measurements without progress, as a climb
        after the phase does. A centre that is infeasible or fails
        ends the climb (its own measurements stay none). The record is this
        sampler's own: a resumed study does not resume the climb, and of
        several workers those that proposed the start climb from it (one,
        unless two asked before either's claim was written: a claimed centre
        is not proposed again)."""
        if self._start_climb_keys is None and self.climb_from == "best":
            # Measured already: the climb's first measurement, from which its steps go.
            self._start_climb_keys = {max(measured, key=lambda key: measured[key][1])}
        if self._start_climb_keys is None:
            self._start_climb_keys = set()
            draw = random.Random(self.seed)  # the unordered values: the same centre for a seed, whatever was asked
            cfg = {name: LANDMARK_PICKS["centre"](values) if ordered else draw.choice(values)
                   for name, (ordered, values) in self._order.items()}  # fmt: skip
            if config_key(cfg) in visited or not self._feasible(cfg):
                return None
            self._start_climb_keys.add(config_key(cfg))
            return cfg
        if not plateau and len(self._start_climb_keys) >= self.start_climb:
            return None
        own = {key: measured[key] for key in measured if key in self._start_climb_keys}  # in trial order
        if not own:
            return None
        best, since = 0.0, 0
        for _, value in own.values():
            best, since = (value, 0) if value > best * (1 + PROGRESS) else (best, since + 1)
        if since >= (self.patience if plateau else CLIMB_PATIENCE):
            return None
        if len(own) >= CLIMB_GRACE and max(value for _, value in own.values()) < CLIMB_BEHIND * top:
            return None
        cfg = self._start_climb_favourite(own, measured, visited, rng)
        if cfg is not None:
            self._start_climb_keys.add(config_key(cfg))
        return cfg

    def _start_climb_favourite(self, own: dict[str, tuple[dict, float]], measured: dict[str, tuple[dict, float]],
                          visited: set[str], rng: random.Random) -> dict | None:  # fmt: skip
        """The unvisited step from the best of the start climb's ``own``
        measurements that a ridge regression of log-bandwidth on the parameter
        values (main effects), fitted on those and the space-filling start
        alone, predicts fastest. The Parzen draws alongside crowd the broadest
        good region; fitted on them too, the model rates that region's values
        best and pulls the climb out of its own basin towards it (``ordinal``
        climbs from the centre with a model of its own measurements)."""
        best_key, (best_cfg, _) = max(own.items(), key=lambda item: item[1][1])
        steps = {key: cfg for key, cfg in self._neighbours(best_key, best_cfg) if key not in visited}
        if not steps:
            return None
        start = list(measured)[: self.n_startup]
        keys = start + [key for key in own if key not in start]
        y = np.log([measured[key][1] for key in keys])
        main = len(self._dists)  # the model's first columns: one per parameter value (neighbours grouped)
        weights = ridge_weights(*one_hot_sums(self._features_of(keys)[:, :main], y, self._main_width), y.mean())
        return self._highest(steps, weights[self._features_of(list(steps))[:, :main]].sum(axis=1), rng)

    @staticmethod
    def _on_plateau(measured: dict[str, tuple[dict, float]], state: dict) -> bool:
        """Whether the measurements before the current restart are ``crowded``
        near the study's best when it began."""
        before = (value for _, value in itertools.islice(measured.values(), state["start"]))
        return crowded(before, state["top_before"])
