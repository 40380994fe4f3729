"""Which GPU this is: its name as a results-folder slug, and its description.

Facts needed before any CUDA context exists (the folder name at workflow parse
time, the device count and memory for validation) come from NVML; CUDA device
indices follow the PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` is set for
every measuring process), which is NVML's and nvidia-smi's order too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NO_GPU_SLUG = "no-gpu"


@dataclass(frozen=True)
class DeviceFacts:
    """What validation needs to know of the CUDA devices (from NVML); None
    fields where no device could be asked."""

    count: int | None = None
    names: tuple[str, ...] = ()
    memory_bytes: tuple[int, ...] = ()
    compute_capabilities: tuple[str, ...] = ()  # "9.0"

    def memory_of(self, index: int) -> int | None:
        return self.memory_bytes[index] if index < len(self.memory_bytes) else None

    def capability_of(self, index: int) -> str | None:
        return self.compute_capabilities[index] if index < len(self.compute_capabilities) else None


def slugify(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or NO_GPU_SLUG


def probe_devices() -> DeviceFacts:
    """The CUDA devices NVML sees (name, memory, compute capability); empty
    facts (nothing checked against a device) where there is no driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library: validation runs without a device
        return DeviceFacts()
    try:
        names, memory, capabilities = [], [], []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            names.append(name.decode() if isinstance(name, bytes) else name)
            memory.append(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            capabilities.append(f"{major}.{minor}")
        return DeviceFacts(len(names), tuple(names), tuple(memory), tuple(capabilities))
    except Exception:
        return DeviceFacts()
    finally:
        pynvml.nvmlShutdown()


def describe(gpu) -> dict:
    """Everything the results and the report say about the device."""
    info = gpu.describe()
    info["slug"] = slugify(info["name"])
    try:
        from tuner.device.clocks import NvmlClocks

        clocks = NvmlClocks(gpu.pci_bus_id)
        info["max_sm_clock_mhz"] = clocks.max_sm_clock_mhz()
        info["max_memory_clock_mhz_nvml"] = clocks.max_mem_clock_mhz()
    except Exception as error:  # NVML is optional for describing
        info["nvml"] = f"unavailable: {type(error).__name__}"
    return info
