"""A GPU-free family and a synthetic measurement, shared by the study and
replay tests and by ``make_replay_table.py``.

Bandwidth is a deterministic function of the parameters with one unique
optimum, ``OPTIMUM_CFG`` at ``OPTIMUM_GBS``. Configurations with
``cache_hint="cs"`` and ``unroll=1`` return ``wrong_result`` with a bandwidth
far above the optimum, so a search that ranked failures would pick them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tuner.families.base import Config, Family, Launch, Param, Problem

PROBLEM = Problem("fake", "int32", 1 << 20)
OPTIMUM_CFG = {"block_size": 256, "unroll": 4, "vector_width": 4, "cache_hint": "cg"}
OPTIMUM_GBS = 900.0
WRONG_GBS = 9999.0
HINT_PENALTY = {"cg": 0.0, "none": 15.0, "cs": 30.0}


class FakeFamily(Family):
    """Four parameters; the constraint is ``unroll * vector_width <= 16``."""

    name = "fake"
    source = "fake.cu"
    dtypes = ("int32", "float32")
    params = (
        Param("block_size", (64, 128, 256, 512), "threads per block", 256),
        Param("unroll", (1, 2, 4, 8), "elements per thread per step", 1),
        Param("vector_width", (1, 2, 4, 8), "elements per load", 1),
        Param("cache_hint", ("none", "cg", "cs"), "load cache hint", "none"),
    )

    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        product = cfg["unroll"] * cfg["vector_width"]
        return [f"unroll * vector_width must be <= 16, got {product}"] if product > 16 else []

    def kernel_name(self, cfg: Config) -> str:
        return "fake"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {k.upper(): str(v) for k, v in cfg.items()}

    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return problem.n * 4

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError("the fake family runs nowhere")

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        raise NotImplementedError("the fake family runs nowhere")

    def bind(self, cfg: Config, problem: Problem, workspace: Any, function: Any, device: Any) -> Launch:
        raise NotImplementedError("the fake family runs nowhere")

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu: Any) -> Any:
        raise NotImplementedError("the fake family runs nowhere")


def bandwidth(cfg: Config) -> float:
    """Synthetic GB/s: penalties by distance (in octaves) from the optimum."""
    return (
        OPTIMUM_GBS
        - 60.0 * abs(math.log2(cfg["block_size"] / 256))
        - 40.0 * abs(math.log2(cfg["unroll"] / 4))
        - 50.0 * abs(math.log2(cfg["vector_width"] / 4))
        - HINT_PENALTY[cfg["cache_hint"]]
    )


def is_wrong(cfg: Config) -> bool:
    return cfg["cache_hint"] == "cs" and cfg["unroll"] == 1


def measure(cfg: Config, problem: Problem = PROBLEM) -> dict:
    """A results row as the GPU harness would return it."""
    bytes_moved = FakeFamily().bytes_moved(cfg, problem)
    gbs = WRONG_GBS if is_wrong(cfg) else bandwidth(cfg)
    return {
        "status": "wrong_result" if is_wrong(cfg) else "ok",
        "error": "relative error 0.5 > 1e-05" if is_wrong(cfg) else "0.0",
        "bandwidth_gbs": gbs,
        "time_ms_median": bytes_moved / gbs / 1e6,
        "registers": 16 + 4 * cfg["unroll"],
        "spill_bytes": 0,
        "bytes_moved": bytes_moved,
    }
