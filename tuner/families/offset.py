"""Misaligned reads and writes (the memory-access lesson): ``c = a + b`` with
the reads or the writes shifted by ``offset`` elements, the L1 policy set by
``-Xptxas -dlcm=ca|cg``, optionally through the read-only path, and an
unrolled read kernel with several elements per thread.

Bytes moved: a and b read once, c written once, ``3 * n * 4`` (float32).

The offset is a run-time argument (one module serves every offset). Each
input lives in a padded work buffer with room for ``n + 128`` elements:

* ``read_offset``, ``read_offset_unrolled``: the pristine inputs are copied to
  ``work + offset`` and the kernel gets the unshifted ``work`` pointers, so it
  reads ``a[i + offset]`` (misaligned for offset 11) and still computes
  ``c[i] = a_in[i] + b_in[i]`` for every ``i < n``, written aligned.
* ``write_offset``: inputs at ``work + 0``; the kernel writes ``c[i + offset]``
  into a padded c and the result is read back from ``c + offset``.

So the expected result is ``a + b`` whatever the offset, and no element of
the problem is dropped (the lesson's kernels skip the last ``offset``).
The kernels never write their inputs: no restore is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.families import inputs as random_inputs
from tuner.families import params as shared
from tuner.families.base import (
    Config,
    DeviceOutput,
    Family,
    Launch,
    Param,
    Problem,
    Verdict,
    relative_error_verdict,
)
from tuner.families.buffers import MAX_OFFSET_ELEMENTS, Inputs1D, ceil_div, poison

VARIANTS = ("read_offset", "write_offset", "read_offset_unrolled")
L1_FLAGS = {"ca": ("-Xptxas", "-dlcm=ca"), "cg": ("-Xptxas", "-dlcm=cg")}


@dataclass
class OffsetBuffers:
    inputs: Inputs1D  # a and b, pristine and padded work copies
    c: object  # DeviceBuffer with room for n + MAX_OFFSET_ELEMENTS floats
    n: int


class Offset(Family):
    name = "offset"
    report_rank = 40
    source = "offset.cu"
    dtypes = ("float32",)
    arg_types = "PPPQQ"  # a, b, c, n, offset
    params = (
        Param("variant", VARIANTS, "which access is shifted: the reads, the writes, or the reads with unrolling",
              default="read_offset"),
        shared.offset((0, 11, 128), "elements the reads (or writes) are shifted by; a run-time argument"),
        shared.block_size(512),
        Param("unroll", (1, 2, 4, 8), "elements per thread, a block apart (read_offset_unrolled; 1 for the others)", default=1,
              rule=lambda u: u in (1, 2, 4, 8, 16), rule_text="one of [1, 2, 4, 8, 16]"),
        Param("l1_cache", ("ca", "cg"), "global loads cached in L1 and L2 (-dlcm=ca) or in L2 only (-dlcm=cg)",
              default="ca"),
        Param("read_only", (0, 1), "1: loads through const __restrict__ pointers and __ldg (read-only path)",
              default=0),
    )  # fmt: skip
    # One float32 rounding of a + b against the float64 sum.
    tolerance = 1e-6

    # ---- space -------------------------------------------------------------
    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        variant, unroll = cfg["variant"], cfg["unroll"]
        if variant != "read_offset_unrolled" and unroll != 1:
            return [f"unroll must be 1 for {variant} (use read_offset_unrolled), got {unroll}"]
        return []

    # ---- compiling ---------------------------------------------------------
    def kernel_name(self, cfg: Config) -> str:
        return cfg["variant"]

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {
            f"OFFSET_{cfg['variant'].upper()}": "",
            "BLOCK": str(cfg["block_size"]),
            "UNROLL": str(cfg["unroll"]),
            "READ_ONLY": str(cfg["read_only"]),
        }

    def compile_flags(self, cfg: Config) -> tuple[str, ...]:
        return L1_FLAGS[cfg["l1_cache"]]

    # ---- running -----------------------------------------------------------
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 3 * problem.n * 4

    def device_bytes(self, problem: Problem) -> int:
        # a and b twice (pristine and working), c, and the float64 reference
        # c is compared with on the device: eight float32 arrays' worth.
        return 8 * problem.n * 4

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {
            "a": random_inputs.uniform(rng, -1.0, 1.0, problem.n, np.float32),
            "b": random_inputs.uniform(rng, -1.0, 1.0, problem.n, np.float32),
        }

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        return random_inputs.add(inputs["a"], inputs["b"], np.float64)

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        return relative_error_verdict(output, expected, self.tolerance)

    def grid_size(self, cfg: Config, problem: Problem) -> int:
        return max(1, ceil_div(problem.n, cfg["block_size"] * cfg["unroll"]))

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> OffsetBuffers:
        c = gpu.alloc((problem.n + MAX_OFFSET_ELEMENTS) * 4)
        return OffsetBuffers(Inputs1D.upload(gpu, inputs), c, problem.n)

    def bind(self, cfg: Config, problem: Problem, buffers: OffsetBuffers, function, gpu) -> Launch:
        grid, block = self.grid_size(cfg, problem), cfg["block_size"]
        offset = cfg["offset"]
        shifted_reads = cfg["variant"] != "write_offset"
        for name in ("a", "b"):
            buffers.inputs.place(name, offset if shifted_reads else 0)
        poison(gpu, buffers.c)
        a, b = buffers.inputs.ptr("a", 0), buffers.inputs.ptr("b", 0)
        run = gpu.launcher(function, (grid, 1, 1), (block, 1, 1), a, b, buffers.c.ptr(),
                           np.uint64(problem.n), np.uint64(offset))  # fmt: skip
        result_at = 0 if shifted_reads else offset * 4

        def fetch() -> np.ndarray:
            return gpu.download(buffers.c, problem.n, np.float32, result_at)

        output = DeviceOutput(int(buffers.c.ptr(result_at)), problem.n, np.dtype(np.float32), self.tolerance)
        return Launch(run=run, grid=(grid, 1, 1), block=(block, 1, 1), fetch=fetch, output=output)
