"""Arithmetic on a grid of parameter values for ``OrdinalSampler``: which
values are ordered, the step sizes along them, distances between grid points,
the sums of the one-hot model's normal equations, and the Parzen phase's
kernels and densities."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tuner.data.results import plain_value


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
    log scale, to twice and to half it, where every value is a positive
    number; else, or where that is the value itself, the adjacent ones."""
    positive = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)
    found = []
    for here, value in enumerate(values):
        near = set()
        if positive:
            for target in (2.0 * value, 0.5 * value):
                nearest = min(range(len(values)), key=lambda i: (abs(math.log(values[i] / target)), i))
                if nearest != here:
                    near.add(nearest)
        if not near:
            near = {i for i in (here - 1, here + 1) if 0 <= i < len(values)}
        found.append(sorted(near))
    return found


def parzen_kernels(orders: Sequence[tuple[bool, list]], observations: int, neighbour_share: float) -> list[np.ndarray]:
    """Per parameter, the (k, k) matrix whose row c is the Parzen kernel
    centred on position c of a mixture of ``observations``: the categorical
    kernel (``kernel_keep``), and for an ordered parameter a share
    ``neighbour_share`` of it moved to ``log_neighbours`` of c, split evenly.
    Positions are the sorted values' of an ordered parameter."""
    kernels = []
    for ordered, values in orders:
        k = len(values)
        keep = float(kernel_keep(np.array([k], dtype=float), observations)[0])
        kernel = np.full((k, k), (1.0 - keep) / max(1, k - 1))
        np.fill_diagonal(kernel, keep)
        if ordered and k > 1:
            moved = np.zeros((k, k))
            for here, near in enumerate(log_neighbours(values)):
                moved[here, near] = 1.0 / len(near)
            kernel = (1.0 - neighbour_share) * kernel + neighbour_share * moved
        kernels.append(kernel)
    return kernels


def parzen_log_density(drawn: np.ndarray, observed: np.ndarray, kernels: Sequence[np.ndarray]) -> np.ndarray:
    """Log density of each row of ``drawn`` (positions, one column per
    parameter) under a mixture of one kernel per row of ``observed`` (row c
    of each parameter's matrix of ``kernels``) and a uniform one."""
    uniform = -float(sum(np.log(len(kernel)) for kernel in kernels))
    if len(observed) == 0:
        return np.full(len(drawn), uniform)
    log_kernels = [np.log(kernel) for kernel in kernels]
    log_p = np.empty((len(drawn), len(observed) + 1))
    for start in range(0, len(observed), 256):  # bounded memory: 256 observations at a time
        block = observed[start : start + 256]
        total = np.zeros((len(drawn), len(block)))
        for j, log_kernel in enumerate(log_kernels):
            total += log_kernel[block[:, j][None, :], drawn[:, j][:, None]]
        log_p[:, start : start + len(block)] = total
    log_p[:, -1] = uniform
    top = log_p.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1)) - np.log(len(observed) + 1)
