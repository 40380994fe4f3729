"""Which GPU this is: its name as a results-folder slug, and its description.

Facts needed before any CUDA context exists (the folder name at workflow parse
time, the device count and memory for validation) come from NVML; CUDA device
indices follow the PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` is set for
every measuring process), which is NVML's and nvidia-smi's order too. NVML
sees every device; CUDA only those ``CUDA_VISIBLE_DEVICES`` lists, in its
order, so the facts are those of the visible devices (``visible_order``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Sequence

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


def visible_order(uuids: Sequence[str], listed: str | None) -> list[int]:
    """The NVML indices (PCI bus order) of the devices CUDA numbers 0, 1, ...
    under ``CUDA_VISIBLE_DEVICES=listed`` (None: unset, every device), read as
    the CUDA driver reads it (checked against ``cuDeviceGetCount`` on an H200):
    comma-separated entries, each an index (its leading digits: ``0x1`` and
    ``0a`` are 0, ``+1`` is 1) or a UUID (``GPU-`` then a unique prefix of its
    hex digits, in either case). The list ends at the first entry that names no
    device; an entry naming a device named already leaves none (CUDA fails to
    start). A config's ``device_index: 0`` on a host with
    ``CUDA_VISIBLE_DEVICES=2`` is NVML's device 2: checked against device 0,
    its name, arch and memory were another card's. A list naming MIG
    instances leaves every device in NVML's order."""
    if listed is None or "MIG-" in listed:  # a MIG instance is no NVML device of its own here: NVML's view, as before
        return list(range(len(uuids)))
    order: list[int] = []
    for entry in (part.strip() for part in listed.split(",")):
        index = re.match(r"[+-]?[0-9]+", entry)
        if index:
            found = [int(index.group())] if 0 <= int(index.group()) < len(uuids) else []
        elif entry.startswith("GPU-") and len(entry) > len("GPU-"):
            found = [i for i, uuid in enumerate(uuids) if uuid.lower().startswith(entry.lower())]
        else:
            found = []
        if len(found) != 1:
            break
        if found[0] in order:
            return []
        order.append(found[0])
    return order


def probe_devices() -> DeviceFacts:
    """The CUDA devices NVML sees (name, memory, compute capability), as CUDA
    numbers them under ``CUDA_VISIBLE_DEVICES``; empty facts (nothing checked
    against a device) where there is no driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library: validation runs without a device
        return DeviceFacts()
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(pynvml.nvmlDeviceGetCount())]
        uuids = [_text(pynvml.nvmlDeviceGetUUID(handle)) for handle in handles]
        names, memory, capabilities = [], [], []
        for index in visible_order(uuids, os.environ.get("CUDA_VISIBLE_DEVICES")):
            handle = handles[index]
            names.append(_text(pynvml.nvmlDeviceGetName(handle)))
            memory.append(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            capabilities.append(f"{major}.{minor}")
        return DeviceFacts(len(names), tuple(names), tuple(memory), tuple(capabilities))
    except Exception:
        return DeviceFacts()
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
