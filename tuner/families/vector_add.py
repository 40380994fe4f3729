"""Element-wise add ``c = a + b``: the vectorisation lesson (vector widths 1 to
8 for int8, float16, float32 and int32) and ``#pragma unroll`` on the
grid-stride loop.

Bytes moved: a and b read once, c written once, ``3 * n * itemsize``.

The ``offset`` shifts a, b and c alike by that many elements; the kernel adds a
scalar head up to the first vector boundary and a scalar tail after the last
whole vector, so every offset works with every vector width.
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
    relative_error_verdict,
)
from tuner.families.buffers import (
    MAX_OFFSET_ELEMENTS,
    Inputs1D,
    grid_stride_blocks,
    poison,
)

MAX_VECTOR_BYTES = 16  # the widest load instruction
# Relative error (2-norm) allowed for float outputs: one rounding of the sum.
TOLERANCES = {"float16": 1e-3, "float32": 1e-6}


@dataclass
class VectorAddBuffers:
    inputs: Inputs1D  # a and b, pristine and padded work copies
    c: object  # DeviceBuffer with room for n + MAX_OFFSET_ELEMENTS elements
    n: int
    dtype: np.dtype


class VectorAdd(Family):
    name = "vector_add"
    report_rank = 30
    source = "vector_add.cu"
    dtypes = ("int8", "float16", "float32", "int32")
    arg_types = "PPPQ"  # a, b, c, n
    params = (
        Param("variant", ("add",), "grid-stride add, one vector of VEC elements per iteration", default="add"),
        Param("vector_width", (1, 2, 4, 8), "elements per load and store; vector_width x element size <= 16 bytes",
              default=1, rule=lambda v: v in (1, 2, 4, 8, 16), rule_text="one of [1, 2, 4, 8, 16]"),
        Param("unroll", (1, 2, 4), "#pragma unroll factor of the grid-stride loop", default=1,
              rule=lambda u: u in (1, 2, 4, 8), rule_text="one of [1, 2, 4, 8]"),
        shared.block_size(512),
        shared.grid_blocks_per_sm((0, 4, 8, 16), "blocks per multiprocessor; 0: one pass, just enough blocks for unroll iterations per thread"),
        shared.offset((0, 11), "elements added to the a, b and c pointers"),
    )  # fmt: skip

    # ---- space -------------------------------------------------------------
    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        if problem.dtype not in DTYPES:
            return []  # reported by violations()
        itemsize = np.dtype(DTYPES[problem.dtype]).itemsize
        width = cfg["vector_width"]
        if width * itemsize > MAX_VECTOR_BYTES:
            size = f"{width} x {itemsize} = {width * itemsize} bytes for {problem.dtype}"
            return [f"vector_width x element size must be at most {MAX_VECTOR_BYTES} bytes, got {size}"]
        return []

    # ---- compiling ---------------------------------------------------------
    def kernel_name(self, cfg: Config) -> str:
        return "vector_add"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {
            "ELEM": C_TYPES[problem.dtype],
            "BLOCK": str(cfg["block_size"]),
            "VEC": str(cfg["vector_width"]),
            "UNROLL": str(cfg["unroll"]),
        }

    # ---- running -----------------------------------------------------------
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 3 * problem.n * np.dtype(DTYPES[problem.dtype]).itemsize

    def device_bytes(self, problem: Problem) -> int:
        # a and b twice (pristine and working), c, and the reference c is
        # compared with on the device (float64 for float32: two arrays' worth).
        return 8 * problem.n * np.dtype(DTYPES[problem.dtype]).itemsize

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, dtype = problem.n, DTYPES[problem.dtype]
        if problem.dtype in ("int8", "int32"):
            # Half the type's range each, so a + b never overflows.
            high = 64 if problem.dtype == "int8" else 2**30
            a = random_inputs.integers(rng, -high, high, n, dtype)
            b = random_inputs.integers(rng, -high, high, n, dtype)

            def no_poison(piece: slice) -> None:
                # No sum is -1, the poison pattern: an unwritten element never
                # passes. (The sum fits the type: each value is within half its range.)
                part = b[piece]
                part[a[piece] + part == -1] += 1

            random_inputs.by_chunks(n, no_poison)
        else:
            a = random_inputs.uniform(rng, -1.0, 1.0, n, dtype)
            b = random_inputs.uniform(rng, -1.0, 1.0, n, dtype)
        return {"a": a, "b": b}

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        a, b = inputs["a"], inputs["b"]
        if problem.dtype in ("int8", "int32"):
            return random_inputs.add(a, b, a.dtype)  # exact: each input is within half the type's range
        return random_inputs.add(a, b, np.float32 if problem.dtype == "float16" else np.float64)

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        if output.dtype.kind == "i":
            if output.shape != expected.shape:
                return Verdict(False, float("inf"), f"shape {output.shape} != {expected.shape}")
            wrong = int(np.count_nonzero(output != expected))
            return Verdict(wrong == 0, float(wrong), "" if wrong == 0 else f"{wrong} of {output.size} elements differ")
        return relative_error_verdict(output, expected, TOLERANCES[output.dtype.name])

    def grid_size(self, cfg: Config, problem: Problem, sm_count: int) -> int:
        per_block_pass = cfg["block_size"] * cfg["vector_width"] * cfg["unroll"]
        return grid_stride_blocks(problem.n, per_block_pass, cfg["grid_blocks_per_sm"], sm_count)

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> VectorAddBuffers:
        a = inputs["a"]
        c = gpu.alloc(a.nbytes + MAX_OFFSET_ELEMENTS * a.itemsize)
        return VectorAddBuffers(Inputs1D.upload(gpu, inputs), c, problem.n, a.dtype)

    def bind(self, cfg: Config, problem: Problem, buffers: VectorAddBuffers, function, gpu) -> Launch:
        grid = self.grid_size(cfg, problem, gpu.sm_count)
        block = cfg["block_size"]
        offset, itemsize = cfg["offset"], buffers.dtype.itemsize
        for name in ("a", "b"):
            buffers.inputs.place(name, offset)
        poison(gpu, buffers.c)
        a, b = buffers.inputs.ptr("a", offset), buffers.inputs.ptr("b", offset)
        c = buffers.c.ptr(offset * itemsize)
        run = gpu.launcher(function, (grid, 1, 1), (block, 1, 1), a, b, c, np.uint64(problem.n))

        def fetch() -> np.ndarray:
            return gpu.download(buffers.c, problem.n, buffers.dtype, offset * itemsize)

        exact = buffers.dtype.kind == "i"
        output = DeviceOutput(int(c), problem.n, buffers.dtype, None if exact else TOLERANCES[buffers.dtype.name])
        return Launch(run=run, grid=(grid, 1, 1), block=(block, 1, 1), fetch=fetch, output=output)
