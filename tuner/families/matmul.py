"""Square float32 matrix multiply ``C = A x B`` (``problem.n`` is the matrix
dimension N): the pitched-allocation lesson and the shared-memory lesson
(naive, a tile of A in shared memory, tiles of A and B).

Bytes moved: ``3 * N * N * 4``, A and B read once and C written once. This is
the blog's GB/s convention, not the traffic the kernels cause (the naive
kernel reads each element of A and B N times, mostly from cache); it makes
GB/s a speed measure comparable across variants. FLOPs: ``2 * N^3``.

Storage (``pitched``): 0, linear rows of N floats (``cuda.mem_alloc``); 1,
rows padded to the pitch PyCUDA's ``mem_alloc_pitch(N * 4, N, 4)`` chooses
(the driver's ``cuMemAllocPitch``, like ``cudaMallocPitch``), so every row
starts aligned. Pitched A and B are uploaded row by row with one
``Memcpy2D`` (like ``cudaMemcpy2D``); pitched C is read back whole and its
padding dropped on the host. The kernel takes the leading dimension ``ld``
(elements per row: N, or pitch / 4) as an argument, so ``pitched`` is not a
compile-time knob. Both storages are allocated once per problem.

The kernels only read A and B: no restore is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.families.base import (
    Config,
    Family,
    Launch,
    Param,
    Problem,
    Verdict,
    relative_error_verdict,
)
from tuner.families.buffers import ceil_div, poison

VARIANTS = ("naive", "shared_a", "shared_ab")
FLOAT_BYTES = 4


@dataclass
class Storage:
    """A, B and C in one storage scheme; ``ld`` is the row length in elements."""

    a: object  # DeviceBuffer
    b: object
    c: object
    ld: int


@dataclass
class MatmulBuffers:
    linear: Storage
    pitched: Storage
    n: int


class Matmul(Family):
    name = "matmul"
    source = "matmul.cu"
    dtypes = ("float32",)
    check_sizes = (1000, 512)  # N: not a multiple of any tile, and one that is
    ladder = VARIANTS  # each a change to the one before: a tile of A in shared memory, then of B too
    report_rank = 60
    arg_types = "PPPii"  # A, B, C, n, ld
    params = (
        Param("variant", VARIANTS, "naive; a tile of A in shared memory; tiles of A and B in shared memory",
              default="shared_ab"),
        Param("tile", (8, 16, 32), "tile width: blocks of tile x tile threads, one element of C each", default=16),
        Param("pitched", (0, 1), "0: rows of N floats back to back; 1: rows padded to mem_alloc_pitch's pitch",
              default=0),
    )  # fmt: skip
    # Float32 sums of N products in order against float64: 1e-4 relative (2-norm).
    tolerance = 1e-4

    # ---- compiling ---------------------------------------------------------
    def kernel_name(self, cfg: Config) -> str:
        return f"matmul_{cfg['variant']}"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {f"MATMUL_{cfg['variant'].upper()}": "", "TILE": str(cfg["tile"])}

    # ---- running -----------------------------------------------------------
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 3 * problem.n * problem.n * FLOAT_BYTES

    def flops(self, cfg: Config, problem: Problem) -> int:
        return 2 * problem.n**3

    def size_text(self, n: int, *, tex: bool = False) -> str:
        return f"{n}×{n}"  # n is the matrices' dimension

    def problem_text(self, dtype: str, n: int, *, tex: bool = False) -> str:
        return f"{dtype}, {self.size_text(n)}"

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n = problem.n
        return {
            "a": rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32),
            "b": rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32),
        }

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        return relative_error_verdict(output, expected, self.tolerance)

    def device_bytes(self, problem: Problem) -> int:
        # A, B and C linear and pitched (a row padded by at most 512 bytes).
        return 6 * problem.n * (problem.n * FLOAT_BYTES + 512)

    def grid_size(self, cfg: Config, problem: Problem) -> tuple[int, int, int]:
        tiles = max(1, ceil_div(problem.n, cfg["tile"]))
        return (tiles, tiles, 1)

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> MatmulBuffers:
        n = problem.n
        linear = Storage(gpu.upload(inputs["a"]), gpu.upload(inputs["b"]), gpu.alloc(n * n * FLOAT_BYTES), n)
        (a, pitch), (b, pitch_b), (c, pitch_c) = (gpu.alloc_pitched(n * FLOAT_BYTES, n, FLOAT_BYTES) for _ in range(3))
        if not pitch == pitch_b == pitch_c:
            raise RuntimeError(f"one leading dimension for A, B and C needs equal pitches, got {pitch}, {pitch_b}, {pitch_c}")
        gpu.upload_pitched(inputs["a"].astype(np.float32), a, pitch)
        gpu.upload_pitched(inputs["b"].astype(np.float32), b, pitch)
        return MatmulBuffers(linear, Storage(a, b, c, pitch // FLOAT_BYTES), n)

    def bind(self, cfg: Config, problem: Problem, buffers: MatmulBuffers, function, gpu) -> Launch:
        storage = buffers.pitched if cfg["pitched"] else buffers.linear
        grid, block = self.grid_size(cfg, problem), (cfg["tile"], cfg["tile"], 1)
        poison(gpu, storage.c)
        n, ld = problem.n, storage.ld
        run = gpu.launcher(function, grid, block, storage.a.ptr(), storage.b.ptr(), storage.c.ptr(),
                           np.int32(n), np.int32(ld))  # fmt: skip

        def fetch() -> np.ndarray:
            return np.ascontiguousarray(gpu.download(storage.c, (n, ld), np.float32)[:, :n])

        return Launch(run=run, grid=grid, block=block, fetch=fetch)
