"""The step model of ``OrdinalSampler`` (``tuner.search.samplers.ordinal``):
a ridge regression of log-bandwidth on one-hot parameter values, with value
pairs of narrow parameters where they predict better left out in turn (step 5
of the ordinal module's docstring), and the configuration of highest upper
confidence bound under it (step 4's ``bound_every``).

``StepModel`` is a part of ``OrdinalSampler``, not a sampler of its own: it
reads the space and the measurement sums the sampler binds and keeps.
"""

from __future__ import annotations

import itertools
import json
import math
import random

import numpy as np

from tuner.data.results import config_key
from tuner.search.samplers.ordinal_grid import one_hot_quadratic_forms

RIDGE = 1.0  # the model's L2 penalty (per one-hot column; values are log GB/s)
WIDE = 5  # ordered parameters of at least this many values are a slice's free ones
PAIR_COLUMNS_MAX = 256  # value-pair columns the model takes at most (beyond, fewer pairs: two inverses an ask)
LEFT_OUT_ROWS = 2000  # the latest rows (measurements, prior) whose leave-one-out error decides on the pairs
MODEL_VALUES = 64  # a parameter's columns in the model at most (more values share them, neighbours together)
BOUND_KAPPA = 1.0  # the bound: the model's prediction plus this many of its standard deviations
BOUND_POOL = 2000  # unvisited configurations, drawn at random, among which the bound's favourite is chosen


def ridge_weights(gram: np.ndarray, moment: np.ndarray, ones: np.ndarray, mean: float) -> np.ndarray:
    """The ridge regression's weights per one-hot column (penalty ``RIDGE``)
    from X'X, X'y and X'1 of the design, the intercept held at ``mean``."""
    return np.linalg.solve(gram + RIDGE * np.eye(len(ones)), moment - mean * ones)



