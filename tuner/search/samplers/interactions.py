"""``InteractionSampler``: Thompson sampling over a model of every
parameter's effect and every pair's interaction, on the ordinal search's
start and history.

``OrdinalSampler`` ranks only the steps around its current climb's best with
a model of main effects, and a climb ends only when it stops gaining. Where
parameters interact strongly (a convolution whose shared-memory switch
decides which tile sizes are fast, a block width that is fast only at
multiples of the warp) such a climb keeps gaining a little from switches
that barely matter and never looks where the optimum is. This sampler keeps
the ordinal start and replaces the climb:

1. **Start** as ``OrdinalSampler`` does: the grid's centre, its extreme
   corners and far-apart points (``n_startup``).
2. **Model**: Bayesian linear regression of log-rate on one-hot parameter
   values and one-hot value *pairs* (a value of one parameter together with
   a value of another), with Gaussian priors that shrink pairs harder than
   single values. A configuration that failed is taken in at the worst rate
   measured, so the model learns to avoid it. This is a Gaussian process
   whose kernel counts the parameters, and the pairs, two configurations
   share: it needs no distance, so non-power-of-two and unordered values,
   and jagged effects (warp multiples), are all one to it.
3. **Choice by Thompson sampling**: each ask draws one model from the
   posterior and proposes the unmeasured feasible configuration that draw
   rates best, among every one where the space was enumerated and small
   enough (``POOL``), else up to 200 random ones (``OrdinalSampler``'s
   draw), plus the ordinal steps around the best measured. Early, draws differ widely and the search
   explores; as data accumulate they agree on the best region. Every other
   ask is instead ``OrdinalSampler``'s step around the best measured, which
   refines where a draw is indifferent between neighbours.

An ask costs a solve of at most ``KEEP + RECENT`` measurements (the best
and the latest; the posterior is drawn in that dual form, by Matheron's
rule) and a sum of a few weights per candidate, so it stays cheap on spaces
of 10^6 points (35 ms an ask on average over 200 trials of a synthetic
790,000-point space: ``benchmarks/results/space-scale.txt``). Everything else it reads from the study's trials, as
``OrdinalSampler`` does, so a resumed study or several workers go on from the
same history.
"""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.samplers.registry import Prior

DEFAULT_STARTUP = 8  # space-filling configurations before the model chooses
DEFAULT_TOP_K = 5  # best configurations whose ordinal steps are always candidates
POOL = 20_000  # candidates scored per ask where the space is larger (or not enumerated)
KEEP = 200  # best measurements the model is fitted on
RECENT = 56  # most recent ones besides
PRIOR_MAIN = 1.0  # prior variance of a value's effect (standardised log-rate)
PRIOR_PAIR = 1.0  # of a pair's interaction: as much as a value's
NOISE = 0.05  # noise variance (standardised): the tables are exact, the model is not


