"""Sum reduction: the lesson's ladder from a divergent kernel to a completely
unrolled one, the shared-memory steps, and a vectorised warp-shuffle kernel.

``finish`` says how the block sums become one total. ``host``: the kernel
writes one partial per block and the host adds them (the lesson's kernels; the
timed region holds the partial pass only). The complete reductions (shuffle
only) finish on the device, all of it timed: ``second_pass`` launches the same
kernel again as one block over the partials, ``last_block`` lets the last block
to finish add them (a fence and an atomic counter, which that block resets),
``atomic`` zeroes the total (a memset) and every block adds its sum atomically.
For float32 ``atomic`` adds in a different order each run; the verification's
relative tolerance covers any order.

Bytes moved: the n input elements read once plus one result written,
``(n + 1) * itemsize``. Partial sums per block are part of the kernels' work
but not of the problem, so every variant is judged on the same bytes.
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
    Family,
    Launch,
    Param,
    Problem,
    Verdict,
    relative_error_verdict,
)
from tuner.families.buffers import (
    POISON_BYTE,
    Inputs1D,
    ceil_div,
    grid_stride_blocks,
)
from tuner.families.params import CACHE_HINTS

# The ladder, in the order the lessons climb it.
LADDER = (
    "neighbored",
    "neighbored_less",
    "interleaved",
    "unrolled",
    "unrolled_warp",
    "complete",
    "complete_template",
    "shared",
    "shuffle",
)
BANK_CONFLICT_PAIR = ("shared_interleaved", "shared_sequential")
VARIANTS = LADDER + BANK_CONFLICT_PAIR

IN_PLACE = {"neighbored", "neighbored_less", "interleaved", "unrolled", "unrolled_warp", "complete", "complete_template"}
WARP_STAGE = {"unrolled_warp", "complete", "complete_template"}
# finish -> the kernel's FINISH define (second_pass runs the partials kernel twice).
FINISHES = {"host": 0, "second_pass": 0, "last_block": 1, "atomic": 2}
COMPLETE = ("second_pass", "last_block", "atomic")
# The workspace's layout (kernels/reduce.cu): total, blocks-done counter, then block sums.
TOTAL, COUNTER, SUMS = 0, 1, 2


def _power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass
class ReduceBuffers:
    inputs: Inputs1D
    workspace: object  # DeviceBuffer: total, counter, then one sum per block of the largest grid
    n: int
    dtype: np.dtype


class Reduce(Family):
    name = "reduce"
    report_rank = 20
    ladder = LADDER
    source = "reduce.cu"
    dtypes = ("int32", "float32")
    params = (
        Param("variant", VARIANTS, "which kernel of the ladder", default="shuffle"),
        shared.block_size(256),
        Param("unroll", (1, 2, 4, 8), "block-sized segments folded per block (ladder) or loads in flight per thread (shuffle)",
              default=1, rule=lambda u: u in (1, 2, 4, 8, 16), rule_text="one of [1, 2, 4, 8, 16]"),
        Param("vector_width", (1, 2, 4), "elements per load (shuffle only)", default=1),
        shared.offset((0, 11), "elements added to the input pointer"),
        shared.grid_blocks_per_sm((1, 2, 4, 8), "blocks per multiprocessor for the grid-stride loop; 0: one pass, no loop (shuffle only)"),
        shared.cache_hint(("none", "stream"), "load path: plain, read-only (__ldg) or streaming (__ldcs) (shuffle only)"),
        Param("min_blocks", (0, 2), "__launch_bounds__ minimum blocks per multiprocessor; 0: none (shuffle only)",
              default=0, rule=lambda m: isinstance(m, int) and 0 <= m <= 32, rule_text="an integer from 0 to 32"),
        Param("finish", ("host",) + COMPLETE, "who adds the block sums: the host (partial pass timed), or on the device, "
              "timed: a second_pass launch, the last_block, atomic adds (device finishes: shuffle only)", default="host"),
    )  # fmt: skip
    arg_types = "PPQ"  # data, partials, n
    # Float sums of 2^28 terms in different orders differ by rounding: 2e-5 relative.
    tolerance = 2e-5

    # ---- space -------------------------------------------------------------
    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        variant, block, unroll = cfg["variant"], cfg["block_size"], cfg["unroll"]
        reasons = []
        if variant != "shuffle":
            shuffle_only = (
                ("vector_width", 1),
                ("grid_blocks_per_sm", 0),
                ("cache_hint", "none"),
                ("min_blocks", 0),
                ("finish", "host"),
            )
            for name, default in shuffle_only:
                if cfg[name] != default:
                    reasons.append(
                        f"{name} applies only to variant shuffle (must be {default!r} for {variant}), got {cfg[name]!r}"
                    )
            if not _power_of_two(block):
                reasons.append(f"block_size must be a power of two for the tree reduction of {variant}, got {block}")
        if variant in ("neighbored", "neighbored_less", "interleaved") and unroll != 1:
            reasons.append(f"unroll must be 1 for {variant} (use variant unrolled), got {unroll}")
        if variant == "unrolled" and unroll < 2:
            reasons.append(f"unroll must be at least 2 for variant unrolled, got {unroll}")
        if variant in WARP_STAGE and block < 64:
            reasons.append(f"block_size must be at least 64 for the warp stage of {variant}, got {block}")
        if variant == "shuffle" and cfg["min_blocks"] * block > 2048:
            reasons.append(
                f"min_blocks x block_size must be at most 2048 threads per multiprocessor, got {cfg['min_blocks']} x {block}"
            )
        return reasons

    # ---- compiling ---------------------------------------------------------
    def kernel_name(self, cfg: Config) -> str:
        return f"reduce_{cfg['variant']}"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        defines = {
            f"REDUCE_{cfg['variant'].upper()}": "",
            "ELEM": C_TYPES[problem.dtype],
            "BLOCK": str(cfg["block_size"]),
            "UNROLL": str(cfg["unroll"]),
        }
        if cfg["variant"] == "shuffle":
            defines |= {"VEC": str(cfg["vector_width"]), "CACHE_HINT": str(CACHE_HINTS[cfg["cache_hint"]]),
                        "MIN_BLOCKS": str(cfg["min_blocks"]), "FINISH": str(FINISHES[cfg["finish"]])}  # fmt: skip
        return defines

    # ---- running -----------------------------------------------------------
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return (problem.n + 1) * np.dtype(DTYPES[problem.dtype]).itemsize

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if problem.dtype == "int32":
            # |x| <= 4 keeps every partial and total sum of up to 2^28 elements inside int32.
            data = random_inputs.integers(rng, -4, 4, problem.n, np.int32)

            def no_zeros(piece: slice) -> None:
                part = data[piece]
                part[part == 0] = 3

            random_inputs.by_chunks(problem.n, no_zeros)
        else:
            data = random_inputs.uniform(rng, 0.0, 1.0, problem.n, np.float32)
        return {"data": data}

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        acc = np.int64 if problem.dtype == "int32" else np.float64
        return np.array([inputs["data"].sum(dtype=acc)])

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        if output.dtype.kind == "i":
            total = int(output.astype(np.int64).sum())
            ok = total == int(expected[0])
            return Verdict(
                ok, 0.0 if ok else float(abs(total - int(expected[0]))), "" if ok else f"sum {total} != {int(expected[0])}"
            )
        total = np.array([output.astype(np.float64).sum()])
        return relative_error_verdict(total, expected, self.tolerance)

    def grid_size(self, cfg: Config, problem: Problem, sm_count: int) -> int:
        if cfg["variant"] == "shuffle":
            per_block_pass = cfg["block_size"] * cfg["vector_width"] * cfg["unroll"]
            return grid_stride_blocks(problem.n, per_block_pass, cfg["grid_blocks_per_sm"], sm_count)
        return ceil_div(problem.n, cfg["block_size"] * cfg["unroll"])

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> ReduceBuffers:
        largest_grid = ceil_div(problem.n, 32)
        itemsize = inputs["data"].itemsize
        workspace = gpu.alloc((SUMS + largest_grid) * itemsize)
        gpu.fill_bytes(workspace.ptr(), 0, workspace.nbytes)  # the last_block counter starts at zero
        return ReduceBuffers(Inputs1D.upload(gpu, inputs), workspace, problem.n, inputs["data"].dtype)

    def bind(self, cfg: Config, problem: Problem, buffers: ReduceBuffers, function, gpu) -> Launch:
        grid, block, finish = self.grid_size(cfg, problem, gpu.sm_count), cfg["block_size"], cfg["finish"]
        offset = cfg["offset"]
        workspace, itemsize = buffers.workspace, buffers.dtype.itemsize
        total, sums = workspace.ptr(TOTAL * itemsize), workspace.ptr(SUMS * itemsize)
        data = buffers.inputs.ptr("data", offset)
        n = np.uint64(problem.n)
        buffers.inputs.place("data", offset)
        gpu.fill_bytes(workspace.ptr(COUNTER * itemsize), 0, itemsize)
        gpu.fill_bytes(total, POISON_BYTE, itemsize)
        gpu.fill_bytes(sums, POISON_BYTE, grid * itemsize)
        if finish in ("host", "second_pass"):
            partials = gpu.launcher(function, (grid, 1, 1), (block, 1, 1), data, sums, n)
        else:
            whole = gpu.launcher(function, (grid, 1, 1), (block, 1, 1), data, total, n)
        if finish == "host":
            run = partials
        elif finish == "second_pass":
            # The same kernel as one block over the partials; it writes its one "partial": the total.
            added = gpu.launcher(function, (1, 1, 1), (block, 1, 1), sums, total, np.uint64(grid))

            def run() -> None:
                partials()
                added()
        elif finish == "atomic":

            def run() -> None:
                gpu.fill_bytes(total, 0, itemsize)
                whole()
        else:
            run = whole

        def fetch() -> np.ndarray:
            if finish == "host":
                return gpu.download(workspace, grid, buffers.dtype, SUMS * itemsize)
            return gpu.download(workspace, 1, buffers.dtype, TOTAL * itemsize)

        restore = (lambda: buffers.inputs.place("data", offset)) if cfg["variant"] in IN_PLACE else None
        return Launch(run=run, grid=(grid, 1, 1), block=(block, 1, 1), fetch=fetch, restore=restore)
