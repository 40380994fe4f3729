"""What one launch may ask of a CUDA device: threads and dimensions of a
block, dimensions of the grid, shared memory and registers per block.

A configuration over a limit cannot run, so it is infeasible, with the limit
and the value as its reason, never a measured failure. Threads and launch
dimensions are known before compiling (``launch_violations``); static shared
memory and registers per thread only from ptxas's report of the compiled
kernel (``resource_violations``). The defaults are CUDA's limits for every
device of compute capability 5.0 and later; a device's own (``device.json``,
or the GPU's attributes) replace them where known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

WARP = 32
# Registers are allocated to a warp in units of 256 (compute capability 5.0 to 9.0).
REGISTER_UNIT_PER_WARP = 256


@dataclass(frozen=True)
class DeviceLimits:
    """The per-launch limits of a device.

    Attributes:
        max_threads_per_block: threads one block may hold.
        max_block_dim: the largest block in x, y and z.
        max_grid_dim: the largest grid in x, y and z.
        max_shared_bytes_per_block: static plus dynamic shared memory one
            block may use without opting in to more (48 KiB on every device
            since compute capability 2.0).
        max_registers_per_block: the register file one block may use.
        where: where the figures come from, for the reasons.
    """

    max_threads_per_block: int = 1024
    max_block_dim: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dim: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_bytes_per_block: int = 48 * 1024
    max_registers_per_block: int = 64 * 1024
    where: str = "CUDA's"

    @classmethod
    def of_device(cls, device: Mapping[str, Any]) -> "DeviceLimits":
        """The limits ``device.json`` (``tuner.device.describe``) records; CUDA's where it records none."""
        default = cls()

        def number(key: str, fallback: int) -> int:
            value = device.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else fallback

        def triple(key: str, fallback: tuple[int, int, int]) -> tuple[int, int, int]:
            value = device.get(key)
            if isinstance(value, Sequence) and len(value) == 3 and all(isinstance(v, int) and v > 0 for v in value):
                return tuple(int(v) for v in value)
            return fallback

        known = any(key in device for key in ("max_threads_per_block", "max_shared_memory_per_block", "max_registers_per_block"))
        return cls(
            max_threads_per_block=number("max_threads_per_block", default.max_threads_per_block),
            max_block_dim=triple("max_block_dim", default.max_block_dim),
            max_grid_dim=triple("max_grid_dim", default.max_grid_dim),
            max_shared_bytes_per_block=number("max_shared_memory_per_block", default.max_shared_bytes_per_block),
            max_registers_per_block=number("max_registers_per_block", default.max_registers_per_block),
            where=f"the {device.get('name', 'device')}'s" if known else default.where,
        )

    @classmethod
    def of_gpu(cls, gpu: Any) -> "DeviceLimits":
        """The limits a ``tuner.device.gpu.Gpu`` read from the driver (CUDA's for a stand-in without them)."""
        return cls.of_device({key: getattr(gpu, key) for key in DEVICE_KEYS if hasattr(gpu, key)} | {"name": getattr(gpu, "name", "device")})


# The keys of device.json (and attributes of a Gpu) that DeviceLimits reads.
DEVICE_KEYS = ("max_threads_per_block", "max_block_dim", "max_grid_dim", "max_shared_memory_per_block", "max_registers_per_block")


def launch_violations(grid: Sequence[int] | None, block: Sequence[int], limits: DeviceLimits = DeviceLimits()) -> list[str]:
    """Why a launch of ``grid`` blocks (None: not known yet) of ``block`` threads exceeds ``limits``."""
    reasons = []
    threads = math.prod(block)
    shape = "x".join(map(str, block))
    if threads > limits.max_threads_per_block:
        reasons.append(f"threads per block must be at most {limits.max_threads_per_block} ({limits.where} limit), "
                       f"got {threads} (block {shape})")  # fmt: skip
    for axis, size, most in zip("xyz", block, limits.max_block_dim):
        if size > most:
            reasons.append(f"block {axis} must be at most {most} ({limits.where} limit), got {size}")
    for axis, size, most in zip("xyz", grid or (), limits.max_grid_dim):
        if size > most:
            reasons.append(f"grid {axis} must be at most {most} ({limits.where} limit), got {size}")
    return reasons


def resource_violations(*, threads: int, registers: int, static_shared: int, dynamic_shared: int,
                        limits: DeviceLimits = DeviceLimits()) -> list[str]:  # fmt: skip
    """Why a block of ``threads`` of a kernel that ptxas gave ``registers``
    per thread and ``static_shared`` bytes, launched with ``dynamic_shared``
    more, exceeds ``limits``. Registers are counted as the device allocates
    them: per warp, in units of 256."""
    reasons = []
    shared = static_shared + dynamic_shared
    if shared > limits.max_shared_bytes_per_block:
        reasons.append(f"shared memory per block must be at most {limits.max_shared_bytes_per_block} bytes ({limits.where} limit "
                       f"without opt-in), got {shared} (static {static_shared} + dynamic {dynamic_shared})")  # fmt: skip
    per_warp = math.ceil(registers * WARP / REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP
    used = math.ceil(threads / WARP) * per_warp
    if registers and used > limits.max_registers_per_block:
        reasons.append(f"registers per block must be at most {limits.max_registers_per_block} ({limits.where} register file), "
                       f"got {used} ({registers} per thread x {threads} threads, allocated per warp)")  # fmt: skip
    return reasons
