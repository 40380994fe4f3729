"""The CUDA device, through PyCUDA. The only module that imports PyCUDA, and
only when a ``Gpu`` is made, so ``import tuner`` works on machines without CUDA.

PyCUDA runs in the device's primary context, the one the CUDA runtime uses,
so CuPy or PyTorch can share the GPU in-process. Devices are numbered in PCI
bus order (as NVML and nvidia-smi number them), so ``device_index`` names the
same card everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.errors import Refusal


class GpuUnavailable(Refusal, RuntimeError):
    """No PyCUDA or no CUDA device: the message says which and what to do."""

    exit_status = 2


def require_gpu(device_index: int = 0) -> "Gpu":
    try:
        import pycuda  # noqa: F401
    except ImportError as error:
        raise GpuUnavailable(
            f"PyCUDA is not installed ({error}); on a machine with a CUDA GPU run: pip install 'pycuda>=2024.1' (the cuda "
            f"extra; python -m tuner check-install says what its build needs)"
        ) from None
    try:
        return Gpu(device_index)
    except Exception as error:  # pycuda raises its own types for "no device"/"no driver"
        raise GpuUnavailable(
            f"no usable CUDA device ({type(error).__name__}: {error}); run on a machine with an NVIDIA GPU and driver,"
            " or use `snakemake --cores 1 report` to rebuild figures from existing results"
        ) from None


@dataclass
class DeviceBuffer:
    """A device allocation and its size; ``ptr(k)`` is the address of byte ``k``."""

    allocation: Any
    nbytes: int

    def ptr(self, byte_offset: int = 0) -> np.uintp:
        if not 0 <= byte_offset <= self.nbytes:
            raise ValueError(f"byte offset must lie within the buffer of {self.nbytes} bytes, got {byte_offset}")
        return np.uintp(int(self.allocation) + byte_offset)


class Gpu:
    def __init__(self, device_index: int = 0) -> None:
        import atexit

        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # before the driver is initialised
        import pycuda.driver as cuda

        cuda.init()
        if not 0 <= device_index < cuda.Device.count():
            raise ValueError(f"device_index must be one of the {cuda.Device.count()} CUDA devices, got {device_index}")
        self.cuda = cuda
        self.device = cuda.Device(device_index)
        self.context = self.device.retain_primary_context()
        self.context.push()
        atexit.register(self._release)
        attr = cuda.device_attribute
        self.name: str = self.device.name()
        major, minor = self.device.compute_capability()
        self.compute_capability = f"{major}.{minor}"
        self.arch = f"sm_{major}{minor}"
        self.sm_count: int = self.device.get_attribute(attr.MULTIPROCESSOR_COUNT)
        self.l2_bytes: int = self.device.get_attribute(attr.L2_CACHE_SIZE)
        self.bus_width_bits: int = self.device.get_attribute(attr.GLOBAL_MEMORY_BUS_WIDTH)
        self.max_threads_per_sm: int = self.device.get_attribute(attr.MAX_THREADS_PER_MULTIPROCESSOR)
        # The per-launch limits (tuner.families.limits reads them): a configuration over one is infeasible.
        self.max_threads_per_block: int = self.device.get_attribute(attr.MAX_THREADS_PER_BLOCK)
        self.max_block_dim = tuple(self.device.get_attribute(getattr(attr, f"MAX_BLOCK_DIM_{a}")) for a in "XYZ")
        self.max_grid_dim = tuple(self.device.get_attribute(getattr(attr, f"MAX_GRID_DIM_{a}")) for a in "XYZ")
        self.max_shared_memory_per_block: int = self.device.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)
        self.max_registers_per_block: int = self.device.get_attribute(attr.MAX_REGISTERS_PER_BLOCK)
        self.total_memory_bytes: int = self.device.total_memory()
        self.pci_bus_id: str = self.device.pci_bus_id()
        self.memory_clock_mhz: float = self._memory_clock_mhz()
        self._modules: dict[str, object] = {}
        self._function_modules: dict[int, tuple] = {}

    def _memory_clock_mhz(self) -> float:
        """Peak memory clock: the driver attribute (kHz), or NVML where a CUDA
        version no longer reports it."""
        try:
            khz = self.device.get_attribute(self.cuda.device_attribute.MEMORY_CLOCK_RATE)
            if khz > 0:
                return khz / 1000.0
        except Exception:
            pass
        try:
            from tuner.device.clocks import NvmlClocks

            return NvmlClocks(self.pci_bus_id).max_mem_clock_mhz()
        except Exception:
            return float("nan")

    def _release(self) -> None:
        from pycuda.tools import clear_context_caches

        try:
            self.context.pop()
        except Exception:  # a context lost to a device fault cannot be popped cleanly
            pass
        clear_context_caches()

    # ---- facts -----------------------------------------------------------
    def describe(self) -> dict:
        import pycuda

        driver = self.cuda.get_driver_version()
        return {
            "name": self.name,
            "compute_capability": self.compute_capability,
            "arch": self.arch,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "bus_width_bits": self.bus_width_bits,
            "memory_clock_mhz": self.memory_clock_mhz,
            "total_memory_bytes": self.total_memory_bytes,
            "max_threads_per_block": self.max_threads_per_block,
            "max_block_dim": list(self.max_block_dim),
            "max_grid_dim": list(self.max_grid_dim),
            "max_shared_memory_per_block": self.max_shared_memory_per_block,
            "max_registers_per_block": self.max_registers_per_block,
            "pci_bus_id": self.pci_bus_id,
            "driver_version": f"{driver // 1000}.{driver % 1000 // 10}",
            "cuda_version": ".".join(map(str, self.cuda.get_version())),
            "pycuda_version": pycuda.VERSION_TEXT,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }

    # ---- memory ----------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        return DeviceBuffer(self.cuda.mem_alloc(max(int(nbytes), 1)), int(nbytes))

    def upload(self, array: np.ndarray, pad_bytes: int = 0) -> DeviceBuffer:
        buffer = self.alloc(array.nbytes + pad_bytes)
        self.cuda.memcpy_htod(buffer.allocation, np.ascontiguousarray(array))
        return buffer

    def alloc_pitched(self, row_bytes: int, rows: int, element_bytes: int) -> tuple[DeviceBuffer, int]:
        """Rows padded to the driver's pitch (``cuMemAllocPitch``); returns the
        buffer and the pitch in bytes."""
        allocation, pitch = self.cuda.mem_alloc_pitch(row_bytes, rows, element_bytes)
        pitch = int(pitch)
        if pitch % element_bytes or pitch < row_bytes:
            raise RuntimeError(f"mem_alloc_pitch returned pitch {pitch} for rows of {row_bytes} bytes")
        return DeviceBuffer(allocation, pitch * rows), pitch

    def upload_pitched(self, host: np.ndarray, buffer: DeviceBuffer, pitch: int) -> None:
        """Copy the rows of a 2-D ``host`` array (C order) into a pitched buffer
        (a synchronous ``cuMemcpy2D``)."""
        host = np.ascontiguousarray(host)
        rows, row_bytes = host.shape[0], host.shape[1] * host.itemsize
        copy = self.cuda.Memcpy2D()
        copy.set_src_host(host)
        copy.src_pitch = row_bytes
        copy.set_dst_device(int(buffer.ptr()))
        copy.dst_pitch = pitch
        copy.width_in_bytes = row_bytes
        copy.height = rows
        copy(True)  # synchronous; PyCUDA's binding takes `aligned` positionally and has no default

    def download(self, buffer: DeviceBuffer, shape, dtype, byte_offset: int = 0) -> np.ndarray:
        out = np.empty(shape, dtype=dtype)
        self.cuda.memcpy_dtoh(out, int(buffer.ptr(byte_offset)))
        return out

    def copy(self, dst: np.uintp, src: np.uintp, nbytes: int) -> None:
        self.cuda.memcpy_dtod_async(int(dst), int(src), int(nbytes))

    def fill_bytes(self, dst: np.uintp, value: int, nbytes: int) -> None:
        self.cuda.memset_d8_async(int(dst), value, int(nbytes))

    def synchronize(self) -> None:
        self.cuda.Context.synchronize()

    # ---- kernels ---------------------------------------------------------
    def module(self, cubin_path: str):
        """Each cubin is loaded once per process."""
        if cubin_path not in self._modules:
            self._modules[cubin_path] = self.cuda.module_from_file(cubin_path)
        return self._modules[cubin_path]

    def function(self, cubin_path: str, kernel: str, arg_types: str):
        """A kernel prepared for fast launches; ``arg_types`` is PyCUDA's struct
        format ("PPQ": two pointers and an unsigned 64-bit integer)."""
        module = self.module(cubin_path)
        function = module.get_function(kernel)
        function.prepare(arg_types)
        self._function_modules[id(function)] = (function, module)  # the function kept alive: its id stays its own
        return function

    def set_constant(self, function, name: str, array: np.ndarray) -> None:
        """Copy ``array`` into the ``__constant__`` symbol ``name`` of the module
        ``function`` was loaded from."""
        _, module = self._function_modules[id(function)]
        address, size = module.get_global(name)
        array = np.ascontiguousarray(array)
        if array.nbytes > size:
            raise ValueError(f"__constant__ {name} holds {size} bytes, got an array of {array.nbytes}")
        self.cuda.memcpy_htod(address, array)

    def launcher(self, function, grid: tuple, block: tuple, *args, shared_bytes: int = 0):
        """A no-argument callable that enqueues one launch on the default stream."""
        grid = tuple(int(g) for g in grid)
        block = tuple(int(b) for b in block)

        def run() -> None:
            function.prepared_async_call(grid, block, None, *args, shared_size=shared_bytes)

        return run

    def marker(self):
        """A CUDA event recorded in the launch stream now; returns the callable
        that waits for it (the energy measurement keeps the GPU one batch ahead
        of the host with these)."""
        event = self.cuda.Event()
        event.record()
        return event.synchronize

    def profiled(self, run) -> None:
        """Run ``run`` (one enqueued launch) between cuProfilerStart and
        cuProfilerStop, so a profiler started with profiling off sees it alone."""
        self.synchronize()
        self.cuda.start_profiler()
        try:
            run()
            self.synchronize()
        finally:
            self.cuda.stop_profiler()

    def event_timer(self) -> "EventTimer":
        return EventTimer(self.cuda)


class EventTimer:
    """Times one enqueued piece of work with a pair of CUDA events."""

    def __init__(self, cuda) -> None:
        self.start, self.end = cuda.Event(), cuda.Event()

    def __call__(self, run) -> float:
        self.start.record()
        run()
        self.end.record()
        self.end.synchronize()
        return self.end.time_since(self.start)  # milliseconds
