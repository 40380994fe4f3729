"""A plug-in family (loaded through ``family_paths``) whose ``reach=1``
configurations fault: the device-fault containment test's kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tuner.families import params as shared
from tuner.families.base import Config, Family, Launch, Param, Problem
from tuner.families.buffers import ceil_div, poison


class FaultyCopy(Family):
    name = "faulty"
    source = str(Path(__file__).with_name("faulty.cu"))
    dtypes = ("float32",)
    arg_types = "PPQ"
    params = (
        shared.block_size(256),
        Param("reach", (0, 1), "1: store 2^40 elements past the output (an illegal address)", default=0),
    )

    def kernel_name(self, cfg: Config) -> str:
        return "faulty_copy"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {"BLOCK": str(cfg["block_size"]), "REACH": str(cfg["reach"])}

    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 2 * 4 * problem.n

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"src": rng.standard_normal(problem.n, dtype=np.float32)}

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        return inputs["src"]

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu):
        return {"src": gpu.upload(inputs["src"]), "dst": gpu.alloc(inputs["src"].nbytes)}

    def bind(self, cfg: Config, problem: Problem, buffers, function, gpu) -> Launch:
        grid, block = (ceil_div(problem.n, cfg["block_size"]), 1, 1), (cfg["block_size"], 1, 1)
        poison(gpu, buffers["dst"])
        run = gpu.launcher(function, grid, block, buffers["src"].ptr(), buffers["dst"].ptr(), np.uint64(problem.n))
        return Launch(run=run, grid=grid, block=block, fetch=lambda: gpu.download(buffers["dst"], problem.n, np.float32))
