"""Streaming yardsticks: a vectorised copy and a read-only pass.

Bytes moved: ``copy`` reads and writes n elements, ``2 * n * itemsize``;
``read`` reads n elements and writes one word, ``n * itemsize + 4``.
The two do different work, so each is an operation of its own
(``operation_param``): the run's answer names the fastest copy and the fastest read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.families import inputs as random_inputs
from tuner.families import params as shared
from tuner.families.base import (
    C_TYPES,
    DTYPES,
    Config,
    DeviceOutput,
    Family,
    Launch,
    Param,
    Problem,
    Verdict,
)
from tuner.families.buffers import (
    MAX_OFFSET_ELEMENTS,
    Inputs1D,
    ceil_div,
    grid_stride_blocks,
    poison,
)
from tuner.families.params import CACHE_HINTS


@dataclass
class CopyBuffers:
    inputs: Inputs1D
    dst: object  # DeviceBuffer with room for the largest offset
    partials: object
    n: int
    dtype: np.dtype


class Copy(Family):
    name = "copy"
    report_rank = 10
    source = "copy.cu"
    dtypes = ("float32", "int32")
    arg_types = "PPQ"  # src, dst (or partials), n
    params = (
        Param("variant", ("copy", "read"), "copy: read and write every element; read: read only", default="copy"),
        shared.block_size(256),
        Param("vector_width", (1, 2, 4), "elements per load and store", default=4),
        Param("unroll", (1, 2, 4, 8), "loads in flight per thread", default=1),
        shared.grid_blocks_per_sm((0, 4, 8, 16), "blocks per multiprocessor; 0: one pass, no loop"),
        shared.cache_hint(("none", "stream"), "load path: plain, read-only (__ldg) or streaming (__ldcs)"),
        shared.offset((0,), "elements added to the source and destination pointers"),
    )  # fmt: skip
    # A read-only pass is no copy: the answer names the fastest of each.
    operation_param = "variant"

    def kernel_name(self, cfg: Config) -> str:
        return f"{cfg['variant']}_kernel"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {
            f"COPY_{cfg['variant'].upper()}": "",
            "ELEM": C_TYPES[problem.dtype],
            "BLOCK": str(cfg["block_size"]),
            "VEC": str(cfg["vector_width"]),
            "UNROLL": str(cfg["unroll"]),
            "CACHE_HINT": str(CACHE_HINTS[cfg["cache_hint"]]),
        }

    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        data = problem.n * np.dtype(DTYPES[problem.dtype]).itemsize
        return 2 * data if cfg["variant"] == "copy" else data + 4

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        words = random_inputs.integers(rng, 1, 2**31 - 1, problem.n, np.int32)
        return {"src": words.view(DTYPES[problem.dtype])}

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        return inputs["src"]

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        if output.dtype == np.uint32:  # read: XOR of the per-block words
            got = int(np.bitwise_xor.reduce(output)) if output.size else 0
            want = int(np.bitwise_xor.reduce(expected.view(np.uint32)))
            return Verdict(got == want, 0.0 if got == want else 1.0, "" if got == want else f"xor {got:#x} != {want:#x}")
        same = np.array_equal(output.view(np.uint32), expected.view(np.uint32))
        mismatches = 0 if same else int(np.count_nonzero(output.view(np.uint32) != expected.view(np.uint32)))
        return Verdict(same, float(mismatches), "" if same else f"{mismatches} elements differ")

    def grid_size(self, cfg: Config, problem: Problem, sm_count: int) -> int:
        per_block_pass = cfg["block_size"] * cfg["vector_width"] * cfg["unroll"]
        return grid_stride_blocks(problem.n, per_block_pass, cfg["grid_blocks_per_sm"], sm_count)

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> CopyBuffers:
        src = inputs["src"]
        dst = gpu.alloc(src.nbytes + MAX_OFFSET_ELEMENTS * src.itemsize)
        partials = gpu.alloc(4 * ceil_div(problem.n, 32))
        return CopyBuffers(Inputs1D.upload(gpu, inputs), dst, partials, problem.n, src.dtype)

    def bind(self, cfg: Config, problem: Problem, buffers: CopyBuffers, function, gpu) -> Launch:
        grid = self.grid_size(cfg, problem, gpu.sm_count)
        offset, itemsize = cfg["offset"], buffers.dtype.itemsize
        buffers.inputs.place("src", offset)
        src = buffers.inputs.ptr("src", offset)
        if cfg["variant"] == "copy":
            poison(gpu, buffers.dst)
            out = buffers.dst.ptr(offset * itemsize)

            def fetch() -> np.ndarray:
                return gpu.download(buffers.dst, problem.n, buffers.dtype, offset * itemsize)

            output = DeviceOutput(int(out), problem.n, buffers.dtype)  # bit for bit
        else:
            poison(gpu, buffers.partials, 4 * grid)
            out = buffers.partials.ptr()

            def fetch() -> np.ndarray:
                return gpu.download(buffers.partials, grid, np.uint32)

            output = None  # a word per block, XORed on the host

        run = gpu.launcher(function, (grid, 1, 1), (cfg["block_size"], 1, 1), src, out, np.uint64(problem.n))
        return Launch(run=run, grid=(grid, 1, 1), block=(cfg["block_size"], 1, 1), fetch=fetch, output=output)
