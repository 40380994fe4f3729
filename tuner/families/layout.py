"""Array of structures against structure of arrays (the memory-access lesson):
``x += 10, y += 20`` for n points of two float32 fields.

Bytes moved: both fields read once and written once, ``2 * n * 8``.

``aos`` stores the points as n structs ``{float x, y;}``; ``soa`` as the n x
values followed by the n y values (one buffer, like a struct of two arrays).
Both kernels read an input buffer and write a separate output buffer (not in
place), so the input never changes and no restore is needed. The output is
compared as a ``(2, n)`` array: row 0 the x values, row 1 the y values.
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
from tuner.families.buffers import ceil_div, poison

VARIANTS = ("aos", "soa")
SHIFT = (10.0, 20.0)  # added to x and to y


@dataclass
class LayoutBuffers:
    aos_in: object  # DeviceBuffer: x0 y0 x1 y1 ...
    aos_out: object
    soa_in: object  # DeviceBuffer: x0 x1 ... y0 y1 ...
    soa_out: object
    n: int


class Layout(Family):
    name = "layout"
    report_rank = 50
    source = "layout.cu"
    dtypes = ("float32",)
    arg_types = "PPQ"  # in, out, n
    params = (
        Param("variant", VARIANTS, "aos: array of {x, y} structs; soa: an x array and a y array", default="aos"),
        shared.block_size(128),
    )  # fmt: skip
    # One float32 rounding of x + 10 against the float64 sum.
    tolerance = 1e-6

    # ---- compiling ---------------------------------------------------------
    def kernel_name(self, cfg: Config) -> str:
        return f"layout_{cfg['variant']}"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        return {f"LAYOUT_{cfg['variant'].upper()}": "", "BLOCK": str(cfg["block_size"])}

    # ---- running -----------------------------------------------------------
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        return 2 * problem.n * 8

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # The lesson's range, 0 to 2.55, made continuous.
        return {
            "x": random_inputs.uniform(rng, 0.0, 2.56, problem.n, np.float32),
            "y": random_inputs.uniform(rng, 0.0, 2.56, problem.n, np.float32),
        }

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        x, y = inputs["x"], inputs["y"]
        expected = np.empty((2, problem.n), np.float64)

        def work(piece: slice) -> None:
            np.add(x[piece], SHIFT[0], out=expected[0, piece], dtype=np.float64)
            np.add(y[piece], SHIFT[1], out=expected[1, piece], dtype=np.float64)

        random_inputs.by_chunks(problem.n, work)
        return expected

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        return relative_error_verdict(output, expected, self.tolerance)

    def device_bytes(self, problem: Problem) -> int:
        # Inputs and outputs in both arrangements (2n floats each), and the
        # float64 reference in both, for comparing outputs on the device.
        return 4 * (2 * problem.n * 4) + 2 * (2 * problem.n * 8)

    def device_reference(self, expected: np.ndarray, layout: str) -> np.ndarray:
        # expected is (2, n): x then y, as the SoA output lies; AoS interleaves them.
        return (expected.T if layout == "aos" else expected).reshape(-1)

    def grid_size(self, cfg: Config, problem: Problem) -> int:
        return max(1, ceil_div(problem.n, cfg["block_size"]))

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> LayoutBuffers:
        x, y = inputs["x"], inputs["y"]
        nbytes = 2 * x.nbytes
        return LayoutBuffers(
            aos_in=gpu.upload(np.stack([x, y], axis=1)),  # (n, 2): the structs in order
            aos_out=gpu.alloc(nbytes),
            soa_in=gpu.upload(np.concatenate([x, y])),
            soa_out=gpu.alloc(nbytes),
            n=problem.n,
        )

    def bind(self, cfg: Config, problem: Problem, buffers: LayoutBuffers, function, gpu) -> Launch:
        grid, block = self.grid_size(cfg, problem), cfg["block_size"]
        aos = cfg["variant"] == "aos"
        src, dst = (buffers.aos_in, buffers.aos_out) if aos else (buffers.soa_in, buffers.soa_out)
        poison(gpu, dst)
        run = gpu.launcher(function, (grid, 1, 1), (block, 1, 1), src.ptr(), dst.ptr(), np.uint64(problem.n))
        n = problem.n

        def fetch() -> np.ndarray:
            if aos:
                return gpu.download(dst, (n, 2), np.float32).T  # (2, n)
            return gpu.download(dst, (2, n), np.float32)

        output = DeviceOutput(int(dst.ptr()), 2 * n, np.dtype(np.float32), self.tolerance, layout=cfg["variant"])
        return Launch(run=run, grid=(grid, 1, 1), block=(block, 1, 1), fetch=fetch, output=output)
