"""Arithmetic on a grid of parameter values for ``OrdinalSampler``: which
values are ordered, the step sizes along them, distances between grid points,
the sums of the one-hot model's normal equations, and the Parzen phase's
kernels and densities."""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tuner.data.results import plain_value

# The grid points the space-filling start tries first: its centre, the corner of
# every ordered parameter's last (largest) value and that of every first one.
LANDMARKS = ("centre", "last", "first")
LANDMARK_PICKS = {"centre": lambda values: values[len(values) // 2], "last": lambda values: values[-1],
         "first": lambda values: values[0]}  # fmt: skip


def one_hot_sums(columns: np.ndarray, y: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X'X, X'y and X'1 of the one-hot design whose rows set ``columns``,
    counted directly (no dense matrix: a BLAS product of these small
    matrices costs more in thread start-up than in arithmetic)."""
    pairs = (columns[:, :, None] * width + columns[:, None, :]).ravel()
    gram = np.bincount(pairs, minlength=width * width).reshape(width, width).astype(float)
    moment = np.bincount(columns.ravel(), weights=np.repeat(y, columns.shape[1]), minlength=width)
    ones = np.bincount(columns.ravel(), minlength=width).astype(float)
    return gram, moment, ones


def one_hot_quadratic_forms(inverse: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """x' A x for each one-hot row x that sets ``columns`` (A = ``inverse``,
    square): a ridge fit's leverages, or its posterior variances over the
    noise's. A dense product of the one-hot design costs less than a gather
    of A's entries over each row's columns (4-6 times, 2,000 rows)."""
    design = np.zeros((len(columns), len(inverse)))
    design[np.arange(len(columns))[:, None], columns] = 1.0
    return np.einsum("ij,ij->i", design @ inverse, design)


def ordered_values(choices: Sequence) -> tuple[bool, list]:
    """Whether the values are ordered (all numbers), and them sorted (by
    text where unordered, so the listed order never matters)."""
    values = [plain_value(v) for v in choices]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return numeric, sorted(values) if numeric else sorted(values, key=str)


def powers_below(n: int) -> list[int]:
    steps, d = [], 1
    while d < n:
        steps.append(d)
        d *= 2
    return steps


def grid_distance(a: list[float], b: list[float]) -> float:
    """Euclidean in the unit cube; an unordered parameter (label >= 10) adds 1 where the labels differ."""
    total = 0.0
    for x, y in zip(a, b):
        total += (x != y) * 1.0 if x >= 10.0 else (x - y) ** 2
    return math.sqrt(total)


def nearest_distances(candidates: Sequence[list[float]], points: np.ndarray, ordered: Sequence[bool]) -> np.ndarray:
    """Each candidate's ``grid_distance`` to the nearest of ``points`` (rows),
    for all at once. Summed dimension by dimension in ``grid_distance``'s
    order, so the figures are the same to the last bit and ties break alike."""
    cand = np.asarray(candidates, dtype=float).reshape(len(candidates), len(ordered))
    nearest = np.empty(len(cand))
    for start in range(0, len(cand), 32):  # bounded memory: 32 candidates x every point at a time
        chunk = cand[start : start + 32, None, :]
        total = np.zeros((chunk.shape[0], len(points)))
        for k, is_ordered in enumerate(ordered):
            diff = chunk[:, :, k] - points[None, :, k]
            total += diff * diff if is_ordered else (diff != 0)
        nearest[start : start + 32] = np.sqrt(total).min(axis=1)
    return nearest


def kernel_keep(sizes: np.ndarray, observations: int) -> np.ndarray:
    """The chance that a categorical Parzen kernel of a mixture of
    ``observations`` keeps its own value of each parameter,
    (1 + e) / (1 + k e), with k the parameter's number of values and
    e = 1 / (observations + 1); every other value has e / (1 + k e)."""
    e = 1.0 / (observations + 1)
    return (1 + e) / (1 + sizes * e)


def log_neighbours(values: Sequence) -> list[list[int]]:
    """Each sorted value's neighbours (positions): the values nearest, on a
    log scale, to twice and to half it (the lower one where two are as
    near), where every value is a positive number; else, or where that is
    the value itself, the adjacent ones."""
    positive = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)
    found = []
    for here, value in enumerate(values):
        near = set()
        if positive:
            for target in (2.0 * value, 0.5 * value):
                # The nearest on a log scale is one of the two values around the target.
                above = bisect.bisect_left(values, target)
                around = [i for i in (above - 1, above) if 0 <= i < len(values)]
                nearest = min(around, key=lambda i: (abs(math.log(values[i] / target)), i))
                if nearest != here:
                    near.add(nearest)
        if not near:
            near = {i for i in (here - 1, here + 1) if 0 <= i < len(values)}
        found.append(sorted(near))
    return found


def neighbour_table(values: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """``log_neighbours`` of sorted ``values`` as arrays: (k, 2) positions,
    -1 where a value has one neighbour, and (k,) one over their number."""
    near = log_neighbours(values)
    table = np.full((len(values), 2), -1)
    for here, positions in enumerate(near):
        table[here, : len(positions)] = positions
    return table, np.array([1.0 / len(positions) for positions in near])


@dataclass(frozen=True)
class ParzenKernel:
    """One parameter's Parzen kernel in a mixture of some observations, for
    every centre at once without a (values x values) matrix (a parameter can
    list thousands of values). The kernel centred on position c gives c
    ``keep`` and every other position ``other``; of an ordered parameter a
    share ``share`` of that goes instead to c's neighbours (``near``, as
    ``neighbour_table``), split evenly."""

    keep: float
    other: float
    share: float
    near: np.ndarray
    near_weight: np.ndarray

    def at(self, centres: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The kernel centred on each of ``centres`` at each of ``positions``
        (integer arrays, broadcast together)."""
        base = np.where(centres == positions, self.keep, self.other)
        if not self.share:
            return base
        moved = np.where((self.near[centres, 0] == positions) | (self.near[centres, 1] == positions), self.near_weight[centres], 0.0)
        return (1.0 - self.share) * base + self.share * moved

    def row(self, centre: int) -> np.ndarray:
        """The kernel centred on ``centre`` at every position."""
        return self.at(np.array(centre), np.arange(len(self.near)))

    def dense(self) -> np.ndarray:
        """(k, k): row c the kernel centred on c (for small parameters)."""
        positions = np.arange(len(self.near))
        return self.at(positions[:, None], positions[None, :])