class StepModel:
    """The model that ranks ``OrdinalSampler``'s steps (a mixin of it)."""

    def _fit(self, measured: dict[str, tuple[dict, float]]) -> tuple[np.ndarray, float]:
        """Ridge regression of log-bandwidth on one-hot parameter values (and
        value pairs, where they predict better): the weights per column and
        the intercept. The prior rows (shifted to the study's mean) join
        while they outnumber the study's own."""
        if self._fitted is not None and self._fitted[0] is measured:
            return self._fitted[1]  # asked again for one trial: the same history
        gram, moment, ones = self._sums.read(measured)  # read-only below
        y = np.log(self._sums.values)
        total, count = y.sum(), len(y)
        shift = None  # the prior rows' shift to the study's mean, where they join
        if self._prior and len(self._prior) > count:
            shift = y.mean() - self._prior_mean
            gram = gram + self._prior_gram
            moment = moment + self._prior_moment + shift * self._prior_ones
            ones = ones + self._prior_ones
            total += (self._prior_mean + shift) * len(self._prior)
            count += len(self._prior)
        mean = total / count
        if self._pair_columns:
            keys, left_out = self._left_out_rows(y, shift)
            weights = self._fit_with_or_without_pairs(gram, moment - mean * ones, self._features_of(keys), left_out - mean)
        else:
            weights = ridge_weights(gram, moment, ones, mean)
        self._fitted = (measured, (weights, mean))
        return weights, mean

    def _left_out_rows(self, y: np.ndarray, shift: float | None) -> tuple[list[str], np.ndarray]:
        """The keys and log-bandwidths whose leave-one-out error decides on
        the pairs: the study's latest ``LEFT_OUT_ROWS``, then the best prior
        rows (shifted by ``shift``, where they join the fit) up to that many."""
        keys, values = self._sums.keys[-LEFT_OUT_ROWS:], y[-LEFT_OUT_ROWS:]
        if shift is not None:
            room = LEFT_OUT_ROWS - len(keys)  # prior rows are best first
            keys = keys + [key for key, _, _ in self._prior[:room]]
            values = np.concatenate([values, self._prior_log[:room] + shift])
        return keys, values

    def _fit_with_or_without_pairs(self, gram: np.ndarray, centred_moment: np.ndarray, rows: np.ndarray,
                                   centred: np.ndarray) -> np.ndarray:  # fmt: skip
        """The weights of the ridge model with the value-pair columns, or of
        the one without them (zero there), whichever predicts the rows it is
        fitted on (``rows``' columns, at most ``LEFT_OUT_ROWS``; ``centred``,
        their log-bandwidth less the intercept) better when each is left out
        in turn. Pairs fitted on too few measurements of a combination, or
        where the parameters do not interact, only add noise to the ranking.
        For a fixed intercept the leave-one-out error of a ridge model is
        exact in closed form: each residual over one less its row's leverage.
        Without pairs unless they do better."""
        best_error, best = math.inf, None
        for width, columns in ((self._main_width, rows[:, : len(self._dists)]), (self._width, rows)):
            inverse = np.linalg.inv(gram[:width, :width] + RIDGE * np.eye(width))
            weights = np.zeros(self._width)
            weights[:width] = inverse @ centred_moment[:width]
            leverage = one_hot_quadratic_forms(inverse, columns)
            error = float((((centred - weights[columns].sum(axis=1)) / (1.0 - leverage)) ** 2).sum())
            if best is None or error < best_error:
                best_error, best = error, weights
        return best

    def _paired(self) -> list[tuple[str, str]]:
        """The parameter pairs the model has value-pair columns for: every
        two parameters of more than one and fewer than ``WIDE`` values. Where
        their value pairs would be more than ``PAIR_COLUMNS_MAX`` (a space of
        many narrow parameters, such as a GEMM's tile and vector widths), only
        the pairs with a switch (a parameter of two values), then only those
        of two switches, then none: one switch deciding what another value is
        worth is the interaction the pairs are for. On the hub's convolution
        (under the cap) the pairs with a switch alone did nearly what every
        pair did; no space over the cap has been screened."""
        narrow = [name for name in self._narrow if 1 < len(self._dists[name].choices) < WIDE]
        every = list(itertools.combinations(narrow, 2))
        switch = {name for name in narrow if len(self._dists[name].choices) == 2}
        for names in (every, [p for p in every if switch & set(p)], [p for p in every if set(p) <= switch]):
            if sum(len(self._dists[a].choices) * len(self._dists[b].choices) for a, b in names) <= PAIR_COLUMNS_MAX:
                return names
        return []

    def _value_pairs(self) -> dict[tuple, int]:
        """The model's column (after the one-hot values') of every pair of
        values of each pair of ``_pair_names``."""
        pairs = [((a, va), (b, vb)) for a, b in self._pair_names
                 for va in self._dists[a].choices for vb in self._dists[b].choices]  # fmt: skip
        return {pair: self._main_width + i for i, pair in enumerate(pairs)}

    def _grouped_columns(self) -> tuple[dict[tuple, int], int]:
        """The model's column of each parameter value, and their number: one
        column per value (numbered as ``_columns``), but a parameter of more
        than ``MODEL_VALUES`` values shares that many columns among runs of
        neighbouring values (in its order). The model's sums, kept for the
        latest positions of the history, grow with the square of its columns:
        a space listing thousands of values of one parameter would otherwise
        take gigabytes, and their main effects are measured a few times each."""
        if all(len(dist.choices) <= MODEL_VALUES for dist in self._dists.values()):
            return self._columns, len(self._columns)
        columns, width = {}, 0
        for name, dist in self._dists.items():
            ordered, values = self._order[name]
            listed = values if ordered else list(dist.choices)
            groups = min(len(listed), MODEL_VALUES)
            for position, value in enumerate(listed):
                columns[(name, value)] = width + position * groups // len(listed)
            width += groups
        return columns, width

    def _features_of(self, keys: list[str]) -> np.ndarray:
        """(len(keys), columns) the model's columns of each key: its values'
        (``_grouped_columns``), then its pairs of narrow values (``pairs``)."""
        if not self._pair_columns and self._model_columns is self._columns:
            return self._columns_of(keys)
        rows = []
        for key in keys:
            features = self._feature_cache.get(key)
            if features is None:
                cfg = json.loads(key)
                features = self._feature_cache[key] = [self._model_columns[(name, cfg[name])] for name in self._dists] + [
                    self._pair_columns[((a, cfg[a]), (b, cfg[b]))] for a, b in self._pair_names]  # fmt: skip
            rows.append(features)
        return np.array(rows, dtype=int).reshape(len(keys), -1)

    def _columns_of(self, keys: list[str]) -> np.ndarray:
        """(len(keys), parameters) column indices of the keys' one-hot values."""
        rows = []
        for key in keys:
            columns = self._column_cache.get(key)
            if columns is None:
                cfg = json.loads(key)
                columns = self._column_cache[key] = [self._columns[(name, cfg[name])] for name in self._dists]
            rows.append(columns)
        return np.array(rows, dtype=int).reshape(len(keys), len(self._dists))

    def _bound(self, measured: dict[str, tuple[dict, float]], visited: set[str], rng: random.Random) -> dict | None:
        """The unvisited configuration, of ``BOUND_POOL`` drawn at random (of
        as many random draws where the space is not listed), of
        highest upper confidence bound (prediction plus ``BOUND_KAPPA``
        standard deviations) under the step model with every column, value
        pairs included, read as a Bayesian linear regression: the posterior
        covariance is the residual variance times (X'X + ``RIDGE`` I)^-1. The
        value pairs measured least have the widest bound. Where the best
        measurements all share a region that is good in most parameters (the
        A100's convolution of the benchmark hub: its optimum has read-only
        loads with shared memory, slow without it), the Parzen proposals of a
        restart recombine that region again; the bound tries what is unmeasured
        and could be fast. The study's own measurements only (no prior rows)."""
        gram, moment, ones = self._sums.read(measured)
        y = np.log(self._sums.values)
        mean = y.mean()
        inverse = np.linalg.inv(gram + RIDGE * np.eye(self._width))
        weights = inverse @ (moment - mean * ones)
        residuals = y - mean - weights[self._features_of(self._sums.keys)].sum(axis=1)
        variance = max(float(residuals @ residuals) / max(1, len(y) - 1), 1e-6)
        candidates = self._random_unseen(visited, rng, BOUND_POOL)
        if not candidates:
            return None
        columns = self._features_of([config_key(cfg) for cfg in candidates])
        spread = one_hot_quadratic_forms(inverse, columns) * variance
        return self._choose(candidates, weights[columns].sum(axis=1) + BOUND_KAPPA * np.sqrt(spread))
