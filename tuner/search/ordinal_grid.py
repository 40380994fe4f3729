"""Arithmetic on a grid of parameter values for ``OrdinalSampler``: which
values are ordered, the step sizes along them, distances between grid points,
and the sums of the one-hot model's normal equations."""

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
    """The chance that a Parzen kernel of a mixture of ``observations`` keeps
    its own value of each parameter, (1 + e) / (1 + k e), with k the
    parameter's number of values and e = 1 / (observations + 1)."""
    e = 1.0 / (observations + 1)
    return (1 + e) / (1 + sizes * e)


def parzen_log_density(drawn: np.ndarray, observed: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Log density of each row of ``drawn`` (codes, one column per parameter)
    under a mixture of one categorical kernel per row of ``observed`` and a
    uniform one: a kernel gives its own value (1 + e) / (1 + k e) and every
    other value e / (1 + k e), k the parameter's number of values and
    e = 1 / (observations + 1)."""
    uniform = -np.log(sizes).sum()
    if len(observed) == 0:
        return np.full(len(drawn), uniform)
    same = np.log(kernel_keep(sizes, len(observed)))
    other = same - np.log(len(observed) + 2)  # e / (1 + k e): the kept value's (1 + e) / (1 + k e) over 1 + 1 / e
    log_p = np.empty((len(drawn), len(observed) + 1))
    for start in range(0, len(observed), 256):  # bounded memory: 256 observations at a time
        block = observed[start : start + 256]
        match = drawn[:, None, :] == block[None, :, :]
        log_p[:, start : start + len(block)] = np.where(match, same, other).sum(axis=2)
    log_p[:, -1] = uniform
    top = log_p.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1)) - np.log(len(observed) + 1)
