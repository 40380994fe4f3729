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
