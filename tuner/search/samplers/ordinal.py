"""``OrdinalSampler``: the project's search, a model-guided neighbourhood search
that treats ordered parameters as ordered, between phases of Parzen proposals.
``ordinal_global`` is this sampler with a start phase, a restart phase and
only the far corner as a landmark; ``ordinal_best`` is the same with the start
phase's climb from the start's best, not the grid's centre (the default,
``ordinal_adaptive``, runs one of the two, chosen from the study's budget:
``tuner.search.samplers.switch``); ``ordinal`` is it without the phases.
``docs/search.md`` says why each part is there and how the strategies compare
on tables measured exhaustively.

Kernel spaces are grids of ordered values (block size, unroll, grid size)
with a few unordered ones (cache hint, variant), and the fast configurations
sit together, often at an edge of the grid. A sampler that sees only
categories (TPE, GP over one-hot choices) cannot tell that block 992 lies
between 960 and 1024. This one works on each ordered parameter's sorted values:

1. **Space-filling start**: landmarks (the grid's centre and extreme corners;
   the phased strategies the far corner only), then each the candidate farthest
   from those chosen (maximin) among random feasible ones; a warm start's
   best configurations take their place. With ``start_phase``, proposals
   after it come from the Parzen model (4.) until that many measurements;
   with ``start_climb``, every other one of them is instead a step of a
   climb from the best measured so far (or the grid's centre,
   ``climb_from``; ``_start_climb_step``): the draws spread over the space
   while the climb refines what the start found (the centre: a narrow peak
   in another basin than the draws' is reached too).
2. **Steps around the best** of the current climb: one ordered parameter
   moved 1, 2, 4, ... positions or to an end (an optimum at the grid's edge),
   one unordered parameter changed, or two ordered ones moved one position
   each (diagonal ridges, such as unroll and vector width trading the same
   elements per thread, where every one-parameter step is slower).
3. **Restarts**: a climb whose best has not gained ``PROGRESS`` (above the
   measurement noise) in ``patience`` measurements restarts, so that broad
   plateaus do not hold a search for hundreds of evaluations.
4. **A global phase after each restart** (``global_phase``): proposals from a
   tree-structured Parzen estimator over every measurement so far, its
   kernels sharing an ordered value's weight with its neighbours; the next
   climb goes on from the phase's best. A stalled climb has exhausted its
   neighbourhood, and what the fast configurations share anywhere is where a
   new one should start; TPE's kernels, centred on whole good configurations,
   also recombine parameters that interact. ``wide_restarts`` draws every
   other proposal of a phase apart from what is measured after a restart
   that found nothing better; ``bound_every`` makes every third proposal the
   step model's upper confidence bound (the combinations measured least).
5. **A model picks the step**: a ridge regression of log-bandwidth on every
   parameter value (main effects, refitted each trial), with prior rows of a
   warm start until the study's own outnumber them. With ``pairs`` it also
   has a column for every pair of values of two narrow parameters (where one
   switch decides what another is worth), kept only while the leave-one-out
   error says they predict better.
6. **A slice sweep where the best stands alone** (``slice_after``): once a
   climb has stalled and its best's measured neighbours have a median below
   ``RUGGED`` of it, the steps take in every unvisited configuration of its
   slice (the best's narrow values, the wide ordered ones free), ranked by
   the same model: a lone peak is where one- and two-parameter steps stop short.

It is an ordinary Optuna sampler: whatever it needs it reads from the study's
trials, so a resumed study or several workers sharing one storage go on from
the same history. ``DistinctSampler`` hands it the space (``bind``) and wraps
it, so a proposal that another worker claimed meanwhile is passed over.

Its parts: this module has the start, the climbs, the slice sweep and the
choosing; ``ordinal_model`` the step model (5.) and its upper bound;
``ordinal_phases`` the Parzen phases (4.), the draws apart and the centre
climb; ``ordinal_grid`` the grid's arithmetic and ``ordinal_history`` its
reading of the history, carried from one ask to the next.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.data.results import config_key, plain_value
from tuner.search.samplers.feasible_draws import FeasibleDraws
from tuner.search.samplers.ordinal_grid import (
    LANDMARK_PICKS,
    LANDMARKS,
    kernel_neighbours,
    nearest_distances,
    one_hot_sums,
    ordered_values,
    powers_below,
)
from tuner.search.samplers.ordinal_history import FinishedPrefix, climb_read, sums_read
from tuner.search.samplers.ordinal_model import WIDE, StepModel
from tuner.search.samplers.ordinal_phases import PROGRESS, GlobalPhases
from tuner.search.samplers.registry import Prior

DEFAULT_STARTUP = 5  # space-filling configurations before the neighbourhood steps
DEFAULT_TOP_K = 1  # neighbourhoods of this many best configurations compete
DEFAULT_PATIENCE = 30  # steps without progress before a climb restarts elsewhere
CANDIDATES = 128  # random feasible candidates per space-filling choice
UNSEEN = 200  # random draws where no enumerated space is bound
GLOBAL_PHASE = 30  # measurements drawn from the Parzen model after a restart (ordinal_best, ordinal_global)
START_PHASE = 80  # the study's first measurements, after the space-filling start, drawn from it (ordinal_best, ordinal_global)
SLICE_AFTER = 15  # measurements of a stalled climb before its best's slice is swept (ordinal_best, ordinal_global)
RUGGED = 0.8  # the best stands alone where its measured neighbours' median is below this share of it
SLICE_MAX = 4096  # configurations of a slice ranked in one ask at most (a random choice of a larger one)
BOUND_EVERY = 3  # every this many measurements of a restart's global phase, one proposal is the model's upper bound's (ordinal_best, ordinal_global)
START_CLIMB = 20  # the start phase's climb's proposals at most (ordinal_best, ordinal_global)
CLIMB_FROM = ("centre", "best")  # where the start phase's climb begins (``OrdinalSampler``'s climb_from)
RUNNERS_UP = 4  # of a proposal's ranked candidates, the next best kept as the likely next proposals


class OrdinalSampler(GlobalPhases, StepModel, optuna.samplers.BaseSampler):
    """Space-filling start, then model-ranked steps around the best
    configurations (see the module's docstring).

    Args:
        seed: seeds the space-filling draws and the tie-breaks.
        n_startup: space-filling configurations before the steps.
        top_k: best configurations whose neighbourhoods are searched.
        landmarks: the grid points (of ``LANDMARKS``; unordered parameters
            drawn at random) the start tries, in this order: fast kernels
            often sit at an edge. The first is the start's first point.
        landmarks_first: whether the start proposes a landmark, as long as
            one drawn is unvisited, before any far-apart point (the far
            corner with one unordered value, then with others); otherwise
            the rest compete with the random candidates for being far apart.
        ends: whether a step may move an ordered parameter to its first or
            last value.
        diagonals: whether a step may move two ordered parameters at once,
            one position each.
        patience: steps of a climb without progress before it restarts
            (0: never).
        global_phase: measurements after a restart drawn from the Parzen
            model of every measurement (0: a restart begins at a new
            space-filling point instead).
        start_phase: the study's first measurements (counted from its
            first, space-filling start included) after which the first climb
            begins; those after the start are drawn from the Parzen model.
        slice_after: measurements of a climb without progress after which,
            where its best stands alone, its steps take in the best's whole
            slice (0: never).
        pairs: whether the model also has a column for every pair of values
            of two narrow parameters (fewer than ``WIDE`` values each).
        wide_restarts: whether, after a restart whose climb found nothing
            better than the study's best, every other measurement of the next
            restart's global phase is drawn apart from the rest: far-apart
            points, then the Parzen model of those draws alone (not where
            ``CROWD`` measurements lie within ``CROWD_SHARE`` of the best).
        bound_every: every this many measurements of a restart's global
            phase (from its first; 0: never), except on a plateau as above, the
            proposal is the configuration of highest upper confidence bound
            under the step model with every value-pair column, among
            ``BOUND_POOL`` unvisited ones drawn at random (``_bound``); once
            a measurement count (a failed proposal leaves it where it was).
        start_climb: in the start phase (after the space-filling start),
            every ``CLIMB_EVERY``-th measurement is a step of a climb from
            where ``climb_from`` says, for at most this many
            proposals (0: none); ``CLIMB_PATIENCE`` of its own measurements
            without progress end it sooner, and so does its best falling under
            ``CLIMB_BEHIND`` of the study's best once it has ``CLIMB_GRACE``
            measurements. Its steps are ranked by a model of its own and the
            space-filling start's measurements. On a plateau (``crowded``)
            every measurement is its step, uncapped, until ``patience`` of its
            own without progress (``_start_climb_step``).
        climb_from: where that climb begins: ``"best"``, the fastest
            configuration measured when it begins (the space-filling start's
            best, as ``ordinal``'s first climb), not measured again; or
            ``"centre"``, the grid's centre (the centre value of each ordered
            parameter, unordered ones drawn from ``seed``), proposed first.
        prior: (configuration, bandwidth) pairs known before the study (warm
            start); used by the model, never taken for measured.
        phase_from: the first trial number this sampler proposes (the later
            search of a switch, ``tuner.search.samplers.switch``): its start
            phase begins there, after the measurements of the trials before
            it (those finished at its first ask), which set the first climb's
            best without counting against its patience. 0: the study's start.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        n_startup: int = DEFAULT_STARTUP,
        top_k: int = DEFAULT_TOP_K,
        landmarks: Sequence[str] = LANDMARKS,
        landmarks_first: bool = False,
        prior: Sequence[tuple[Mapping, float]] = (),
        ends: bool = True,
        diagonals: bool = True,
        patience: int = DEFAULT_PATIENCE,
        global_phase: int = 0,
        start_phase: int = 0,
        slice_after: int = 0,
        pairs: bool = False,
        wide_restarts: bool = False,
        bound_every: int = 0,
        start_climb: int = 0,
        climb_from: str = "centre",
        phase_from: int = 0,
    ) -> None:
        if n_startup < 1 or top_k < 1:
            raise ValueError(f"n_startup and top_k must be >= 1, got {n_startup} and {top_k}")
        if patience < 0:
            raise ValueError(f"patience must be >= 0, got {patience}")
        if global_phase < 0 or start_phase < 0 or slice_after < 0:
            raise ValueError(f"global_phase, start_phase and slice_after must be >= 0, "
                             f"got {global_phase}, {start_phase} and {slice_after}")  # fmt: skip
        if bound_every < 0:
            raise ValueError(f"bound_every must be >= 0, got {bound_every}")
        if start_climb < 0:
            raise ValueError(f"start_climb must be >= 0, got {start_climb}")
        if climb_from not in CLIMB_FROM:
            raise ValueError(f"climb_from must be one of {list(CLIMB_FROM)}, got {climb_from!r}")
        if phase_from < 0:
            raise ValueError(f"phase_from must be >= 0, got {phase_from}")
        if not set(landmarks) <= set(LANDMARKS):
            raise ValueError(f"landmarks must be of {list(LANDMARKS)}, got {list(landmarks)}")
        self.seed = seed
        self.n_startup = n_startup
        self.top_k = top_k
        self.landmarks, self.landmarks_first = tuple(landmarks), landmarks_first
        self.ends, self.diagonals, self.patience = ends, diagonals, patience
        self.global_phase, self.start_phase, self.slice_after = global_phase, start_phase, slice_after
        self.pairs, self.wide_restarts, self.bound_every = pairs, wide_restarts, bound_every
        self.start_climb, self.climb_from, self.phase_from = start_climb, climb_from, phase_from
        self._phases_begun = not phase_from  # whether the start phase's clock is set (``_begin_phases``)
        self.prior = sorted(((dict(cfg), float(value)) for cfg, value in prior if value > 0), key=lambda item: -item[1])
        self._rng = random.Random(seed)
        self._dists: dict[str, CategoricalDistribution] | None = None
        self._feasible: Callable[[dict], bool] = lambda cfg: True
        self._enumerated: list[tuple[str, dict]] | None = None
        self._draws: FeasibleDraws | None = None
        self._asked: dict[int, set[str]] = {}  # trial number -> keys proposed for it
        self._taken: set[str] = set()  # claimed in the study, as DistinctSampler last read
        self._recent: tuple | None = None  # (trial number, measured, visited) of the last history read
        self._fitted: tuple | None = None  # (measured, (weights, mean)) of the last fit
        self._exhausted: set[str] = set()  # measured keys whose every step was visited
        self._apart: dict[int, set[str]] = {}  # restart's start -> keys this sampler drew apart (wide_restarts)
        self._bounded: set[tuple[int, int]] = set()  # (restart's start, measurements) where the bound was proposed
        self._start_climb_keys: set[str] | None = None  # keys of the start climb (None: not begun)
        self._prior: list[tuple[str, dict, float]] = []
        self._upcoming: list[dict] = []  # the last proposal's runners-up

    # What DistinctSampler tells it.

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Mapping[str, dict] | None, draws: FeasibleDraws | None = None) -> None:  # fmt: skip
        """The searched space: its distributions, a feasibility test and, where
        the space is small enough, every feasible configuration by its key;
        else, where given, ``draws`` of its feasible configurations."""
        self._dists = dict(dists)
        self._feasible = feasible
        self._draws = draws if enumerated is None else None
        # Sorted by key, so that the order the values are listed in changes nothing.
        self._enumerated = None if enumerated is None else sorted(enumerated.items(), key=lambda item: item[0])
        self._order = {name: ordered_values(dist.choices) for name, dist in self._dists.items()}
        # A slice: the configurations that share the parameters of few values (switches, tiles).
        self._wide = [name for name, (ordered, values) in self._order.items() if ordered and len(values) >= WIDE]
        self._narrow = [name for name in self._order if name not in self._wide]
        self._slices: dict[tuple, list[tuple[str, dict]]] | None = None
        self._columns = {(name, value): i for i, (name, value) in enumerate(
            (name, value) for name, dist in self._dists.items() for value in dist.choices)}  # fmt: skip
        # Each value's column -> its position for the Parzen kernels: among the sorted values of an ordered
        # parameter (its neighbours matter), among the listed choices of an unordered one.
        sorted_position = {name: {value: i for i, value in enumerate(values)} for name, (_, values) in self._order.items()}
        self._kernel_position = np.array([sorted_position[name][plain_value(value)] if self._order[name][0] else i
                                          for name, dist in self._dists.items() for i, value in enumerate(dist.choices)])  # fmt: skip
        self._kernel_neighbours = kernel_neighbours([self._order[name] for name in self._dists])
        self._model_columns, self._main_width = self._grouped_columns()
        self._pair_names = self._paired() if self.pairs else []
        self._pair_columns = self._value_pairs()
        self._width = self._main_width + len(self._pair_columns)
        self._finished, self._steps, self._column_cache, self._feature_cache, self._points = {}, {}, {}, {}, {}
        self._base = FinishedPrefix()
        # The climb and the model's sums, each folded over the history one new measurement at a time.
        self._climbs = climb_read(self.patience, PROGRESS, self.global_phase, self.start_phase)
        self._sums = sums_read(self._width, lambda key: self._features_of([key])[0])
        # The prior rows within this space, best first, and their sums for the model.
        self._prior = []
        for cfg, value in self.prior:
            if all(cfg.get(name) in dist.choices for name, dist in self._dists.items()):
                cfg = {name: plain_value(cfg[name]) for name in self._dists}
                self._prior.append((config_key(cfg), cfg, value))
        if self._prior:
            y = np.log([value for _, _, value in self._prior])
            sums = one_hot_sums(self._features_of([key for key, _, _ in self._prior]), y, self._width)
            self._prior_gram, self._prior_moment, self._prior_ones = sums
            self._prior_mean, self._prior_log = y.mean(), y

    def upcoming(self) -> list[dict]:
        """What this sampler would likely propose next, best first: the
        candidates its last proposal ranked just below the one it chose (at
        most ``RUNNERS_UP``; none where it ranked none). A study compiles
        their modules ahead while it measures, and a climb's next step is
        often one of them."""
        return [dict(cfg) for cfg in self._upcoming]

    def taken(self, keys: set[str]) -> None:
        """The study's claimed configurations (every worker's), not to be
        proposed. Another worker's claim reaches its trial's parameters only
        once its ask is written, and a proposal that collides with it costs a
        whole new proposal (with four workers, more than one per trial)."""
        self._taken = keys

    # Optuna's sampler interface.

    def reseed_rng(self) -> None:
        self._rng.seed()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self._dists) if self._dists is not None else {}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._rng.choice(param_distribution.choices)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space or self._dists is None:
            return {}
        if not self._phases_begun:
            self._begin_phases(study)
        rng = random.Random(self.seed * 1_000_003 + trial.number + 7919 * len(self._asked.get(trial.number, ())))
        if self._recent is not None and self._recent[0] == trial.number:
            # Asked again for this trial (what it proposed was claimed meanwhile by
            # another worker): the history just read, less what was proposed since.
            measured, visited = self._recent[1], self._recent[2] | self._asked.get(trial.number, set()) | self._taken
        else:
            measured, visited = self._history(study, trial)
            self._recent = (trial.number, measured, visited)
        cfg, self._upcoming = None, []
        if len(visited) - len(self._asked.get(trial.number, ())) < self.n_startup or not measured:
            # A warm start's best rows stand in for the space-filling start.
            cfg = self._best_prior(visited) if self._prior else None
            cfg = cfg or self._spread(visited, rng)
        if cfg is None and measured and len(measured) < self._climbs.read(measured)["until"]:
            # A climb just restarted: the global phase draws where the Parzen model expects fast ones.
            cfg = self._restart_draw(measured, visited, rng)
        if cfg is None:
            climb = self._climb(measured)
            # A climb just restarted begins at a new space-filling point; one stalled on a lone peak sweeps its slice.
            swept = self._slice_sweep(climb, measured, visited, rng)
            if swept:
                cfg = self._favourite(swept, measured, rng)
            else:
                cfg = self._step(climb, measured, visited, rng) if climb else self._spread(visited, rng)
        if cfg is None:
            cfg = self._step(measured, measured, visited, rng)
        if cfg is None:
            cfg = self._unseen(visited, rng)
        if cfg is None:
            return {}
        self._asked.setdefault(trial.number, set()).add(config_key(cfg))
        return cfg

    def _begin_phases(self, study: optuna.Study) -> None:
        """Start the start phase's clock after the measurements of the trials
        numbered below ``phase_from``: the phase then draws ``start_phase``
        measurements of its own from the Parzen model of all of them (a
        climb that takes over another search's history otherwise begins
        where that search left off, with none of the broad draws that find
        a second region)."""
        before = 0
        for other in study.get_trials(deepcopy=False):
            if other.number < self.phase_from:
                seen = self._seen(other)
                before += seen is not None and seen[2] is not None
        self._climbs = climb_read(self.patience, PROGRESS, self.global_phase, before + self.start_phase)
        self._phases_begun = True

    # Choosing.

    def _history(self, study: optuna.Study, trial: FrozenTrial) -> tuple[dict[str, tuple[dict, float]], set[str]]:
        """Measured configurations (key -> (config, bandwidth)) and every key
        not to propose (measured, failed, in flight, proposed for this trial)."""
        trials = study.get_trials(deepcopy=False)
        base = self._base.advance(study, trials, self._seen)
        measured = dict(base.measured)
        visited = base.visited | self._asked.get(trial.number, set()) | self._taken
        for other in trials[base.length :]:
            if other.number == trial.number:
                continue
            seen = self._seen(other)
            if seen is None:
                continue
            key, cfg, value = seen
            visited.add(key)
            if value is not None:
                measured[key] = (cfg, value)
        return measured, visited

    def _seen(self, trial: FrozenTrial) -> tuple[str, dict, float | None] | None:
        """(key, configuration, bandwidth or None) of a trial with this
        space's parameters; a finished trial is read once."""
        seen = self._finished.get(trial.number)
        if seen is None:
            if not trial.params.keys() >= self._dists.keys():
                return None
            cfg = {name: plain_value(trial.params[name]) for name in self._dists}
            good = trial.state == TrialState.COMPLETE and trial.value is not None and trial.value > 0
            seen = (config_key(cfg), cfg, float(trial.value) if good else None)
            if trial.state.is_finished():  # a running trial is read again
                self._finished[trial.number] = seen
        return seen

    def _spread(self, visited: set[str], rng: random.Random, with_landmarks: bool = True) -> dict | None:
        """The random feasible candidate farthest from every visited one; the
        landmarks (unordered parameters drawn at random) are candidates too,
        and the first of them is the start's first point (none without
        ``with_landmarks``: a draw apart from what is measured)."""
        points = [self._point(key) for key in visited]
        landmarks = []
        for landmark in self.landmarks if with_landmarks else ():
            pick = LANDMARK_PICKS[landmark]
            cfg = {name: pick(values) if ordered else rng.choice(values) for name, (ordered, values) in self._order.items()}
            if config_key(cfg) not in visited and self._feasible(cfg):
                landmarks.append(cfg)
        if landmarks and (not points or self.landmarks_first):
            self._upcoming = landmarks[1 : RUNNERS_UP + 1]
            return landmarks[0]
        candidates = landmarks + self._random_unseen(visited, rng, CANDIDATES)
        if not candidates or not points:
            self._upcoming = candidates[1 : RUNNERS_UP + 1]
            return candidates[0] if candidates else None
        ordered = [is_ordered for is_ordered, _ in self._order.values()]
        distances = nearest_distances([self._position(cfg) for cfg in candidates], np.array(points), ordered)
        return self._choose(candidates, distances)  # the first of the farthest

    def _point(self, key: str) -> list[float]:
        point = self._points.get(key)
        if point is None:
            point = self._points[key] = self._position(json.loads(key))
        return point

    def _best_prior(self, visited: set[str]) -> dict | None:
        """The best prior configuration of this space not yet visited."""
        unvisited = (cfg for key, cfg, _ in self._prior if key not in visited and self._feasible(cfg))  # best first
        found = list(itertools.islice(unvisited, RUNNERS_UP + 1))
        self._upcoming = found[1:]
        return found[0] if found else None

    def _climb(self, measured: dict[str, tuple[dict, float]]) -> dict[str, tuple[dict, float]]:
        """The measured configurations of the current climb: those since the
        last restart. A climb restarts once ``patience`` measurements in a row
        failed to beat its best by ``PROGRESS``; the fold over the whole history
        (carried between asks), so a resumed study or another worker agrees."""
        start = self._climbs.read(measured)["start"]
        return dict(itertools.islice(measured.items(), start, None))  # in trial order

    def _step(self, climb: dict[str, tuple[dict, float]], measured: dict[str, tuple[dict, float]], visited: set[str],
              rng: random.Random) -> dict | None:  # fmt: skip
        """The model's favourite among unvisited steps from the climb's best
        configurations (the model learns from every measurement)."""
        ranked = sorted(climb.items(), key=lambda item: -item[1][1])
        candidates: dict[str, dict] = {}
        searched = 0
        for key, (cfg, _) in ranked:
            if key in self._exhausted:
                continue
            steps = [(k, c) for k, c in self._neighbours(key, cfg) if k not in visited]
            if not steps:
                self._exhausted.add(key)  # what is visited stays visited
            else:
                candidates.update(steps)
                searched += 1
                if searched >= self.top_k:
                    break
        return self._favourite(candidates, measured, rng) if candidates else None

    def _favourite(self, candidates: dict[str, dict], measured: dict[str, tuple[dict, float]], rng: random.Random) -> dict:
        """The candidate the model predicts fastest (ties broken at random)."""
        weights, mean = self._fit(measured)
        keys = list(candidates)
        return self._highest(candidates, weights[self._features_of(keys)].sum(axis=1) + mean, rng)

    def _highest(self, candidates: dict[str, dict], scores: np.ndarray, rng: random.Random) -> dict:
        """The candidate of highest score (``scores`` in the candidates' order;
        ties broken at random)."""
        return self._choose(list(candidates.values()), scores + np.array([rng.random() * 1e-9 for _ in candidates]))

    def _choose(self, candidates: list[dict], scores: np.ndarray) -> dict:
        """The first candidate of highest score; the ``RUNNERS_UP`` next best
        are kept as what this sampler would likely propose next (``upcoming``)."""
        best = int(np.argmax(scores))
        order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")[: RUNNERS_UP + 1]
        self._upcoming = [candidates[i] for i in order if i != best][:RUNNERS_UP]
        return candidates[best]

    def _slice_sweep(self, climb: dict[str, tuple[dict, float]], measured: dict[str, tuple[dict, float]],
                     visited: set[str], rng: random.Random) -> dict[str, dict]:  # fmt: skip
        """The unvisited configurations of the climb's best's slice and its
        unvisited neighbours, once the climb has gone ``slice_after``
        measurements without progress and its best stands alone (at least 3
        neighbours measured, their median below ``RUGGED`` of it); else none."""
        if not self.slice_after or not climb:
            return {}
        state = self._climbs.read(measured)
        if state["since"] < self.slice_after or len(measured) < state["until"]:
            return {}
        best_key, (best, value) = max(climb.items(), key=lambda item: item[1][1])
        neighbours = self._neighbours(best_key, best)
        around = [measured[key][1] / value for key, _ in neighbours if key in measured]
        if len(around) < 3 or float(np.median(around)) >= RUGGED:
            return {}
        found = {key: cfg for key, cfg in self._slice(best, rng) if key not in visited}
        found.update((key, cfg) for key, cfg in neighbours if key not in visited)
        return found

    def _slice(self, cfg: dict, rng: random.Random) -> list[tuple[str, dict]]:
        """The feasible configurations with ``cfg``'s values of the narrow
        parameters (at most ``SLICE_MAX``, drawn at random from a larger slice).
        An enumerated space is grouped by them once, at the first sweep; any
        other slice small enough to list is listed once."""
        narrow = tuple(cfg[name] for name in self._narrow)
        if self._enumerated is not None:
            if self._slices is None:
                self._slices = {}
                for key, other in self._enumerated:
                    self._slices.setdefault(tuple(other[name] for name in self._narrow), []).append((key, other))
            found = self._slices.get(narrow, [])
            return rng.sample(found, SLICE_MAX) if len(found) > SLICE_MAX else found
        if self._slices is not None and narrow in self._slices:
            return self._slices[narrow]
        wide = [self._order[name][1] for name in self._wide]
        listed = math.prod(len(values) for values in wide) <= SLICE_MAX
        combos = itertools.product(*wide) if listed else (tuple(rng.choice(v) for v in wide) for _ in range(SLICE_MAX))
        found = []
        for combo in combos:
            other = {**cfg, **dict(zip(self._wide, combo))}
            if self._feasible(other):
                found.append((config_key(other), other))
        if listed:
            self._slices = {} if self._slices is None else self._slices
            self._slices[narrow] = found
        return found

    def _neighbours(self, key: str, cfg: dict) -> list[tuple[str, dict]]:
        """Feasible configurations one step from ``cfg`` (cached): an ordered
        parameter moved 1, 2, 4, ... positions or to an end, an unordered one
        changed, or two ordered ones moved one position each."""
        found = self._steps.get(key)
        if found is not None:
            return found
        found = []
        for name, (ordered, values) in self._order.items():
            here = values.index(cfg[name])
            if ordered:
                reach = [here + sign * d for d in powers_below(len(values)) for sign in (-1, 1)]
                if self.ends:
                    reach += [0, len(values) - 1]
                others = [values[i] for i in dict.fromkeys(reach) if 0 <= i < len(values) and i != here]
            else:
                others = [v for v in values if v != cfg[name]]
            for value in others:
                candidate = {**cfg, name: value}
                if self._feasible(candidate):
                    found.append((config_key(candidate), candidate))
        if self.diagonals:
            # The fast configurations can lie on a diagonal ridge (unroll x vector width constant):
            # from a point on it, every one-parameter step goes downhill.
            ordered = [(name, values) for name, (is_ordered, values) in self._order.items() if is_ordered and len(values) > 1]
            for (name_a, values_a), (name_b, values_b) in itertools.combinations(ordered, 2):
                a, b = values_a.index(cfg[name_a]), values_b.index(cfg[name_b])
                for to_a, to_b in itertools.product((a - 1, a + 1), (b - 1, b + 1)):
                    if 0 <= to_a < len(values_a) and 0 <= to_b < len(values_b):
                        candidate = {**cfg, name_a: values_a[to_a], name_b: values_b[to_b]}
                        if self._feasible(candidate):
                            found.append((config_key(candidate), candidate))
        self._steps[key] = found
        return found

    def _unseen(self, visited: set[str], rng: random.Random) -> dict | None:
        return next(iter(self._random_unseen(visited, rng, 1)), None)

    def _random_unseen(self, visited: set[str], rng: random.Random, count: int) -> list[dict]:
        if self._enumerated is not None:
            left = [cfg for key, cfg in self._enumerated if key not in visited]
            return rng.sample(left, min(count, len(left)))
        found = []
        for _ in range(max(UNSEEN, count)):
            if self._draws is None:
                cfg = {name: rng.choice(dist.choices) for name, dist in self._dists.items()}
            else:
                cfg = self._draws.random(rng)
            if cfg is not None and config_key(cfg) not in visited and self._feasible(cfg):
                found.append(cfg)
                if len(found) >= count:
                    break
        if self._draws is not None and not found:
            # A sparse space: what a walk of its product has found.
            seen = visited | {config_key(cfg) for cfg in found}
            found += self._draws.walked(rng, count - len(found), seen, config_key)
        return found

    def _position(self, cfg: dict) -> list[float]:
        """``cfg`` in the unit cube (ordered parameters) and as labels (others)."""
        position = []
        for name, (ordered, values) in self._order.items():
            i = values.index(cfg[name]) if cfg.get(name) in values else 0
            position.append(i / max(1, len(values) - 1) if ordered else float(i) + 10.0)
        return position


def make(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    """The ``ordinal`` strategy's sampler (``registry.Strategy.make``)."""
    return OrdinalSampler(seed=seed, prior=prior)


def make_global(seed: int, prior: Prior, phase_from: int = 0, climb_from: str = "centre") -> optuna.samplers.BaseSampler:
    """The ``ordinal_global`` strategy's sampler (``registry.Strategy.make``);
    ``phase_from``: the trial its start phase begins at (a switch's later search)."""
    # Only the far corner as a landmark: the centre and the near corner of a
    # large space are slow more often than not, and a first measurement many
    # times slower than a random one is what an anytime score punishes most.
    return OrdinalSampler(seed=seed, prior=prior, global_phase=GLOBAL_PHASE, start_phase=START_PHASE, landmarks=("last",),
                          landmarks_first=True, slice_after=SLICE_AFTER, pairs=True, wide_restarts=True,
                          bound_every=BOUND_EVERY, start_climb=START_CLIMB, climb_from=climb_from,
                          phase_from=phase_from)  # fmt: skip


def make_best(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    """The ``ordinal_best`` strategy's sampler (the default's on a small
    budget): ``ordinal_global`` with the start phase's climb from the start's
    best, not the grid's centre."""
    return make_global(seed, prior, climb_from="best")
