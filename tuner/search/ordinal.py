"""``OrdinalSampler``: the default search, a model-guided neighbourhood search
that treats ordered parameters as ordered.

Kernel spaces are grids of ordered values (block size, unroll, grid size)
with a few unordered ones (cache hint, variant), and the fast configurations
sit together, often at an edge of the grid. A sampler that sees only
categories (TPE, GP over one-hot choices) cannot tell that block 992 lies
between 960 and 1024. This one works on each ordered parameter's sorted
values:

1. **Space-filling start**: the first ``n_startup`` configurations are
   chosen, each from random feasible candidates, as far as possible from
   those already chosen (maximin in the normalised grid), so the corners and
   the middle are sampled before any refinement. With a warm start, the
   prior's best configurations take their place.
2. **Neighbourhood steps around the best**: every later trial is one step
   from one of the best measured configurations (the ``top_k`` best that
   still have unmeasured neighbours): one ordered parameter moved by 1, 2, 4,
   ... positions either way (a pattern search at every scale), or one
   unordered parameter changed.
3. **A model picks the step**: a ridge regression of log-bandwidth on every
   parameter value (main effects, refitted each trial, microseconds) ranks
   the candidate steps; the best predicted is proposed. Prior rows (a warm
   start from another GPU's results) join the model's data until the study's
   own measurements outnumber them.

It is an ordinary Optuna sampler: whatever it needs it reads from the
study's trials, so a resumed study or several workers sharing one storage
go on from the same history. ``DistinctSampler`` hands it the space
(``bind``) and wraps it, so a proposal that another worker claimed meanwhile
is passed over as for any sampler.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.data.results import config_key, plain_value

DEFAULT_STARTUP = 8  # space-filling configurations before the neighbourhood steps
DEFAULT_TOP_K = 1  # neighbourhoods of this many best configurations compete
RIDGE = 1.0  # the model's L2 penalty (per one-hot column; values are log GB/s)
CANDIDATES = 128  # random feasible candidates per space-filling choice
UNSEEN = 200  # random draws where no enumerated space is bound


class OrdinalSampler(optuna.samplers.BaseSampler):
    """Space-filling start, then model-ranked steps around the best
    configurations (see the module's docstring).

    Args:
        seed: seeds the space-filling draws and the tie-breaks.
        n_startup: space-filling configurations before the steps.
        top_k: best configurations whose neighbourhoods are searched.
        prior: (configuration, bandwidth) pairs known before the study (warm
            start); used by the model, never taken for measured.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        n_startup: int = DEFAULT_STARTUP,
        top_k: int = DEFAULT_TOP_K,
        prior: Sequence[tuple[Mapping, float]] = (),
    ) -> None:
        if n_startup < 1 or top_k < 1:
            raise ValueError(f"n_startup and top_k must be >= 1, got {n_startup} and {top_k}")
        self.seed = seed
        self.n_startup = n_startup
        self.top_k = top_k
        self.prior = sorted(((dict(cfg), float(value)) for cfg, value in prior if value > 0), key=lambda item: -item[1])
        self._rng = random.Random(seed)
        self._dists: dict[str, CategoricalDistribution] | None = None
        self._feasible: Callable[[dict], bool] = lambda cfg: True
        self._enumerated: list[tuple[str, dict]] | None = None
        self._asked: dict[int, set[str]] = {}  # trial number -> keys proposed for it

    # What DistinctSampler tells it.

    def bind(self, dists: Mapping[str, CategoricalDistribution], feasible: Callable[[dict], bool],
             enumerated: Sequence[dict] | None) -> None:  # fmt: skip
        """The searched space: its distributions, a feasibility test and, where
        the space is small enough, every feasible configuration."""
        self._dists = dict(dists)
        self._feasible = feasible
        # Sorted by key, so that the order the values are listed in changes nothing.
        self._enumerated = None if enumerated is None else sorted((config_key(cfg), cfg) for cfg in enumerated)
        self._order = {name: _ordered_values(dist.choices) for name, dist in self._dists.items()}
        self._columns = {(name, value): i for i, (name, value) in enumerate(
            (name, value) for name, dist in self._dists.items() for value in dist.choices)}  # fmt: skip

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
        rng = random.Random(self.seed * 1_000_003 + trial.number + 7919 * len(self._asked.get(trial.number, ())))
        measured, visited = self._history(study, trial)
        cfg = None
        if len(visited) - len(self._asked.get(trial.number, ())) < self.n_startup or not measured:
            # A warm start's best rows stand in for the space-filling start.
            cfg = self._best_prior(visited) if self.prior else None
            cfg = cfg or self._spread(visited, rng)
        if cfg is None:
            cfg = self._step(measured, visited, rng)
        if cfg is None:
            cfg = self._unseen(visited, rng)
        if cfg is None:
            return {}
        self._asked.setdefault(trial.number, set()).add(config_key(cfg))
        return cfg

    # Choosing.

    def _history(self, study: optuna.Study, trial: FrozenTrial) -> tuple[dict[str, tuple[dict, float]], set[str]]:
        """Measured configurations (key -> (config, bandwidth)) and every key
        not to propose (measured, failed, in flight, proposed for this trial)."""
        measured: dict[str, tuple[dict, float]] = {}
        visited = set(self._asked.get(trial.number, ()))
        for other in study.get_trials(deepcopy=False):
            if other.number == trial.number or not other.params.keys() >= self._dists.keys():
                continue
            cfg = {name: plain_value(other.params[name]) for name in self._dists}
            key = config_key(cfg)
            visited.add(key)
            if other.state == TrialState.COMPLETE and other.value is not None and other.value > 0:
                measured[key] = (cfg, float(other.value))
        return measured, visited

    def _spread(self, visited: set[str], rng: random.Random) -> dict | None:
        """The random feasible candidate farthest from every visited one."""
        points = [self._position(_parse(key)) for key in visited]
        best, best_distance = None, -1.0
        for cfg in self._random_unseen(visited, rng, CANDIDATES):
            if not points:
                return cfg
            here = self._position(cfg)
            distance = min(_distance(here, p) for p in points)
            if distance > best_distance:
                best, best_distance = cfg, distance
        return best

    def _best_prior(self, visited: set[str]) -> dict | None:
        """The best prior configuration of this space not yet visited."""
        for cfg, _ in self.prior:  # best first
            if all(cfg.get(n) in d.choices for n, d in self._dists.items()):
                cfg = {name: cfg[name] for name in self._dists}
                if config_key(cfg) not in visited and self._feasible(cfg):
                    return cfg
        return None

    def _step(self, measured: dict[str, tuple[dict, float]], visited: set[str], rng: random.Random) -> dict | None:
        """The model's favourite among unvisited steps from the best configurations."""
        ranked = sorted(measured.values(), key=lambda item: -item[1])
        candidates: dict[str, dict] = {}
        searched = 0
        for cfg, _ in ranked:
            steps = [c for c in self._neighbours(cfg) if config_key(c) not in visited]
            if steps:
                candidates.update((config_key(c), c) for c in steps)
                searched += 1
                if searched >= self.top_k:
                    break
        if not candidates:
            return None
        model = self._fit(list(measured.values()))
        choices = list(candidates.values())
        scores = model(choices) + np.array([rng.random() * 1e-9 for _ in choices])
        return choices[int(np.argmax(scores))]

    def _neighbours(self, cfg: dict) -> list[dict]:
        """Feasible configurations one step from ``cfg``: an ordered parameter
        moved 1, 2, 4, ... positions, or an unordered one changed."""
        found = []
        for name, values in self._order.items():
            ordered, values = values
            here = values.index(cfg[name])
            if ordered:
                reach = [here + sign * d for d in _powers_below(len(values)) for sign in (-1, 1)]
                others = [values[i] for i in reach if 0 <= i < len(values)]
            else:
                others = [v for v in values if v != cfg[name]]
            for value in others:
                candidate = {**cfg, name: value}
                if self._feasible(candidate):
                    found.append(candidate)
        return found

    def _fit(self, rows: list[tuple[dict, float]]) -> Callable[[list[dict]], np.ndarray]:
        """Ridge regression of log-bandwidth on one-hot parameter values, with
        the prior rows (rescaled to the study's mean) while they outnumber the
        study's own."""
        data = list(rows)
        if self.prior and len(self.prior) > len(rows):
            known = [(cfg, v) for cfg, v in self.prior if all(cfg.get(n) in d.choices for n, d in self._dists.items())]
            if known and rows:
                shift = np.mean([math.log(v) for _, v in rows]) - np.mean([math.log(v) for _, v in known])
                data += [(cfg, v * math.exp(shift)) for cfg, v in known]
            elif known:
                data += known
        x = self._design([cfg for cfg, _ in data])
        y = np.log([v for _, v in data])
        mean = y.mean()
        weights = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ (y - mean))
        return lambda cfgs: self._design(cfgs) @ weights + mean

    def _design(self, cfgs: list[dict]) -> np.ndarray:
        x = np.zeros((len(cfgs), len(self._columns)))
        for row, cfg in enumerate(cfgs):
            for name in self._dists:
                column = self._columns.get((name, cfg.get(name)))
                if column is not None:
                    x[row, column] = 1.0
        return x

    def _unseen(self, visited: set[str], rng: random.Random) -> dict | None:
        return next(iter(self._random_unseen(visited, rng, 1)), None)

    def _random_unseen(self, visited: set[str], rng: random.Random, count: int) -> list[dict]:
        if self._enumerated is not None:
            left = [cfg for key, cfg in self._enumerated if key not in visited]
            return rng.sample(left, min(count, len(left)))
        found = []
        for _ in range(UNSEEN):
            cfg = {name: rng.choice(dist.choices) for name, dist in self._dists.items()}
            if config_key(cfg) not in visited and self._feasible(cfg):
                found.append(cfg)
                if len(found) >= count:
                    break
        return found

    def _position(self, cfg: dict) -> list[float]:
        """``cfg`` in the unit cube (ordered parameters) and as labels (others)."""
        position = []
        for name, (ordered, values) in self._order.items():
            i = values.index(cfg[name]) if cfg.get(name) in values else 0
            position.append(i / max(1, len(values) - 1) if ordered else float(i) + 10.0)
        return position


def _ordered_values(choices: Sequence) -> tuple[bool, list]:
    """Whether the values are ordered (all numbers), and them sorted (by
    text where unordered, so the listed order never matters)."""
    values = [plain_value(v) for v in choices]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return numeric, sorted(values) if numeric else sorted(values, key=str)


def _powers_below(n: int) -> list[int]:
    steps, d = [], 1
    while d < n:
        steps.append(d)
        d *= 2
    return steps


def _distance(a: list[float], b: list[float]) -> float:
    """Euclidean in the unit cube; an unordered parameter (label >= 10) adds 1 where the labels differ."""
    total = 0.0
    for x, y in zip(a, b):
        total += (x != y) * 1.0 if x >= 10.0 else (x - y) ** 2
    return math.sqrt(total)


def _parse(key: str) -> dict:
    import json

    return json.loads(key)
