"""SAXPY (y = a x + y, float32) declared for the tuner: an example of a kernel
family that lives outside the package. The config names this folder in
``family_paths``; nothing under ``tuner/`` knows about it.

Bytes moved: x and y read, y written: ``3 * 4 * n``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tuner.families import params as shared
from tuner.families.base import Config, Family, Launch, Param, Problem
from tuner.families.buffers import grid_stride_blocks, poison
from tuner.families.params import CACHE_HINTS

A = np.float32(2.5)


class Saxpy(Family):
    name = "saxpy"
    source = str(Path(__file__).with_name("saxpy.cu"))
    dtypes = ("float32",)
    arg_types = "fPPQ"  # a, x, y, n
    tolerance = 1e-6
    params = (
        shared.block_size(256, (64, 128, 256, 512, 1024)),
        Param("vector_width", (1, 2, 4), "floats per load and store", default=4),
        shared.grid_blocks_per_sm((0, 2, 4, 8, 16), "blocks per multiprocessor; 0: enough for one pass"),
        shared.cache_hint(("none", "ldg", "stream"), "load path of x: plain, read-only (__ldg) or streaming (__ldcs)"),
    )

    def kernel_name(self, cfg: Config) -> str:
        return "saxpy"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {
            "BLOCK": str(cfg["block_size"]),
            "VEC": str(cfg["vector_width"]),
            "CACHE_HINT": str(CACHE_HINTS[cfg["cache_hint"]]),
        }

    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 3 * 4 * problem.n

    def device_bytes(self, problem: Problem) -> int:
        return 3 * 4 * problem.n  # x, y and the pristine y

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.standard_normal(problem.n, dtype=np.float32), "y": rng.standard_normal(problem.n, dtype=np.float32)}

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        return (np.float64(A) * inputs["x"].astype(np.float64) + inputs["y"]).astype(np.float32)

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu):
        return {"x": gpu.upload(inputs["x"]), "y": gpu.alloc(inputs["y"].nbytes), "y0": gpu.upload(inputs["y"])}

    def bind(self, cfg: Config, problem: Problem, buffers, function, gpu) -> Launch:
        blocks = grid_stride_blocks(problem.n, cfg["block_size"] * cfg["vector_width"], cfg["grid_blocks_per_sm"], gpu.sm_count)
        grid, block = (blocks, 1, 1), (cfg["block_size"], 1, 1)
        x, y, y0, nbytes = buffers["x"], buffers["y"], buffers["y0"], 4 * problem.n

        def restore() -> None:  # y is overwritten: every run starts from the same y
            gpu.copy(y.ptr(), y0.ptr(), nbytes)

        poison(gpu, y)
        restore()
        run = gpu.launcher(function, grid, block, A, x.ptr(), y.ptr(), np.uint64(problem.n))
        return Launch(run=run, grid=grid, block=block, restore=restore, fetch=lambda: gpu.download(y, problem.n, np.float32))
