"""Bandwidth peaks of the GPU, measured in the same run as the kernels they judge.

- copy: device-to-device ``cuMemcpyDtoD`` of a buffer at least 8x the L2 cache,
  counting bytes read plus bytes written;
- read: the best of a few configurations of the copy family's read-only kernel;
- theoretical: memory clock x 2 (double data rate) x bus width;
- CUB: CuPy's sum (CUB DeviceReduce) of the 2^28 int32 and float32 problems,
  when CuPy is there (``cub_reduce_gbs`` is int32, ``cub_reduce_float32_gbs``).

CUB is reached through Python (CuPy sizes and takes its workspace on every
call), so its sample starts after a longer hold kernel than ours: the host's
work for the call then happens while the GPU is still busy with the hold and
never lands between the two events (``benchmarks/yardsticks.py`` checks the
figure against CuPy timed independently).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tuner.families import REGISTRY, Problem

READ_CONFIGS = [
    {"variant": "read", "block_size": b, "vector_width": 4, "unroll": u, "grid_blocks_per_sm": 0, "cache_hint": h, "offset": 0}
    for b in (256, 512) for u in (2, 4) for h in ("none", "stream")
]  # fmt: skip


def theoretical_gbs(memory_clock_mhz: float, bus_width_bits: int) -> float:
    """Double-data-rate peak: clock (MHz) x 2 transfers x bus width (bytes)."""
    return memory_clock_mhz * 1e6 * 2 * (bus_width_bits / 8) / 1e9


def peak_buffer_bytes(l2_bytes: int) -> int:
    """At least 8x the L2 cache and 1 GiB, so no copy is served from cache."""
    return max(8 * l2_bytes, 1 << 30)


def device_copy_gbs(bench, nbytes: int):
    """cuMemcpyDtoD of ``nbytes``, checked once (every byte arrives), then timed;
    GB/s counts bytes read plus bytes written."""
    gpu = bench.gpu
    src, dst = gpu.alloc(nbytes), gpu.alloc(nbytes)
    gpu.fill_bytes(src.ptr(), 0x3C, nbytes)
    gpu.fill_bytes(dst.ptr(), 0xFF, nbytes)
    gpu.copy(dst.ptr(), src.ptr(), nbytes)
    gpu.synchronize()
    if not (gpu.download(dst, nbytes, np.uint8) == 0x3C).all():
        raise RuntimeError("device-to-device copy left bytes unwritten")
    timing = bench.time(lambda: gpu.copy(dst.ptr(), src.ptr(), nbytes))
    return 2 * nbytes / (timing.median_ms / 1e3) / 1e9, timing


def measure_peaks(bench, *, source: str = "peaks") -> tuple[dict, list[dict]]:
    """The peaks dict and the results rows measured on the way."""
    gpu = bench.gpu
    nbytes = peak_buffer_bytes(gpu.l2_bytes)
    copy_gbs, timing = device_copy_gbs(bench, nbytes)
    peaks: dict[str, Any] = {
        "copy_gbs": copy_gbs,
        "copy_bytes": nbytes,
        "copy_rel_spread": timing.rel_spread,
        "copy_samples": timing.count,
        "theoretical_gbs": theoretical_gbs(gpu.memory_clock_mhz, gpu.bus_width_bits),
        "memory_clock_mhz": gpu.memory_clock_mhz,
        "bus_width_bits": gpu.bus_width_bits,
    }
    bench.peaks = peaks
    words = nbytes // 4
    problem = Problem("copy", "int32", words)
    session = bench.problem(REGISTRY["copy"], problem)
    rows = [session.measure(cfg, source) for cfg in READ_CONFIGS]
    rows.append(session.measure({**READ_CONFIGS[0], "variant": "copy", "unroll": 1}, source))
    del session
    reads = [r["bandwidth_gbs"] for r in rows if r["status"] == "ok" and r["variant"] == "read"]
    peaks["read_gbs"] = max(reads) if reads else None
    peaks["cub_reduce_gbs"], peaks["cub_reduce_note"] = cub_reduce_gbs(bench, "int32")
    peaks["cub_reduce_float32_gbs"], peaks["cub_reduce_float32_note"] = cub_reduce_gbs(bench, "float32")
    return peaks, rows


CUB_HOLD_US = 500.0  # covers CuPy's host work per call (tens of microseconds) many times over


def cub_reduce_gbs(bench, dtype: str = "int32", n: int = 1 << 28) -> tuple[float | None, str]:
    """CUB DeviceReduce::Sum of n values (through CuPy's binding) with the
    accumulator our kernels use (the element type), verified against numpy;
    GB/s of input read."""
    try:
        import cupy
        from cupy.cuda import cub
    except Exception as error:  # CuPy is optional: it is a yardstick, not a dependency
        return None, f"CuPy unavailable: {type(error).__name__}"
    try:
        return _time_cub(bench, cupy, cub, dtype, n)
    finally:
        cupy.get_default_memory_pool().free_all_blocks()  # the input goes back before the kernels' buffers come


def _time_cub(bench, cupy, cub, dtype: str, n: int) -> tuple[float | None, str]:
    rng = np.random.default_rng(1)
    host = rng.integers(-4, 4, size=n, dtype=np.int32) if dtype == "int32" else rng.random(n, dtype=np.float32)
    data = cupy.asarray(host)
    out = cupy.zeros((), dtype=host.dtype)

    def run() -> None:
        if cub.cub_reduction(data, cub.CUPY_CUB_SUM, None, host.dtype, out, False) is None:
            raise RuntimeError("CuPy declined the CUB reduction for this input")

    try:
        run()
    except Exception as error:
        return None, f"CUB reduction unavailable: {error}"
    cupy.cuda.Device().synchronize()
    expected = host.sum(dtype=np.int64 if dtype == "int32" else np.float64)
    got = out.get()
    if (got != expected) if dtype == "int32" else abs(float(got) - expected) > 2e-5 * abs(expected):
        return None, f"CUB sum {got} disagreed with numpy's {expected}"
    timing = bench.time(run, options=replace(bench.timing, hold_us=max(bench.timing.hold_us, CUB_HOLD_US)))
    return n * host.itemsize / (timing.median_ms / 1e3) / 1e9, f"CUB DeviceReduce sum via cupy {cupy.__version__}, n={n} {dtype}"