class InteractionSampler(OrdinalSampler):
    """Space-filling start, then Thompson sampling over main effects and
    pairwise interactions (see the module's docstring). Arguments as
    ``OrdinalSampler``'s; its climbs and restarts are not used."""

    def __init__(self, seed: int = 0, *, n_startup: int = DEFAULT_STARTUP, top_k: int = 1, **kwargs) -> None:
        kwargs.setdefault("patience", 0)
        # No landmarks: on spaces with restrictions and failures the grid's extremes are often its
        # worst configurations, which sets an anytime score back for every seed alike.
        kwargs.setdefault("landmarks", ())
        super().__init__(seed, n_startup=n_startup, top_k=top_k, **kwargs)
        self._failed: dict[str, None] = {}  # in the order seen, so a run repeats

    def bind(self, dists, feasible, enumerated, draws=None) -> None:
        super().bind(dists, feasible, enumerated, draws)
        # Only parameters with a choice carry information.
        self._names = [name for name, dist in self._dists.items() if len(dist.choices) > 1]
        self._index = {name: {value: i for i, value in enumerate(self._order[name][1])} for name in self._names}
        sizes = [len(self._index[name]) for name in self._names]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self._main_offsets = offsets[:-1]
        pairs = list(itertools.combinations(range(len(sizes)), 2))
        self._pairs = np.array(pairs, dtype=int).reshape(-1, 2)
        pair_sizes = [sizes[a] * sizes[b] for a, b in pairs]
        self._pair_offsets = offsets[-1] + np.concatenate([[0], np.cumsum(pair_sizes)])[:-1].astype(int)
        self._pair_strides = np.array([sizes[b] for _, b in pairs], dtype=int)
        self._width = int(offsets[-1] + sum(pair_sizes))
        self._prior_var = np.concatenate([np.full(offsets[-1], PRIOR_MAIN), np.full(sum(pair_sizes), PRIOR_PAIR)])
        self._rows: dict[str, np.ndarray] = {}
        if self._enumerated is not None and len(self._enumerated) <= POOL:
            self._all_keys = [key for key, _ in self._enumerated]
            self._all_values = np.array([self._values(cfg) for _, cfg in self._enumerated], dtype=int).reshape(
                len(self._enumerated), len(self._names))  # fmt: skip
            self._all_columns = self._design(self._all_values)
        else:
            self._all_keys = None

    def _values(self, cfg: dict) -> list[int]:
        return [self._index[name][cfg[name]] for name in self._names]

    def _design(self, values: np.ndarray) -> np.ndarray:
        """(rows, parameters + pairs) one-hot column indices of value-index rows."""
        pair_values = values[:, self._pairs[:, 0]] * self._pair_strides + values[:, self._pairs[:, 1]]
        return np.concatenate([values + self._main_offsets, pair_values + self._pair_offsets], axis=1)

    def _row(self, key: str, cfg: dict) -> np.ndarray:
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._design(np.array([self._values(cfg)], dtype=int))[0]
        return row

    def _seen(self, trial: FrozenTrial):
        seen = super()._seen(trial)
        if seen is not None and seen[2] is None and trial.state in (TrialState.FAIL, TrialState.COMPLETE):
            self._failed[seen[0]] = None  # measured and failed (a running trial is not)
        return seen

    def _step(self, climb, measured, visited, rng: random.Random) -> dict | None:
        if (len(measured) + len(self._failed)) % 2 == 0:
            # Every other ask refines: the ordinal step around the best measured, ranked by its
            # main-effects model (a draw rates a one-position step no higher than far points).
            cfg = super()._step(measured, measured, visited, rng)
            if cfg is not None:
                return cfg
        draw = np.random.default_rng(rng.getrandbits(64))
        weights = self._draw(measured, draw)
        # Candidates: the ordinal steps around the best, and the space (or a random share of it).
        local: dict[str, dict] = {}
        searched = 0
        for key, (cfg, _) in sorted(measured.items(), key=lambda item: -item[1][1]):
            if searched >= DEFAULT_TOP_K:
                break
            if key in self._exhausted:
                continue
            steps = [(k, c) for k, c in self._neighbours(key, cfg) if k not in visited]
            if not steps:
                self._exhausted.add(key)
                continue
            local.update(steps)
            searched += 1
        best_score, best_cfg = -np.inf, None
        if local:
            keys = list(local)
            scores = weights[np.array([self._row(k, local[k]) for k in keys])].sum(axis=1)
            i = int(np.argmax(scores))
            best_score, best_cfg = scores[i], local[keys[i]]
        if self._all_keys is not None:
            scores = weights[self._all_columns].sum(axis=1)
            for i in np.argsort(-scores, kind="stable"):
                if scores[i] <= best_score:
                    break
                if self._all_keys[i] not in visited:
                    best_cfg = self._enumerated[i][1]
                    break
        else:
            pool = self._random_unseen(visited, rng, POOL)
            if pool:
                columns = self._design(np.array([self._values(cfg) for cfg in pool], dtype=int))
                scores = weights[columns].sum(axis=1)
                i = int(np.argmax(scores))
                if scores[i] > best_score:
                    best_cfg = pool[i]
        return best_cfg

    def _draw(self, measured: dict, draw: np.random.Generator) -> np.ndarray:
        """One draw of the weights from the posterior given the kept
        measurements (Matheron's rule: a prior draw corrected by the data)."""
        keys = list(measured)
        y_all = np.log(np.array([value for _, value in measured.values()]))
        floor = y_all.min()
        failed = [key for key in self._failed if key not in measured]
        keep = _kept(y_all)
        rows = [self._row(keys[i], measured[keys[i]][0]) for i in keep]
        y = y_all[keep]
        if failed:
            rows += [self._row(key, json.loads(key)) for key in failed[-RECENT:]]
            y = np.concatenate([y, np.full(min(len(failed), RECENT), floor)])
        columns = np.array(rows, dtype=int)
        mean, spread = y.mean(), y.std() or 1.0
        z = (y - mean) / spread
        # The kernel: shared values weighted by their prior variances.
        share = np.zeros((len(z), len(z)))
        for c in range(columns.shape[1]):
            share += (columns[:, None, c] == columns[None, :, c]) * self._prior_var[columns[0, c]]
        prior = draw.standard_normal(self._width) * np.sqrt(self._prior_var)
        residual = z - prior[columns].sum(axis=1) - draw.standard_normal(len(z)) * np.sqrt(NOISE)
        beta = np.linalg.solve(share + NOISE * np.eye(len(z)), residual)
        correction = np.bincount(columns.ravel(), weights=np.repeat(beta, columns.shape[1]), minlength=self._width)
        return prior + self._prior_var * correction


def _kept(y: np.ndarray) -> np.ndarray:
    """Indices of the measurements the model is fitted on: all while few,
    else the best ``KEEP`` and the ``RECENT`` latest."""
    if len(y) <= KEEP + RECENT:
        return np.arange(len(y))
    best = np.argsort(-y, kind="stable")[:KEEP]
    return np.union1d(best, np.arange(len(y) - RECENT, len(y)))


def make(seed: int, prior: Prior) -> optuna.samplers.BaseSampler:
    """The ``interactions`` strategy's sampler (``registry.Strategy.make``)."""
    return InteractionSampler(seed=seed, prior=prior)