def kernel_neighbours(orders: Sequence[tuple[bool, list]]) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Each parameter's ``neighbour_table`` for ``parzen_kernels``: an
    ordered one's of its sorted values, None for an unordered one."""
    return [neighbour_table(values) if ordered and len(values) > 1 else None for ordered, values in orders]


def parzen_kernels(orders: Sequence[tuple[bool, list]], observations: int, neighbour_share: float,
                   neighbours: Sequence[tuple[np.ndarray, np.ndarray] | None] | None = None) -> list[ParzenKernel]:  # fmt: skip
    """Per parameter, the Parzen kernel of a mixture of ``observations``:
    the categorical kernel (``kernel_keep``), and for an ordered parameter a
    share ``neighbour_share`` of it moved to ``log_neighbours`` of its
    centre, split evenly. Positions are the sorted values' of an ordered
    parameter. ``neighbours``: ``kernel_neighbours(orders)``, computed here
    where not given (a sampler computes it once)."""
    neighbours = kernel_neighbours(orders) if neighbours is None else neighbours
    kernels = []
    for (_, values), table in zip(orders, neighbours):
        k = len(values)
        keep = float(kernel_keep(np.array([k], dtype=float), observations)[0])
        near, weight = table if table is not None else (np.full((k, 2), -1), np.zeros(k))
        kernels.append(ParzenKernel(keep, (1.0 - keep) / max(1, k - 1), neighbour_share if table is not None else 0.0, near, weight))
    return kernels


def weighted_choice(weights: np.ndarray, rng: random.Random) -> int:
    """``rng.choices(range(len(weights)), weights=weights)[0]``: the same
    draw from the same state (one ``rng.random()``), with the running sums
    of the weights taken by numpy in the same order instead of in Python."""
    cumulative = np.cumsum(weights)
    return int(np.searchsorted(cumulative[:-1], rng.random() * (float(cumulative[-1]) + 0.0), side="right"))


def parzen_log_density(drawn: np.ndarray, observed: np.ndarray, kernels: Sequence[ParzenKernel]) -> np.ndarray:
    """Log density of each row of ``drawn`` (positions, one column per
    parameter) under a mixture of one kernel per row of ``observed`` (the
    kernels of ``kernels`` centred there) and a uniform one."""
    uniform = -float(sum(np.log(len(kernel.near)) for kernel in kernels))
    if len(observed) == 0:
        return np.full(len(drawn), uniform)
    total = np.zeros((len(drawn), len(observed)))
    for j, kernel in enumerate(kernels):
        # The log kernel of every centre at each drawn position (values x draws), read at the observed centres.
        at_drawn = np.log(kernel.at(np.arange(len(kernel.near))[:, None], drawn[:, j][None, :]))
        total += at_drawn[observed[:, j]].T
    log_p = np.empty((len(drawn), len(observed) + 1))
    log_p[:, :-1] = total
    log_p[:, -1] = uniform
    top = log_p.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1)) - np.log(len(observed) + 1)
