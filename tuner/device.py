"""Which GPU this is: its name as a results-folder slug, and its description."""

from __future__ import annotations

import re
import shutil
import subprocess

NO_GPU_SLUG = "no-gpu"


def slugify(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or NO_GPU_SLUG


def detect_slug(device_index: int = 0) -> str:
    """The slug of CUDA device ``device_index`` from nvidia-smi, without PyCUDA
    (the workflow needs it to name outputs even for a dry run); NO_GPU_SLUG when
    there is no driver."""
    if not shutil.which("nvidia-smi"):
        return NO_GPU_SLUG
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", f"--id={device_index}"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return NO_GPU_SLUG
    return slugify(out.splitlines()[0]) if out else NO_GPU_SLUG


def describe(gpu) -> dict:
    """Everything the results and the report say about the device."""
    info = gpu.describe()
    info["slug"] = slugify(info["name"])
    try:
        from tuner.clocks import NvmlClocks

        clocks = NvmlClocks(gpu.pci_bus_id)
        info["max_sm_clock_mhz"] = clocks.max_sm_clock_mhz()
        info["max_memory_clock_mhz_nvml"] = clocks.max_mem_clock_mhz()
    except Exception as error:  # NVML is optional for describing
        info["nvml"] = f"unavailable: {type(error).__name__}"
    return info
