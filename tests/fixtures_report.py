"""A synthetic results dataset for the report tests.

Plausible numbers for a made-up GPU (HBM, ~3.35 TB/s theoretical): every
family, variant and sweep the report draws, one Optuna study of 30 trials, and
a few rows that did not run or ran wrong (one of them with an absurd bandwidth,
so a report that forgets the status filter picks it as a best).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from tuner.data.results import COLUMNS, config_key, to_frame
from tuner.families.reduce import LADDER

# to_frame cannot cast a float column that no row sets (it fills pd.NA into an
# object column), so every row starts with NaN in each float column.
FLOAT_NAN = {column: np.nan for column, dtype in COLUMNS.items() if dtype == "float64"}

DEVICE: dict[str, Any] = {
    "name": "Synthetic GPU X100",
    "slug": "synthetic-x100",
    "compute_capability": "9.0",
    "driver_version": "550.54.15",
    "cuda_version": "12.4",
    "memory_clock_mhz": 2619,
    "bus_width_bits": 5120,
    "l2_bytes": 52428800,
    "sm_count": 132,
    "nvcc_version": "12.4.131",
    "pycuda_version": "2024.1.2",
    "git_commit": "0123456789abcdef0123456789abcdef01234567",
}
PEAKS: dict[str, Any] = {"copy_gbs": 2900.0, "read_gbs": 3100.0, "theoretical_gbs": 3352.3, "cub_reduce_gbs": 2750.0}

ITEMSIZE = {"int8": 1, "float16": 2, "int32": 4, "float32": 4}
LADDER_FRACTION = {  # fraction of the copy peak each reduction step reaches at block 256, large n
    "neighbored": 0.08,
    "neighbored_less": 0.14,
    "interleaved": 0.20,
    "unrolled_warp": 0.80,
    "complete": 0.82,
    "complete_template": 0.83,
    "shared": 0.86,
    "shuffle": 0.93,
    "shared_interleaved": 0.55,
    "shared_sequential": 0.70,
}
UNROLL_FRACTION = {2: 0.45, 4: 0.62, 8: 0.75}
BLOCK_FACTOR = {64: 0.85, 128: 0.93, 256: 1.0, 512: 0.98, 1024: 0.94}
REDUCE_DEFAULTS = {
    "block_size": 256,
    "unroll": 1,
    "vector_width": 1,
    "offset": 0,
    "grid_blocks_per_sm": 0,
    "cache_hint": "none",
    "min_blocks": 0,
}
REDUCE_SPACE = {
    "block_size": [128, 256, 512, 1024],
    "unroll": [1, 2, 4, 8],
    "vector_width": [1, 2, 4],
    "cache_hint": ["none", "ldg", "stream"],
    "grid_blocks_per_sm": [2, 4],
    "min_blocks": [0, 2],
}


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        source: str,
        family: str,
        dtype: str,
        n: int,
        params: dict[str, Any],
        bytes_moved: int,
        bandwidth_gbs: float | None,
        *,
        status: str = "ok",
        trial: int | None = None,
        flops: float | None = None,
    ) -> None:
        """One measured row; ``bandwidth_gbs`` is the model value (noise is added here)."""
        row: dict[str, Any] = {
            **FLOAT_NAN,
            "run_id": "synthetic-run",
            "timestamp": "2025-01-01T00:00:00Z",
            "source": source,
            "trial": trial,
            "gpu": DEVICE["name"],
            "gpu_slug": DEVICE["slug"],
            "compute_capability": DEVICE["compute_capability"],
            "driver_version": DEVICE["driver_version"],
            "cuda_version": DEVICE["cuda_version"],
            "nvcc_version": DEVICE["nvcc_version"],
            "pycuda_version": DEVICE["pycuda_version"],
            "git_commit": DEVICE["git_commit"],
            "family": family,
            "dtype": dtype,
            "n": n,
            **params,
            "config_key": config_key(params),
            "status": status,
            "bytes_moved": bytes_moved,
        }
        if status == "ok" and bandwidth_gbs is not None:
            bandwidth = bandwidth_gbs * float(self.rng.lognormal(0.0, 0.01))
            time_ms = bytes_moved / (bandwidth * 1e9) * 1e3
            row.update(
                time_ms_median=time_ms,
                time_ms_min=time_ms * 0.98,
                time_ms_max=time_ms * 1.05,
                time_ms_p10=time_ms * 0.99,
                time_ms_p90=time_ms * 1.02,
                rel_spread=0.01,
                samples=50,
                throttled_samples=0,
                converged=True,
                l2_flushed=True,
                bandwidth_gbs=bandwidth,
                fraction_of_copy_peak=bandwidth / PEAKS["copy_gbs"],
                fraction_of_theoretical_peak=bandwidth / PEAKS["theoretical_gbs"],
                error="0.0",
                gflops=(flops / (time_ms * 1e-3) / 1e9) if flops else None,
            )
        elif status == "wrong_result":
            # A broken kernel that returns at once: absurdly fast, must never be a best.
            time_ms = 1e-4
            row.update(
                time_ms_median=time_ms,
                bandwidth_gbs=bytes_moved / (time_ms * 1e-3) / 1e9,
                fraction_of_copy_peak=99.0,
                fraction_of_theoretical_peak=99.0,
                error="relative error 1 > 1e-05",
            )
        else:
            row.update(error=f"synthetic {status}")
        self.rows.append(row)


def _reduce_gbs(variant: str, p: dict[str, Any], n: int) -> float:
    fraction = UNROLL_FRACTION[p["unroll"]] if variant == "unrolled" else LADDER_FRACTION[variant]
    fraction *= BLOCK_FACTOR[p["block_size"]] * (1.0 if n >= 2**28 else 0.9 if n >= 2**25 else 0.85)
    if variant == "shuffle":
        fraction *= {1: 0.85, 2: 0.95, 4: 1.0, 8: 0.99}[p["unroll"]] * {1: 0.88, 2: 0.96, 4: 1.0}[p["vector_width"]]
        fraction *= {"none": 1.0, "ldg": 1.0, "stream": 1.01}[p["cache_hint"]] * (1.0 if p["grid_blocks_per_sm"] >= 4 else 0.97)
    if p["offset"]:
        fraction *= 0.9
    return min(fraction, 0.99) * PEAKS["copy_gbs"]


def _reduce(b: _Builder) -> None:
    ladder = list(LADDER)
    for dtype, n in itertools.product(["int32", "float32"], [2**24, 2**25]):
        for variant in ladder:
            unrolls = (
                [2, 4, 8]
                if variant == "unrolled"
                else [8]
                if variant in ("unrolled_warp", "complete", "complete_template")
                else [4]
                if variant in ("shared", "shuffle")
                else [1]
            )
            for block, unroll in itertools.product([256, 1024], unrolls):
                p = {**REDUCE_DEFAULTS, "variant": variant, "block_size": block, "unroll": unroll}
                if variant == "shuffle":
                    p.update(vector_width=4, grid_blocks_per_sm=4)
                b.add("sweep:reduce_ladder", "reduce", dtype, n, p, (n + 1) * ITEMSIZE[dtype], _reduce_gbs(variant, p, n))
            if variant == "neighbored":  # the misaligned input the reduce family also offers
                p = {**REDUCE_DEFAULTS, "variant": variant, "offset": 11}
                b.add("sweep:reduce_ladder", "reduce", dtype, n, p, (n + 1) * ITEMSIZE[dtype], _reduce_gbs(variant, p, n))
    for n, block, unroll in itertools.product([2**24, 2**28], [128, 256, 512, 1024], [2, 4, 8]):
        p = {**REDUCE_DEFAULTS, "variant": "unrolled", "block_size": block, "unroll": unroll}
        b.add("sweep:reduce_block_unroll", "reduce", "int32", n, p, (n + 1) * 4, _reduce_gbs("unrolled", p, n))
    for dtype, variant in itertools.product(["int32", "float32"], ["shared_interleaved", "shared_sequential"]):
        p = {**REDUCE_DEFAULTS, "variant": variant}
        b.add("sweep:reduce_bank_conflicts", "reduce", dtype, 2**24, p, (2**24 + 1) * 4, _reduce_gbs(variant, p, 2**24))
    n = 2**28
    for values in itertools.product(*REDUCE_SPACE.values()):
        p = {**REDUCE_DEFAULTS, "variant": "shuffle", **dict(zip(REDUCE_SPACE, values))}
        infeasible = p["min_blocks"] * p["block_size"] >= 2048
        b.add(
            "sweep:reduce_space",
            "reduce",
            "int32",
            n,
            p,
            (n + 1) * 4,
            None if infeasible else _reduce_gbs("shuffle", p, n),
            status="infeasible" if infeasible else "ok",
        )
    # The broken kernel: claims ~10^6 GB/s.
    p = {**REDUCE_DEFAULTS, "variant": "shuffle", "block_size": 512, "unroll": 8, "vector_width": 4, "grid_blocks_per_sm": 8}
    b.add("sweep:reduce_space", "reduce", "int32", n, p, (n + 1) * 4, None, status="wrong_result")


def _study(b: _Builder, trials: int = 30) -> None:
    n = 2**28
    for trial in range(trials):
        choice = {k: v[int(b.rng.integers(len(v)))] for k, v in REDUCE_SPACE.items()}
        p = {**REDUCE_DEFAULTS, "variant": "shuffle", **choice}
        infeasible = p["min_blocks"] * p["block_size"] >= 2048
        b.add(
            "study:reduce_int32",
            "reduce",
            "int32",
            n,
            p,
            (n + 1) * 4,
            None if infeasible else _reduce_gbs("shuffle", p, n),
            status="infeasible" if infeasible else "ok",
            trial=trial,
        )


def _copy(b: _Builder) -> None:
    n = 2**28
    for width in (1, 2, 4):
        p = {"variant": "copy", "vector_width": width, "block_size": 256}
        b.add("sweep:copy_widths", "copy", "float32", n, p, 2 * n * 4, {1: 0.9, 2: 0.96, 4: 0.99}[width] * PEAKS["copy_gbs"])
    p = {"variant": "read", "vector_width": 4, "block_size": 256}
    b.add("sweep:copy_widths", "copy", "float32", n, p, n * 4, 0.99 * PEAKS["read_gbs"])


def _vector_add(b: _Builder) -> None:
    for n, dtype, width, unroll in itertools.product([2**20, 2**26], ITEMSIZE, [1, 2, 4, 8], [1, 2, 4]):
        p = {"variant": "add", "vector_width": width, "unroll": unroll, "block_size": 512, "grid_blocks_per_sm": 0, "offset": 0}
        load_bytes = ITEMSIZE[dtype] * width
        fraction = min(1.0, 0.3 + 0.7 * load_bytes / 16) * 0.95 * (0.55 if n < 2**24 else 1.0)
        fraction *= {1: 1.0, 2: 1.01, 4: 1.015}[unroll]
        b.add("sweep:vector_add_widths", "vector_add", dtype, n, p, 3 * n * ITEMSIZE[dtype], fraction * PEAKS["copy_gbs"])
    p = {"variant": "add", "vector_width": 8, "unroll": 4, "block_size": 512, "grid_blocks_per_sm": 0, "offset": 0}
    b.add("sweep:vector_add_widths", "vector_add", "float32", 2**26, p, 3 * 2**26 * 4, None, status="compile_error")


def _offset(b: _Builder) -> None:
    offsets = [0, 1, 2, 4, 8, 11, 16, 32, 64, 128]
    for n in (2**20, 2**24):
        scale = 0.6 if n < 2**24 else 1.0
        for offset in offsets:
            aligned = offset % 32 == 0
            for l1 in ("ca", "cg"):
                p = {
                    "variant": "read_offset",
                    "offset": offset,
                    "block_size": 512,
                    "l1_cache": l1,
                    "cache_hint": "none",
                    "unroll": 1,
                }
                fraction = 0.9 if aligned else (0.8 if l1 == "ca" else 0.74)
                b.add("sweep:offset_read_write", "offset", "float32", n, p, 3 * n * 4, fraction * scale * PEAKS["copy_gbs"])
            p = {
                "variant": "write_offset",
                "offset": offset,
                "block_size": 512,
                "l1_cache": "ca",
                "cache_hint": "none",
                "unroll": 1,
            }
            b.add(
                "sweep:offset_read_write",
                "offset",
                "float32",
                n,
                p,
                3 * n * 4,
                (0.88 if aligned else 0.7) * scale * PEAKS["copy_gbs"],
            )
    n = 2**24
    for offset, block, unroll in itertools.product([0, 11, 128], [128, 256, 512, 1024], [1, 2, 4, 8]):
        p = {
            "variant": "read_offset_unrolled",
            "offset": offset,
            "block_size": block,
            "l1_cache": "ca",
            "cache_hint": "none",
            "unroll": unroll,
        }
        fraction = {1: 0.9, 2: 0.93, 4: 0.95, 8: 0.95}[unroll] * {128: 0.97, 256: 1.0, 512: 0.99, 1024: 0.95}[block]
        fraction *= 1.0 if offset % 32 == 0 else 0.9
        b.add("sweep:offset_unroll_blocks", "offset", "float32", n, p, 3 * n * 4, fraction * PEAKS["copy_gbs"])
    p = {"variant": "read_offset_unrolled", "offset": 11, "block_size": 1024, "l1_cache": "cg", "cache_hint": "none", "unroll": 8}
    b.add("sweep:offset_unroll_blocks", "offset", "float32", n, p, 3 * n * 4, None, status="launch_error")


def _layout(b: _Builder) -> None:
    n = 2**20
    for variant, block in itertools.product(["aos", "soa"], [64, 128, 256, 512, 1024]):
        fraction = (0.6 if variant == "aos" else 0.9) * BLOCK_FACTOR[block] * 0.6
        b.add(
            "sweep:layout_aos_soa",
            "layout",
            "float32",
            n,
            {"variant": variant, "block_size": block},
            2 * n * 8,
            fraction * PEAKS["copy_gbs"],
        )


def _matmul(b: _Builder) -> None:
    n = 1000
    bytes_moved, flops = 3 * n * n * 4, 2.0 * n**3
    for variant, pitched, tile in itertools.product(["naive", "shared_a", "shared_ab"], [0, 1], [16, 32]):
        gflops = (
            {"naive": 1800.0, "shared_a": 3000.0, "shared_ab": 7000.0}[variant]
            * (1.04 if pitched else 1.0)
            * (1.1 if tile == 32 else 1.0)
        )
        time_ms = flops / (gflops * 1e9) * 1e3
        p = {"variant": variant, "pitched": pitched, "tile": tile}
        b.add("sweep:matmul_variants", "matmul", "float32", n, p, bytes_moved, bytes_moved / (time_ms * 1e-3) / 1e9, flops=flops)
    b.add(
        "sweep:matmul_variants",
        "matmul",
        "float32",
        n,
        {"variant": "shared_ab", "pitched": 0, "tile": 64},
        bytes_moved,
        None,
        status="compile_error",
    )


def make_dataset(seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """(rows in the results schema, device description, peaks) for one synthetic GPU."""
    builder = _Builder(seed)
    for part in (_reduce, _study, _copy, _vector_add, _offset, _layout, _matmul):
        part(builder)
    return to_frame(builder.rows), dict(DEVICE), dict(PEAKS)
